/**
 * Runs one cell of the matrix: a scenario on a host driver, with the scenario's driving script
 * (answers to waits, a steer or cancel at the latch, a crash and reopen), bounded in time.
 */
import type { HostDriver } from './hosts.js';
import type { Probe, RunResult, Scenario } from './scenarios.js';

/** Rejects after `ms` naming what did not happen. */
export function within<T>(ms: number, what: string, promise: Promise<T>): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timeout = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`${what}: nothing after ${ms} ms`)), ms)));
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

/** The run's normalized result and the probe of the process that finished it. */
export async function runCell(scenario: Scenario, driver: HostDriver): Promise<{ result: RunResult; probe: Probe }> {
  const timeoutMs = scenario.timeoutMs ?? 10_000;
  let { config, probe } = scenario.setup();
  const first = probe;
  try {
    const onWait = scenario.answer ?? ((wait) => {
      throw new Error(`the scenario does not wait, the run waits for ${wait.kind}`);
    });
    await driver.start(config, scenario.prompt, onWait, probe);
    if (scenario.during || scenario.crash) await within(timeoutMs, 'the latch tool never started', probe.reached);
    if (scenario.during === 'cancel') await driver.cancel();
    else if (scenario.during) await driver.steer(scenario.during.steer);
    if (scenario.crash) {
      ({ config, probe } = scenario.setup());
      await driver.crash(config, probe);
    }
    first.release();
    const result = await within(timeoutMs, `${scenario.id} did not end`, driver.result());
    return { result, probe };
  } finally {
    first.release();
    probe.release();
    await driver.dispose();
  }
}
