/**
 * The tree of a session's child sessions (agent tools), as `sessions show` prints it. A child's
 * id is its parent's, then `/run-<n>:turn-<m>:<call id>` (see `agentTool`), so the tree is read
 * from the ids alone.
 */
import { escapeLine } from './escape.js';

/** A child session under its parent: the run, turn and call that started it. */
export interface SessionNode {
  sessionId: string;
  run: number;
  turn: number;
  callId: string;
  children: SessionNode[];
}

const CHILD_TAIL = /^run-(\d+):turn-(\d+):([^/]+)$/;

/** The child sessions of `parentId` among `sessionIds`, each with its own children, in run, turn and call order. */
export function sessionTree(sessionIds: readonly string[], parentId: string): SessionNode[] {
  const byParent = new Map<string, SessionNode[]>();
  for (const sessionId of sessionIds) {
    const cut = sessionId.lastIndexOf('/');
    const tail = cut > 0 ? CHILD_TAIL.exec(sessionId.slice(cut + 1)) : null;
    if (!tail) continue;
    const parent = sessionId.slice(0, cut);
    const node: SessionNode = { sessionId, run: Number(tail[1]), turn: Number(tail[2]), callId: tail[3]!, children: [] };
    byParent.set(parent, [...(byParent.get(parent) ?? []), node]);
  }
  // Ends: each level's ids are longer than its parent's.
  const build = (id: string): SessionNode[] =>
    (byParent.get(id) ?? [])
      .sort((a, b) => a.run - b.run || a.turn - b.turn || a.callId.localeCompare(b.callId))
      .map((node) => ({ ...node, children: build(node.sessionId) }));
  return build(parentId);
}

/** One line per node, indented by depth: `<describe(node)>` after the call that started it. */
export function treeLines(nodes: readonly SessionNode[], describe: (node: SessionNode) => string, depth = 0): string[] {
  return nodes.flatMap((node) => [
    `${'  '.repeat(depth + 1)}└ call ${escapeLine(node.callId)} (run ${node.run}, turn ${node.turn}): ${describe(node)}`,
    ...treeLines(node.children, describe, depth + 1),
  ]);
}
