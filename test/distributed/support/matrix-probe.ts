/**
 * The conformance matrix's scenarios on a Restate worker (fixtures/matrix-worker.ts): each
 * scenario's agent is built in the worker, as a deployment builds its agent, so its probe (what
 * its tools ran, how often its model was called, the latch a run stops at) lives there too. This
 * is how the test process reads and drives those probes: a small HTTP side door of the worker,
 * apart from Restate (instrumentation of the test, not a part of the system under test).
 *
 * - `GET /probe/<scenario>`: `{ ran, modelCalls }`;
 * - `GET /probe/<scenario>/reached`: answers once the scenario's latch tool started;
 * - `POST /probe/<scenario>/release`: releases the latch.
 */
import { createServer, type Server } from 'node:http';
import type { FeatureId, Probe } from '../../agent/matrix/scenarios.js';

/** The virtual object serving one scenario's agent (its channel is `<name>Channel`). */
export const matrixObjectName = (scenario: FeatureId) => `matrix_${scenario.replaceAll('-', '_')}`;

export interface ProbeState {
  ran: string[];
  modelCalls: number;
}

/** Serves the worker's probes on 127.0.0.1:`port`; resolves once it listens. */
export function serveProbes(probes: ReadonlyMap<string, Probe>, port: number): Promise<Server> {
  const server = createServer((request, response) => {
    const [, root, scenario, action] = (request.url ?? '').split('/');
    const probe = root === 'probe' ? probes.get(scenario ?? '') : undefined;
    const reply = (status: number, body: unknown) => response.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
    if (!probe) return reply(404, { error: `no probe for ${request.url}` });
    if (request.method === 'GET' && action === undefined) return reply(200, { ran: probe.ran, modelCalls: probe.modelCalls } satisfies ProbeState);
    if (request.method === 'GET' && action === 'reached') return void probe.reached.then(() => reply(200, { reached: true }));
    if (request.method === 'POST' && action === 'release') {
      probe.release();
      return reply(200, { released: true });
    }
    reply(405, { error: `${request.method} ${request.url}` });
  });
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, '127.0.0.1', () => resolve(server));
  });
}

/** The test process's side of the probes of the worker at `url`. */
export function probeClient(url: string) {
  const at = (scenario: FeatureId, action = '') => `${url}/probe/${scenario}${action}`;
  const ok = async (response: Response) => {
    if (!response.ok) throw new Error(`probe ${response.url}: ${response.status} ${await response.text()}`);
    return response.json() as Promise<unknown>;
  };
  return {
    state: async (scenario: FeatureId) => (await ok(await fetch(at(scenario), { signal: AbortSignal.timeout(10_000) }))) as ProbeState,
    /** Resolves once the latch tool started in the worker (`signal` gives up). */
    reached: async (scenario: FeatureId, signal: AbortSignal) => void (await ok(await fetch(at(scenario, '/reached'), { signal }))),
    release: async (scenario: FeatureId) => void (await ok(await fetch(at(scenario, '/release'), { method: 'POST', signal: AbortSignal.timeout(10_000) }))),
  };
}
