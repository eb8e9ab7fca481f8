import { writeFileSync } from 'node:fs';
import { DEFAULT_VIEWER_PORT, sessionHtml, startViewer } from '../viewer/server.js';
import { loadSessionView } from '../viewer/load.js';
import { CliError, UsageError } from './errors.js';
import { escapeLine } from './escape.js';
import { refuseDatabaseAsOutput } from './output-file.js';
import { noStore, withStore, type CommandOptions } from './sessions.js';
import { restateSchedules } from './restate-schedules.js';
import { watchStopSignals } from './stop-signals.js';

function parsePort(text: string | undefined): number {
  if (text === undefined) return DEFAULT_VIEWER_PORT;
  if (!/^\d+$/.test(text) || Number(text) > 65535) throw new UsageError(`--port must be a number from 0 to 65535, got '${text}'`);
  return Number(text);
}

/** `loopchart view [--store] [--port N] [--restate URL]`: serves the viewer on 127.0.0.1 until stopped; `/schedules` lists Restate's with `--restate`. */
export async function serveCommand(port: string | undefined, options: CommandOptions, restate?: string): Promise<number> {
  const { io, location } = options;
  const chosen = parsePort(port);
  // Listening before anything slow: SIGTERM while the store opens stops the command, exit 0, as Ctrl-C does.
  const stop = watchStopSignals();
  try {
    const schedules = restate === undefined ? undefined : await restateSchedules(restate);
    return await withStore(
      options,
      async (store) => {
        const viewer = await startViewer({ store, port: chosen, storeLabel: location.label, schedules });
        io.out(`loopchart view: ${escapeLine(location.label)} at ${viewer.url} (127.0.0.1 only; Ctrl+C or SIGTERM stops)`);
        await stop.next;
        await viewer.close();
        return 0;
      },
      noStore(location),
    );
  } finally {
    stop.off();
  }
}

/** `loopchart view export ID -o FILE`: one self-contained HTML file. */
export async function exportCommand(sessionId: string, out: string | undefined, options: CommandOptions): Promise<number> {
  const { io, location } = options;
  if (!out) throw new UsageError('usage: loopchart view export ID -o FILE');
  refuseDatabaseAsOutput(out, '-o');
  return withStore(
    options,
    async (store) => {
      const view = await loadSessionView(store, sessionId);
      if (view === undefined) throw new CliError(`no session '${escapeLine(sessionId)}' in ${escapeLine(location.label)}`);
      // An id the store refuses or a session it cannot read is a failure, as for `sessions show`: no file that looks exported.
      if (view.error) throw new CliError(`session '${escapeLine(sessionId)}' cannot be exported: ${escapeLine(view.error.message)}`);
      const html = await sessionHtml(view);
      writeFileSync(out, html);
      io.out(`wrote ${escapeLine(out)} (${Buffer.byteLength(html)} bytes): session ${escapeLine(sessionId)}, one file, no network access`);
      return 0;
    },
    noStore(location),
  );
}
