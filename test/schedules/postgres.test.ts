import { describe } from 'vitest';
import { describeScheduleConformance } from './conformance.js';
import { postgresHarness } from './harnesses.js';

/** Runs against a real server when DATABASE_URL is set (`eval "$(bash .ci/postgres.sh)"` starts one; CI sets it). */
const url = process.env.DATABASE_URL;

describe.skipIf(!url)('postgres', () => {
  describeScheduleConformance('postgres', postgresHarness(url!));
});
