/**
 * The folders import one way: each layer only uses the layers below it, so a reader can learn the
 * brain without the driver, the driver without the stores, and the library never depends on its
 * examples or tests. A new import that points up (or sideways into a peer) fails here.
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));

/** The files every layer may use: the data shapes, typed errors, the model contract and how an `authorize` hook is asked, how a request body is read, the longest delay a timer can take, how a failure a client must not read is reported on the server. */
const FOUNDATION = new Set(['src/authorization.ts', 'src/errors.ts', 'src/known-keys.ts', 'src/missing-package.ts', 'src/schemas.ts', 'src/model.ts', 'src/tokens.ts', 'src/json-value.ts', 'src/object-slot.ts', 'src/read-answer.ts', 'src/read-body.ts', 'src/timer-bound.ts', 'src/failure-report.ts']);

/** Layers from the bottom up; a file may import its own layer or any layer with a lower rank. */
const RANKS = new Map<string, number>([
  ['foundation', 0],
  ['brain', 1],
  ['models', 2],
  ['tools', 2],
  ['stores', 2],
  ['telemetry', 2],
  ['compaction', 2],
  ['mcp', 3],
  ['agent', 4],
  ['sessions', 5],
  // Above the sessions it fires, below the viewer, which lists the schedules.
  ['schedules', 5.5],
  // Above the sessions it runs, below the viewer, whose compare page shows its decision diff.
  ['evals', 5.75],
  ['viewer', 6],
  ['mcp-server', 6],
  ['memory', 6],
  ['http', 7],
  ['restate', 7],
  // Above Restate, whose schedules `loopchart schedules --restate` and `loopchart view --restate` list.
  ['cli', 7.5],
  ['entries', 8],
]);

/** The layer a repository file belongs to: the two charts sit with the layer whose chart they are. */
function layerOf(file: string): string {
  if (FOUNDATION.has(file)) return 'foundation';
  if (file === 'machines/loop.machine.ts') return 'brain';
  if (file === 'machines/agent.machine.ts') return 'agent';
  const [top, folder, ...rest] = file.split('/');
  if (top !== 'src') return top!;
  return rest.length > 0 ? folder! : 'entries';
}

function sourceFiles(dir: string): string[] {
  return readdirSync(join(ROOT, dir), { withFileTypes: true }).flatMap((entry) => {
    const path = `${dir}/${entry.name}`;
    if (entry.isDirectory()) return sourceFiles(path);
    return /\.tsx?$/.test(entry.name) ? [path] : [];
  });
}

const IMPORT = /(?:\bfrom\s*|\bimport\s*\(\s*|\bimport\s+)['"](\.{1,2}\/[^'"]+)['"]/g;

/** Every relative import of a file, as the repository path it resolves to. */
function importsOf(file: string): string[] {
  const text = readFileSync(join(ROOT, file), 'utf8');
  return [...text.matchAll(IMPORT)].map(([, specifier]) => {
    const target = resolve(ROOT, dirname(file), specifier!);
    const candidates = [target.replace(/\.js$/, '.ts'), target.replace(/\.js$/, '.tsx'), target, `${target}.ts`, join(target, 'index.ts')];
    return relative(ROOT, candidates.find((candidate) => existsSync(candidate)) ?? target);
  });
}

const library = [...sourceFiles('src'), ...sourceFiles('machines')];

describe('layers', () => {
  it('every file of the library sits in a known layer', () => {
    const unknown = library.filter((file) => !RANKS.has(layerOf(file)));
    expect(unknown).toEqual([]);
  });

  it('imports only point down: brain ← agent ← sessions ← viewer ← cli / http / restate ← entry points', () => {
    const upward = library.flatMap((file) =>
      importsOf(file)
        .filter((target) => {
          const from = RANKS.get(layerOf(file))!;
          const to = RANKS.get(layerOf(target));
          return to === undefined || (layerOf(target) !== layerOf(file) && to >= from);
        })
        .map((target) => `${file} → ${target}`),
    );
    expect(upward).toEqual([]);
  });

  it('no import cycle in src/ and machines/, type imports included: each file can be read before the files that use it', () => {
    const graph = new Map(library.map((file) => [file, importsOf(file).filter((target) => target !== file)]));
    // Tarjan's strongly connected components: a component of more than one file is a cycle.
    const index = new Map<string, number>();
    const low = new Map<string, number>();
    const stack: string[] = [];
    const onStack = new Set<string>();
    const cycles: string[] = [];
    const visit = (file: string) => {
      index.set(file, index.size);
      low.set(file, index.get(file)!);
      stack.push(file);
      onStack.add(file);
      for (const target of graph.get(file) ?? []) {
        if (!graph.has(target)) continue;
        if (!index.has(target)) {
          visit(target);
          low.set(file, Math.min(low.get(file)!, low.get(target)!));
        } else if (onStack.has(target)) low.set(file, Math.min(low.get(file)!, index.get(target)!));
      }
      if (low.get(file) !== index.get(file)) return;
      const component: string[] = [];
      for (let member = stack.pop()!; ; member = stack.pop()!) {
        onStack.delete(member);
        component.push(member);
        if (member === file) break;
      }
      if (component.length > 1) cycles.push(component.sort().join(' ↔ '));
    };
    for (const file of library) if (!index.has(file)) visit(file);
    expect(cycles).toEqual([]);
  });

  it('the loop every agent runs names a feature only at its composition points (compile, config, context)', () => {
    // Issue 39, point 2: a feature reaches the core through a hook on the compiled agent
    // (structured output's answers, core/answer.ts; the prices and usage by model,
    // core/pricing.ts; who speaks, core/speakers.ts; the operations' hook points,
    // core/hook-points.ts), and what every batch reads of people's decisions on its calls is the
    // core's record (core/call-decisions.ts), so no feature is on a minimal agent's path.
    const composition = new Set(['src/agent/core/compile.ts', 'src/agent/core/config.ts', 'src/agent/core/context.ts']);
    const featureOf = (file: string) => /^src\/agent\/([^/]+)\//.exec(file)?.[1];
    const reached = library
      .filter((file) => featureOf(file) === 'core' && !composition.has(file))
      .flatMap((file) => importsOf(file).filter((target) => ![undefined, 'core', 'protocol'].includes(featureOf(target))).map((target) => `${file} → ${target}`));
    expect([...new Set(reached)].sort()).toEqual([]);
  });

  it('the library never imports its examples or tests', () => {
    const outside = library.flatMap((file) =>
      importsOf(file)
        .filter((target) => target.startsWith('examples/') || target.startsWith('test/') || target.startsWith('bench/'))
        .map((target) => `${file} → ${target}`),
    );
    expect(outside).toEqual([]);
  });
});
