// examples/readme/errors.ts
import { LoopchartError, LoopMachine, type LoopchartErrorCode } from 'loopchart';

const brain = new LoopMachine();
try {
  brain.toolResults([]); // no tool calls are pending: refused, the machine is unchanged
} catch (error) {
  // isInstance works across copies of loopchart (ESM and CommonJS builds), where instanceof does not.
  if (!LoopchartError.isInstance(error)) throw error;
  const code: LoopchartErrorCode = error.code;
  console.log(code, error.message); // IllegalFeed toolResults is not allowed in state Start
}
