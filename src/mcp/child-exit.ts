/**
 * Stdio servers that are still running when this process exits get SIGTERM: a process that
 * ends without `close()` (process.exit, an uncaught exception, the event loop running dry) does
 * not leave its MCP servers behind. A process killed outright (SIGKILL, a default SIGTERM) runs
 * no code; its servers then see their stdin close, on which well-behaved servers exit.
 */

const running = new Set<{ readonly pid: number | null }>();
let hooked = false;

function endAll(): void {
  for (const child of running) {
    const pid = child.pid;
    if (pid === null) continue;
    try {
      process.kill(pid, 'SIGTERM');
    } catch {
      // Already gone.
    }
  }
  running.clear();
}

/** Ends `child` when this process exits, until `release` is called (after the child was closed). */
export function endOnExit(child: { readonly pid: number | null }): () => void {
  if (!hooked) {
    hooked = true;
    process.once('exit', endAll);
  }
  running.add(child);
  return () => running.delete(child);
}
