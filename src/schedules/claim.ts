import type { StoreError } from '../stores/errors.js';
import { decodeScheduleRow, gistOf, leasedRow, type Claim, type ScheduleRow } from './row.js';

/**
 * Which due schedules one claim takes, the same in every backend (each reads the rows and writes
 * the leases in its one transaction). Ticks on one session take turns: two schedules driving one
 * session at once would lose a version race to each other (and could run a tool twice), so a
 * schedule whose session another schedule's tick holds waits until that tick ends.
 */

/** A stored row as text, by id: what a backend reads before anything is decoded. */
export interface StoredText {
  id: string;
  text: string;
}

/** A row that holds its session: leased now, or with a tick in progress (its lease given back or lost, the tick to be taken over). */
interface Holder {
  id: string;
  live: boolean;
  tick: boolean;
}

/**
 * The claim of `due` (rows due at `now`, lease free, for the caller's agents, in the order to take
 * them), given `leased` (every row with a lease, live or not): each due row is decoded on its own
 * (one this version does not read is reported, not thrown), and taken unless another row holds its
 * session: one with a live lease, or, for a fresh tick, one whose tick is in progress (a paused one
 * does not hold it: it may stay paused). A tick in progress is taken even while another one is, so
 * two such ticks cannot wait on each other. At most `limit` are taken, leased to `owner`.
 */
export function planClaim(lease: { owner: string; now: number; leaseMs: number }, due: readonly StoredText[], leased: readonly StoredText[], limit: number, where: string): Claim {
  const { owner, now, leaseMs } = lease;
  const holders = new Map<string, Holder[]>();
  const hold = (session: string, holder: Holder) => holders.set(session, [...(holders.get(session) ?? []), holder]);
  for (const { id, text } of leased) {
    const gist = gistOf(text);
    if (gist?.sessionId === undefined) continue;
    hold(gist.sessionId, { id, live: (gist.leaseUntil ?? 0) > now, tick: gist.tickDue != null && gist.paused !== true });
  }
  const claim: Claim = { claimed: [], unreadable: [], waiting: 0 };
  for (const { id, text } of due) {
    if (claim.claimed.length >= limit) break;
    let row: ScheduleRow;
    try {
      row = decodeScheduleRow(text, where);
    } catch (error) {
      // decodeScheduleRow throws nothing but the StoreError naming the row.
      claim.unreadable.push(error as StoreError);
      continue;
    }
    const fresh = row.tickDue === null;
    if ((holders.get(row.sessionId) ?? []).some((other) => other.id !== id && (other.live || (fresh && other.tick)))) {
      claim.waiting++;
      continue;
    }
    const taken = leasedRow(row, owner, now, leaseMs);
    hold(row.sessionId, { id, live: true, tick: !fresh });
    claim.claimed.push(taken);
  }
  return claim;
}
