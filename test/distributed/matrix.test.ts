/**
 * The conformance matrix on the Restate session object (issue 41): every scenario whose Restate
 * cell is declared tested (test/agent/matrix/cells.ts) runs here, unchanged, through the Restate
 * driver (test/agent/matrix/restate-host.ts) against a real server and one real worker process
 * serving every scenario's agent (fixtures/matrix-worker.ts), one scenario after another; a cell
 * refused at run time runs and its refusal is checked. The in-doubt scenario SIGKILLs the worker
 * while its tool runs and starts another on the same port. A cell found open by a run here keeps
 * a test of what fails (a finding), to be turned into the cell's ✓ by the fix.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cellOf } from '../agent/matrix/cells.js';
import { restateHost, type RestateWorkerLink } from '../agent/matrix/restate-host.js';
import { runCell } from '../agent/matrix/run-cell.js';
import { SCENARIOS } from '../agent/matrix/scenarios.js';
import { RestateServer, freePort } from './support/server.js';
import { SERVER_BINARY } from './support/suite.js';
import { MATRIX_WORKER, startWorker, type Worker } from './support/workers.js';

/** The scenarios this file runs: what the declaration says a run shows on Restate. */
const runnable = SCENARIOS.filter((scenario) => {
  const cell = cellOf(scenario.id, 'restate');
  return cell.status === 'tested' || (cell.status === 'refused' && cell.verify !== undefined);
});

describe.skipIf(!SERVER_BINARY)('the conformance matrix on the Restate session object (real server, one worker)', () => {
  let server: RestateServer;
  let worker: Worker;
  let ports: { worker: number; probe: number };
  const start = () => startWorker({ INGRESS: server.ingressUrl, PORT: String(ports.worker), PROBE_PORT: String(ports.probe) }, MATRIX_WORKER);
  const link: RestateWorkerLink = {
    get ingressUrl() {
      return server.ingressUrl;
    },
    get probeUrl() {
      return `http://127.0.0.1:${ports.probe}`;
    },
    async restartWorker() {
      await worker.kill('SIGKILL');
      worker = await start();
    },
  };

  beforeAll(async () => {
    ports = { worker: await freePort(), probe: await freePort() };
    server = await RestateServer.start(SERVER_BINARY!);
    worker = await start();
    await server.register(worker.url);
  });

  afterAll(async () => {
    await worker?.kill('SIGTERM');
    await server?.stop();
  });

  const ran = new Set<string>();

  it.each(runnable)('$id: $title', async (scenario) => {
    const cell = cellOf(scenario.id, 'restate');
    const { result, probe } = await runCell(scenario, restateHost(link, scenario.id));
    if (cell.status === 'refused') cell.verify!(result);
    else scenario.check(result, probe);
    ran.add(scenario.id);
  });

  it('every Restate cell declared tested ran and held above', () => {
    expect([...ran]).toEqual(runnable.map((scenario) => scenario.id));
  });
});
