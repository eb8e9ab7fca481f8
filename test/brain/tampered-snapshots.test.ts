/**
 * Bug 4: tampered snapshots. One validation (`parseLoopSnapshot`) guards every way a brain
 * snapshot comes in: `LoopMachine.restore`, XState's persisted form, and a stored session row
 * read back through a real store. Every tampered case is refused with a typed error naming the
 * path; every snapshot the machine itself makes is accepted.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { InvalidSnapshotError, LoopchartError } from '../../src/errors.js';
import { LoopMachine } from '../../src/brain/loop-machine.js';
import { loopSnapshotProblem, parseLoopSnapshot } from '../../src/brain/loop-snapshot.js';
import type { Message } from '../../src/schemas.js';
import { decodeRow, SESSION_ROW_VERSION, SessionRowError } from '../../src/sessions/session-row.js';
import { MemorySessionStore } from '../../src/stores/memory.js';
import { PostgresSessionStore } from '../../src/stores/postgres.js';
import type { SessionStore } from '../../src/stores/session-store.js';
import { SqliteSessionStore } from '../../src/stores/sqlite.js';
import { asst, call, inAwaitingTools, inStart, inTerminal, notAvailable, sys, toolMsg, user } from '../support/brain.js';

type Json = Record<string, unknown> & { history: Message[]; pending: Message[]; pendingTools: Array<Record<string, unknown>> };
const plain = (m: LoopMachine): Json => JSON.parse(JSON.stringify(m.toJSON())) as Json;

const P = { contextWindow: 1000 } as const;
/** Machine-made snapshots at every point of runs that pass every state. */
function machineSnapshots(): Json[] {
  const out: Json[] = [];
  const m = new LoopMachine({ history: [sys(), user('old'), asst('', [call('h1'), call('h2')]), toolMsg('h1'), toolMsg('h2'), asst('old answer')] });
  const steps: Array<(m: LoopMachine) => unknown> = [
    (x) => x.acceptInput(user('question')),
    (x) => x.nextStep(P),
    (x) => x.steer(user('steer')),
    (x) => x.modelResponse(asst('', [call('a', 'read', { path: 'x' }), call('b', 'ghost')]), 300, ['read']),
    (x) => x.nextStep(P),
    (x) => x.toolResults([notAvailable('b', 'ghost'), toolMsg('a', 'read', 'A')]),
    (x) => x.setContextTokens(960),
    (x) => x.nextStep(P),
    (x) => x.compactionNoop(960, 400, P),
    (x) => x.nextStep(P),
    (x) => x.modelResponse(asst('', [call('c', 'read')]), 500, ['read']),
    (x) => x.toolResults([toolMsg('c', 'read', 'C')]),
    (x) => x.nextStep(P),
    (x) => x.modelResponse(asst('final'), 520, []),
    (x) => x.commitPending(),
  ];
  out.push(plain(m));
  for (const step of steps) {
    step(m);
    out.push(plain(m));
  }
  // A run that failed while its tools ran: Terminal with unanswered calls.
  const failed = inAwaitingTools();
  failed.fail({ type: 'X', message: 'boom' });
  out.push(plain(failed));
  failed.discardPending();
  out.push(plain(failed));
  return out;
}
const VALID = machineSnapshots();

/** Restores through every entry: the facade (versioned and persisted forms) and the pure check. */
function refusals(json: unknown): unknown[] {
  const errors: unknown[] = [];
  const attempt = (fn: () => unknown) => {
    try {
      fn();
      errors.push(undefined);
    } catch (error) {
      errors.push(error);
    }
  };
  attempt(() => LoopMachine.restore(structuredCloneSafe(json)));
  attempt(() => parseLoopSnapshot(json));
  if (json && typeof json === 'object' && 'state' in json) {
    const { version: _v, state, ...context } = json as Record<string, unknown>;
    attempt(() => LoopMachine.restore({ status: 'active', value: state, context }));
  }
  return errors;
}
// Tampered values may hold functions or cycles that structuredClone refuses: pass those as they are.
function structuredCloneSafe(value: unknown): unknown {
  try {
    return structuredClone(value);
  } catch {
    return value;
  }
}

function expectRefused(json: unknown, path?: string | RegExp): void {
  for (const error of refusals(json)) {
    expect(error, `accepted: ${safeText(json)}`).toBeInstanceOf(InvalidSnapshotError);
    expect(error).toBeInstanceOf(LoopchartError);
    expect((error as LoopchartError).code).toBe('InvalidSnapshot');
    if (typeof path === 'string') expect((error as Error).message).toContain(path);
    else if (path) expect((error as Error).message).toMatch(path);
  }
  expect(loopSnapshotProblem(json)).not.toBeNull();
}
const safeText = (value: unknown) => {
  try {
    return JSON.stringify(value)?.slice(0, 400);
  } catch {
    return String(value);
  }
};

const awaitingTools = () => plain(inAwaitingTools()); // history [sys], pending [user, asst(c1)], pendingTools [c1]
const terminal = () => plain(inTerminal()); // pending [user, asst('done')]

describe('the cases of the report, each refused with the path of the problem', () => {
  it('a tool result with no call', () => {
    const t = terminal();
    expectRefused({ ...t, history: [...t.history, toolMsg('ghost')] }, "history[1].toolCallId: not coherent: tool result at position 1 answers no open tool call ('ghost')");
    expectRefused({ ...t, pending: [toolMsg('ghost'), ...t.pending] }, "pending[0].toolCallId");
  });

  it('two results for one call', () => {
    const m = inAwaitingTools();
    m.toolResults([toolMsg('c1')]);
    const s = plain(m);
    expectRefused({ ...s, pending: [...s.pending, toolMsg('c1')] }, "pending[3].toolCallId: not coherent: tool result at position 4 answers tool call 'c1' (position 2) a second time");
  });

  it('a user message between a call and its result', () => {
    const m = inAwaitingTools();
    m.toolResults([toolMsg('c1')]);
    const s = plain(m);
    const [u, a, r] = s.pending;
    expectRefused({ ...s, pending: [u, a, user('sneaky'), r] }, "pending[2]: not coherent: user message at position 3 comes between tool call 'c1' (position 2) and its result");
    expectRefused({ ...s, pending: [u, a, sys('sneaky'), r] }, /system message at position 3 comes between/);
  });

  it('an unanswered call in history, or in pending where the state does not allow one', () => {
    const s = plain(inStart());
    expectRefused({ ...s, history: [...s.history, asst('', [call('x')])] }, "history[1].toolCalls[0]: not coherent: tool call 'x' at position 1 has no result");
    expectRefused({ ...s, pending: [...s.pending, asst('', [call('x')])] }, "pending[1].toolCalls[0]");
  });

  it('a tool-call id reused while its first call is unanswered', () => {
    const s = awaitingTools();
    const a = s.pending[1] as Message & { toolCalls: unknown[] };
    expectRefused(
      { ...s, pending: [s.pending[0], { ...a, toolCalls: [call('c1'), call('c1')] }], pendingTools: [{ call: call('c1') }, { call: call('c1') }] },
      "pending[1].toolCalls[1].id: not coherent: tool call id 'c1' at position 2 is used again while an earlier call in this message is unanswered",
    );
  });

  it('pending tool calls that do not match the calls that end the conversation', () => {
    const s = awaitingTools();
    expectRefused({ ...s, pendingTools: [{ call: call('other') }] }, "pendingTools[0].call: pending tool call 'other' is not call 0 ('c1')");
    expectRefused({ ...s, pendingTools: [{ call: call('c1', 'read', { path: 'a' }) }, { call: call('c2') }] }, /2 tool calls are pending but the reply at position 2 asked for 1/);
    expectRefused({ ...s, pending: [...s.pending, toolMsg('c1')] }, /does not end with the reply that asked for tools/);
    expectRefused({ ...s, pendingTools: [{ call: s.pendingTools[0]!.call, preAnswered: notAvailable('zz', 'read') }] }, 'pendingTools[0].preAnswered.toolCallId');
    expectRefused({ ...plain(inStart()), pendingTools: s.pendingTools }, 'pendingTools: state is Start but tool calls are pending');
    expectRefused({ ...s, turnsTaken: 0 }, 'turnsTaken');
  });

  it('counters out of range', () => {
    const s = terminal();
    for (const field of ['turnsTaken', 'contextTokens', 'totalToolCalls', 'lastCompactionTokens']) {
      for (const bad of [-1, 1.5, 2 ** 53, 1e300, '3', null]) {
        if (field === 'lastCompactionTokens' && bad === null) continue;
        expectRefused({ ...s, [field]: bad }, field);
      }
    }
  });

  it('state and context that contradict each other', () => {
    expectRefused({ ...terminal(), outcome: null }, 'outcome: state is Terminal but outcome is missing');
    expectRefused({ ...plain(inStart()), compactionReason: 'Emergency' }, 'compactionReason');
    expectRefused({ ...plain(inStart()), state: 'AwaitingTools' }, 'pendingTools');
  });

  it('arguments that are not plain JSON (objects handed over in memory)', () => {
    const s = awaitingTools();
    const cyclic: Record<string, unknown> = {};
    cyclic.self = cyclic;
    let deep: unknown = 1;
    for (let i = 0; i < 3000; i++) deep = { d: deep };
    for (const args of [() => 1, 10n, Symbol('s'), cyclic, deep, new Date(0), { x: undefined }, Number.NaN]) {
      const a = s.pending[1] as Message & { toolCalls: Array<Record<string, unknown>> };
      const tampered = { ...a, toolCalls: [{ ...a.toolCalls[0], args }] };
      expectRefused({ ...s, pending: [s.pending[0], tampered], pendingTools: [{ call: { ...call('c1'), args } }] }, 'pending[1].toolCalls[0].args');
    }
  });

  it('an XState snapshot of an actor that failed', () => {
    const p = JSON.parse(JSON.stringify(inStart().actor.getPersistedSnapshot())) as Record<string, unknown>;
    expect(() => LoopMachine.restore({ ...p, status: 'error' })).toThrow(/status: the snapshot is of an actor that failed/);
  });
});

// ------------------------------------------------------------------ fuzz

type Tamper = (s: Json, pick: number) => Json | undefined;
const at = <T>(list: readonly T[], pick: number): T | undefined => (list.length ? list[pick % list.length] : undefined);
const positions = (s: Json, where: 'history' | 'pending', test: (m: Message) => boolean) =>
  s[where].flatMap((m, i) => (test(m) ? [i] : []));
const insert = (list: Message[], i: number, m: Message) => [...list.slice(0, i), m, ...list.slice(i)];
const hasCalls = (m: Message) => m.role === 'assistant' && (m.toolCalls?.length ?? 0) > 0;

/** Each operator either returns a snapshot that is invalid for sure or declines (undefined). */
const TAMPERS: Record<string, Tamper> = {
  orphanResult: (s, pick) => {
    const where = pick % 2 ? 'history' : 'pending';
    const i = Math.floor(pick / 2) % (s[where].length + 1);
    return { ...s, [where]: insert(s[where], i, toolMsg(`orphan-${pick}`)) };
  },
  resultTwice: (s, pick) => {
    const where = pick % 2 ? 'history' : 'pending';
    const i = at(positions(s, where, (m) => m.role === 'tool'), pick >> 1);
    return i === undefined ? undefined : { ...s, [where]: insert(s[where], i + 1, s[where][i]!) };
  },
  messageAfterCall: (s, pick) => {
    const where = pick % 2 ? 'history' : 'pending';
    const i = at(positions(s, where, hasCalls), pick >> 1);
    const intruder = [user('intruder'), sys('intruder'), asst('intruder')][pick % 3]!;
    return i === undefined ? undefined : { ...s, [where]: insert(s[where], i + 1, intruder) };
  },
  dropHistoryResult: (s, pick) => {
    const i = at(positions(s, 'history', (m) => m.role === 'tool'), pick);
    return i === undefined ? undefined : { ...s, history: s.history.filter((_, k) => k !== i) };
  },
  openCallInHistory: (s, pick) => ({ ...s, history: insert(s.history, s.history.length, asst('', [call(`open-${pick}`)])) }),
  reuseId: (s, pick) => {
    const where = pick % 2 ? 'history' : 'pending';
    const i = at(positions(s, where, hasCalls), pick >> 1);
    if (i === undefined) return undefined;
    const m = s[where][i] as Message & { toolCalls: Array<{ id: string; name: string; args: unknown }> };
    const first = m.toolCalls[0]!;
    return { ...s, [where]: s[where].map((x, k) => (k === i ? { ...m, toolCalls: [...m.toolCalls, { ...first }] } : x)) };
  },
  pendingToolsMismatch: (s, pick) =>
    s.state === 'Terminal'
      ? undefined
      : s.pendingTools.length === 0
        ? { ...s, pendingTools: [{ call: call(`p${pick}`) }] }
        : { ...s, pendingTools: s.pendingTools.map((p, k) => (k === 0 ? { ...p, call: { ...(p.call as object), id: `x${pick}` } } : p)) },
  counter: (s, pick) => {
    const field = ['turnsTaken', 'contextTokens', 'totalToolCalls', 'lastCompactionTokens'][pick % 4]!;
    return { ...s, [field]: [-1, 0.5, 2 ** 53 + 2, -0.5, 'x', true][(pick >> 2) % 6] };
  },
  stateFlip: (s, pick) => {
    const states = ['Start', 'AwaitingModel', 'AwaitingTools', 'AwaitingCompaction', 'Terminal'].filter((x) => x !== s.state);
    const state = states[pick % states.length]!;
    // Leaving Terminal or entering AwaitingCompaction / Terminal always contradicts the fields.
    if (s.state === 'Terminal' || state === 'Terminal' || state === 'AwaitingCompaction' || state === 'AwaitingTools') {
      return { ...s, state };
    }
    return s.state === 'AwaitingTools' ? { ...s, state } : undefined;
  },
  badArgs: (s, pick) => {
    const i = at(positions(s, 'history', hasCalls), pick);
    if (i === undefined) return undefined;
    const m = s.history[i] as Message & { toolCalls: Array<Record<string, unknown>> };
    const args = [() => 0, 1n, Symbol('x'), undefined, Number.POSITIVE_INFINITY][pick % 5];
    const broken = { ...m, toolCalls: [{ ...m.toolCalls[0], args }, ...m.toolCalls.slice(1)] } as unknown as Message;
    return { ...s, history: s.history.map((x, k) => (k === i ? broken : x)) };
  },
};

describe('fuzz: tampered snapshots', () => {
  it('every snapshot the machine makes is accepted, through every entry', () => {
    for (const s of VALID) {
      expect(loopSnapshotProblem(s)).toBeNull();
      for (const error of refusals(s)) expect(error).toBeUndefined();
    }
  });

  it('every tampered one is refused, through every entry', () => {
    const names = Object.keys(TAMPERS);
    let tried = 0;
    fc.assert(
      fc.property(fc.nat(VALID.length - 1), fc.nat(names.length - 1), fc.nat(1000), (v, t, pick) => {
        const tampered = TAMPERS[names[t]!]!(VALID[v]!, pick);
        if (!tampered) return;
        tried++;
        expectRefused(tampered);
      }),
      { numRuns: 3000 },
    );
    expect(tried).toBeGreaterThan(1500);
  });
});

// ------------------------------------------------------------------ stored rows

const root = mkdtempSync(join(tmpdir(), 'loopchart-snapshots-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

/** The state row a durable session stores for this brain (see encodeRow), and its log. */
function rowOf(s: Json, policy: Record<string, unknown> = {}): { row: unknown; log: Message[] } {
  const { version: _v, state, history, pending, ...rest } = s;
  return {
    row: {
      rowVersion: SESSION_ROW_VERSION,
      brain: { value: state, historyLength: history.length, context: rest },
      policy: { maxTurns: 200, contextWindow: 200_000, compactThreshold: 80, autoCompact: true, ...policy },
      runIndex: 1,
      runUsage: { inputTokens: 0, outputTokens: 0 },
      sessionUsage: { inputTokens: 0, outputTokens: 0 },
      extrasTokens: 0,
      lastRun: null,
      approvals: { waiting: [], decisions: {}, standing: {} },
      runStartedAt: 0,
      operations: { slices: {}, point: null, done: null, waiting: null },
    },
    log: [...history, ...pending],
  };
}

describe('stored session rows pass the same validation when read back', () => {
  const url = process.env.DATABASE_URL;
  const schema = `lc_snapshots_${process.pid}`;
  const stores: Record<string, () => SessionStore> = {
    memory: () => new MemorySessionStore(),
    sqlite: () => new SqliteSessionStore({ path: join(root, `rows-${Math.random().toString(36).slice(2)}.db`) }),
    postgres: () => new PostgresSessionStore({ connectionString: url!, schema }),
  };
  afterAll(async () => {
    if (!url) return;
    const admin = new pg.Pool({ connectionString: url, max: 1 });
    await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
    await admin.end();
  });

  for (const [name, open] of Object.entries(stores)) {
    it.skipIf(name === 'postgres' && !url)(`${name}: valid rows decode; tampered rows and out-of-range policies are SessionRowError naming the path`, async () => {
      const store = open();
      const names = Object.keys(TAMPERS);
      let n = 0;
      let decoded = 0;
      const roundTrip = async (row: unknown, log: Message[]) => {
        const id = `s${n++}`;
        await store.apply(id, { expectedVersion: 0, state: row, append: log });
        const loaded = (await store.load(id))!;
        return () => decodeRow(id, loaded.state, loaded.messages);
      };
      for (const s of VALID) {
        const { row, log } = rowOf(s);
        const decode = await roundTrip(row, log);
        expect(decode().brain.context.history).toEqual(s.history);
      }
      for (let k = 0; k < 200; k++) {
        const s = VALID[k % VALID.length]!;
        const tampered = TAMPERS[names[k % names.length]!]!(s, k * 7 + 3);
        // Values JSON cannot carry are refused at write time; the row tests what a store can hold.
        if (!tampered || names[k % names.length] === 'badArgs') continue;
        const { row, log } = rowOf(tampered);
        const decode = await roundTrip(row, log).catch(() => undefined);
        if (!decode) continue; // the store refused the write (e.g. a message that is not a Message)
        expect(decode).toThrow(SessionRowError);
        decoded++;
      }
      expect(decoded).toBeGreaterThan(120);
      for (const policy of [{ contextWindow: -1 }, { maxTurns: 1.5 }, { compactThreshold: 101 }, { autoCompact: 'yes' }]) {
        const { row, log } = rowOf(VALID[0]!, policy);
        const decode = await roundTrip(row, log);
        expect(decode).toThrow(SessionRowError);
        expect(decode).toThrow(`policy.${Object.keys(policy)[0]}`);
      }
      const orphan = rowOf({ ...VALID[1]!, history: [...VALID[1]!.history, toolMsg('ghost')] });
      const decode = await roundTrip(orphan.row, orphan.log);
      expect(decode).toThrow(/history\[6\]\.toolCallId: not coherent: tool result at position 6 answers no open tool call \('ghost'\)/);
      await store.close();
    });
  }
});
