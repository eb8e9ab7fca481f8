/**
 * `npm ci` on Node 20 prints no EBADENGINE warning (it printed 6: AI SDK 7 and its provider
 * packages declare Node >= 22). Node 20 stays supported (package.json engines, CI's first leg), so
 * those development packages are out of package.json: .ci/node22/package.json lists them, the
 * Node 24 leg of .ci/run installs and links them. Checked on the lockfile, which is what npm ci
 * installs: every package in it accepts Node 20.19.0, the oldest Node 20 the development tools
 * themselves run on (vite 8 and rolldown declare ^20.19).
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { REPO } from './export-count.js';

const OLDEST_NODE_20 = '20.19.0';
/**
 * Whether `version` is in an npm `engines.node` range, for the forms the lockfile holds: `*`,
 * `>=X`, `>X`, `<X`, `<=X`, `^X`, a bare `X` / `X.x` / `X.Y`, comparators joined by spaces (and)
 * and by `||` (or). Written out because semver is only in the tree through an optional dependency.
 */
function satisfies(version: string, range: string): boolean {
  const parts = (text: string) => text.split('.').filter((part) => /^\d+$/.test(part)).map(Number);
  const [major, minor, patch] = parts(version) as [number, number, number];
  const compare = (bound: number[]) => Math.sign(major - (bound[0] ?? 0)) || Math.sign(minor - (bound[1] ?? 0)) || Math.sign(patch - (bound[2] ?? 0));
  const holds = (comparator: string): boolean => {
    const [, operator = '', text = ''] = /^(>=|<=|>|<|\^|=)?(.*)$/.exec(comparator)!;
    if (text === '*' || text === 'x' || text === '') return true;
    const bound = parts(text);
    switch (operator) {
      case '>=': return compare(bound) >= 0;
      case '>': return compare(bound) > 0;
      case '<': return compare(bound) < 0;
      case '<=': return compare(bound) <= 0;
      case '^': return compare(bound) >= 0 && major === bound[0];
      default: return bound.every((n, i) => n === [major, minor, patch][i]);
    }
  };
  return range.split('||').some((set) => set.replace(/(>=|<=|>|<|\^|=)\s+/g, '$1').trim().split(/\s+/).every(holds));
}

const read = (path: string) => JSON.parse(readFileSync(join(REPO, path), 'utf8')) as Record<string, unknown>;

describe('engines', () => {
  it('the range check reads the forms the lockfile holds', () => {
    const cases: [string, string, boolean][] = [
      ['>=22', '20.19.0', false],
      ['>= 20', '20.19.0', true],
      ['^20.19.0 || >=22.12.0', '20.19.0', true],
      ['^20.19.0 || >=22.12.0', '20.18.9', false],
      ['^18.19.0 || >=20.6.0', '20.19.0', true],
      ['20.x || 22.x', '20.19.0', true],
      ['18 || 20 || >=22', '21.0.0', false],
      ['>=16 || 14 >=14.17', '14.16.0', false],
      ['>= 10.x', '20.19.0', true],
      ['*', '20.19.0', true],
    ];
    for (const [range, version, expected] of cases) expect(satisfies(version, range), `${version} in ${range}`).toBe(expected);
  });

  it(`every package npm ci installs accepts Node ${OLDEST_NODE_20}: no EBADENGINE warning`, () => {
    const lock = read('package-lock.json') as { packages: Record<string, { engines?: { node?: string } | string[] }> };
    const refusing = Object.entries(lock.packages).flatMap(([path, entry]) => {
      const range = Array.isArray(entry.engines) ? undefined : entry.engines?.node;
      return path !== '' && range !== undefined && !satisfies(OLDEST_NODE_20, range) ? [`${path} (node ${range})`] : [];
    });
    expect(Object.keys(lock.packages).length).toBeGreaterThan(100);
    expect(refusing).toEqual([]);
  });

  it('the package itself still says Node 20, and the Node >= 22 development packages live in .ci/node22, linked by the Node 24 leg', () => {
    const manifest = read('package.json') as { engines: { node: string }; devDependencies: Record<string, string> };
    expect(satisfies('20.0.0', manifest.engines.node)).toBe(true);
    const node22 = Object.keys((read('.ci/node22/package.json') as { dependencies: Record<string, string> }).dependencies);
    expect(node22).toEqual(expect.arrayContaining(['ai-v7', 'ai-sdk-openai-compatible-v3']));
    for (const name of node22) expect(manifest.devDependencies[name], name).toBeUndefined();
    const ci = readFileSync(join(REPO, '.ci/run'), 'utf8');
    expect(ci).toContain(".ci/node22/package.json");
    expect(readFileSync(join(REPO, '.ci/node24.sh'), 'utf8')).toContain('cp .ci/node22/package.json');
  });
});
