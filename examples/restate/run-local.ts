/**
 * The whole thing on one machine, then gone: starts a Restate server on 127.0.0.1 with a temp
 * data dir, starts the worker, registers it through the admin API, drives three sessions (one
 * waits for an approval, granted from a second client), prints what happened and stops
 * everything it started.
 *
 *   npm run setup:restate            # once: the server binary into .cache/restate-server
 *   npx tsx examples/restate/run-local.ts
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const REPO = fileURLToPath(new URL('../../', import.meta.url));
const binary =
  process.env.LOOPCHART_RESTATE_SERVER ?? join(REPO, '.cache/restate-server/node_modules/@restatedev/restate-server-linux-x64/bin/restate-server');
if (!existsSync(binary)) {
  console.error('no Restate server: run `npm run setup:restate` first (or set LOOPCHART_RESTATE_SERVER)');
  process.exit(1);
}

const freePort = () =>
  new Promise<number>((resolve) => {
    const probe = createServer().listen(0, '127.0.0.1', () => {
      const { port } = probe.address() as { port: number };
      probe.close(() => resolve(port));
    });
  });
async function until<T>(what: string, probe: () => Promise<T | undefined>, timeoutMs = 20_000): Promise<T> {
  for (const deadline = Date.now() + timeoutMs; Date.now() < deadline; await new Promise((r) => setTimeout(r, 100))) {
    const value = await probe().catch(() => undefined);
    if (value !== undefined) return value;
  }
  throw new Error(`timed out waiting for ${what}`);
}

const [ingressPort, adminPort, nodePort, workerPort] = [await freePort(), await freePort(), await freePort(), await freePort()];
const ingress = `http://127.0.0.1:${ingressPort}`;
const admin = `http://127.0.0.1:${adminPort}`;
const dataDir = mkdtempSync(join(tmpdir(), 'loopchart-restate-example-'));
const started: ChildProcess[] = [];

try {
  started.push(
    spawn(binary, ['--no-logo', '--base-dir', dataDir], {
      stdio: 'ignore',
      env: {
        PATH: process.env.PATH ?? '',
        // Every port on loopback: ingress, admin and node-to-node.
        RESTATE_LISTEN_MODE: 'tcp',
        RESTATE_INGRESS__BIND_ADDRESS: `127.0.0.1:${ingressPort}`,
        RESTATE_ADMIN__BIND_ADDRESS: `127.0.0.1:${adminPort}`,
        RESTATE_BIND_ADDRESS: `127.0.0.1:${nodePort}`,
        RESTATE_ADVERTISED_ADDRESS: `http://127.0.0.1:${nodePort}/`,
        RESTATE_DISABLE_TELEMETRY: 'true',
      },
    }),
  );
  await until('the server', async () => ((await fetch(`${admin}/health`)).ok ? true : undefined));
  const worker = spawn(process.execPath, ['--import', 'tsx', fileURLToPath(new URL('./worker.ts', import.meta.url))], {
    env: { ...process.env, PORT: String(workerPort), INGRESS: ingress },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  started.push(worker);
  await new Promise<void>((resolve) => worker.stdout!.on('data', (chunk: Buffer) => chunk.toString().includes('listening') && resolve()));
  const registered = await fetch(`${admin}/deployments`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ uri: `http://127.0.0.1:${workerPort}` }),
  });
  if (!registered.ok) throw new Error(`registering the worker: ${registered.status} ${await registered.text()}`);

  const call = async (session: string, handler: string, body?: unknown) => {
    const response = await fetch(`${ingress}/loopchartSession/${session}/${handler}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body ?? null),
    });
    if (!response.ok && response.status !== 202) throw new Error(`${handler}: ${response.status} ${await response.text()}`);
    return response.json() as Promise<Record<string, any>>;
  };

  for (const [session, message] of [
    ['alice', 'count the words in this sentence please'],
    ['bob', 'how many words is this'],
  ]) {
    const reply = await call(session!, 'send', { message });
    console.log(`${session}: ${reply.outcome.type}: ${reply.outcome.finalText}`);
  }

  // A run that waits for a human: send without waiting, approve from "another client".
  const { invocationId } = await call('carol', 'send/send', { message: 'deploy the web service' });
  const request = await until('the approval request', async () => {
    const { events } = await call('carol', 'events', { cursor: 0 });
    return events.find((e: { event: { type: string } }) => e.event.type === 'approval.requested')?.event;
  });
  console.log(`carol: waiting for approval of ${request.calls[0].name}`);
  await call('carol', 'approve', { toolCallId: request.calls[0].id });
  const result = (await (await fetch(`${ingress}/restate/invocation/${invocationId}/attach`)).json()) as Record<string, any>;
  console.log(`carol: ${result.outcome.type}: ${result.outcome.finalText}`);
  const state = await call('carol', 'state');
  console.log(`carol: ${state.messageCount} messages stored, ${state.turnsTaken} turns`);
} finally {
  // Worker first, then the server; each is waited for (SIGKILL after 5 s) before its data goes.
  for (const child of started.reverse()) {
    if (child.exitCode !== null || child.signalCode !== null) continue;
    const exited = new Promise((resolve) => child.once('exit', resolve));
    child.kill('SIGTERM');
    const timer = setTimeout(() => child.kill('SIGKILL'), 5_000);
    await exited;
    clearTimeout(timer);
  }
  rmSync(dataDir, { recursive: true, force: true });
}
