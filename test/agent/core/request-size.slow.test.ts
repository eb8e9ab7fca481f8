/**
 * The sweep of one measure of a request (request-size-sweeps.ts) at the size CI holds it to:
 * 1,000 random configurations through the actor, 150 through `DurableSession`, 150 through
 * `AgentStepper`. request-size.test.ts runs a smaller sweep for `test:fast`.
 */
import { describeRequestSweeps } from './request-size-sweeps.js';

describeRequestSweeps({ actor: 1_000, session: 150, stepper: 150 });
