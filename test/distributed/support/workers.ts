/** Worker processes for the distributed suite: real `node` children serving the fixture agent. */
import { spawn, type ChildProcess } from 'node:child_process';
import { createRequire } from 'node:module';
import { fileURLToPath, pathToFileURL } from 'node:url';

const TSX = pathToFileURL(createRequire(import.meta.url).resolve('tsx')).href;
const WORKER = fileURLToPath(new URL('../fixtures/worker.ts', import.meta.url));

export interface Worker {
  readonly url: string;
  readonly child: ChildProcess;
  output(): string;
  kill(signal: NodeJS.Signals): Promise<void>;
}

export interface WorkerEnv {
  /** The append tool's file (the fixture agent's workers). */
  TOOL_LOG?: string;
  INGRESS?: string;
  MAX_DELAY_MS?: string;
  INACTIVITY_MS?: string;
  PORT?: string;
  TRACE_LOG?: string;
  /** While this file exists, the faultySession object's turns fail unexpectedly (fixtures/worker.ts). */
  FAULT_FILE?: string;
  /** Where the subagent worker's models record their calls (fixtures/subagent-worker.ts). */
  MODEL_LOG?: string;
  /** Where the matrix worker serves its scenarios' probes (fixtures/matrix-worker.ts). */
  PROBE_PORT?: string;
}

/** The worker script that serves the subagent fixtures. */
export const SUBAGENT_WORKER = fileURLToPath(new URL('../fixtures/subagent-worker.ts', import.meta.url));
/** The worker script that serves the conformance matrix's scenarios (test/distributed/matrix.test.ts). */
export const MATRIX_WORKER = fileURLToPath(new URL('../fixtures/matrix-worker.ts', import.meta.url));

/**
 * Starts a worker (`script`: the fixture agent's by default) and resolves once it listens (20 s
 * at most). `node` is whichever runs the tests.
 */
export async function startWorker(env: WorkerEnv, script = WORKER): Promise<Worker> {
  const child = spawn(process.execPath, ['--import', TSX, script], {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  // Whatever happens to the test process (a hook that times out, a crash), the worker goes too.
  const reap = () => child.kill('SIGKILL');
  process.once('exit', reap);
  child.once('exit', () => process.off('exit', reap));
  let output = '';
  child.stderr!.on('data', (chunk: Buffer) => (output = (output + chunk.toString()).slice(-20_000)));
  const port = await new Promise<number>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`worker did not start in 20 s: ${output}`)), 20_000);
    child.stdout!.on('data', (chunk: Buffer) => {
      output = (output + chunk.toString()).slice(-20_000);
      const match = /listening (\d+)/.exec(output);
      if (match) {
        clearTimeout(timer);
        resolve(Number(match[1]));
      }
    });
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`worker exited (${code}) before listening: ${output}`));
    });
  });
  return {
    url: `http://127.0.0.1:${port}`,
    child,
    output: () => output,
    kill: async (signal) => {
      if (child.exitCode !== null || child.signalCode !== null) return;
      const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
      child.kill(signal);
      // A process that ignores a gentle signal for 5 s gets SIGKILL: teardown is bounded.
      const timer = signal === 'SIGKILL' ? undefined : setTimeout(() => child.kill('SIGKILL'), 5_000);
      await exited;
      clearTimeout(timer);
    },
  };
}
