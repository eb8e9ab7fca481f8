/**
 * The chart an agent runs is the whole chart without what cannot happen to it (issue 39: a
 * feature that is not configured is not on the path of a minimal agent's turn): branches whose
 * guard cannot hold are taken out, and a state left with nothing to decide is passed through.
 */
import { describe, expect, it } from 'vitest';
import { and, createActor, createMachine, or, toPromise, type InspectionEvent } from 'xstate';
import { z } from 'zod';
import { createAgentMachine } from '../../../machines/agent.machine.js';
import { chartVariant } from '../../../src/agent/core/chart-variant.js';
import { scriptedModel } from '../../../src/testing.js';
import { defineTool } from '../../../src/tools/define-tool.js';
import { memoryTracing } from '../tracing/support.js';

const dead = new Set(['paused', 'audited']);
const holds = (name: string) => !dead.has(name);

/**
 * Runs `config` as a machine whose named actions record themselves, its guards reading what was
 * done (so they answer the same however often they are asked), through `events`: what it did, where
 * it ended, and in how many microsteps.
 */
function runChart(config: object, actions: readonly string[], events: readonly string[], guards: (done: readonly string[]) => Record<string, () => boolean>) {
  const done: string[] = [];
  let microsteps = 0;
  const machine = createMachine({ id: 'demo', ...(config as object) } as never).provide({
    actions: Object.fromEntries(actions.map((name) => [name, () => void done.push(name)])),
    guards: guards(done),
  } as never);
  const actor = createActor(machine, { inspect: (event: InspectionEvent) => void (event.type === '@xstate.microstep' && microsteps++) }).start();
  for (const type of events) actor.send({ type });
  return { done, value: actor.getSnapshot().value, microsteps };
}

describe('chartVariant: branches that cannot hold', () => {
  it('are taken out of eventless lists, event lists and timers; an `and` with one of them goes, an `or` with a live part stays', () => {
    const chart = {
      states: {
        A: {
          always: [{ guard: 'paused', target: 'B' }, { guard: and(['ready', 'audited']), target: 'B' }, { guard: or(['ready', 'audited']), target: 'C' }],
          on: { go: [{ guard: 'paused', target: 'B' }, { target: 'C' }], stop: { guard: 'audited', target: 'B' } },
          after: { deadline: { guard: 'paused', target: 'B' }, later: { target: 'C' } },
        },
        B: {},
        C: {},
      },
    };
    const variant = chartVariant(chart, 'demo', holds) as unknown as { states: { A: Record<string, unknown> } };
    expect(variant.states.A.always).toEqual([chart.states.A.always[2]]);
    // An event no branch can take is left to the parent, as a branch refused is; a timer no branch can take is not armed.
    expect(variant.states.A.on).toEqual({ go: [{ target: 'C' }] });
    expect(variant.states.A.after).toEqual({ later: [{ target: 'C' }] });
    // The chart it was made from is untouched.
    expect(chart.states.A.always).toHaveLength(3);
  });

  it('leaves a chart whose guards all hold as it was, but for lists written as arrays', () => {
    const chart = { initial: 'A', states: { A: { always: [{ guard: 'ready', target: 'B' }], on: { go: 'B' } }, B: {} } };
    expect(chartVariant(chart, 'demo', () => true)).toEqual({ initial: 'A', states: { A: { always: [{ guard: 'ready', target: 'B' }], on: { go: [{ target: 'B' }] } }, B: {} } });
  });
});

describe('chartVariant: actions that do nothing for the agent', () => {
  const idle = (name: string) => name !== 'audit';

  it('are taken out of transitions, entries and exits; a list left empty goes, one with nothing taken out stays as written', () => {
    const chart = {
      initial: 'A',
      states: {
        A: {
          entry: ['audit', { type: 'log', params: 1 }],
          exit: { type: 'audit', params: 'out' },
          on: { go: [{ target: 'B', actions: ['audit', 'work'] }, { target: 'C', actions: 'audit' }], stay: { actions: 'work' } },
        },
        B: {},
        C: {},
      },
    };
    const variant = chartVariant(chart, 'demo', holds, idle) as unknown as { states: { A: Record<string, unknown> } };
    expect(variant.states.A).toEqual({
      entry: [{ type: 'log', params: 1 }],
      on: { go: [{ target: 'B', actions: ['work'] }, { target: 'C' }], stay: [{ actions: 'work' }] },
    });
  });

  it('leave a state that only ran them with nothing to decide: it is passed through', () => {
    const chart = { initial: 'A', states: { A: { on: { go: 'Hop' } }, Hop: { entry: 'audit', always: { target: 'B' } }, B: {} } };
    const variant = chartVariant(chart, 'demo', holds, idle) as unknown as { states: { A: { on: { go: unknown } } } };
    expect(variant.states.A.on.go).toEqual([{ target: '#demo.B' }]);
    expect(chartVariant(chart, 'demo', holds)).toMatchObject({ states: { A: { on: { go: [{ target: 'Hop' }] } } } });
  });
});

describe('chartVariant: a state with nothing left to decide', () => {
  const chart = {
    initial: 'Idle',
    states: {
      Idle: { on: { go: { target: 'Run', actions: 'begin' }, busy: 'Run.Busy' } },
      Run: {
        initial: 'Start',
        on: { cancel: { target: '.Start', actions: 'cancel' } },
        states: {
          Start: { always: [{ guard: 'paused', target: 'Paused' }, { target: 'Step' }] },
          Step: { always: [{ guard: 'ready', target: 'Call' }, { target: '#demo.Done', actions: 'finish' }] },
          Call: { always: { target: 'Awaiting', actions: 'take' } },
          Awaiting: { entry: 'arrive', exit: 'leave', on: { replied: { target: 'Start', actions: 'accept' }, again: { target: '#demo.Run.Start', reenter: true } } },
          Paused: { entry: 'markPaused' },
          Busy: { entry: 'work', always: { target: 'Start' } },
        },
      },
      Done: { type: 'final' },
    },
  };
  const variant = chartVariant(chart, 'demo', holds) as unknown as typeof chart & { states: { Run: { states: Record<string, Record<string, unknown>> } } };
  const run = variant.states.Run;

  it('is passed through: a transition into it goes where its branch goes, with the branch actions after its own', () => {
    expect(run.states.Awaiting!.on).toEqual({
      replied: [{ target: '#demo.Run.Step', actions: ['accept'] }],
      // Passed through Start, then folded: it does nothing itself and Step only decides (see below).
      again: [
        { guard: 'ready', target: '#demo.Run.Awaiting', actions: ['take'], reenter: true },
        { target: '#demo.Done', actions: 'finish' },
      ],
    });
    // A chain is followed to its end; the actions of each hop in order.
    expect(run.states.Step!.always).toEqual([{ guard: 'ready', target: '#demo.Run.Awaiting', actions: ['take'] }, { target: '#demo.Done', actions: 'finish' }]);
    // A target written as the state's own child ('.Start').
    expect(run.on).toEqual({ cancel: [{ target: '#demo.Run.Step', actions: ['cancel'] }] });
    // A compound state starts in the state its pass-through first child sends it to.
    expect(run.initial).toBe('Step');
  });

  it('keeps every state, so a snapshot taken in one variant runs in another', () => {
    expect(Object.keys(run.states)).toEqual(Object.keys(chart.states.Run.states));
    // Start decides as Step does (its one branch there, folded), should a snapshot stand in it.
    expect(run.states.Start!.always).toEqual(run.states.Step!.always);
  });

  it('is not one that does work on entry, nor one whose branch is guarded', () => {
    expect(variant.states.Idle.on).toMatchObject({ busy: [{ target: 'Run.Busy' }] });
    // Its own branch is passed through Start like any other (and folded: Step only decides).
    expect(run.states.Busy!.always).toEqual(run.states.Step!.always);
    expect(run.states.Step!.always).toHaveLength(2);
  });

  it('runs as the whole chart does: the same actions in the same order, in fewer microsteps', () => {
    const trace = (config: object) =>
      runChart(config, ['begin', 'cancel', 'finish', 'take', 'accept', 'markPaused', 'work', 'arrive', 'leave'], ['go', 'replied', 'again', 'replied'], (done) => ({
        paused: () => false,
        audited: () => false,
        ready: () => done.filter((name) => name === 'take').length < 3,
      }));
    const whole = trace(chart);
    const passed = trace(variant);
    expect(passed.done).toEqual(whole.done);
    // 'again' leaves Awaiting and comes back into it: its exit and entry run in both.
    expect(whole.done.filter((name) => name === 'arrive')).toHaveLength(3);
    expect(passed.value).toEqual('Done');
    expect(whole.value).toEqual('Done');
    expect(passed.microsteps).toBeLessThan(whole.microsteps);
  });
});

describe('chartVariant: a branch into a sibling that only decides', () => {
  // Decide only decides: nothing but an eventless list whose last branch is unguarded.
  const chart = {
    initial: 'A',
    states: {
      A: {
        on: {
          plain: { guard: 'ok', target: 'Decide' },
          busy: { target: 'Decide', actions: 'work' },
          open: 'Open',
        },
        always: { guard: 'late', target: 'Decide' },
      },
      Decide: { always: [{ guard: 'ready', target: 'B', actions: 'take' }, { guard: 'again', target: 'A' }, { target: 'C' }] },
      Open: { always: [{ guard: 'ready', target: 'B' }] },
      B: { on: { deep: '.Inner', up: 'Decide' }, initial: 'Inner', states: { Inner: {} } },
      C: {},
    },
  };
  const variant = chartVariant(chart, 'demo', () => true) as unknown as { states: Record<string, Record<string, unknown>> };
  const on = (state: string) => variant.states[state]!.on as Record<string, unknown[]>;
  /** A branch with an `and` guard shown as its parts (XState's guard objects compare by identity). */
  const shown = (branches: unknown[]) =>
    branches.map((branch) => {
      const { guard, ...rest } = branch as { guard?: { guards?: unknown[] } | string };
      return guard === undefined ? rest : { ...rest, guard: typeof guard === 'string' ? guard : guard.guards };
    });

  it("is replaced by the sibling's branches, each also guarded by its own; one back into the source says reenter", () => {
    expect(shown(on('A').plain!)).toEqual([
      { guard: ['ok', 'ready'], target: '#demo.B', actions: 'take' },
      { guard: ['ok', 'again'], target: '#demo.A', reenter: true },
      { guard: 'ok', target: '#demo.C' },
    ]);
    expect(variant.states.A!.always).toHaveLength(3);
    expect(on('B').up).toHaveLength(3);
  });

  it('is not when the branch does something itself, nor when the sibling may take no branch', () => {
    expect(on('A').busy).toEqual([{ target: 'Decide', actions: 'work' }]);
    expect(on('A').open).toEqual([{ target: 'Open' }]);
  });

  it('is not into a region of a parallel state (nor is a region passed through)', () => {
    const regions = (right: object) => ({ initial: 'P', states: { P: { type: 'parallel', states: { Left: { on: { go: 'Right' } }, Right: right } } } });
    type Shape = { states: { P: { states: { Left: { on: { go: unknown[] } } } } } };
    for (const right of [{ always: [{ guard: 'ready', target: 'Left' }, { target: 'Left' }] }, { always: { target: 'Left' } }]) {
      const variant = chartVariant(regions(right), 'demo', () => true) as unknown as Shape;
      expect(variant.states.P.states.Left.on.go).toEqual([{ target: 'Right' }]);
    }
  });

  it('is not when the list would grow past 8 branches', () => {
    const many = Array.from({ length: 8 }, (_, i) => ({ guard: `g${i}`, target: 'B' }));
    const long = { initial: 'A', states: { A: { on: { go: 'Decide' } }, Decide: { always: [...many, { target: 'C' }] }, B: {}, C: {} } };
    const folded = chartVariant(long, 'demo', () => true) as unknown as { states: { A: { on: { go: unknown[] } } } };
    expect(folded.states.A.on.go).toEqual([{ target: 'Decide' }]);
    const fits = { ...long, states: { ...long.states, Decide: { always: [...many.slice(1), { target: 'C' }] } } };
    expect((chartVariant(fits, 'demo', () => true) as unknown as typeof folded).states.A.on.go).toHaveLength(8);
  });

  it('runs as the chart does: the same actions, entries and exits in the same order, in fewer microsteps', () => {
    // Every state but Decide says when it is entered and left; the guards read what has been done.
    const tracked = { ...chart, states: Object.fromEntries(Object.entries(chart.states).map(([name, state]) => [name, name === 'Decide' ? state : { ...state, entry: `in${name}`, exit: `out${name}` }])) };
    const names = ['work', 'take', ...Object.keys(chart.states).flatMap((name) => [`in${name}`, `out${name}`])];
    const run = (config: object) =>
      runChart(config, names, ['plain', 'up', 'busy', 'plain'], (done) => ({ ok: () => true, late: () => false, ready: () => !done.includes('take'), again: () => true }));
    const whole = run(tracked);
    const folded = run(chartVariant(tracked, 'demo', () => true));
    expect(folded.done).toEqual(whole.done);
    expect(whole.done).toEqual(['inA', 'outA', 'take', 'inB', 'outB', 'inA', 'outA', 'work', 'inA', 'outA', 'inA']);
    expect(folded.value).toEqual(whole.value);
    expect(folded.microsteps).toBeLessThan(whole.microsteps);
  });
});

describe("a minimal agent's turn", () => {
  const echo = defineTool({ name: 'echo', description: 'Echoes.', input: z.object({ text: z.string() }), execute: ({ text }) => text });

  /** The microsteps a run took, and the states it passed. */
  async function microsteps(config: Partial<Parameters<typeof createAgentMachine>[0]>) {
    const states: string[] = [];
    const inspect = (event: InspectionEvent) => {
      if (event.type === '@xstate.microstep') states.push(JSON.stringify((event.snapshot as unknown as { value: unknown }).value));
    };
    const model = scriptedModel([{ toolCalls: [{ name: 'echo', args: { text: 'a' } }] }, { toolCalls: [{ name: 'echo', args: { text: 'b' } }] }, { text: 'done' }]);
    const output = await toPromise(createActor(createAgentMachine({ model, tools: [echo], ...config }), { input: { prompt: 'go' }, inspect }).start());
    expect(output.outcome).toEqual({ type: 'Completed', finalText: 'done' });
    return states;
  }

  it('passes through no state of a feature it is not configured with, and not through Start', async () => {
    const states = await microsteps({});
    expect(states.filter((value) => value.includes('"Start"') || value.includes('"CallLLM"'))).toEqual([]);
    // The run's start and first call (2); a tool turn: the reply, the brain's step and the batch in
    // one (CallTools folded into Deciding), its last result feeding the batch, the next call (4
    // each); the last reply and the run's end (4).
    expect(states.length).toBe(2 + 4 + 4 + 4);
  });

  /** The action names an agent's chart has anywhere in it. */
  function actionsNamed(config: unknown, into = new Set<string>()): Set<string> {
    if (Array.isArray(config)) for (const item of config) actionsNamed(item, into);
    else if (config && typeof config === 'object') {
      for (const [key, value] of Object.entries(config)) {
        if (key === 'actions' || key === 'entry' || key === 'exit') {
          for (const action of [value].flat()) if (typeof action === 'string' || typeof action?.type === 'string') into.add(typeof action === 'string' ? action : action.type);
        } else actionsNamed(value, into);
      }
    }
    return into;
  }

  it("names no action of a feature it is not configured with: no trace mark without a tracer, no rejected answer without an output schema", () => {
    const minimal = actionsNamed(createAgentMachine({ model: scriptedModel([]), tools: [echo] }).config);
    expect(minimal.has('trace')).toBe(false);
    expect(minimal.has('emitOutputRejected')).toBe(false);
    expect(minimal.has('acceptReply')).toBe(true);
    const structured = actionsNamed(createAgentMachine({ model: scriptedModel([]), output: z.object({ answer: z.string() }) }).config);
    expect(structured.has('emitOutputRejected')).toBe(true);
    const traced = actionsNamed(createAgentMachine({ model: scriptedModel([]), telemetry: { tracer: memoryTracing().tracer } }).config);
    expect(traced.has('trace')).toBe(true);
  });

  it('an agent with an operation hook before each model call still goes through it (the branch is on its path)', async () => {
    const calls: number[] = [];
    const states = await microsteps({ operations: [{ name: 'count', beforeModelCall: ({ turn }) => void calls.push(turn) }] });
    expect(calls).toEqual([1, 2, 3]);
    expect(states.filter((value) => value.includes('"Operating"')).length).toBeGreaterThanOrEqual(3);
  });
});
