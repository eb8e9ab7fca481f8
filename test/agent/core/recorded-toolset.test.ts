/**
 * The tool set a run is offered is a recorded step (`toolset`): listed once per run, kept in the
 * driver context and the session row, so a run continued by a stepper or in another process
 * offers and accepts the tools of that listing, even when the source lists them no more.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createActor, waitFor } from 'xstate';
import { z } from 'zod';
import { createAgentMachine } from '../../../machines/agent.machine.js';
import type { Executor, SideEffectKind } from '../../../src/agent/protocol/executor.js';
import { AgentStepper } from '../../../src/agent/hosts/stepper.js';
import type { ModelRequest } from '../../../src/model.js';
import { scriptedModel } from '../../../src/models/scripted.js';
import { DurableSession } from '../../../src/sessions/durable-session.js';
import { SqliteSessionStore } from '../../../src/stores/sqlite.js';
import { defineTool, type Tool } from '../../../src/tools/define-tool.js';
import type { ToolSource } from '../../../src/tools/tool-source.js';
import { bundledCommand, runNode, type NodeCommand } from '../../sessions/fixtures/processes.js';

let child: NodeCommand;
const root = mkdtempSync(join(tmpdir(), 'loopchart-toolset-'));
beforeAll(async () => {
  child = await bundledCommand(fileURLToPath(new URL('./fixtures/toolset-child.ts', import.meta.url)));
});
afterAll(() => {
  child?.dispose();
  rmSync(root, { recursive: true, force: true });
});

/** A "server" whose tools are callable by name, and whose listing the test changes. */
function server(options: { resolves: boolean }) {
  const state = { listed: ['lookup'], listings: 0 };
  const make = (name: string, via: string): Tool =>
    defineTool({ name, description: `Looks ${name} up.`, input: z.object({ q: z.string() }), execute: ({ q }) => `${name}(${q}) via ${via}` });
  const source: ToolSource = {
    async listTools() {
      state.listings++;
      return state.listed.map((name) => make(name, 'listing'));
    },
    ...(options.resolves && { toolFor: (definition) => make(definition.name, 'record') }),
  };
  return { source, state };
}

/** The model: call `lookup`, then answer with what it was offered. */
function model() {
  const seen: string[][] = [];
  const offered = (request: ModelRequest) => (seen.push(request.tools.map((tool) => tool.name)), undefined);
  const m = scriptedModel([
    (request) => (offered(request), { toolCalls: [{ id: 'c1', name: 'lookup', args: { q: 'x' } }] }),
    (request) => (offered(request), { text: 'done' }),
  ]);
  return { model: m, seen };
}

const counting = (kinds: SideEffectKind[]): Executor => (effect, perform) => (kinds.push(effect.kind), perform());

const toolResult = (history: readonly { role: string }[]) => history.find((m) => m.role === 'tool') as { content: string; isError?: boolean } | undefined;

describe('the recorded tool set', () => {
  it('an actor lists once per run, through the executor as one toolset step; without sources there is none', async () => {
    const { source, state } = server({ resolves: false });
    const kinds: SideEffectKind[] = [];
    const { model: m } = model();
    const actor = createActor(createAgentMachine({ model: m, toolSources: [source], executor: counting(kinds) }), { input: { prompt: 'go' } }).start();
    const done = await waitFor(actor, (s) => s.status === 'done', { timeout: 5_000 });
    expect(state.listings).toBe(1);
    expect(kinds).toEqual(['toolset', 'model', 'tool', 'model']);
    expect(done.context.offered?.definitions.map((tool) => tool.name)).toEqual(['lookup']);

    const plain: SideEffectKind[] = [];
    const own = defineTool({ name: 'lookup', description: '', input: z.object({ q: z.string() }), execute: () => 'own' });
    const bare = createActor(createAgentMachine({ model: model().model, tools: [own], executor: counting(plain) }), { input: { prompt: 'go' } }).start();
    const finished = await waitFor(bare, (s) => s.status === 'done', { timeout: 5_000 });
    expect(plain).toEqual(['model', 'tool', 'model']);
    expect(finished.context.offered).toBeUndefined();
  });

  it('a stepped run lists once, and runs a call to a tool the source has dropped since (same process: the listing\'s own tool)', async () => {
    const { source, state } = server({ resolves: false });
    const { model: m, seen } = model();
    const machine = createAgentMachine({ model: m, toolSources: [source] });
    const stepper = new AgentStepper(machine, { input: { prompt: 'go', sessionId: 'stepped' } });
    const kinds: string[] = [];
    for (let i = 0; i < 20 && stepper.status() === 'continues'; i++) {
      const { effects } = await stepper.step();
      kinds.push(...effects.map((effect) => effect.type));
      // Dropped from the source right after the listing.
      state.listed = [];
      stepper.apply(effects);
    }
    expect(stepper.status()).toBe('finished');
    expect(state.listings).toBe(1);
    expect(kinds.filter((type) => type === 'io.listed')).toHaveLength(1);
    expect(seen).toEqual([['lookup'], ['lookup']]);
    const history = (stepper.session as unknown as { context: { brain: { context: { history: { role: string }[] } } } }).context.brain.context.history;
    expect(toolResult(history)).toMatchObject({ content: 'lookup(x) via listing' });
  });

  it('a stepped session continued by another machine (another process) resolves the dropped tool from its record', async () => {
    const first = server({ resolves: true });
    const { model: m, seen } = model();
    const stepper = new AgentStepper(createAgentMachine({ model: m, toolSources: [first.source] }), { input: { prompt: 'go', sessionId: 'moved' } });
    // The toolset step and the model step, stored.
    for (let i = 0; i < 2; i++) stepper.apply((await stepper.step()).effects);
    const stored = JSON.parse(JSON.stringify(stepper.session));
    const later = server({ resolves: true });
    later.state.listed = ['other'];
    const elsewhere = new AgentStepper(createAgentMachine({ model: m, toolSources: [later.source] }), { session: stored });
    for (let i = 0; i < 20 && elsewhere.status() === 'continues'; i++) elsewhere.apply((await elsewhere.step()).effects);
    expect(elsewhere.status()).toBe('finished');
    expect(first.state.listings).toBe(1);
    // Listed once more, for executables only: what the model is offered is still the record.
    expect(later.state.listings).toBe(1);
    expect(seen).toEqual([['lookup'], ['lookup']]);
    const history = (elsewhere.session as unknown as { context: { brain: { context: { history: { role: string }[] } } } }).context.brain.context.history;
    expect(toolResult(history)).toMatchObject({ content: 'lookup(x) via record' });
  });

  for (const resolves of [true, false]) {
    it(`a DurableSession reopened from a child process on the same SQLite file accepts the recorded call (${resolves ? 'toolFor runs it' : 'no toolFor: an error result saying why'})`, async () => {
      const path = join(root, `reopen-${resolves}.db`);
      let listingsA = 0;
      let release: () => void = () => {};
      const hung = new Promise<void>((resolve) => (release = resolve));
      // Process A: the tool hangs, and A goes away with the call in flight.
      const hanging: ToolSource = {
        async listTools() {
          listingsA++;
          return [defineTool({ name: 'lookup', description: 'Looks lookup up.', input: z.object({ q: z.string() }), execute: () => hung.then(() => 'never') })];
        },
      };
      const { model: m, seen } = model();
      const storeA = new SqliteSessionStore({ path });
      const a = await DurableSession.open({ machine: createAgentMachine({ model: m, toolSources: [hanging] }), store: storeA, sessionId: 'moved' });
      a.send({ type: 'input', message: 'go' });
      await waitFor(a.actor, (s) => s.matches({ Running: 'AwaitingTools' }), { timeout: 5_000 });
      await a.flush();
      await a.close();
      release();
      await storeA.close();
      expect(listingsA).toBe(1);

      // Process B: another process, whose source lists nothing now.
      const b = await runNode([...child.args, JSON.stringify({ path, sessionId: 'moved', resolves })], { timeoutMs: 30_000 });
      expect(b.code, b.stderr).toBe(0);
      const report = JSON.parse(b.lines.at(-1)!) as { outcome: unknown; result: { content: string; isError?: boolean }; listings: number; offered: string[][] };
      expect(report.outcome).toEqual({ type: 'Completed', finalText: 'done' });
      // Listed once in B, for executables only: what the model is offered is the record.
      expect(report.listings).toBe(1);
      expect(seen).toEqual([['lookup']]);
      expect(report.offered).toEqual([['lookup']]);
      const result = report.result;
      if (resolves) expect(result).toMatchObject({ content: 'lookup(x) via record' });
      else {
        expect(result.isError).toBe(true);
        expect(result.content).toContain("tool 'lookup' was offered to this run, but its source no longer provides it");
      }
    });
  }
});
