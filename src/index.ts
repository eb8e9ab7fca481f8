export * from './schemas.js';
export * from './errors.js';
export type { LoopEvent, LoopEventType } from './loop-events.js';
export { coherentCut, coalesceAdjacentAssistants } from './conversation.js';
export { LoopMachine, type LoopMachineOptions } from './loop-machine.js';
export { summarizingInspector } from './inspect.js';
export {
  loopMachine,
  nextStep,
  decisionOrder,
  loopGuards,
  type LoopSnapshot,
  type LoopInput,
} from '../machines/loop.machine.js';
export type { Model, ModelRequest, ModelReply, ToolDefinition, FinishReason, Usage } from './model.js';
export { ModelError } from './model.js';
