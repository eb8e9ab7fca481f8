/**
 * The agent actor's event property (agent-property.ts) at the size CI holds it to: 1,000 random
 * sequences (about 5-9 s), or LOOPCHART_FUZZ_RUNS of them.
 */
import { describeAgentProperty } from './agent-property.js';

describeAgentProperty(Number(process.env.LOOPCHART_FUZZ_RUNS ?? 1_000));
