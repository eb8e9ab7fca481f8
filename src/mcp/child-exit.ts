/*
 * Stdio servers run in their own process group; the groups still running when this process ends
 * are killed (SIGKILL: an exit hook cannot wait, and a server may ignore SIGTERM and the end of
 * its input) on every way out that runs code: `process.exit()`, an uncaught exception, the
 * event loop running dry, and SIGINT / SIGTERM / SIGHUP when nothing else listens for them
 * (then the signal is raised again, so the process ends as it would have). A host that listens
 * for those signals itself ends by exiting, which the exit hook covers. A process killed outright
 * (SIGKILL) runs no code: its servers see their stdin close, on which well-behaved servers exit.
 * `close()` is the graceful way (stdin closed, then SIGTERM, then SIGKILL).
 */

const groups = new Set<number>();
const SIGNALS = ['SIGINT', 'SIGTERM', 'SIGHUP'] as const;
let hooked = false;

/** Signals a server's whole process group (or the process alone where there are no groups); never throws. */
export function killGroup(pid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(process.platform === 'win32' ? pid : -pid, signal);
  } catch {
    // Already gone.
  }
}

function killAll(): void {
  for (const pid of groups) killGroup(pid, 'SIGKILL');
  groups.clear();
}

function onSignal(signal: NodeJS.Signals): void {
  // Someone else handles it: they decide whether this process ends, and its exit hook runs then.
  if (process.listenerCount(signal) > 1) return;
  killAll();
  for (const each of SIGNALS) process.removeListener(each, onSignal);
  process.kill(process.pid, signal);
}

/** Kills the process group led by `pid` when this process ends, until `release` is called (it was closed). */
export function endOnExit(pid: number): () => void {
  if (!hooked) {
    hooked = true;
    process.once('exit', killAll);
    for (const signal of SIGNALS) process.on(signal, onSignal);
  }
  groups.add(pid);
  return () => groups.delete(pid);
}
