/**
 * `npm start`: an agent answers a question about the files of a folder with the real
 * list_dir / read_file / calculator tools, and prints a live trace. Offline (the scripted model)
 * unless the environment names a real model.
 *
 *   npm start                                   # the fixture folder examples/fixtures
 *   npm start -- src/tools "What is in here?"   # any folder; the rest of the line is the question
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
 * Exits 0 when the run is Completed, 130 when cancelled (Ctrl+C), 1 otherwise.
 */
import { mkdirSync, mkdtempSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { createActor, toPromise } from 'xstate';
import type { AgentActor, ToolCall } from '../src/index.js';
import { createFolderAgent, DEFAULT_QUESTION } from './folder-agent.js';
import { cut, exitCodeOf, traceAgent } from './trace.js';

const USAGE = 'usage: tsx examples/demo.ts [--approve [--out DIR]] [folder] [question...]';
const { approve, out, positional } = parseFlags(process.argv.slice(2));
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
console.log(`loopchart demo · model: ${agent.model.name} · tools: ${toolNames.join(', ')}`);
console.log(`folder:   ${agent.label}`);
if (reportRoot) console.log(`writes:   ${reportRoot}`);
console.log(`question: ${agent.input.prompt}\n`);

const actor = createActor(agent.machine, { input: agent.input });
// Listen before start(): the run begins on entry.
const trace = traceAgent(actor);
const cancel = () => actor.send({ type: 'cancel' });
// Ctrl+C cancels the run: in-flight calls are aborted and the history stays coherent.
process.once('SIGINT', cancel);
const approvals = approve ? askOnTerminal(actor, cancel) : undefined;

actor.start();
try {
  const output = await toPromise(actor);
  trace.stop();
  process.exitCode = exitCodeOf(output);
} catch (error) {
  trace.stop();
  console.error('the agent actor crashed:', error);
  process.exitCode = 1;
} finally {
  approvals?.close();
}

function parseFlags(args: string[]): { approve: boolean; out: string | undefined; positional: string[] } {
  let approve = false;
  let out: string | undefined;
  const positional: string[] = [];
  for (let i = 0; i < args.length; i++) {
    const arg = args[i]!;
    if (arg === '--approve') approve = true;
    else if (arg === '--out' && i + 1 < args.length) out = args[++i];
    else if (arg.startsWith('--out=')) out = arg.slice('--out='.length);
    else positional.push(arg);
  }
  if (out !== undefined && !approve) {
    console.error(`--out needs --approve\n${USAGE}`);
    process.exit(2);
  }
  return { approve, out, positional };
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
