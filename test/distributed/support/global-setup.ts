/**
 * The distributed suite needs the Restate server binary (`npm run setup:restate` installs it).
 * Without it the suite skips with this one line; with LOOPCHART_REQUIRE_RESTATE=1 (CI) a missing
 * server fails the run instead.
 */
import { restateServerBinary } from './server.js';

export default function setup(): void {
  if (restateServerBinary()) return;
  if (process.env.LOOPCHART_REQUIRE_RESTATE) {
    throw new Error('LOOPCHART_REQUIRE_RESTATE is set but no Restate server is installed: run `npm run setup:restate`');
  }
  console.log('distributed suite skipped: no Restate server installed (run `npm run setup:restate`, then `npm run test:distributed`)');
}
