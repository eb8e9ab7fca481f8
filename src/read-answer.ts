import { z } from 'zod';

/**
 * What a user's code handed back (a callback's answer: approve, a guardrail, a tool policy, an
 * operation hook, fallbackOn ...), checked against its schema. Reading such a value runs the
 * user's code again (a getter, a Proxy trap), and zod's `safeParse` lets such a throw through:
 * here it is a failed read with the reason, like any other bad answer, so a caller that runs this
 * outside its own try cannot turn one getter into an unhandled rejection.
 */
export type ReadAnswer<T> = { ok: true; value: T } | { ok: false; problem: string };

/** `schema.safeParse(value)` where a throw while reading `value` is a failed read, not a throw. */
export function readAnswer<S extends z.ZodType>(schema: S, value: unknown): ReadAnswer<z.output<S>> {
  try {
    const parsed = schema.safeParse(value);
    return parsed.success ? { ok: true, value: parsed.data } : { ok: false, problem: z.prettifyError(parsed.error) };
  } catch (error) {
    return { ok: false, problem: `reading it threw: ${thrownMessage(error)}` };
  }
}

/** What a thrown value says, even one whose message or toString throws. */
export function thrownMessage(error: unknown): string {
  try {
    return error instanceof Error ? String(error.message) : String(error);
  } catch {
    return 'an error whose message could not be read';
  }
}
