import { describeScheduleConformance } from './conformance.js';
import { sqliteHarness } from './harnesses.js';

describeScheduleConformance('sqlite', sqliteHarness());
