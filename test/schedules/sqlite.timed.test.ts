import { describeScheduleTimingConformance } from './conformance.js';
import { sqliteHarness } from './harnesses.js';

describeScheduleTimingConformance('sqlite', sqliteHarness());
