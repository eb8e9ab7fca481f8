import { InvalidScheduleError } from '../schedules/schedules.js';
import type { StoreError } from '../stores/errors.js';
import { UsageError } from './errors.js';
import { escapeLine } from './escape.js';

/** The schedules Restate keeps, through its ingress at `url` (the client needs no Restate SDK); a URL the client refuses is a usage error. */
export async function restateSchedules(url: string, onUnreadable?: ((error: StoreError) => void) | undefined) {
  const { restateScheduleClient } = await import('../restate/schedule-client.js');
  try {
    return restateScheduleClient(url, { ...(onUnreadable && { onUnreadable }) });
  } catch (error) {
    if (InvalidScheduleError.isInstance(error)) throw new UsageError(`--restate takes the ingress URL (http://host:port), not '${escapeLine(url)}'`);
    throw error;
  }
}
