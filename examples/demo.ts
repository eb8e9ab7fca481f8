/**
 * `npm start`: an agent answers a question about the files of a folder with the real
 * list_dir / read_file / calculator tools, and prints a live trace. The run is a durable session
 * in the embedded store (SQLite at `.loopchart/loopchart.db`, or $LOOPCHART_STORE): the demo
 * prints the session's id and the commands that list, show and resume it. Offline (the scripted
 * model) unless the environment names a real model.
 *
 *   npm start                                   # the fixture folder examples/fixtures
 *   npm start -- src/tools "What is in here?"   # any folder; the rest of the line is the question
 *   npm start -- --resume demo-…                # continue a demo stopped by Ctrl+C, a failure or a kill
 *   npm start -- --resume demo-… . "And now?"   # ...with that message for its next run
 *   OPENAI_BASE_URL=http://localhost:11434/v1 LOOPCHART_MODEL=qwen3 npm start   # a real model
 *   npm start -- --approve                      # adds write_file, which asks before each write
 *   npm start -- --approve --out DIR            # ...rooted at DIR (default: a new temporary folder)
 *
 * With --approve the agent writes its answer to report.md in the scratch folder, never in the
 * repository or the folder it reads. Each write waits for an answer: `[y/N/a(lways)]` on a
 * terminal; when stdin is not a terminal, one answer per stdin line (`echo y | npm start -- --approve`),
 * and no line left counts as no.
 *
 * A real model is used when OPENAI_BASE_URL is set (with OPENAI_API_KEY and LOOPCHART_MODEL,
 * default gpt-4o-mini); see `chooseModel` in folder-agent.ts.
 *
 * Ctrl+C cancels the run and keeps the session (it prints how to continue); a second Ctrl+C quits
 * at once. Exits 0 when the run is Completed, 130 when cancelled (Ctrl+C), 1 otherwise.
 */
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { DurableSession, openSessionStore, type AgentActor, type ToolCall } from '../src/index.js';
import { DEMO_SESSION_PREFIX } from '../src/cli/agent.js';
import { cliHint } from '../src/cli/hint.js';
import { watchInterrupt } from '../src/cli/interrupt.js';
import { createFolderAgent, DEFAULT_QUESTION } from './folder-agent.js';
import { cut, exitCodeOf, traceAgent, type Trace } from './trace.js';

const USAGE = 'usage: tsx examples/demo.ts [--resume ID] [--approve [--out DIR]] [folder] [question...]';
/** What a resumed demo says to its model when its last run was cut short (Ctrl+C, a failure) and no question is given. */
const CONTINUE_MESSAGE = 'Please go on where you stopped.';
const { approve, out, resume, positional } = parseFlags(process.argv.slice(2));
const [folderArg, ...questionWords] = positional;
if (folderArg === '--help' || folderArg === '-h') {
  console.log(USAGE);
  process.exit(0);
}
if (folderArg !== undefined && !statSync(folderArg, { throwIfNoEntry: false })?.isDirectory()) {
  console.error(`not a directory: ${folderArg}\n${USAGE}`);
  process.exit(2);
}

// --approve: write_file is rooted in a scratch folder, never the repository or the folder read.
let reportRoot: string | undefined;
if (approve) {
  reportRoot = out ? path.resolve(out) : mkdtempSync(path.join(tmpdir(), 'loopchart-demo-'));
  mkdirSync(reportRoot, { recursive: true });
}

const agent = createFolderAgent({ folder: folderArg, question: questionWords.join(' ') || DEFAULT_QUESTION, reportRoot });
const toolNames = ['list_dir', 'read_file', 'calculator', ...(approve ? ['write_file (asks first)'] : [])];
const storeLocation = process.env.LOOPCHART_STORE || undefined;
const store = await openSessionStore(storeLocation);
// The id records that the demo agent made the session: `loopchart sessions resume` runs the
// demo agent only on such sessions.
const sessionId = resume ?? `${DEMO_SESSION_PREFIX}${new Date().toISOString().replace(/\D/g, '').slice(0, 14)}-${randomBytes(3).toString('hex')}`;
if (resume !== undefined && !(await store.load(resume))) {
  console.error(`no session ${resume} in ${storeLocation ?? '.loopchart/loopchart.db'}\n${USAGE}`);
  await store.close();
  process.exit(2);
}

console.log(`loopchart demo · model: ${agent.model.name} · tools: ${toolNames.join(', ')}`);
console.log(`folder:   ${agent.label}`);
if (reportRoot) console.log(`writes:   ${reportRoot}`);
const storeFlag = storeLocation ? ` --store ${storeLocation}` : '';
const again = [approve ? '--approve' : '', out ? `--out ${out}` : '', folderArg ?? ''].filter(Boolean).join(' ');
console.log(`session:  ${sessionId} (${resume ? 'resumed' : 'new'}, stored in ${storeLocation ?? '.loopchart/loopchart.db'})`);
console.log(`  list:   ${cliHint(`sessions list${storeFlag}`)}`);
console.log(`  show:   ${cliHint(`sessions show ${sessionId}${storeFlag}`)}`);
console.log(`  resume: npm start -- --resume ${sessionId}${again ? ` ${again}` : ''}   (after Ctrl+C, a failure or a crash)`);
if (!resume) console.log(`question: ${agent.input.prompt}\n`);
else console.log('');

let trace: Trace | undefined;
let approvals: { close(): void } | undefined;
let session: DurableSession | undefined;
// Ctrl+C cancels the run (in-flight calls are aborted, the history stays coherent, the session is
// kept); a second Ctrl+C quits at once.
const interrupt = watchInterrupt(() => session?.send({ type: 'cancel' }), (line) => console.error(`\n${line}`));
try {
  session = await DurableSession.open({
    machine: agent.machine,
    store,
    sessionId,
    history: agent.input.history ?? [],
    // Listen before the actor starts: a resumed run goes on at once.
    attach: (actor) => {
      trace = traceAgent(actor);
      approvals = approve ? askOnTerminal(actor, interrupt.press) : undefined;
    },
  });
  // A new session, or one at rest (its last run was cancelled, failed or finished): a run starts
  // with the question. A run left in flight (the process was killed) has gone on by itself.
  const { value, context } = session.actor.getSnapshot();
  const atRest = value === 'Idle';
  // A finished session has nothing to go on with: say so, and call no model, unless a question is given.
  const finished = resume !== undefined && atRest && questionWords.length === 0 && context.lastRun?.outcome.type === 'Completed';
  if (finished) {
    trace?.stop();
    console.log(`the session's last run finished (Completed); there is nothing to resume, and no model was called.`);
    const flags = [approve ? '--approve' : '', out ? `--out ${out}` : '', folderArg ?? agent.label].filter(Boolean).join(' ');
    console.log(`ask it something new: npm start -- --resume ${sessionId} ${flags} "your next question"`);
    console.log(`                  or: ${cliHint(`sessions send ${sessionId} "your next message"${storeFlag}`)}`);
  } else {
    if (!resume) session.send({ type: 'input', message: String(agent.input.prompt) });
    else if (atRest) {
      const message = questionWords.join(' ') || CONTINUE_MESSAGE;
      console.log(`the last run is over; the next one starts with: ${message}\n`);
      session.send({ type: 'input', message });
    }
    const output = await session.whenIdle();
    trace?.stop();
    process.exitCode = output ? exitCodeOf(output) : 1;
    if (output?.outcome.type === 'Cancelled') {
      console.log(`the session is kept; continue it: npm start -- --resume ${sessionId}${again ? ` ${again}` : ''}`);
      console.log(`                   or: ${cliHint(`sessions send ${sessionId} "your next message"${storeFlag}`)}`);
    }
  }
} catch (error) {
  trace?.stop();
  console.error('the demo failed:', error instanceof Error ? error.message : error);
  process.exitCode = 1;
} finally {
  interrupt.detach();
  approvals?.close();
  await session?.close().catch(() => {});
  await store.close();
}

function parseFlags(args: string[]): { approve: boolean; out: string | undefined; resume: string | undefined; positional: string[] } {
  let approve = false;
  let out: string | undefined;
  let resume: string | undefined;
  const positional: string[] = [];
  for (let i = 0; i < args.length; i++) {
    const arg = args[i]!;
    if (arg === '--approve') approve = true;
    else if (arg === '--out' && i + 1 < args.length) out = args[++i];
    else if (arg.startsWith('--out=')) out = arg.slice('--out='.length);
    else if (arg === '--resume' && i + 1 < args.length) resume = args[++i];
    else if (arg.startsWith('--resume=')) resume = arg.slice('--resume='.length);
    else positional.push(arg);
  }
  if (out !== undefined && !approve) {
    console.error(`--out needs --approve\n${USAGE}`);
    process.exit(2);
  }
  return { approve, out, resume, positional };
}

/**
 * Answers approval requests from the terminal: `approve write_file(...)? [y/N/a(lways)]` for each
 * waiting call, one at a time. On a terminal, readline asks; otherwise each answer is the next line
 * of stdin, and stdin running dry counts as no.
 */
function askOnTerminal(agent: AgentActor, onInterrupt: () => void): { close(): void } {
  const rl = createInterface({ input: process.stdin, output: process.stdout, terminal: process.stdin.isTTY === true });
  // Lines typed or piped before a question is asked wait for it.
  const lines: string[] = [];
  const readers: ((line: string | null) => void)[] = [];
  let ended = false;
  rl.on('line', (line) => (readers.length > 0 ? readers.shift()!(line) : lines.push(line)));
  rl.on('close', () => {
    ended = true;
    for (const reader of readers.splice(0)) reader(null);
  });
  // On a terminal readline takes Ctrl+C itself: cancel the run as the SIGINT handler would.
  rl.on('SIGINT', onInterrupt);
  const nextLine = (question: string): Promise<string | null> => {
    if (ended) {
      process.stdout.write(question);
      return Promise.resolve(lines.shift() ?? null);
    }
    if (process.stdin.isTTY) {
      return new Promise((resolve) => {
        readers.push(resolve); // answered by close (Ctrl+D) if nothing is typed
        rl.question(question, (answer) => {
          readers.splice(readers.indexOf(resolve), 1);
          resolve(answer);
        });
      });
    }
    process.stdout.write(question);
    if (lines.length > 0) return Promise.resolve(lines.shift()!);
    return new Promise((resolve) => readers.push(resolve));
  };

  let queue = Promise.resolve();
  const ask = async (call: ToolCall) => {
    const answer = await nextLine(`approve ${call.name}(${cut(JSON.stringify(call.args) ?? '', 100)})? [y/N/a(lways)] `);
    if (agent.getSnapshot().status !== 'active') return; // the run ended meanwhile (Ctrl+C)
    if (!process.stdin.isTTY) process.stdout.write(`${answer ?? '(no answer)'}\n`);
    const choice = (answer ?? '').trim().toLowerCase();
    if (choice === 'y' || choice === 'yes' || choice === 'a' || choice === 'always') {
      const always = choice.startsWith('a');
      agent.send({ type: 'approve', toolCallId: call.id, always });
      console.log(`  ✓ ${call.name} approved${always ? ' (always, for this session)' : ''}`);
    } else {
      const reason = answer === null ? 'no answer (stdin closed)' : 'the user said no on the terminal';
      // The trace prints the denial: it is the call's result.
      agent.send({ type: 'deny', toolCallId: call.id, reason });
    }
  };
  agent.on('approval.requested', ({ calls }) => {
    queue = queue.then(async () => {
      for (const call of calls) await ask(call);
    });
  });
  return { close: () => rl.close() };
}
