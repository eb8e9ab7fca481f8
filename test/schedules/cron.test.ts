/** The strict five-field cron reader and its time zones (Intl.DateTimeFormat). */
import { describe, expect, it } from 'vitest';
import { InvalidCronError, nextCronTime, parseCron, UnknownTimeZoneError } from '../../src/schedules.js';
import { checkTimeZone } from '../../src/schedules/time-zone.js';

const next = (expression: string, after: string, zone = 'UTC') => {
  const at = nextCronTime(parseCron(expression), Date.parse(after), zone);
  return at === null ? null : new Date(at).toISOString();
};

describe('parseCron', () => {
  it('reads values, ranges, steps, lists and names; 7 is Sunday', () => {
    const cron = parseCron('0,30 9-17/4 1,15 JAN-mar MON,wed,7');
    expect(cron.minutes).toEqual([0, 30]);
    expect(cron.hours).toEqual([9, 13, 17]);
    expect(cron.days).toEqual([1, 15]);
    expect(cron.months).toEqual([1, 2, 3]);
    expect(cron.weekdays).toEqual([0, 1, 3]);
    expect(parseCron('*/20 * * * *').minutes).toEqual([0, 20, 40]);
    expect(parseCron('* * * * *').weekdays).toEqual([0, 1, 2, 3, 4, 5, 6]);
  });

  it.each([
    ['* * * *', /4 fields; cron takes 5/],
    ['* * * * * *', /6 fields/],
    ['', /0 fields/],
    ['60 * * * *', /minute: 60 is outside 0-59/],
    ['* 24 * * *', /hour: 24 is outside 0-23/],
    ['* * 0 * *', /day of month: 0 is outside 1-31/],
    ['* * * 13 *', /month: 13 is outside 1-12/],
    ['* * * * 8', /day of week: 8 is outside 0-7/],
    ['5-1 * * * *', /runs backwards/],
    ['*/0 * * * *', /step .* must be from 1/],
    ['5/15 * * * *', /step without a range; write 5-59\/15/],
    ['* * * FOO *', /month: 'FOO' is not a number nor one of JAN/],
    ['L * * * *', /minute: 'L' is not a number/],
    ['? * * * *', /not a value, a range/],
    ['1,,2 * * * *', /'' is not a value/],
    ['@daily', /1 fields/],
  ])('%j is an InvalidCronError: %s', (expression, message) => {
    expect(() => parseCron(expression)).toThrow(InvalidCronError);
    expect(() => parseCron(expression)).toThrow(message);
  });

  it('refuses what is not a string, and an expression past 200 characters', () => {
    expect(() => parseCron(7 as never)).toThrow(InvalidCronError);
    expect(() => parseCron(`0 0 * * ${'1,'.repeat(150)}1`)).toThrow(/longer than 200/);
  });
});

describe('nextCronTime', () => {
  it('finds the next matching minute after the given time, never the same minute', () => {
    expect(next('*/15 * * * *', '2026-01-01T10:07:30Z')).toBe('2026-01-01T10:15:00.000Z');
    expect(next('*/15 * * * *', '2026-01-01T10:15:00Z')).toBe('2026-01-01T10:30:00.000Z');
    expect(next('0 0 1 1 *', '2026-06-01T00:00:00Z')).toBe('2027-01-01T00:00:00.000Z');
    expect(next('0 0 29 2 *', '2026-01-01T00:00:00Z')).toBe('2028-02-29T00:00:00.000Z');
  });

  it('day of month OR weekday when both are restricted (Vixie cron); either alone otherwise', () => {
    // 2026-01-04 is a Sunday.
    expect(next('0 12 10 * SUN', '2026-01-01T13:00:00Z')).toBe('2026-01-04T12:00:00.000Z');
    expect(next('0 12 10 * *', '2026-01-01T13:00:00Z')).toBe('2026-01-10T12:00:00.000Z');
    expect(next('0 12 * * SUN', '2026-01-05T13:00:00Z')).toBe('2026-01-11T12:00:00.000Z');
  });

  it('reads the wall clock of the time zone, across daylight saving changes', () => {
    expect(next('0 9 * * MON-FRI', '2026-01-02T09:00:00Z', 'America/New_York')).toBe('2026-01-02T14:00:00.000Z');
    expect(next('0 9 * * *', '2026-07-01T00:00:00Z', 'Europe/Paris')).toBe('2026-07-01T07:00:00.000Z');
    // Paris skips 02:00-03:00 on 2026-03-29: that day has no 02:30.
    expect(next('30 2 * * *', '2026-03-28T12:00:00Z', 'Europe/Paris')).toBe('2026-03-30T00:30:00.000Z');
    // ...and has 02:30 twice on 2026-10-25: it fires once, the first time.
    expect(next('30 2 * * *', '2026-10-24T12:00:00Z', 'Europe/Paris')).toBe('2026-10-25T00:30:00.000Z');
    expect(next('30 2 * * *', '2026-10-25T00:30:00Z', 'Europe/Paris')).toBe('2026-10-26T01:30:00.000Z');
    expect(next('0 0 * * *', '2026-01-01T12:00:00Z', 'Asia/Kolkata')).toBe('2026-01-01T18:30:00.000Z');
  });

  it('an expression that never matches gives null (February 30th)', () => {
    expect(next('0 0 30 2 *', '2026-01-01T00:00:00Z')).toBeNull();
  });

  it('an unknown time zone is an UnknownTimeZoneError', () => {
    expect(() => next('* * * * *', '2026-01-01T00:00:00Z', 'Mars/Olympus')).toThrow(UnknownTimeZoneError);
    expect(() => checkTimeZone('')).toThrow(UnknownTimeZoneError);
    expect(checkTimeZone('Europe/Paris')).toBe('Europe/Paris');
  });
});
