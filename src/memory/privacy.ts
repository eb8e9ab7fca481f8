import type { SessionStore } from '../stores/session-store.js';
import { ScopeSchema } from '../agent/protocol/scope.js';
import { InvalidScopeError } from './errors.js';
import type { ScopeExport, ScopeSummary } from './memory-backend.js';
import { memoryBackend } from './memory-store.js';

/** A scope given from outside, checked where it enters. */
function checkedScope(scope: unknown): string {
  const parsed = ScopeSchema.safeParse(scope);
  if (!parsed.success) throw new InvalidScopeError(typeof scope === 'string' ? parsed.error.issues[0]!.message : 'must be a string');
  return parsed.data;
}

async function withMemory<T>(store: SessionStore, work: (backend: ReturnType<typeof memoryBackend>) => Promise<T>): Promise<T> {
  const backend = memoryBackend(store);
  try {
    return await work(backend);
  } finally {
    await backend.close();
  }
}

/**
 * The scopes that have memory beside `store`'s sessions, most recently updated first: how big
 * each one's working memory and index are. Reads no document and no entry.
 *
 * @example
 * ```ts
 * import { listScopes } from 'loopchart/memory';
 * for (const scope of await listScopes(store)) console.log(scope.scope, scope.entries, scope.workingChars);
 * ```
 */
export async function listScopes(store: SessionStore): Promise<ScopeSummary[]> {
  const scopes = await withMemory(store, (backend) => backend.listScopes());
  return scopes.sort((a, b) => b.updatedAt.getTime() - a.updatedAt.getTime() || a.scope.localeCompare(b.scope));
}

/**
 * Everything the memory holds for one scope (its working memory and every indexed entry), for a
 * user who asks for their data. A scope with nothing gives `{ working: null, entries: [] }`. A
 * stored row this version does not read is left out and named in `problems` (as recall does), so
 * one such row never withholds the rest. Throws `InvalidScopeError` for a scope that cannot be one.
 *
 * @example
 * ```ts
 * import { exportScope } from 'loopchart/memory';
 * const data = await exportScope(store, 'user:42');
 * console.log(JSON.stringify(data, null, 2));
 * for (const problem of data.problems ?? []) console.error(problem); // a row left out, and why
 * ```
 */
export async function exportScope(store: SessionStore, scope: string): Promise<ScopeExport> {
  const checked = checkedScope(scope);
  return withMemory(store, (backend) => backend.exportScope(checked));
}

/**
 * Forgets a scope: its working memory and every indexed entry, search indexes included (a search
 * of the scope finds nothing afterwards). The sessions themselves stay: delete those with the
 * store. What they held is not indexed again (a fork of one, or one continued by an agent newly
 * given memory, indexes only what is said in it from then on). Returns how many entries went. Throws `InvalidScopeError` for a scope that cannot be one.
 *
 * @example
 * ```ts
 * import { deleteScope } from 'loopchart/memory';
 * const removed = await deleteScope(store, 'user:42');
 * console.log(`forgot ${removed} entries`);
 * ```
 */
export async function deleteScope(store: SessionStore, scope: string): Promise<number> {
  const checked = checkedScope(scope);
  return withMemory(store, (backend) => backend.deleteScope(checked));
}
