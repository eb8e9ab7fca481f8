import { InvalidScheduleError, listSchedules, type ScheduleInfo } from '../schedules/schedules.js';
import type { SessionStore } from '../stores/session-store.js';

/**
 * The store's schedules for the viewer's list, or null when the store cannot hold any (a store of
 * the user's own, an in-memory SQLite store): the page then has no list, not an error. A store that
 * fails, or a stored row that is unreadable, is an error like any other page's.
 */
export async function storedSchedules(store: SessionStore): Promise<ScheduleInfo[] | null> {
  try {
    return await listSchedules(store);
  } catch (error) {
    if (InvalidScheduleError.isInstance(error)) return null;
    throw error;
  }
}
