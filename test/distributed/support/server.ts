/**
 * A real Restate server for the distributed suite: the binary that `.ci/restate.sh` installs into
 * .cache/restate-server (or $LOOPCHART_RESTATE_SERVER), a temp data dir, and every port (ingress,
 * admin, node-to-node) bound to 127.0.0.1. `kill('SIGKILL')` + `start()` restarts it on the same
 * data dir and ports.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync, readdirSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

export const REPO = fileURLToPath(new URL('../../../', import.meta.url));

/** The server binary, or undefined when it is not installed (the suite then skips). */
export function restateServerBinary(): string | undefined {
  const candidates = [
    process.env.LOOPCHART_RESTATE_SERVER,
    join(REPO, '.cache/restate-server/node_modules/@restatedev/restate-server-linux-x64/bin/restate-server'),
  ];
  return candidates.find((path): path is string => path !== undefined && path !== '' && existsSync(path));
}

/** A free TCP port on 127.0.0.1 (closed again before it is used: good enough on a test machine). */
export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}

export async function waitFor<T>(what: string, probe: () => Promise<T | undefined>, timeoutMs = 20_000, everyMs = 50): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  while (Date.now() < deadline) {
    try {
      const value = await probe();
      if (value !== undefined) return value;
    } catch (error) {
      last = error;
    }
    await new Promise((resolve) => setTimeout(resolve, everyMs));
  }
  throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}${last ? `: ${String(last)}` : ''}`);
}

export class RestateServer {
  readonly dataDir: string;
  ingressUrl = '';
  adminUrl = '';
  #ports: { ingress: number; admin: number; node: number } | undefined;
  #child: ChildProcess | undefined;
  #log = '';

  private constructor(readonly binary: string) {
    this.dataDir = mkdtempSync(join(tmpdir(), 'loopchart-restate-'));
  }

  static async start(binary: string): Promise<RestateServer> {
    const server = new RestateServer(binary);
    await server.start();
    return server;
  }

  get pid(): number | undefined {
    return this.#child?.pid;
  }

  /** Starts (or restarts, same data dir and ports) and waits until admin and ingress answer. */
  async start(): Promise<void> {
    this.#ports ??= { ingress: await freePort(), admin: await freePort(), node: await freePort() };
    const { ingress, admin, node } = this.#ports;
    this.ingressUrl = `http://127.0.0.1:${ingress}`;
    this.adminUrl = `http://127.0.0.1:${admin}`;
    const child = spawn(this.binary, ['--no-logo', '--base-dir', this.dataDir, '--node-name', 'loopchart-test'], {
      env: {
        PATH: process.env.PATH ?? '',
        RESTATE_LISTEN_MODE: 'tcp',
        RESTATE_BIND_ADDRESS: `127.0.0.1:${node}`,
        RESTATE_ADVERTISED_ADDRESS: `http://127.0.0.1:${node}/`,
        RESTATE_INGRESS__BIND_ADDRESS: `127.0.0.1:${ingress}`,
        RESTATE_ADMIN__BIND_ADDRESS: `127.0.0.1:${admin}`,
        RESTATE_DISABLE_TELEMETRY: 'true',
        // A small test server: fewer partitions and a smaller RocksDB budget than the defaults.
        RESTATE_DEFAULT_NUM_PARTITIONS: '4',
        RESTATE_ROCKSDB_TOTAL_MEMORY_SIZE: '256MiB',
        RESTATE_LOG_FILTER: 'warn',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    this.#child = child;
    // Whatever happens to the test process (a hook that times out, a crash), the server goes too.
    const reap = () => child.kill('SIGKILL');
    process.once('exit', reap);
    child.once('exit', () => process.off('exit', reap));
    const keep = (chunk: Buffer) => {
      this.#log = (this.#log + chunk.toString()).slice(-20_000);
    };
    child.stdout!.on('data', keep);
    child.stderr!.on('data', keep);
    await waitFor('the Restate server to be healthy', async () => {
      if (child.exitCode !== null) throw new Error(`restate-server exited (${child.exitCode}): ${this.#log.slice(-2000)}`);
      const [a, i] = await Promise.all([fetch(`${this.adminUrl}/health`), fetch(`${this.ingressUrl}/restate/health`)]);
      return a.ok && i.ok ? true : undefined;
    });
  }

  /** Sends a signal and waits for the process to exit. */
  async kill(signal: NodeJS.Signals): Promise<void> {
    const child = this.#child;
    if (!child || child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    child.kill(signal);
    // A process that ignores a gentle signal for 5 s gets SIGKILL: teardown is bounded.
    const timer = signal === 'SIGKILL' ? undefined : setTimeout(() => child.kill('SIGKILL'), 5_000);
    await exited;
    clearTimeout(timer);
  }

  /** Registers a deployment (a worker's URL) through the admin API. */
  async register(uri: string): Promise<void> {
    const response = await fetch(`${this.adminUrl}/deployments`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ uri, force: true }),
      signal: AbortSignal.timeout(20_000),
    });
    if (!response.ok) throw new Error(`registering ${uri}: ${response.status} ${await response.text()}`);
  }

  /** Runs SQL on the admin API's introspection tables (`sys_invocation`, `state`, ...). */
  async query<T>(sql: string): Promise<T[]> {
    const response = await fetch(`${this.adminUrl}/query`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json' },
      body: JSON.stringify({ query: sql }),
      signal: AbortSignal.timeout(10_000),
    });
    if (!response.ok) throw new Error(`query: ${response.status} ${await response.text()}`);
    return ((await response.json()) as { rows: T[] }).rows;
  }

  /** Resident set size of the server process, from /proc. */
  rssBytes(): number {
    const status = readFileSync(`/proc/${this.#child!.pid}/status`, 'utf8');
    return Number(/VmRSS:\s+(\d+) kB/.exec(status)![1]) * 1024;
  }

  dataDirBytes(): number {
    const size = (path: string): number => {
      const stat = statSync(path, { throwIfNoEntry: false });
      if (!stat) return 0;
      return stat.isDirectory() ? readdirSync(path).reduce((sum, name) => sum + size(join(path, name)), 0) : stat.size;
    };
    return size(this.dataDir);
  }

  get log(): string {
    return this.#log;
  }

  async stop(): Promise<void> {
    await this.kill('SIGTERM').catch(() => {});
    rmSync(this.dataDir, { recursive: true, force: true });
  }
}
