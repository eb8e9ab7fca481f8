/**
 * Under `exactOptionalPropertyTypes` (on in the tsconfig `tsc --init` writes since TypeScript 5.9)
 * an optional property `apiKey?: string` refuses `apiKey: process.env.OPENAI_API_KEY`, the code a
 * user writes naturally, and an interface extending another whose optional property is narrower
 * fails to compile in our own declarations (TS2430). So every optional property in the modules
 * the public entries reach says `| undefined`: the same type where that option is off, the one a
 * consumer can pass where it is on. The consumer suite compiles the packed declarations under
 * `tsc --init`'s settings; this test names the property that breaks the rule, in milliseconds.
 */
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';
import { publicEntries, REPO } from './export-count.js';

const IMPORT = /(?:\bfrom\s*|\bimport\s*\(\s*|\bimport\s+)['"](\.{1,2}\/[^'"]+)['"]/g;

/** The repository files the public entries import, directly or not (relative imports only). */
function reachable(entries: readonly string[]): string[] {
  const seen = new Set<string>();
  const pending = [...entries];
  while (pending.length > 0) {
    const file = pending.pop()!;
    if (seen.has(file)) continue;
    seen.add(file);
    for (const [, specifier] of readFileSync(file, 'utf8').matchAll(IMPORT)) {
      const target = resolve(dirname(file), specifier!);
      const found = [target.replace(/\.js$/, '.ts'), `${target}.ts`, join(target, 'index.ts')].find((path) => path.endsWith('.ts') && existsSync(path));
      if (found) pending.push(found);
    }
  }
  return [...seen].sort();
}

const admitsUndefined = (type: ts.TypeNode): boolean =>
  type.kind === ts.SyntaxKind.UndefinedKeyword ||
  type.kind === ts.SyntaxKind.AnyKeyword ||
  type.kind === ts.SyntaxKind.UnknownKeyword ||
  (ts.isUnionTypeNode(type) && type.types.some(admitsUndefined));

/** `file:line name?: type` for each optional property whose type does not admit undefined. */
function narrowOptionals(file: string): string[] {
  const source = ts.createSourceFile(file, readFileSync(file, 'utf8'), ts.ScriptTarget.Latest, true);
  const found: string[] = [];
  const visit = (node: ts.Node) => {
    if ((ts.isPropertySignature(node) || ts.isPropertyDeclaration(node)) && node.questionToken && node.type && !admitsUndefined(node.type)) {
      const line = source.getLineAndCharacterOfPosition(node.getStart(source)).line + 1;
      found.push(`${relative(REPO, file)}:${line} ${node.name.getText(source)}?: ${node.type.getText(source)}`);
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return found;
}

describe('optional properties under exactOptionalPropertyTypes', () => {
  const files = reachable(Object.values(publicEntries()));

  it('the scan reads the modules behind every entry, and finds a narrow optional property', () => {
    expect(files.length).toBeGreaterThan(100);
    for (const file of ['src/models/openai-compatible.ts', 'src/agent/core/config.ts', 'src/stores/postgres.ts']) expect(files).toContain(join(REPO, file));
    const probe = ts.createSourceFile('probe.ts', 'interface A { a?: string; b?: string | undefined; c?: (() => void) | undefined }', ts.ScriptTarget.Latest);
    const properties = (probe.statements[0] as ts.InterfaceDeclaration).members as ts.NodeArray<ts.PropertySignature>;
    expect(properties.map((property) => admitsUndefined(property.type!))).toEqual([false, true, true]);
  });

  it('every optional property in those modules admits undefined (`name?: T | undefined`)', () => {
    expect(files.flatMap(narrowOptionals)).toEqual([]);
  });
});
