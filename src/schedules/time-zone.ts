import { LoopchartError } from '../errors.js';

/**
 * Wall clocks of IANA time zones through `Intl.DateTimeFormat` (no time zone data of our own):
 * what a UTC instant reads in a zone, and which instant a wall-clock time in a zone is.
 */

/**
 * A time zone name `Intl` does not know (`Mars/Olympus`, `CET+1`).
 *
 * @example
 * ```ts
 * import { schedule, UnknownTimeZoneError } from 'loopchart/schedules';
 * try {
 *   await schedule(store, { session: 'nightly', agent: 'reporter', input: 'Report.', cron: '0 2 * * *', timezone: 'Mars/Olympus' });
 * } catch (error) {
 *   if (UnknownTimeZoneError.isInstance(error)) console.error(error.message);
 * }
 * ```
 */
export class UnknownTimeZoneError extends LoopchartError {
  readonly timeZone: string;
  constructor(timeZone: string) {
    super('UnknownTimeZone', `unknown time zone '${String(timeZone).slice(0, 100)}': use an IANA name such as 'Europe/Paris' or 'UTC'`);
    this.timeZone = timeZone;
  }
}

export interface WallClock {
  year: number;
  month: number;
  day: number;
  hour: number;
  minute: number;
}

/** One formatter per zone: making one costs far more than using it. */
const formatters = new Map<string, Intl.DateTimeFormat>();
const MAX_FORMATTERS = 1_000;

function formatter(timeZone: string): Intl.DateTimeFormat {
  let made = formatters.get(timeZone);
  if (made) return made;
  try {
    made = new Intl.DateTimeFormat('en-US', {
      timeZone,
      hourCycle: 'h23',
      year: 'numeric',
      month: 'numeric',
      day: 'numeric',
      hour: 'numeric',
      minute: 'numeric',
      second: 'numeric',
    });
  } catch {
    throw new UnknownTimeZoneError(timeZone);
  }
  if (formatters.size >= MAX_FORMATTERS) formatters.clear();
  formatters.set(timeZone, made);
  return made;
}

/** Throws `UnknownTimeZoneError` for a zone `Intl` does not know; returns its canonical name. */
export function checkTimeZone(timeZone: unknown): string {
  if (typeof timeZone !== 'string' || timeZone.length === 0 || timeZone.length > 100) throw new UnknownTimeZoneError(String(timeZone));
  return formatter(timeZone).resolvedOptions().timeZone;
}

/** What the wall clock of `timeZone` reads at `utc` (ms since epoch), to the minute. */
export function wallClock(timeZone: string, utc: number): WallClock {
  const parts = new Map(formatter(timeZone).formatToParts(new Date(utc)).map((part) => [part.type, part.value]));
  const read = (type: Intl.DateTimeFormatPartTypes) => Number(parts.get(type));
  return { year: read('year'), month: read('month'), day: read('day'), hour: read('hour'), minute: read('minute') };
}

const asUtc = (clock: WallClock): number => Date.UTC(clock.year, clock.month - 1, clock.day, clock.hour, clock.minute);

/** The zone's offset from UTC at `utc`, in ms (to the minute). */
const offsetAt = (timeZone: string, utc: number): number => asUtc(wallClock(timeZone, utc)) - Math.floor(utc / 60_000) * 60_000;

const HALF_DAY_MS = 12 * 3_600_000;

/**
 * The instant the wall clock of `timeZone` reads `clock`: the earlier one when a daylight-saving
 * change repeats it, null when the change skips it.
 */
export function utcOfWallClock(timeZone: string, clock: WallClock): number | null {
  const local = asUtc(clock);
  // Offsets either side of any change near this time: each gives a candidate, kept if it reads back.
  const candidates = [...new Set([offsetAt(timeZone, local - HALF_DAY_MS), offsetAt(timeZone, local + HALF_DAY_MS)])]
    .map((offset) => local - offset)
    .filter((utc) => asUtc(wallClock(timeZone, utc)) === local)
    .sort((a, b) => a - b);
  return candidates[0] ?? null;
}
