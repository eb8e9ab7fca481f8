/** From seed 004: seal(reason) and in-turn steering. */
import { describe, expect, it } from 'vitest';
import { LoopMachine } from '../../src/brain/loop-machine.js';
import type { Message } from '../../src/schemas.js';
import {
  NON_TERMINAL,
  ALL_STATES,
  asst,
  call,
  ctx,
  expectIllegal,
  expectInvalid,
  inAwaitingCompaction,
  inAwaitingModel,
  inAwaitingTools,
  inStart,
  inTerminal,
  snap,
  sys,
  toolMsg,
  toolReply,
  user,
} from '../support/brain.js';

describe('seal', () => {
  for (const s of NON_TERMINAL) {
    it(`in ${s} goes to Terminal(Sealed{reason}) at once`, () => {
      const m = ALL_STATES[s]();
      const full = m.fullHistory();
      m.seal('budget');
      expect(m.state()).toEqual({ type: 'Terminal', outcome: { type: 'Sealed', reason: 'budget' } });
      expect(m.isTerminal()).toBe(true);
      expect(m.fullHistory()).toEqual(full);
      expect(m.nextStep()).toEqual({ type: 'Done', outcome: { type: 'Sealed', reason: 'budget' } });
    });
  }

  it('is idempotent: the first reason wins and nothing changes', () => {
    const m = inAwaitingTools();
    m.seal('budget');
    const before = snap(m);
    expect(() => m.seal('user stop')).not.toThrow();
    expect(snap(m)).toEqual(before);
    expect(m.state()).toEqual({ type: 'Terminal', outcome: { type: 'Sealed', reason: 'budget' } });
  });

  it('sealing a Completed run keeps Completed', () => {
    const m = inTerminal();
    const before = snap(m);
    m.seal('late');
    expect(snap(m)).toEqual(before);
    expect(m.nextStep()).toEqual({ type: 'Done', outcome: { type: 'Completed', finalText: 'done' } });
  });

  it('sealing a Failed run keeps Failed', () => {
    const m = inStart();
    m.fail({ type: 'X', message: 'y' });
    m.seal('late');
    expect(m.state()).toEqual({ type: 'Terminal', outcome: { type: 'Failed', error: { type: 'X', message: 'y' } } });
  });

  it('a sealed machine outranks a cancel requested before the seal', () => {
    const m = inStart();
    m.cancel();
    m.seal('budget');
    expect(m.nextStep()).toEqual({ type: 'Done', outcome: { type: 'Sealed', reason: 'budget' } });
  });

  it('rejects a reason that is not a string (it would make an unrestorable snapshot)', () => {
    const m = inStart();
    expectInvalid(m, 'seal', () => m.seal(123 as unknown as string));
  });

  it('survives toJSON / restore', () => {
    const m = inAwaitingModel();
    m.seal('budget');
    const r = LoopMachine.restore(snap(m));
    expect(r.nextStep()).toEqual({ type: 'Done', outcome: { type: 'Sealed', reason: 'budget' } });
    r.seal('other');
    expect(r.state()).toEqual({ type: 'Terminal', outcome: { type: 'Sealed', reason: 'budget' } });
  });
});

describe('steer', () => {
  it('in Start appends the message to pending at once', () => {
    const m = inStart();
    const full = m.fullHistory();
    m.steer(user('actually, use metric'));
    expect(m.fullHistory()).toEqual([...full, user('actually, use metric')]);
    expect(ctx(m).steering).toEqual([]);
    expect(m.state()).toEqual({ type: 'Start' });
  });

  it('in AwaitingModel queues; a reply without tool calls then continues instead of completing', () => {
    const m = inAwaitingModel();
    const full = m.fullHistory();
    m.steer(user('s1'));
    m.steer(user('s2'));
    expect(m.fullHistory()).toEqual(full);
    expect(ctx(m).steering).toEqual([user('s1'), user('s2')]);
    expect(m.state()).toEqual({ type: 'AwaitingModel', turn: 1 });

    m.modelResponse(asst('here you go'), 40, ['read']);
    expect(m.state()).toEqual({ type: 'Start' });
    expect(m.isTerminal()).toBe(false);
    expect(m.fullHistory()).toEqual([...full, asst('here you go'), user('s1'), user('s2')]);
    expect(ctx(m).steering).toEqual([]);
    expect(m.turnsTaken()).toBe(1);
    expect(m.contextTokens()).toBe(40);
    expect(m.nextStep()).toEqual({ type: 'CallLLM', turn: 2 });
  });

  it('in AwaitingModel with a tool-call reply: stays queued until the results, then follows them', () => {
    const m = inAwaitingModel();
    const full = m.fullHistory();
    m.steer(user('s1'));
    m.modelResponse(toolReply, 40, ['read']);
    expect(m.state().type).toBe('AwaitingTools');
    expect(m.fullHistory()).toEqual([...full, toolReply]);
    expect(ctx(m).steering).toEqual([user('s1')]);
    m.toolResults([toolMsg('c1')]);
    expect(m.fullHistory()).toEqual([...full, toolReply, toolMsg('c1'), user('s1')]);
    expect(ctx(m).steering).toEqual([]);
    expect(m.state()).toEqual({ type: 'Start' });
  });

  it('in AwaitingTools is delivered after the tool results', () => {
    const m = inAwaitingModel();
    const full = m.fullHistory();
    const reply = asst('', [call('a'), call('b')]);
    m.modelResponse(reply, 40, ['read']);
    m.steer(user('stop after this'));
    expect(m.fullHistory()).toEqual([...full, reply]);
    m.toolResults([toolMsg('b'), toolMsg('a')]);
    expect(m.fullHistory()).toEqual([...full, reply, toolMsg('a'), toolMsg('b'), user('stop after this')]);
  });

  it('in AwaitingCompaction is delivered after a compacted history', () => {
    const m = inAwaitingCompaction('Emergency');
    m.steer(user('s1'));
    expect(ctx(m).steering).toEqual([user('s1')]);
    m.compactionResult([sys(), user('summary')], 960, 100);
    expect(m.history()).toEqual([sys(), user('summary')]);
    expect(m.fullHistory()).toEqual([sys(), user('summary'), user('s1')]);
    expect(ctx(m).steering).toEqual([]);
  });

  it('the delivered history stays coherent (no message between a tool call and its results)', () => {
    const m = inAwaitingModel();
    m.steer(user('s1'));
    m.modelResponse(asst('', [call('a')]), 40, ['read']);
    m.steer(user('s2'));
    m.toolResults([toolMsg('a')]);
    const f: Message[] = m.fullHistory();
    const i = f.findIndex((x) => x.role === 'assistant' && (x.toolCalls?.length ?? 0) > 0);
    expect(f[i + 1]).toEqual(toolMsg('a'));
    expect(f.slice(i + 2)).toEqual([user('s1'), user('s2')]);
  });

  it('the queue survives toJSON / restore and is delivered by the restored machine', () => {
    const m = inAwaitingModel();
    m.steer(user('s1'));
    const r = LoopMachine.restore(snap(m));
    r.modelResponse(asst('reply'), 10, []);
    expect(r.state()).toEqual({ type: 'Start' });
    expect(r.fullHistory().slice(-2)).toEqual([asst('reply'), user('s1')]);
  });

  it('acceptInput drops the queue', () => {
    const m = inAwaitingModel();
    m.steer(user('s1'));
    m.acceptInput(user('new'));
    expect(ctx(m).steering).toEqual([]);
    m.nextStep();
    m.modelResponse(asst('fin'), 10, []);
    expect(m.state()).toEqual({ type: 'Terminal', outcome: { type: 'Completed', finalText: 'fin' } });
  });

  it('is illegal in Terminal', () => {
    const m = inTerminal();
    expectIllegal(m, 'steer', 'Terminal', () => m.steer(user('late')));
  });

  for (const bad of [asst('x'), sys('x'), toolMsg('c1')]) {
    it(`rejects a ${bad.role} message`, () => {
      const m = inAwaitingModel();
      expectInvalid(m, 'steer', () => m.steer(bad as never));
    });
  }
});
