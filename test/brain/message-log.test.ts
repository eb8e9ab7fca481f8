/**
 * The brain's conversation is one shared, append-only `MessageLog`: a turn appends without
 * copying the run, and every log (so every context and snapshot) stays a value, whichever older
 * log a change starts from.
 */
import { inspect } from 'node:util';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { emptyLoopContext, reduceLoop } from '../../machines/loop.machine.js';
import { feedBrain, freshBrain, takeStep, type BrainState } from '../../src/agent/core/brain-state.js';
import { fieldsOf, logOf, loopContextOf, MessageLog } from '../../src/brain/message-log.js';
import { DEFAULT_POLICY, LoopContextSchema, type Message } from '../../src/schemas.js';
import { asst, call, toolMsg, user } from '../support/brain.js';

const says = (n: number): Message => user(`m${n}`);
const contents = (list: readonly Message[]) => list.map((message) => message.content);

describe('MessageLog', () => {
  it('appends at its tip in place and copies its own part once when it is not the tip', () => {
    const base = MessageLog.of([says(0)], []);
    const a = base.append([says(1)]);
    const b = a.append([says(2)]);
    expect(b.sharesStorageWith(base)).toBe(true);
    // A second branch from `a`: `b` took the next position, so the branch copies.
    const fork = a.append([says(9)]);
    expect(fork.sharesStorageWith(a)).toBe(false);
    expect(contents(b.pendingView())).toEqual(['m1', 'm2']);
    expect(contents(fork.pendingView())).toEqual(['m1', 'm9']);
    expect([base.length, a.length, b.length, fork.length]).toEqual([1, 2, 3, 3]);
    expect(b.commonPrefix(fork)).toBe(2);
    expect(b.commonPrefix(a)).toBe(2);
  });

  it('cuts each view once; a log grown by appends keeps the history view of the log it grew from', () => {
    const log = MessageLog.of([says(0), says(1)], [says(2)]);
    const history = log.historyView();
    const grown = log.append([says(3)]);
    expect(grown.historyView()).toBe(history);
    expect(grown.pendingView()).toBe(grown.pendingView());
    expect(contents(grown.toArray(says(-1)))).toEqual(['m-1', 'm0', 'm1', 'm2', 'm3']);
    expect(contents(grown.tail(3))).toEqual(['m3']);
  });

  it('commits, discards and rewinds without changing the log it started from', () => {
    const log = MessageLog.of([says(0)], [says(1), says(2)]);
    expect(contents(log.commit().historyView())).toEqual(['m0', 'm1', 'm2']);
    expect(contents(log.commit(1).historyView())).toEqual(['m0', 'm1']);
    expect(log.commit(1).pendingLength).toBe(0);
    expect(contents(log.discardPending().historyView())).toEqual(['m0']);
    expect(log.commit().rewind(1).length).toBe(1);
    expect([log.split, log.length, contents(log.pendingView())]).toEqual([1, 3, ['m1', 'm2']]);
    // After a discard the next append may not write over the dropped messages that `log` still holds.
    const next = log.discardPending().append([says(7)]);
    expect(contents(next.pendingView())).toEqual(['m7']);
    expect(contents(log.pendingView())).toEqual(['m1', 'm2']);
  });

  it('every log stays what it was, whatever older log each change starts from (against plain lists)', () => {
    type Op = { from: number; kind: number; n: number };
    const op = fc.record({ from: fc.nat(), kind: fc.nat(4), n: fc.nat(3) });
    fc.assert(
      fc.property(fc.array(op, { maxLength: 60 }), (ops: Op[]) => {
        const logs = [MessageLog.of([says(0)], [])];
        const model: { history: Message[]; pending: Message[] }[] = [{ history: [says(0)], pending: [] }];
        let made = 1;
        for (const { from, kind, n } of ops) {
          const at = from % logs.length;
          const log = logs[at]!;
          const was = model[at]!;
          const fresh = Array.from({ length: n + 1 }, () => says(made++));
          const [next, expected] =
            kind === 0 || kind === 1
              ? [log.append(fresh), { history: was.history, pending: [...was.pending, ...fresh] }]
              : kind === 2
                ? [log.commit(n), { history: [...was.history, ...was.pending.slice(0, n)], pending: [] }]
                : kind === 3
                  ? [log.discardPending(), { history: was.history, pending: [] }]
                  : [log.rewind(n), { history: was.history.slice(0, Math.min(n, was.history.length)), pending: [] }];
          logs.push(next);
          model.push(expected);
        }
        logs.forEach((log, i) => {
          expect(log.historyView()).toEqual(model[i]!.history);
          expect(log.pendingView()).toEqual(model[i]!.pending);
          expect(log.toArray()).toEqual([...model[i]!.history, ...model[i]!.pending]);
        });
      }),
    );
  });
});

describe('a brain context over a log', () => {
  const context = () => loopContextOf(fieldsOf(emptyLoopContext()), MessageLog.of([says(0)], [says(1)]));

  it('is plain data to spreading, structuredClone, JSON and equality', () => {
    const plain = { ...emptyLoopContext([says(0)]), pending: [says(1)] };
    expect(context()).toStrictEqual(plain);
    expect(structuredClone(context())).toStrictEqual(plain);
    expect(JSON.parse(JSON.stringify(context()))).toStrictEqual(plain);
    expect({ ...context() }).toStrictEqual(plain);
    // Keys in the schema's order: a context serializes as a plain one always did.
    expect(Object.keys(context())).toEqual(Object.keys(LoopContextSchema.shape));
    expect(JSON.stringify(context())).toBe(JSON.stringify(plain));
  });

  it('prints as plain data in Node (console.log, util.inspect)', () => {
    const printed = inspect(context(), { depth: 4 });
    expect(printed).not.toContain('Getter');
    expect(printed).toContain("content: 'm1'");
  });

  it('a list assigned to it replaces the log for that context only', () => {
    const first = context();
    const second = loopContextOf(fieldsOf(first), logOf(first));
    first.pending = [says(5)];
    expect(contents(first.pending)).toEqual(['m5']);
    expect(contents(logOf(first).toArray())).toEqual(['m0', 'm5']);
    expect(contents(second.pending)).toEqual(['m1']);
  });

  it("a copy made field by field (XState's assign) finds the same log, without copying the conversation", () => {
    const original = context();
    const copied = Object.assign({}, original, { turnsTaken: 3 });
    expect(logOf(copied)).toBe(logOf(original));
    // Lists that are no log's views get a log of their own.
    expect(logOf({ ...copied, pending: [says(1)] })).not.toBe(logOf(original));
  });
});

describe('a run through the reducer', () => {
  const policy = DEFAULT_POLICY;
  /** One tool turn: the model asks, the tool answers. */
  function turn(brain: BrainState, n: number): BrainState {
    let next = takeStep(brain, policy);
    next = feedBrain(next, { type: 'modelResponse', response: asst('', [call(`c${n}`)]), contextTokens: 10, availableTools: ['read'] });
    next = takeStep(next, policy);
    return feedBrain(next, { type: 'toolResults', messages: [toolMsg(`c${n}`, 'read', `r${n}`)] });
  }

  it('keeps one list for the whole run: no turn copies the messages before it, and no kept context changes', () => {
    let brain = feedBrain(freshBrain([says(0)]), { type: 'acceptInput', message: user('go') });
    const kept: { brain: BrainState; json: string }[] = [];
    for (let n = 0; n < 200; n++) {
      brain = turn(brain, n);
      kept.push({ brain, json: JSON.stringify(brain.context) });
    }
    expect(logOf(brain.context).length).toBe(2 + 400);
    expect(kept.every(({ brain: earlier }) => logOf(earlier.context).sharesStorageWith(logOf(brain.context)))).toBe(true);
    // A rewind and a new run from an earlier context branch off without touching the later ones.
    const branched = reduceLoop('Start', kept[10]!.brain.context, { type: 'discardPending' });
    feedBrain({ value: 'Start', context: branched!.context }, { type: 'acceptInput', message: user('again') });
    for (const { brain: earlier, json } of kept) expect(JSON.stringify(earlier.context)).toBe(json);
  });
});
