import { describeScheduleTimingConformance } from './conformance.js';
import { memoryHarness } from './harnesses.js';

describeScheduleTimingConformance('memory', memoryHarness());
