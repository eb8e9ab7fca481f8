import { doubtRequests } from '../agent/in-doubt/in-doubt.js';
import { serviceKey } from '../agent/protocol/keys.js';
import { decideDoubtStored, type DoubtVerdict } from '../sessions/stored-doubt.js';
import { ApprovalRefusedError } from '../sessions/stored-decision.js';
import { CliError, UsageError } from './errors.js';
import { escapeLine } from './escape.js';
import { cliHint } from './hint.js';
import { loadSession, noStore, withStore, type CommandOptions } from './sessions.js';

export const DOUBT_SHAPE = 'ID CALL rerun | fail [REASON] | result JSON [--by NAME]';

/** The verdict the command line asks for; a hand result is JSON text (a UsageError otherwise). */
function verdictOf(action: string, argument: string | undefined, by: string | undefined): DoubtVerdict {
  const who = by !== undefined ? { by } : {};
  if (action === 'rerun' && argument === undefined) return { action, ...who };
  if (action === 'fail') return { action, ...who, ...(argument !== undefined && { reason: argument }) };
  if (action === 'result' && argument !== undefined) {
    try {
      return { action, result: JSON.parse(argument) as unknown, ...who };
    } catch (error) {
      throw new UsageError(`the result must be JSON (a string in quotes: '"sent"'): ${(error as Error).message}`);
    }
  }
  throw new UsageError(`usage: loopchart sessions doubt ${DOUBT_SHAPE}`);
}

/**
 * `loopchart sessions doubt ID CALL ACTION`: decides a call in doubt (`sessions show` lists
 * them) straight in the store, bound to the call as it is stored (its digest and run). The
 * process that resumes the session next does what was decided.
 */
export async function decideDoubtCommand(sessionId: string, callId: string, action: string, argument: string | undefined, by: string | undefined, options: CommandOptions): Promise<number> {
  const verdict = verdictOf(action, argument, by);
  const { io, location } = options;
  return withStore(
    options,
    async (store) => {
      const { context: decoded } = await loadSession(store, sessionId, location);
      const batch = decoded.brain.value === 'AwaitingTools' ? serviceKey(decoded, decoded.brain.context.turnsTaken, 'tools') : null;
      const context = batch ? { ...decoded, toolJournal: await store.journaledToolResults(sessionId, batch) } : decoded;
      const shown = doubtRequests(context).requests.find((request) => request.toolCallId === callId);
      // A call that is not in doubt is refused by the same check as any decision (and recorded as refused).
      const request = shown ?? { toolCallId: callId, digest: undefined as never, run: context.runIndex };
      try {
        await decideDoubtStored(store, sessionId, request, verdict);
      } catch (error) {
        if (ApprovalRefusedError.isInstance(error)) throw new CliError(error.message, { cause: error });
        throw error;
      }
      io.out(`session ${escapeLine(sessionId)}: call ${escapeLine(callId)} decided (${action}); resume the session to go on (${cliHint(`sessions resume ${escapeLine(sessionId)}`)})`);
      return 0;
    },
    noStore(location),
  );
}
