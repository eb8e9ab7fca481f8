/**
 * The same agent with its model's script changed: it no longer looks the order up. The
 * evaluation of this one fails its gate, and shows the first decision it takes otherwise.
 */
import type { AgentConfig } from '../../src/index.js';
import { lookup, supportModel } from './agent.js';

export const agent = (): AgentConfig => ({
  model: supportModel({ lookUp: false }),
  instructions: 'You help customers with their orders. Look an order up before you answer.',
  tools: [lookup],
  policy: { maxTurns: 4 },
});
