import type { ToolDefinition } from '../../model.js';

/** The tools a model call offers: their definitions and, in the same order, their names. */
export interface Offered {
  readonly definitions: readonly ToolDefinition[];
  readonly names: readonly string[];
}
