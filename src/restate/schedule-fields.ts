import { ScheduleFieldsSchema } from '../schedules/schedules.js';

/**
 * What the schedule object and its ingress client agree on, without Restate's SDK: the client
 * (and `loopchart schedules --restate`) only speaks HTTP to the ingress, so it loads without it.
 */

/** The registry's one key: one list of every schedule of the object. */
export const REGISTRY_KEY = 'all';

/** What `create` takes: `schedule`'s options without the agent (the session object runs it) and the missed policy (a delayed call is never missed). The id is the object's key. */
export const RestateScheduleFieldsSchema = ScheduleFieldsSchema.omit({ agent: true, missed: true, id: true });
