/**
 * A readable live trace of an agent actor, for the examples: a spinner while the model thinks
 * (plain lines when stdout is not a terminal), text as it streams, each tool call and its result
 * (cut short), each turn, compactions, and the outcome. Everything comes from the actor's emitted events and
 * its snapshots, so the same printer works for a stand-alone actor and for an invoked child.
 *
 *   const actor = createActor(agent, { input: { prompt } });
 *   const trace = traceAgent(actor);
 *   actor.start();
 *   const output = await toPromise(actor);
 *   trace.stop();
 */
import type { AgentActor, AgentEmitted, AgentOutput, Outcome } from '../src/index.js';

export interface TraceOptions {
  /** Where to print. Default `process.stdout`. */
  out?: NodeJS.WriteStream;
  /** Put before every line: nests a child agent's trace under its parent's. */
  indent?: string;
  /** Tool results and arguments longer than this are cut. Default 140. */
  maxChars?: number;
  /** Animated spinner and colours. Default: when `out` is a terminal (and NO_COLOR is unset). */
  tty?: boolean;
}

export interface Trace {
  /** Stops the spinner and detaches from the actor. */
  stop(): void;
}

/** Anything that looks like an agent actor: a root actor, or an invoked child taken from `snapshot.children`. */
type AgentLike = Pick<AgentActor, 'on' | 'subscribe' | 'getSnapshot'>;

const FRAMES = ['⠋', '⠙', '⠹', '⠸', '⠼', '⠴', '⠦', '⠧', '⠇', '⠏'];

export function traceAgent(actor: AgentLike, options: TraceOptions = {}): Trace {
  const out = options.out ?? process.stdout;
  const tty = options.tty ?? (out.isTTY === true && !process.env.NO_COLOR);
  const indent = options.indent ?? '';
  const maxChars = options.maxChars ?? 140;
  const paint = (code: number, text: string) => (tty ? `\x1b[${code}m${text}\x1b[0m` : text);
  const dim = (text: string) => paint(2, text);
  const bold = (text: string) => paint(1, text);
  const red = (text: string) => paint(31, text);
  const green = (text: string) => paint(32, text);
  const yellow = (text: string) => paint(33, text);
  const cyan = (text: string) => paint(36, text);

  const started = performance.now();
  const toolStarts = new Map<string, number>();
  let phase = '';
  let modelCallStart = 0;
  let turn = 0;
  let turns = 0;
  /** The cursor sits after streamed text that has no newline yet. */
  let midLine = false;
  let spinner: ReturnType<typeof setInterval> | undefined;
  let frame = 0;

  const turnLabel = (n: number) => cyan(`turn ${n}`);
  const line = (text: string) => {
    clearSpinner();
    if (midLine) {
      out.write('\n');
      midLine = false;
    }
    out.write(`${indent}${text}\n`);
  };

  function clearSpinner(): void {
    if (spinner === undefined) return;
    clearInterval(spinner);
    spinner = undefined;
    out.write('\r\x1b[K');
  }

  function waitingForModel(n: number): void {
    turn = n;
    modelCallStart = performance.now();
    const waiting = `${turnLabel(n)}  waiting for the model`;
    if (!tty) return line(`${waiting}…`);
    clearSpinner();
    const draw = () => {
      const seconds = ((performance.now() - modelCallStart) / 1000).toFixed(1);
      out.write(`\r\x1b[K${indent}${yellow(FRAMES[frame++ % FRAMES.length]!)} ${waiting} ${dim(`${seconds} s`)}`);
    };
    draw();
    spinner = setInterval(draw, 80);
  }

  function textDelta(delta: string): void {
    if (!midLine) {
      clearSpinner();
      out.write(`${indent}${turnLabel(turn)}  ${dim('assistant ›')} `);
      midLine = true;
    }
    out.write(delta.replaceAll('\n', `\n${indent}             `));
  }

  function turnFinished({ turn: n, reply }: Extract<AgentEmitted, { type: 'turn.finished' }>): void {
    turns = Math.max(turns, n);
    const calls = reply.message.toolCalls?.length ?? 0;
    const what = calls > 0 ? `asked for ${calls} tool call${calls === 1 ? '' : 's'}` : 'answered';
    const usage = reply.usage ? `${reply.usage.inputTokens} in / ${reply.usage.outputTokens} out tokens, ` : '';
    const seconds = ((performance.now() - modelCallStart) / 1000).toFixed(2);
    line(`${turnLabel(n)}  model ${what} ${dim(`(${usage}${seconds} s, finish: ${reply.finishReason})`)}`);
  }

  function toolStarted({ call }: Extract<AgentEmitted, { type: 'tool.started' }>): void {
    toolStarts.set(call.id, performance.now());
    line(`  ${bold('→')} ${call.name} ${dim(cut(JSON.stringify(call.args) ?? '', maxChars))}`);
  }

  function toolFinished({ call, result }: Extract<AgentEmitted, { type: 'tool.finished' }>): void {
    const startedAt = toolStarts.get(call.id);
    const ms = startedAt === undefined ? '' : ` ${dim(`(${(performance.now() - startedAt).toFixed(0)} ms)`)}`;
    const mark = result.isError ? red('✗') : green('←');
    const content = cut(result.content.replaceAll('\n', '⏎'), maxChars);
    const args = cut(JSON.stringify(call.args) ?? '', 40);
    line(`  ${mark} ${call.name} ${args}${ms} ${result.isError ? red(content) : dim(content)}`);
  }

  function runFinished({ output }: Extract<AgentEmitted, { type: 'run.finished' }>): void {
    const seconds = ((performance.now() - started) / 1000).toFixed(2);
    const stats = `${turns} turn${turns === 1 ? '' : 's'}, ${output.messages.length} messages kept, ${output.usage.inputTokens} in / ${output.usage.outputTokens} out tokens, ${seconds} s`;
    line(`${outcomeMark(output.outcome)} ${bold(output.outcome.type)}${outcomeDetail(output.outcome)} ${dim(`(${stats})`)}`);
  }

  function compactionFinished({ reason, before, after, rewritten }: Extract<AgentEmitted, { type: 'compaction.finished' }>): void {
    line(`${yellow('⇣')} compaction (${reason}): ${before} → ${after} tokens${rewritten ? '' : ' (nothing rewritten)'}`);
  }

  const outcomeMark = (outcome: Outcome) =>
    outcome.type === 'Completed' ? green('✓') : outcome.type === 'Failed' ? red('✗') : yellow('■');

  // Snapshots tell when a model call starts (and when it stops without a reply: cancel, error).
  function onSnapshot(snapshot: ReturnType<AgentLike['getSnapshot']>): void {
    const value = snapshot.value;
    // { Running: 'AwaitingModel' } or { Running: { AwaitingTools: 'Executing' } }: the brain's name is the first level.
    const running = typeof value === 'string' ? value : Object.values(value)[0];
    const next = typeof running === 'string' ? running : Object.keys(running ?? {})[0] ?? '';
    if (next === phase) return;
    phase = next;
    if (next === 'AwaitingModel') waitingForModel(snapshot.context.brain.context.turnsTaken + 1);
    else clearSpinner();
  }

  const subscriptions = [
    actor.on('text.delta', ({ delta }) => textDelta(delta)),
    actor.on('turn.finished', turnFinished),
    actor.on('tool.started', toolStarted),
    actor.on('tool.finished', toolFinished),
    actor.on('compaction.finished', compactionFinished),
    actor.on('run.finished', runFinished),
    actor.subscribe({ next: onSnapshot, error: () => clearSpinner(), complete: () => clearSpinner() }),
  ];
  // A child taken from its parent's snapshot has already started: catch up with where it is.
  const current = actor.getSnapshot();
  if (current.status === 'active') onSnapshot(current);

  return {
    stop() {
      clearSpinner();
      if (midLine) out.write('\n');
      midLine = false;
      for (const subscription of subscriptions) subscription.unsubscribe();
    },
  };
}

function outcomeDetail(outcome: Outcome): string {
  switch (outcome.type) {
    case 'Failed':
      return ` (${outcome.error.type}): ${outcome.error.message}`;
    case 'Sealed':
      return `: ${outcome.reason}`;
    default:
      return '';
  }
}

/** One line, at most `max` characters, saying how much was cut. */
export function cut(text: string, max: number): string {
  if (text.length <= max) return text;
  return `${text.slice(0, max)}… (+${text.length - max} chars)`;
}

/** The exit code for an outcome: 0 for Completed, 130 (as for Ctrl+C) for Cancelled, 1 otherwise. */
export function exitCodeOf(output: AgentOutput): number {
  return output.outcome.type === 'Completed' ? 0 : output.outcome.type === 'Cancelled' ? 130 : 1;
}
