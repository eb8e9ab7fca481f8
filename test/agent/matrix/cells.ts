/**
 * The declared conformance matrix (issue 41): every feature × every host is a cell, and a cell is
 * one of
 * - `tested`: this suite runs the scenario on the host and checks the scenario's result;
 * - `refused`: the host does not do this by design, for the reason given; where the host refuses
 *   at run time (runAgent seals a pause), the suite runs the scenario and checks the refusal;
 * - `elsewhere`: not run by this suite, run by the test named;
 * - `open`: a gap found and not closed, with the reason.
 * The in-process hosts (the MCP server and schedules among them) run in
 * test/agent/matrix/matrix.test.ts, the Restate session object (a
 * real server) in test/distributed/matrix.test.ts: each runs the cells this declaration says it
 * runs. docs/matrix.md is generated from this declaration and the in-process suite's results
 * (`LOOPCHART_WRITE_MATRIX=1 npx vitest run test/agent/matrix`), and matrix-doc.test.ts checks
 * that the file is what this declaration generates: a cell cannot be claimed without a test.
 */
import { expect } from 'vitest';
import { FEATURES, type FeatureId, type RunResult } from './scenarios.js';

export const HOSTS = [
  { id: 'actor', title: 'actor', runs: 'fast' },
  { id: 'runAgent', title: '`runAgent`', runs: 'fast' },
  { id: 'streamAgent', title: '`streamAgent`', runs: 'fast' },
  { id: 'durable-memory', title: '`DurableSession` memory', runs: 'fast' },
  { id: 'durable-sqlite', title: '`DurableSession` SQLite', runs: 'fast' },
  { id: 'durable-postgres', title: '`DurableSession` PostgreSQL', runs: 'postgres' },
  { id: 'stepper', title: '`AgentStepper`', runs: 'fast' },
  { id: 'restate', title: 'Restate session object', runs: 'distributed' },
  { id: 'chat', title: 'chat handler', runs: 'fast' },
  { id: 'cli', title: 'CLI', runs: 'fast' },
  { id: 'mcp', title: 'MCP server', runs: 'fast' },
  { id: 'schedules', title: 'schedules', runs: 'fast' },
] as const;
export type HostId = (typeof HOSTS)[number]['id'];

export type Cell =
  | { status: 'tested' }
  | { status: 'refused'; reason: string; verify?: (result: RunResult) => void }
  | { status: 'elsewhere'; test: string }
  | { status: 'open'; reason: string };

const NO_JOURNAL =
  'nothing journals a call’s start outside a durable store: the process that dies takes the run with it (an actor snapshot or a stepped session restored elsewhere reruns the step); in-doubt needs `DurableSession` or Restate';
const SEALS = (what: string) =>
  `\`runAgent\` / \`streamAgent\` hold the run’s only handle, so nobody could ${what}: the run ends \`Sealed\` with a reason that names the operation and says to run the agent as an actor or a \`DurableSession\` (checked)`;
const sealedBy = (operation: string) => (result: RunResult) => {
  expect(result.outcome.type).toBe('Sealed');
  expect(result.outcome.reason).toContain(`the '${operation}' operation yielded`);
  expect(result.outcome.reason).toContain('run the agent as an actor or a DurableSession');
};
const NO_STEER = '`runAgent` / `streamAgent` take no events while they run (a signal cancels); steer an actor or a `DurableSession`';

/** Every cell that is not `tested`, by feature then host. */
const DECLARED: Partial<Record<FeatureId, Partial<Record<HostId, Cell>>>> = {
  'in-doubt': {
    actor: { status: 'refused', reason: NO_JOURNAL },
    runAgent: { status: 'refused', reason: NO_JOURNAL },
    streamAgent: { status: 'refused', reason: NO_JOURNAL },
    stepper: { status: 'refused', reason: NO_JOURNAL },
    chat: { status: 'elsewhere', test: 'test/http/in-doubt.test.ts: a chat cut off inside the tool, reloaded, asks "run it again?" as an approval request; approved runs it again, denied fails it …' },
  },
  'budget-pause': {
    runAgent: { status: 'refused', reason: SEALS('raise the budget'), verify: sealedBy('budget') },
    streamAgent: { status: 'refused', reason: SEALS('raise the budget'), verify: sealedBy('budget') },
    chat: { status: 'elsewhere', test: 'test/http/budget-pause.test.ts (the response ends with the run waiting; the raise goes to the stored session, server side: no chat route carries one)' },
  },
  steering: {
    runAgent: { status: 'refused', reason: NO_STEER },
    streamAgent: { status: 'refused', reason: NO_STEER },
    chat: { status: 'refused', reason: 'a second message while a run streams is a 409 (`useChat` sends one message per turn; the next message starts the next run)' },
  },
  operations: {
    runAgent: { status: 'refused', reason: SEALS('resume the operation'), verify: sealedBy('ci-gate') },
    streamAgent: { status: 'refused', reason: SEALS('resume the operation'), verify: sealedBy('ci-gate') },
    chat: { status: 'elsewhere', test: 'test/http/operations.test.ts: the response ends `waiting` with a data-operation-yielded part; POST <api>/<id>/resume continues the run …' },
  },
  delivery: {
    runAgent: { status: 'refused', reason: '`runAgent` returns the result only; `streamAgent` is its evented form' },
    stepper: { status: 'refused', reason: 'the stepper emits no events: the caller stores the session and reads it' },
    chat: { status: 'refused', reason: 'the page gets UI message chunks, not agent events: a reattach replays the whole message and `useChat` replaces its copy (test/http/protocol.test.ts: a second tab …)' },
  },
};

const CLI_DECIDES_NOT =
  '`sessions send/resume` stop at the wait with exit 1 and say to decide from the application that owns the session: the CLI does not decide for you (src/cli/continue.ts)';
const CLI_STALLS = 'test/cli/stalls.test.ts: `sessions send/resume` stop at the wait with exit 1 and say what to do';

/** The CLI column: run by the CLI driver (`main` in process, a SQLite file per run) except where declared. */
const CLI: Partial<Record<FeatureId, Cell>> = {
  approvals: { status: 'refused', reason: CLI_DECIDES_NOT },
  operations: { status: 'refused', reason: CLI_DECIDES_NOT },
  'budget-pause': { status: 'elsewhere', test: `${CLI_STALLS} (raise or seal it from the application) …` },
  steering: {
    status: 'refused',
    reason: 'the run goes in the process of the `sessions send/resume` command, which reads no input while it runs and has no way in from another process (Ctrl-C cancels); the next `sessions send` is the next run',
  },
  delivery: {
    status: 'refused',
    reason: 'the CLI prints the transcript as messages are committed, not agent events (a client that needs delivery ids subscribes to the `DurableSession`, or polls the Restate session object)',
  },
};

const MCP_SEALS = (what: string) =>
  `an MCP client can send no ${what}: the server seals the run at once, the reason naming the pause and saying an MCP client cannot resume it (checked), as \`runAgent\` does, instead of holding the call until its timeout`;
const sealedForMcp = (operation: string) => (result: RunResult) => {
  expect(result.outcome.type).toBe('Sealed');
  expect(result.outcome.reason).toContain(`the '${operation}' operation yielded`);
  expect(result.outcome.reason).toContain('an MCP client cannot resume it');
};

/** The MCP server column: the agent served by `createMcpServer`, called by the SDK's `Client` (test/agent/matrix/mcp-host.ts). */
const MCP: Partial<Record<FeatureId, Cell>> = {
  'in-doubt': {
    status: 'elsewhere',
    test: 'test/mcp-server/in-doubt.process.test.ts: a call in doubt after the server restarted (a real server process on a SQLite file): the repeat asks its client whether to run the call again; yes runs it again, no fails it with the reason … (the client’s form answers yes or no: a result written by hand, this scenario’s answer, is not one of them)',
  },
  'budget-pause': { status: 'refused', reason: MCP_SEALS('raise'), verify: sealedForMcp('budget') },
  steering: {
    status: 'refused',
    reason:
      'MCP has no message into a running call: a second call naming the running session (`_meta[\'loopchart/sessionId\']`) is refused, `InvalidRequest` ‘session … is running another call; wait for it to end’, and the run ends without it (checked); the next call on the session is the next run',
    verify: (result) => {
      expect(result.refusals).toHaveLength(1);
      expect(result.refusals![0]).toMatch(/is running another call; wait for it to end/);
      expect(result.outcome).toMatchObject({ type: 'Completed', finalText: 'Saw: Start.' });
    },
  },
  operations: { status: 'refused', reason: MCP_SEALS('resume'), verify: sealedForMcp('ci-gate') },
  delivery: { status: 'refused', reason: 'the client gets a progress notification per turn and the tool’s result, not agent events' },
};

/** The schedules column: a one-shot schedule fired by `startScheduler` on a SQLite file (test/agent/matrix/schedules-host.ts). */
const SCHEDULES: Partial<Record<FeatureId, Cell>> = {
  steering: {
    status: 'refused',
    reason: 'a tick sends its one input and the run goes in the scheduler, which takes no message while it runs; the next tick’s input (or a `DurableSession` on the session once the tick ended) is the next run',
  },
  cancel: {
    status: 'elsewhere',
    test: 'test/schedules/run-timeout.test.ts: a scheduled run past runTimeoutMs is Cancelled with the timeout as its lastError (only the scheduler holds a tick’s run while it goes: that is its cancel)',
  },
  delivery: {
    status: 'refused',
    reason: '`onTick` tells each tick’s end (its outcome, what a wait is for), not agent events; the session’s events go to whoever opens it as a `DurableSession`',
  },
};

/** The columns declared by a table of their own, by host. */
const COLUMNS: Partial<Record<HostId, Partial<Record<FeatureId, Cell>>>> = { cli: CLI, mcp: MCP, schedules: SCHEDULES };

/** The cell of a feature on a host. */
export function cellOf(feature: FeatureId, host: HostId): Cell {
  const column = COLUMNS[host];
  return (column ? column[feature] : DECLARED[feature]?.[host]) ?? { status: 'tested' };
}

export const FEATURE_TITLES: Record<FeatureId, string> = {
  'structured-output': 'structured output',
  'input-guardrail': 'input guardrail',
  'output-guardrail': 'output guardrail',
  'tool-policy': 'tool policy',
  approvals: 'approvals',
  'in-doubt': 'in-doubt calls',
  'budget-pause': 'budget pause and raise',
  'time-budget': 'time budget',
  fallback: 'fallback',
  repetition: 'repetition',
  subagents: 'subagents',
  handoffs: 'handoffs',
  steering: 'steering',
  cancel: 'cancel',
  compaction: 'compaction',
  operations: 'operations that yield and resume',
  delivery: 'delivery ids',
};

/** What a run of the suite found for a cell (the declaration's status when it held). */
export type CellResult = 'tested' | 'refused' | 'elsewhere' | 'open' | 'failed' | 'skipped';

const MARK: Record<CellResult, string> = { tested: '✓', refused: 'refused', elsewhere: 'elsewhere', open: 'open', failed: 'FAILED', skipped: 'not run' };

/**
 * docs/matrix.md from the declaration and the results of a run (`results` by `feature|host`;
 * without them, what the declaration claims). A tested cell that failed reads FAILED, one whose
 * host was not available (PostgreSQL without DATABASE_URL) "not run".
 */
export function renderMatrix(results: ReadonlyMap<string, CellResult> = new Map()): string {
  const notes: string[] = [];
  const resultOf = (feature: FeatureId, host: HostId): string => {
    const cell = cellOf(feature, host);
    const got = results.get(`${feature}|${host}`) ?? cell.status;
    if (got !== cell.status) return MARK[got];
    if (cell.status === 'tested') return MARK.tested;
    notes.push(`- **${FEATURE_TITLES[feature]} × ${HOSTS.find((h) => h.id === host)!.title}** (${cell.status}): ${'reason' in cell ? cell.reason : cell.test}`);
    return `${MARK[cell.status]} [${notes.length}]`;
  };
  const rows = FEATURES.map((feature) => `| ${FEATURE_TITLES[feature]} | ${HOSTS.map((host) => resultOf(feature, host.id)).join(' | ')} |`);
  const count = (status: Cell['status']) => FEATURES.flatMap((f) => HOSTS.map((h) => cellOf(f, h.id).status)).filter((s) => s === status).length;
  return [
    '# Every feature through every host',
    '',
    '<!-- Generated by test/agent/matrix (LOOPCHART_WRITE_MATRIX=1 npx vitest run test/agent/matrix); test/agent/matrix/matrix-doc.test.ts checks it. Do not edit by hand. -->',
    '',
    'Each feature (a scenario in `test/agent/matrix/scenarios.ts`: the agent, the prompt, what to answer when the run waits) runs',
    'unchanged on each host through one driver interface (`test/agent/matrix/hosts.ts`). ✓: the suite runs it on that host and',
    'checks the result. refused: the host does not do it by design (where it refuses at run time, the suite checks the refusal).',
    'elsewhere: run by the test named. open: not covered or not working, with the reason.',
    '',
    `| feature | ${HOSTS.map((h) => h.title).join(' | ')} |`,
    `| --- | ${HOSTS.map(() => '---').join(' | ')} |`,
    ...rows,
    '',
    `${count('tested')} cells tested, ${count('refused')} refused by design, ${count('elsewhere')} tested elsewhere, ${count('open')} open.`,
    '',
    'Where they run: the in-process hosts in `test/agent/matrix/matrix.test.ts` (the SQLite store a real file in a temporary folder),',
    'PostgreSQL there too when `DATABASE_URL` is set (CI). The CLI runs there too,',
    'through its `main` as a shell runs it (`sessions send`, `sessions doubt`, `sessions resume` on a SQLite file per run; Ctrl-C is',
    'a real SIGINT to the test’s process). The in-doubt cells of the durable hosts stop the session’s actor while the tool runs (what',
    'a crash leaves: the start journaled, no result) and open the session again in the same process; the CLI’s takes a copy of its',
    'store at that moment for the next command. The SIGKILL series of a real child process on SQLite and PostgreSQL is',
    '`test/agent/in-doubt/in-doubt.crash.test.ts`.',
    '',
    'The MCP server runs there too: the scenario’s agent served by `createMcpServer` on a memory store, called by the MCP SDK’s',
    'own `Client` over the SDK’s in-memory transport, its approvals answered through the client’s form elicitation, its cancel the',
    'client’s (`notifications/cancelled`); the result is read from the session the call ran in, and the tool result the client got',
    'must say the same. So do schedules: a one-shot schedule whose tick sends the prompt, fired by `startScheduler` on the SQLite',
    'file; a run that waits for someone ends the tick `Waiting` and is answered through a `DurableSession` on the same store, as',
    '`docs/schedules.md` says. Their in-doubt cell lets the scheduler go mid-tick (`stop({ graceMs: 0 })`: the session closed where',
    'it is stored, the lease given back) and another scheduler takes the tick over.',
    '',
    'The Restate column runs in `test/distributed/matrix.test.ts` (the distributed project: a real server and one worker process that',
    'builds each scenario’s agent from the scenario itself and serves it as a session object of its own), through the ingress as any',
    'client: `send`, the event stream polled with a cursor, each wait answered by its handler (a budget raise is the budget operation’s',
    '`resumeOperation`), `steer` and `cancel`; its in-doubt cell SIGKILLs the worker while the tool runs and starts another. Its marks',
    'here are the declaration’s (this page is written by the in-process run); that file fails when one does not hold.',
    '',
    '## Notes',
    '',
    ...notes,
    '',
  ].join('\n');
}
