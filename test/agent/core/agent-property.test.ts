/**
 * The agent actor's event property (agent-property.ts) at a size for `test:fast`: 100 random
 * sequences (about 2 s). agent-property.slow.test.ts runs the 1,000 CI holds it to.
 */
import { describeAgentProperty } from './agent-property.js';

describeAgentProperty(100);
