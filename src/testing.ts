/**
 * `loopchart/testing`: a model that replies from a script (offline, deterministic) and an
 * in-memory store whose contents outlive a store instance, for tests of code built on loopchart.
 */
export {
  scriptedModel,
  InvalidScriptError,
  ScriptExhaustedError,
  type ScriptEntry,
  type ScriptedReply,
  type ScriptedFailure,
  type ScriptedFunction,
  type ScriptedModelOptions,
} from './models/scripted.js';
export { MemoryBacking, MemorySessionStore } from './stores/memory.js';
