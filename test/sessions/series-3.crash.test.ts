/**
 * Part 3 of the SIGKILL crash series (issue 5): every third kill point and double kill, on SQLite
 * and PostgreSQL. test/support/crash-series.ts holds the series and what it checks; the parts
 * are files of their own so that they run side by side.
 */
import { crashSuite } from '../support/crash-series.js';

crashSuite(2);
