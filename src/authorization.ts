import { z } from 'zod';

/**
 * What the `authorize` hooks of the package's listeners answer (the chat handler's, the
 * viewer's and the inspector's), and how an answer is read: every failure is a refusal. An
 * answer that is neither allow nor deny, a throw (a getter that throws included) and a hook that
 * does not answer in time all deny.
 */

/**
 * An `authorize` hook's answer: `true` / `{ allow: true }` lets the request through; `false` is
 * a 403; `{ allow: false, status, reason }` refuses with 401 (not signed in), 403 or 404 (to not
 * say the thing asked for exists), the reason in the refusal. Anything else is a 403.
 *
 * @example
 * ```ts
 * AuthorizationSchema.parse({ allow: false, status: 401, reason: 'sign in first' });
 * ```
 */
export const AuthorizationSchema = z.union([
  z.boolean(),
  z.strictObject({ allow: z.literal(true) }),
  z.strictObject({
    allow: z.literal(false),
    status: z.union([z.literal(401), z.literal(403), z.literal(404)]).default(403),
    reason: z.string().max(1000).optional(),
  }),
]);

/** A refusal an answer means: its status and why. */
export interface AuthorizationRefusal {
  status: 401 | 403 | 404;
  message: string;
}

/** A 403 saying why. */
export const forbidden = (message: string): AuthorizationRefusal => ({ status: 403, message });

/**
 * The refusal an `authorize` answer means, or null when it allows. `name` names the hook in the
 * message. Read once, inside a try: a getter may throw.
 */
export function refusalOf(value: unknown, name = 'authorize'): AuthorizationRefusal | null {
  let parsed: z.output<typeof AuthorizationSchema>;
  try {
    const result = AuthorizationSchema.safeParse(value);
    if (!result.success) return forbidden(`${name} answered neither true, false nor { allow }`);
    parsed = result.data;
  } catch {
    return forbidden(`${name} answered something that cannot be read`);
  }
  if (parsed === true || (typeof parsed === 'object' && parsed.allow)) return null;
  if (parsed === false) return forbidden('not allowed');
  return { status: parsed.status, message: parsed.reason ?? 'not allowed' };
}

/**
 * The value `call` returns or resolves to, or why there is none: it threw, rejected, or did not
 * settle within `ms`. What it threw is not shown to the client (it may hold anything); the name of
 * the callback and the kind of failure are.
 */
export async function timed<T>(name: string, call: () => T | PromiseLike<T>, ms: number): Promise<{ value: T } | { problem: string }> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<{ problem: string }>((resolve) => {
    timer = setTimeout(() => resolve({ problem: `${name} did not answer within ${ms} ms` }), ms);
  });
  const answer = (async () => ({ value: await call() }))().catch(() => ({ problem: `${name} failed` }));
  try {
    return await Promise.race([answer, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/** An `authorize` hook asked within `ms`: null when it allows, else the refusal (a throw or a timeout is a 403). */
export async function askAuthorization(name: string, call: () => unknown, ms: number): Promise<AuthorizationRefusal | null> {
  const answer = await timed(name, call, ms);
  return 'problem' in answer ? forbidden(answer.problem) : refusalOf(answer.value, name);
}
