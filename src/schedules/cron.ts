import { LoopchartError } from '../errors.js';
import { wallClock, utcOfWallClock } from './time-zone.js';

/**
 * A five-field cron expression (minute, hour, day of month, month, day of week), strict: each
 * field is `*`, a number, a range `a-b`, a step `*\/n` or `a-b/n`, or a comma list of those;
 * months and weekdays also by name (`JAN`, `MON`); weekday 0 and 7 are Sunday. As in Vixie cron,
 * a day matches when the day of month or the weekday matches if both are restricted.
 */

/**
 * A cron expression that does not parse: which field, and why.
 *
 * @example
 * ```ts
 * import { InvalidCronError, parseCron } from 'loopchart/schedules';
 * try {
 *   parseCron('61 * * * *');
 * } catch (error) {
 *   if (InvalidCronError.isInstance(error)) console.error(error.message); // minute: 61 is outside 0-59
 * }
 * ```
 */
export class InvalidCronError extends LoopchartError {
  readonly expression: string;
  constructor(expression: string, problem: string) {
    super('InvalidCron', `cron expression '${expression.slice(0, 200)}': ${problem}`);
    this.expression = expression;
  }
}

interface FieldSpec {
  name: string;
  min: number;
  max: number;
  names?: readonly string[] | undefined;
}

const FIELDS: readonly FieldSpec[] = [
  { name: 'minute', min: 0, max: 59 },
  { name: 'hour', min: 0, max: 23 },
  { name: 'day of month', min: 1, max: 31 },
  { name: 'month', min: 1, max: 12, names: ['JAN', 'FEB', 'MAR', 'APR', 'MAY', 'JUN', 'JUL', 'AUG', 'SEP', 'OCT', 'NOV', 'DEC'] },
  { name: 'day of week', min: 0, max: 7, names: ['SUN', 'MON', 'TUE', 'WED', 'THU', 'FRI', 'SAT'] },
];

/**
 * A parsed cron expression: the values each field allows, sorted.
 *
 * @example
 * ```ts
 * import { parseCron, type CronExpression } from 'loopchart/schedules';
 *
 * const weekdays: CronExpression = parseCron('30 9 * * MON-FRI');
 * console.log(weekdays.hours); // [9]
 * ```
 */
export interface CronExpression {
  readonly source: string;
  readonly minutes: readonly number[];
  readonly hours: readonly number[];
  readonly days: readonly number[];
  readonly months: readonly number[];
  /** 0 (Sunday) to 6. */
  readonly weekdays: readonly number[];
  /** Whether the day-of-month and weekday fields were `*` (unrestricted). */
  readonly anyDay: boolean;
  readonly anyWeekday: boolean;
}

const MAX_LENGTH = 200;

/**
 * Parses a five-field cron expression; throws `InvalidCronError` naming the field for one that
 * does not parse (six fields, `60` minutes, `5-1`, a step of 0, an unknown name, `L` or `?`).
 *
 * @example
 * ```ts
 * import { nextCronTime, parseCron } from 'loopchart/schedules';
 *
 * const nightly = parseCron('0 2 * * *');
 * const next = nextCronTime(nightly, Date.now(), 'Europe/Paris'); // ms since epoch of the next 02:00 in Paris
 * ```
 */
export function parseCron(expression: string): CronExpression {
  if (typeof expression !== 'string') throw new InvalidCronError(String(expression), 'it must be a string');
  if (expression.length > MAX_LENGTH) throw new InvalidCronError(expression, `it is longer than ${MAX_LENGTH} characters`);
  const parts = expression.trim().split(/\s+/);
  if (parts.length !== 5 || parts[0] === '') throw new InvalidCronError(expression, `it has ${parts[0] === '' ? 0 : parts.length} fields; cron takes 5 (minute hour day-of-month month day-of-week)`);
  const [minutes, hours, days, months, weekdays] = parts.map((part, i) => field(expression, part, FIELDS[i]!)) as [number[], number[], number[], number[], number[]];
  // 7 is Sunday too.
  const weekdaySet = new Set(weekdays.map((day) => day % 7));
  return Object.freeze({
    source: expression,
    minutes,
    hours,
    days,
    months,
    weekdays: [...weekdaySet].sort((a, b) => a - b),
    anyDay: parts[2] === '*',
    anyWeekday: parts[4] === '*',
  });
}

function field(expression: string, text: string, spec: FieldSpec): number[] {
  const values = new Set<number>();
  for (const item of text.split(',')) {
    const match = /^(\*|[A-Za-z0-9]+(?:-[A-Za-z0-9]+)?)(?:\/(\d+))?$/.exec(item);
    if (!match) throw new InvalidCronError(expression, `${spec.name}: '${item}' is not a value, a range a-b, a step */n or a-b/n`);
    const [, range, stepText] = match;
    const step = stepText === undefined ? 1 : Number(stepText);
    if (!Number.isInteger(step) || step < 1 || step > spec.max) throw new InvalidCronError(expression, `${spec.name}: the step in '${item}' must be from 1 to ${spec.max}`);
    let from: number;
    let to: number;
    if (range === '*') {
      from = spec.min;
      to = spec.name === 'day of week' ? 6 : spec.max;
    } else {
      const [a, b] = range!.split('-');
      from = value(expression, a!, spec);
      to = b === undefined ? from : value(expression, b, spec);
      // A single value with a step (5/15) reads differently across crons: refused rather than guessed.
      if (b === undefined && stepText !== undefined) throw new InvalidCronError(expression, `${spec.name}: '${item}' has a step without a range; write ${a}-${spec.max}/${stepText}`);
      if (from > to) throw new InvalidCronError(expression, `${spec.name}: the range '${range}' runs backwards`);
    }
    for (let v = from; v <= to; v += step) values.add(v);
  }
  return [...values].sort((a, b) => a - b);
}

function value(expression: string, text: string, spec: FieldSpec): number {
  if (/^\d+$/.test(text)) {
    const n = Number(text);
    if (n < spec.min || n > spec.max) throw new InvalidCronError(expression, `${spec.name}: ${text} is outside ${spec.min}-${spec.max}`);
    return n;
  }
  const index = spec.names?.indexOf(text.toUpperCase()) ?? -1;
  if (index === -1) throw new InvalidCronError(expression, `${spec.name}: '${text}' is not a number${spec.names ? ` nor one of ${spec.names.join(', ')}` : ''}`);
  return spec.name === 'month' ? index + 1 : index;
}

/** How many days ahead the search looks: past it a valid expression matches nothing (`0 0 30 2 *`). */
const SEARCH_DAYS = 366 * 8;
const MINUTE_MS = 60_000;
const DAY_MS = 86_400_000;

/**
 * The first time after `after` (ms since epoch) that the expression matches, read on the wall
 * clock of `timeZone` (IANA, e.g. `Europe/Paris`; default UTC), or null when it never does
 * (February 30th). A wall-clock time that a daylight-saving change skips does not happen; one it
 * repeats happens once, the first time.
 *
 * @example
 * ```ts
 * import { nextCronTime, parseCron } from 'loopchart/schedules';
 *
 * const at = nextCronTime(parseCron('*\/15 * * * *'), Date.UTC(2026, 0, 1, 10, 7), 'UTC');
 * console.log(new Date(at!).toISOString()); // 2026-01-01T10:15:00.000Z
 * ```
 */
export function nextCronTime(cron: CronExpression, after: number, timeZone = 'UTC'): number | null {
  const start = Math.floor(after / MINUTE_MS) * MINUTE_MS + MINUTE_MS;
  const local = wallClock(timeZone, start);
  const firstDay = Date.UTC(local.year, local.month - 1, local.day);
  const months = new Set(cron.months);
  const days = new Set(cron.days);
  const weekdays = new Set(cron.weekdays);
  for (let i = 0; i < SEARCH_DAYS; i++) {
    const date = new Date(firstDay + i * DAY_MS);
    const [year, month, day] = [date.getUTCFullYear(), date.getUTCMonth() + 1, date.getUTCDate()];
    if (!months.has(month)) continue;
    const dayHit = days.has(day);
    const weekdayHit = weekdays.has(date.getUTCDay());
    const matches = cron.anyDay && cron.anyWeekday ? true : cron.anyDay ? weekdayHit : cron.anyWeekday ? dayHit : dayHit || weekdayHit;
    if (!matches) continue;
    for (const hour of cron.hours) {
      if (i === 0 && hour < local.hour) continue;
      for (const minute of cron.minutes) {
        if (i === 0 && hour === local.hour && minute < local.minute) continue;
        const at = utcOfWallClock(timeZone, { year, month, day, hour, minute });
        if (at !== null && at >= start) return at;
      }
    }
  }
  return null;
}
