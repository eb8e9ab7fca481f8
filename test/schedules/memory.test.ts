import { describeScheduleConformance } from './conformance.js';
import { memoryHarness } from './harnesses.js';

describeScheduleConformance('memory', memoryHarness());
