import { InvalidScheduleError } from '../schedules/schedules.js';
import type { StoreError } from '../stores/errors.js';
import { UsageError } from './errors.js';

/**
 * The schedules Restate keeps, through its ingress at `url` (the client needs no Restate SDK); a URL
 * the client refuses is a usage error that says why without repeating it (it may hold a credential).
 */
export async function restateSchedules(url: string, onUnreadable?: ((error: StoreError) => void) | undefined) {
  const [{ restateScheduleClient }, { ingressUrlProblem }] = await Promise.all([import('../restate/schedule-client.js'), import('../restate/ingress-url.js')]);
  try {
    return restateScheduleClient(url, { ...(onUnreadable && { onUnreadable }) });
  } catch (error) {
    if (InvalidScheduleError.isInstance(error)) throw new UsageError(`--restate takes the ingress URL (http://host:port): ${ingressUrlProblem(url) ?? 'it was refused'}`);
    throw error;
  }
}
