import { z } from 'zod';

/**
 * Whose session this is: the memory scope (a user, a resource, a team) given when a session is
 * opened. It is stored with the session, a child run (an agent tool's) inherits its parent's, and
 * every operation and tool of the run is told it, so what belongs to one scope is read and written
 * with that scope's key and no other. Up to 200 characters, no control characters: it is a key
 * someone else chose, and it ends up in stored rows, logs and error messages. Well-formed Unicode
 * too: a lone surrogate becomes U+FFFD on its way to PostgreSQL's text, so `user:a\ud800` would be
 * stored as, and read the memory of, `user:a\ufffd` (another user's key).
 */
export const ScopeSchema = z
  .string()
  .min(1, 'must not be empty')
  .max(200, 'must be at most 200 characters')
  // eslint-disable-next-line no-control-regex
  .refine((scope) => !/[\u0000-\u001f\u007f-\u009f]/.test(scope), 'must not contain control characters')
  .refine((scope) => !/\p{Cs}/u.test(scope), 'must not contain a lone surrogate (not well-formed Unicode)');
