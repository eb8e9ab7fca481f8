/**
 * A small, deliberate public surface (issue 19): the root entry exports what a first agent and a
 * durable session need, at most 80 names at run time; schemas, limits and defaults live in
 * `loopchart/schemas`; no entry exports a name twice and no run-time name has two homes.
 * `npx tsx test/package/export-count.ts` prints the counts.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import * as root from '../../src/index.js';
import * as schemas from '../../src/schemas-entry.js';
import { countExports, publicEntries, REPO } from './export-count.js';

const entries = publicEntries();
const counted = countExports(Object.values(entries));
const counts = new Map(Object.keys(entries).map((name, i) => [name, counted[i]!]));

describe('the public surface', () => {
  it('the root exports at most 80 names at run time, and the checker counts what the module really exports', () => {
    const rootCount = counts.get('loopchart')!;
    expect(rootCount.runtime.length).toBeLessThanOrEqual(80);
    expect(Object.keys(root).sort()).toEqual(rootCount.runtime);
    expect(Object.keys(schemas).sort()).toEqual(counts.get('loopchart/schemas')!.runtime);
  });

  it('no entry exports a name through two statements, and no run-time name is exported by two entries', () => {
    for (const [name, count] of counts) expect(count.twice, name).toEqual([]);
    const homes = new Map<string, string[]>();
    for (const [entry, count] of counts) for (const name of count.runtime) homes.set(name, [...(homes.get(name) ?? []), entry]);
    expect([...homes].filter(([, where]) => where.length > 1)).toEqual([]);
  });

  it('schemas, limits and defaults are in loopchart/schemas, not the root', () => {
    const values = Object.entries(root);
    expect(values.filter(([, value]) => value instanceof z.ZodType).map(([name]) => name)).toEqual([]);
    // Constants: the error codes (for an exhaustive switch) and the approvals operation's name are the root's only ones.
    expect(values.filter(([name]) => /^[A-Z][A-Z0-9_]+$/.test(name)).map(([name]) => name).sort()).toEqual(['APPROVALS_OPERATION', 'ERROR_CODES']);
    expect(schemas.MessageSchema).toBeInstanceOf(z.ZodType);
    expect(schemas.MAX_SESSION_ID_LENGTH).toBeGreaterThan(0);
    expect(typeof schemas.parseModelReply).toBe('function');
  });

  it('every subpath in package.json is built (tsup entry) and shipped under the names its exports give', () => {
    const tsup = readFileSync(join(REPO, 'tsup.config.ts'), 'utf8');
    const manifest = JSON.parse(readFileSync(join(REPO, 'package.json'), 'utf8')) as { exports: Record<string, unknown> };
    for (const [specifier, file] of Object.entries(entries)) {
      const name = specifier === 'loopchart' ? 'index' : specifier.slice('loopchart/'.length);
      const source = `src/${file.slice(join(REPO, 'src/').length)}`;
      expect(tsup, specifier).toMatch(new RegExp(`['"]?${name}['"]?: '${source.replace('.', '\\.')}'`));
      expect(JSON.stringify(manifest.exports[specifier === 'loopchart' ? '.' : `./${name}`]), specifier).toContain(`./dist/${name}.js`);
    }
  });
});
