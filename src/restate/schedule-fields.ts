import { z } from 'zod';
import type { ScheduleRow } from '../schedules/row.js';
import { ScheduleFieldsSchema } from '../schedules/schedules.js';
import { ingressKeyProblem } from './ingress-url.js';

/**
 * What the schedule object and its ingress client agree on, without Restate's SDK: the client
 * (and `loopchart schedules --restate`) only speaks HTTP to the ingress, so it loads without it.
 */

/** The registry's one key: one list of every schedule of the object. */
export const REGISTRY_KEY = 'all';

/**
 * What `create` takes: `schedule`'s options without the agent (the session object runs it) and the
 * missed policy (a delayed call is never missed). The id is the object's key. The session is a
 * session object's key too, which clients, the viewer and a cancel reach through the ingress: one
 * no ingress path can hold (`.`, `..`) would run where nobody can see or stop it.
 */
export const RestateScheduleFieldsSchema = ScheduleFieldsSchema.omit({ agent: true, missed: true, id: true }).extend({
  session: ScheduleFieldsSchema.shape.session.refine((key) => ingressKeyProblem(key) === null, { error: (issue) => ingressKeyProblem(issue.input as string) ?? 'invalid' }),
});

/**
 * What the registry's `list` answers: the rows it read, and each schedule whose row its own object
 * refused (another version wrote it, or it was edited), by id with the refusal's message.
 */
export const RegistryListSchema = z.strictObject({
  rows: z.array(z.unknown()),
  unreadable: z.array(z.strictObject({ id: z.string(), message: z.string() })),
});
/** The registry's answer as the object writes it (the client reads it through `RegistryListSchema`, a row at a time). */
export interface RegistryList {
  rows: ScheduleRow[];
  unreadable: z.infer<typeof RegistryListSchema>['unreadable'];
}
