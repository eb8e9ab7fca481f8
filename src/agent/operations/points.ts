/**
 * An agent's operations as the loop reaches them (see core/hook-points.ts): their prompt parts,
 * the point after a reply, and the points closed when a run stops.
 */
import type { HookPoints } from '../core/hook-points.js';
import type { Operation } from './operation.js';
import { promptParts } from './operation-context.js';
import { closeOperations, openPoint, type OperationPlan } from './operation-rules.js';

/**
 * The hook points of an agent with `operations` (planned as `plan`).
 *
 * @example
 * ```ts
 * declare const operations: Parameters<typeof operationPoints>[0];
 * declare const plan: Parameters<typeof operationPoints>[1];
 * const points = operationPoints(operations, plan);
 * console.log(points.promptParts({ sessionId: 's', turn: 1, messages: [] }, {})); // each operation's prompt part, a system message
 * ```
 */
export const operationPoints = (operations: readonly Operation[], plan: OperationPlan): HookPoints => ({
  promptParts: (read, slices) => promptParts(operations, read, slices),
  afterReply: (state, key, reply) => openPoint(state, plan, 'afterReply', key, reply),
  close: closeOperations,
});
