import type { SessionStore } from '../stores/session-store.js';
import { deleteScope, exportScope, listScopes } from '../memory/privacy.js';
import { UnknownCommandError, UsageError } from './errors.js';
import { escapeLine } from './escape.js';
import { parseCommandArgs, storeCommandOptions } from './args.js';
import { noStore, withStore, type Io } from './sessions.js';

export const MEMORY_USAGE = `usage: loopchart memory <command> [options]

  list                       the scopes with memory: working memory size, entries, sessions, last update
  export SCOPE               everything kept for SCOPE, as JSON (working memory and indexed entries)
  delete SCOPE --yes         forget SCOPE: its working memory and entries, search indexes included
                             (its sessions stay: they are the store's)

options:
  --store LOCATION  a SQLite file (default: $LOOPCHART_STORE, else .loopchart/loopchart.db),
                    sqlite:PATH, or postgres://...
  --schema NAME     the PostgreSQL schema holding the tables (default loopchart)`;

/** `loopchart memory …`: list, export and delete what memory keeps per scope beside a store's sessions. */
export async function memoryCommand(argv: string[], io: Io): Promise<number> {
  const { values, positionals } = parseCommandArgs(argv, { yes: { type: 'boolean' } });
  const [command, ...rest] = positionals;
  if (values.help || command === undefined) {
    io.out(MEMORY_USAGE);
    return 0;
  }
  const options = storeCommandOptions(values, io);
  const onStore = (work: (store: SessionStore) => Promise<number>) => withStore(options, work, noStore(options.location));
  switch (command) {
    case 'list':
      if (rest.length !== 0) throw new UsageError('usage: loopchart memory list');
      return onStore(async (store) => {
        const scopes = await listScopes(store);
        if (scopes.length === 0) io.out(`no memory in ${options.location.label}`);
        for (const s of scopes) io.out(`${escapeLine(s.scope)}  working ${s.workingChars} chars  ${s.entries} entries from ${s.sessions} sessions  updated ${s.updatedAt.toISOString()}`);
        return 0;
      });
    case 'export':
      if (rest.length !== 1) throw new UsageError('usage: loopchart memory export SCOPE');
      // JSON escapes whatever the stored text holds: the output is safe to print as is.
      return onStore(async (store) => (io.out(JSON.stringify(await exportScope(store, rest[0]!), null, 2)), 0));
    case 'delete':
      if (rest.length !== 1) throw new UsageError('usage: loopchart memory delete SCOPE --yes');
      if (!values.yes) throw new UsageError(`deleting forgets everything kept for '${escapeLine(rest[0]!)}': run again with --yes`);
      return onStore(async (store) => (io.out(`forgot ${await deleteScope(store, rest[0]!)} entries and the working memory of ${escapeLine(rest[0]!)}`), 0));
    default:
      throw new UnknownCommandError(`unknown command 'memory ${escapeLine(command)}'; the commands: list, export, delete`);
  }
}
