import { z } from 'zod';
import { InvalidScheduleError, listSchedules, ScheduleInfoSchema, type ScheduleInfo, type ScheduleSource } from '../schedules/schedules.js';
import type { SessionStore } from '../stores/session-store.js';
import { timedCheck } from '../agent/core/timed-check.js';

/** A `schedules` option: something with a `list` function, and an optional label. */
export const ScheduleSourceSchema = z.custom<ScheduleSource>(
  (value) => typeof value === 'object' && value !== null && typeof (value as { list?: unknown }).list === 'function',
  { error: 'schedules must be an object with a list() function (a restateScheduleClient, for one)' },
);

/** How long a schedule source may take to list, in ms: a page never waits for ever. */
const LIST_TIMEOUT_MS = 30_000;
/** A listing is cut only by its timeout: a page's request has no signal of its own here. */
const NEVER = new AbortController().signal;

/**
 * The store's schedules for the viewer's list, or null when the store cannot hold any (a store of
 * the user's own, an in-memory SQLite store): the page then has no list, not an error. A store that
 * fails is an error like any other page's; a stored row this version does not read is left out of
 * the list and reported as a process warning (see `listSchedules`), so it does not hide the others.
 */
export async function storedSchedules(store: SessionStore): Promise<ScheduleInfo[] | null> {
  try {
    return await listSchedules(store);
  } catch (error) {
    if (InvalidScheduleError.isInstance(error)) return null;
    throw error;
  }
}

/**
 * The schedules of a source the viewer was given (Restate's, for one), checked as they come: what
 * the source lists is read like any input from outside, and one it cannot read, or a list it does
 * not give within 30 s, is an error page naming the source, not a page drawn from bad data.
 */
export async function sourcedSchedules(source: ScheduleSource): Promise<ScheduleInfo[]> {
  const where = `the schedules of ${source.label ?? 'the source'}`;
  const listed = await timedCheck(NEVER, LIST_TIMEOUT_MS, () => source.list(), () => new Error(`${where} did not come within ${LIST_TIMEOUT_MS / 1000} s`));
  const parsed = ScheduleInfoSchema.array().safeParse(listed);
  if (!parsed.success) throw new Error(`${where} cannot be read: ${z.prettifyError(parsed.error)}`);
  return parsed.data;
}
