import { UsageError } from './errors.js';
import { escapeLine } from './escape.js';

/** The schedules Restate keeps, through its ingress at `url` (the client needs no Restate SDK). */
export async function restateSchedules(url: string) {
  if (!/^https?:\/\/\S+$/i.test(url) || !URL.canParse(url)) throw new UsageError(`--restate takes the ingress URL (http://host:port), not '${escapeLine(url)}'`);
  return (await import('../restate/schedule-client.js')).restateScheduleClient(url);
}
