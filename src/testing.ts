/**
 * `loopchart/testing`: a model that replies from a script (offline, deterministic) and the
 * backing of an in-memory store that outlives a store instance (`new MemorySessionStore(backing)`),
 * for tests of code built on loopchart.
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
export { MemoryBacking } from './stores/memory.js';
