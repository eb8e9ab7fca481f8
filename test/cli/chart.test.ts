/**
 * `loopchart chart` prints the driver's decision tables (src/agent/core/step-order.ts): every row
 * of every table, in priority order, as text, as JSON and as mermaid edges. The expectations are
 * read from the tables themselves, so a row the command drops, adds or reorders fails here.
 */
import { describe, expect, it } from 'vitest';
import { decisionOrder } from '../../machines/loop.machine.js';
import { stepOrder, type Branch } from '../../src/agent/core/step-order.js';
import { main } from '../../src/cli/main.js';

async function cli(...argv: string[]) {
  const out: string[] = [];
  const err: string[] = [];
  const code = await main(argv, { out: (line) => out.push(line), err: (line) => err.push(line) });
  return { code, out: out.join('\n'), err: err.join('\n') };
}

/** Every row of the tables: state, place, guard, target, why. */
const expected = Object.entries(stepOrder).flatMap(([state, table]) =>
  (table as readonly Branch[]).map((branch, i) => ({ state, index: i + 1, branch })),
);

describe('loopchart chart', () => {
  it('the tables hold rows to print (the expectation is not empty)', () => {
    expect(Object.keys(stepOrder)).toEqual(['Start', 'Deciding', 'CallLLM', 'CallTools']);
    expect(expected.length).toBeGreaterThan(20);
  });

  it('prints every row of every table in order: state, #, guard, target, actions, why', async () => {
    const { code, out, err } = await cli('chart');
    expect(code, err).toBe(0);
    const lines = out.split('\n');
    const header = lines.findIndex((line) => /^state\s+#\s+guard\s+target\s+actions\s+why$/.test(line));
    expect(header).toBeGreaterThan(-1);
    const printed = lines
      .slice(header + 1)
      .filter((line) => line !== '')
      .map((line) => line.split(/ {2,}/));
    expect(printed.map(([state, index, guard, target, , why]) => ({ state, index, guard, target, why }))).toEqual(
      expected.map(({ state, index, branch }) => ({
        state,
        index: String(index),
        guard: branch.guard ?? '(default)',
        target: `${branch.target}${branch.reenter ? ' (re-enter)' : ''}`,
        why: branch.why,
      })),
    );
    // The actions column names each action of its row, in order (`trace(prune)` for one with params).
    const actionNames = (actions: Branch['actions']) =>
      (actions === undefined ? [] : Array.isArray(actions) ? actions : [actions]).map((action: unknown) => (typeof action === 'string' ? action : (action as { type: string }).type));
    expect(printed.map((cells) => (cells[4] === '-' ? [] : cells[4]!.split(', ').map((action) => action.replace(/\(.*\)$/, ''))))).toEqual(
      expected.map(({ branch }) => actionNames(branch.actions)),
    );
    // A blank line between two states' rows, none inside one.
    expect(lines.slice(header + 1).filter((line) => line === '')).toHaveLength(Object.keys(stepOrder).length - 1);
  });

  it('--json prints the tables as data: they parse back to the tables', async () => {
    const { code, out } = await cli('chart', '--json');
    expect(code).toBe(0);
    expect(JSON.parse(out)).toEqual(JSON.parse(JSON.stringify(stepOrder)));
  });

  it('--mermaid prints a flowchart with one edge per row, in order, between declared nodes', async () => {
    const { code, out } = await cli('chart', '--mermaid');
    expect(code).toBe(0);
    const lines = out.split('\n');
    expect(lines[0]).toBe('flowchart TD');
    const id = (target: string) => target.replace(/^#agent\./, '').replace(/[^A-Za-z0-9]/g, '_');
    const edges = lines.filter((line) => line.includes('-->'));
    expect(edges).toEqual(
      expected.map(({ state, index, branch }) => `  ${id(state)} -->|"${index}. ${branch.guard ?? '(default)'}${branch.reenter ? ' (re-enter)' : ''}"| ${id(branch.target)}`),
    );
    const declared = new Set(lines.map((line) => /^ {2}(\w+)\["[^"]+"\]$/.exec(line)?.[1]).filter(Boolean));
    for (const { state, branch } of expected) {
      expect(declared.has(id(state)), state).toBe(true);
      expect(declared.has(id(branch.target)), branch.target).toBe(true);
    }
  });

  it('--help prints its usage; --json with --mermaid, or a stray word, is bad usage (exit 2)', async () => {
    const help = await cli('chart', '--help');
    expect(help.code).toBe(0);
    expect(help.out).toContain('usage: loopchart chart [--brain] [--json | --mermaid]');
    for (const argv of [['chart', '--json', '--mermaid'], ['chart', 'brain'], ['chart', '--svg'], ['chart', '--brain', '--mermaid'], ['chart', '--svg', 'brain', '--json']]) {
      const bad = await cli(...argv);
      expect(bad.code, argv.join(' ')).toBe(2);
      expect(bad.out).toBe('');
      expect(bad.err).toMatch(/usage: loopchart chart|--svg/);
    }
    expect((await cli('chart', '--svg', 'loop')).err).toContain("--svg takes brain or driver, not 'loop'");
  });

  it("--brain prints the brain's decision order, every decision in order; --json gives it as data", async () => {
    const { code, out } = await cli('chart', '--brain');
    expect(code).toBe(0);
    const lines = out.split('\n').slice(3);
    expect(lines).toHaveLength(decisionOrder.length);
    decisionOrder.forEach((decision, i) => {
      const cells = lines[i]!.split(/\s{2,}/);
      expect(cells.slice(0, 2)).toEqual([String(i + 1), decision.type]);
      expect(lines[i]).toContain(decision.guard ?? '(default)');
    });
    const data = JSON.parse((await cli('chart', '--brain', '--json')).out) as { step: string; guard?: string }[];
    expect(data.map((d) => [d.step, d.guard])).toEqual(decisionOrder.map((d) => [d.type, d.guard]));
  });

  it('--svg draws a chart as the viewer lays it out: one standalone picture naming every state', async () => {
    for (const [which, states] of [['brain', ['Start', 'AwaitingModel', 'AwaitingTools', 'AwaitingCompaction', 'Terminal']], ['driver', ['Idle', 'Running', 'AwaitingModel', 'AwaitingTools', 'BudgetPaused', 'Terminal']]] as const) {
      const { code, out } = await cli('chart', '--svg', which);
      expect(code).toBe(0);
      expect(out.startsWith('<svg xmlns="http://www.w3.org/2000/svg"')).toBe(true);
      expect(out.trimEnd().endsWith('</svg>')).toBe(true);
      for (const state of states) expect(out, `${which}: ${state}`).toContain(`>${state}<`);
    }
  }, 30_000);

  it('the main help names the command, and a typo suggests it', async () => {
    expect((await cli('--help')).out).toContain('loopchart chart [--brain] [--json | --mermaid] | --svg brain|driver');
    expect((await cli('chrat')).err).toBe("loopchart: unknown command 'chrat'; did you mean 'chart'? (npx loopchart --help for more)");
  });
});
