import { parseArgs } from 'node:util';
import { decisionOrder } from '../../machines/loop.machine.js';
import { stepOrder, type Branch } from '../agent/core/step-order.js';
import { argumentError } from './args.js';
import { UsageError } from './errors.js';
import type { Io } from './sessions.js';

export const CHART_USAGE = `usage: loopchart chart [--brain] [--json | --mermaid]
       loopchart chart --svg brain|driver > chart.svg

  the driver chart's decision order: the eventless steps of agent.Running (Start, Deciding,
  CallLLM, CallTools), each a list of rows taken in order, the first whose guard holds wins and
  the row without a guard is the default (src/agent/core/step-order.ts); with --brain, the
  brain's (machines/loop.machine.ts, decisionOrder: which step it asks for in which state)

options:
  (none)            a text table: state, #, guard, target, actions, why
  --brain           the brain's decision order instead: #, step, states, guard, target, action
  --json            the tables as data: { state: [{ guard?, target, reenter?, actions?, why }] }
  --mermaid         a mermaid flowchart of those steps (edges labelled "#. guard")
  --svg CHART       the whole chart (brain or driver) as an SVG picture, laid out as the viewer does
  -h, --help        this text`;

/** One row of a table, with the state that holds it and its place (1-based) in that state's list. */
interface Row {
  readonly state: string;
  readonly index: number;
  readonly branch: Branch;
}

/** Every row of every table, states in the order a step reaches them, rows in priority order. */
function rows(): Row[] {
  return Object.entries(stepOrder).flatMap(([state, table]) => (table as readonly Branch[]).map((branch, i) => ({ state, index: i + 1, branch })));
}

const DEFAULT_GUARD = '(default)';

type Action = Exclude<Branch['actions'], readonly unknown[] | undefined>;

/** `prune`, or `trace(prune)` for an action with params. */
const actionText = (action: Action): string =>
  typeof action === 'string' ? action : `${action.type}(${typeof action.params === 'string' ? action.params : JSON.stringify(action.params)})`;

const actionsText = (actions: Branch['actions']): string =>
  actions === undefined ? '-' : (Array.isArray(actions) ? (actions as readonly Action[]) : [actions as Action]).map(actionText).join(', ');

const targetText = (branch: Branch): string => `${branch.target}${branch.reenter ? ' (re-enter)' : ''}`;

/**
 * The rows as one aligned table, a blank line between states; every row is one line that names
 * its state, so `loopchart chart | grep CallTools` and a diff of two releases read line by line.
 */
export function chartTable(): string {
  const header = ['state', '#', 'guard', 'target', 'actions', 'why'];
  const all = rows();
  const cells = all.map(({ state, index, branch }) => [state, String(index), branch.guard ?? DEFAULT_GUARD, targetText(branch), actionsText(branch.actions), branch.why]);
  const widths = header.map((title, column) => Math.max(title.length, ...cells.map((cell) => cell[column]!.length)));
  const line = (cell: readonly string[]) =>
    cell
      .map((text, column) => (column === cell.length - 1 ? text : text.padEnd(widths[column]!)))
      .join('  ')
      .trimEnd();
  const body = cells.flatMap((cell, i) => (i > 0 && all[i]!.state !== all[i - 1]!.state ? ['', line(cell)] : [line(cell)]));
  return [
    "The driver's decision order, agent.Running: in each state the first row whose guard holds is taken, (default) when none does.",
    '',
    line(header),
    ...body,
  ].join('\n');
}

/** The brain's decision order as data: each decision's step, the states it applies in, its guard, where it moves, what it does. */
export function brainOrder(): { step: string; states: readonly string[]; guard?: string; target?: string; action?: string }[] {
  return decisionOrder.map(({ type, states, guard, target, action }) => ({ step: type, states, ...(guard && { guard }), ...(target && { target }), ...(action && { action }) }));
}

/** The brain's decision order as one aligned table, first hit wins. */
export function brainTable(): string {
  const header = ['#', 'step', 'states', 'guard', 'target', 'action'];
  const cells = brainOrder().map((d, i) => [String(i + 1), d.step, d.states.join(' '), d.guard ?? DEFAULT_GUARD, d.target ?? '-', d.action ?? '-']);
  const widths = header.map((title, column) => Math.max(title.length, ...cells.map((cell) => cell[column]!.length)));
  const line = (cell: readonly string[]) => cell.map((text, column) => text.padEnd(widths[column]!)).join('  ').trimEnd();
  return ["The brain's decision order (machines/loop.machine.ts): in its state, the first decision whose guard holds is the step it asks for.", '', line(header), ...cells.map(line)].join('\n');
}

/** A whole chart as an SVG picture, laid out by the viewer's ELK layout (what `npm run docs:charts` draws). */
async function chartPicture(which: 'brain' | 'driver'): Promise<string> {
  const [{ layoutChart }, { chartSvg }, { brainChart }, { agentChart }] = await Promise.all([
    import('../viewer/chart-layout.js'),
    import('../viewer/chart-svg.js'),
    import('../viewer/chart.js'),
    import('../viewer/server.js'),
  ]);
  const chart = which === 'brain' ? brainChart() : agentChart();
  return chartSvg(await layoutChart(chart), which === 'brain' ? "The brain's statechart (machines/loop.machine.ts)" : "The driver's statechart (machines/agent.machine.ts)");
}

/** A mermaid node id for a target (`#agent.Terminal` → `Terminal`, `AwaitingTools.Executing` → `AwaitingTools_Executing`). */
const nodeName = (target: string) => target.replace(/^#agent\./, '');
const nodeId = (target: string) => nodeName(target).replace(/[^A-Za-z0-9]/g, '_');

/** The steps as a mermaid flowchart: one edge per row, labelled with its place and guard. */
export function chartMermaid(): string {
  const all = rows();
  const states = Object.keys(stepOrder);
  const nodes = [...new Set([...states, ...all.map(({ branch }) => branch.target)])];
  return [
    'flowchart TD',
    "  %% loopchart: the driver's eventless steps in agent.Running, first hit wins (src/agent/core/step-order.ts)",
    ...nodes.map((target) => `  ${nodeId(target)}["${nodeName(target)}"]`),
    ...all.map(({ state, index, branch }) => `  ${nodeId(state)} -->|"${index}. ${branch.guard ?? DEFAULT_GUARD}${branch.reenter ? ' (re-enter)' : ''}"| ${nodeId(branch.target)}`),
    '  classDef step stroke-width:3px',
    `  class ${states.map(nodeId).join(',')} step`,
  ].join('\n');
}

const CHART_ARGS = { json: { type: 'boolean' }, mermaid: { type: 'boolean' }, brain: { type: 'boolean' }, svg: { type: 'string' }, help: { type: 'boolean', short: 'h' } } as const;

function parse(argv: string[]) {
  try {
    return parseArgs({
      args: argv,
      allowPositionals: true,
      strict: true,
      options: CHART_ARGS,
    });
  } catch (error) {
    throw argumentError(error, CHART_ARGS);
  }
}

/**
 * `loopchart chart [--brain] [--json | --mermaid]` and `loopchart chart --svg brain|driver`: the
 * decision tables, read from the code that builds the charts, or a chart's picture.
 */
export async function chartCommand(argv: string[], io: Io): Promise<number> {
  const { values, positionals } = parse(argv);
  if (values.help) {
    io.out(CHART_USAGE);
    return 0;
  }
  const usage = 'usage: loopchart chart [--brain] [--json | --mermaid], or loopchart chart --svg brain|driver';
  if (positionals.length > 0 || (values.json && values.mermaid) || (values.brain && values.mermaid)) throw new UsageError(usage);
  if (values.svg !== undefined) {
    if (values.svg !== 'brain' && values.svg !== 'driver') throw new UsageError(`--svg takes brain or driver, not '${values.svg.slice(0, 40)}'`);
    if (values.json || values.mermaid || values.brain) throw new UsageError(usage);
    io.out(await chartPicture(values.svg));
    return 0;
  }
  if (values.brain) io.out(values.json ? JSON.stringify(brainOrder(), null, 2) : brainTable());
  else io.out(values.json ? JSON.stringify(stepOrder, null, 2) : values.mermaid ? chartMermaid() : chartTable());
  return 0;
}
