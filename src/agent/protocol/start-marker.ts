import { randomUUID } from 'node:crypto';

/**
 * A start marker's token: minted by the IO that starts an 'ask' call, journaled by a durable
 * executor before the tool runs. A journal that answers the marker step with a token this IO did
 * not mint holds an earlier process's start (or an earlier attempt's, on Restate): the call was
 * in flight when that process stopped.
 */
export function startToken(minted: Set<string>): { token: string } {
  const token = randomUUID();
  minted.add(token);
  return { token };
}

/** Whether the marker step's output is a start this IO made; anything unreadable (a journal written elsewhere) is not. */
export function madeHere(minted: ReadonlySet<string>, output: unknown): boolean {
  const token = typeof output === 'object' && output !== null ? (output as { token?: unknown }).token : undefined;
  return typeof token === 'string' && minted.has(token);
}
