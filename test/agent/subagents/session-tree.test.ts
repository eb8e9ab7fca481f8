/**
 * `sessions show` shows a session's tree (issue 22 item 5): its child sessions (agent tools),
 * theirs below them, each with its state, outcome and usage, read from a real SQLite file.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { createAgentMachine } from '../../../machines/agent.machine.js';
import { agentTool } from '../../../src/agent/subagents/agent-tool.js';
import { sessionTree, treeLines } from '../../../src/cli/session-tree.js';
import { showSession } from '../../../src/cli/sessions.js';
import { parseLocation } from '../../../src/cli/store.js';
import { scriptedModel } from '../../../src/models/scripted.js';
import { DurableSession } from '../../../src/sessions/durable-session.js';
import { SqliteSessionStore } from '../../../src/stores/sqlite.js';
import { defineTool } from '../../../src/tools/define-tool.js';

const dir = mkdtempSync(join(tmpdir(), 'loopchart-tree-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const usage = { inputTokens: 5, outputTokens: 1 };

describe('the session tree', () => {
  it('is read from the ids: children by run, turn and call; grandchildren under them; other sessions left out', () => {
    const ids = ['a', 'a/run-1:turn-2:x', 'a/run-1:turn-1:y', 'a/run-1:turn-1:y/run-1:turn-1:z', 'ab/run-1:turn-1:q', 'a/notachild', 'b'];
    const tree = sessionTree(ids, 'a');
    expect(tree.map((node) => node.sessionId)).toEqual(['a/run-1:turn-1:y', 'a/run-1:turn-2:x']);
    expect(tree[0]!.children.map((node) => node.callId)).toEqual(['z']);
    expect(treeLines(tree, (node) => node.sessionId)).toEqual([
      '  └ call y (run 1, turn 1): a/run-1:turn-1:y',
      '    └ call z (run 1, turn 1): a/run-1:turn-1:y/run-1:turn-1:z',
      '  └ call x (run 1, turn 2): a/run-1:turn-2:x',
    ]);
    expect(sessionTree(ids, 'b')).toEqual([]);
  });

  it('sessions show prints the tree with each child\'s outcome and usage', async () => {
    const path = join(dir, 'tree.db');
    const leaf = createAgentMachine({ model: scriptedModel([{ text: 'leaf answer', usage }]) });
    const middle = createAgentMachine({
      model: scriptedModel([{ toolCalls: [{ id: 'e1', name: 'leaf', args: { task: 'deep' } }], usage }, { text: 'middle answer', usage }]),
      tools: [agentTool({ agent: leaf, name: 'leaf', description: 'A leaf.' })],
    });
    const echo = defineTool({ name: 'echo', description: 'Echo.', input: z.object({}), execute: () => 'echo' });
    const root = createAgentMachine({
      model: scriptedModel([{ toolCalls: [{ id: 'c1', name: 'middle', args: { task: 'go' } }, { id: 'c2', name: 'echo', args: {} }], usage }, { text: 'root answer', usage }]),
      tools: [agentTool({ agent: middle, name: 'middle', description: 'A middle.' }), echo],
    });
    const store = new SqliteSessionStore({ path });
    const session = await DurableSession.open({ machine: root, store, sessionId: 'root' });
    session.send({ type: 'input', message: 'start' });
    await session.whenIdle();
    await session.close();
    await store.close();

    const lines: string[] = [];
    const code = await showSession('root', { location: parseLocation(path), full: false, io: { out: (line) => lines.push(line), err: () => {} } });
    expect(code).toBe(0);
    const at = lines.indexOf('children:');
    expect(at).toBeGreaterThan(0);
    expect(lines.slice(at, at + 3)).toEqual([
      'children:',
      '  └ call c1 (run 1, turn 1): at rest; last run (1) Completed: middle answer; usage 15 input + 3 output tokens',
      '    └ call e1 (run 1, turn 1): at rest; last run (1) Completed: leaf answer; usage 5 input + 1 output tokens',
    ]);
    // A session without children prints no tree.
    lines.length = 0;
    await showSession('root/run-1:turn-1:c1/run-1:turn-1:e1', { location: parseLocation(path), full: false, io: { out: (line) => lines.push(line), err: () => {} } });
    expect(lines).not.toContain('children:');
  });
});
