/**
 * `@opentelemetry/api` is an optional peer: a project without it runs agents that do not ask for
 * telemetry, and one that does is refused when it is made. A real child process whose module
 * resolution cannot find the package (fixtures/hide-otel-api.cjs).
 */
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bundledCommand, type NodeCommand } from '../sessions/fixtures/processes.js';

let noOtelApi: NodeCommand;
beforeAll(async () => {
  noOtelApi = await bundledCommand(fileURLToPath(new URL('./fixtures/no-otel-api.ts', import.meta.url)));
});
afterAll(() => noOtelApi?.dispose());

describe('without @opentelemetry/api installed', () => {
  it('an agent without telemetry runs; one with telemetry is refused with TelemetryUnavailableError when it is made', () => {
    const hide = fileURLToPath(new URL('./fixtures/hide-otel-api.cjs', import.meta.url));
    const result = spawnSync(process.execPath, ['-r', hide, ...noOtelApi.args], { encoding: 'utf8', timeout: 30_000 });
    expect(result.status, result.stderr).toBe(0);
    const report = JSON.parse(result.stdout.trim());
    expect(report).toMatchObject({ plain: 'Completed', unavailable: true, code: 'TelemetryUnavailable' });
    expect(report.message).toContain('npm install @opentelemetry/api');
  });
});
