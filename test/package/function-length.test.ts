/**
 * No function in src/ or machines/ is longer than 120 lines (issue 39, item 5: `rowsOf` in the
 * viewer was 301, `replayTrace` 226; the check covered src/viewer/ alone until MCP's
 * `boundedEvents` and Restate's `runTurn` had grown past it):
 * every function declaration, method, function expression and arrow function, measured by the
 * TypeScript parser from its first line to its last.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';

const MAX_LINES = 120;
const ROOT = fileURLToPath(new URL('../../', import.meta.url));

/** Each function of a source text with its name and length in lines. */
export function functionLengths(file: string, text: string): { name: string; lines: number }[] {
  const source = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true);
  const found: { name: string; lines: number }[] = [];
  const visit = (node: ts.Node) => {
    if (ts.isFunctionLike(node) && 'body' in node && node.body) {
      const first = source.getLineAndCharacterOfPosition(node.getStart(source)).line;
      const last = source.getLineAndCharacterOfPosition(node.getEnd()).line;
      const named = (node as { name?: ts.Node }).name ?? (ts.isVariableDeclaration(node.parent) || ts.isPropertyAssignment(node.parent) ? node.parent.name : undefined);
      found.push({ name: `${file}:${first + 1} ${named ? named.getText(source) : '(anonymous)'}`, lines: last - first + 1 });
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return found;
}

const sources = ['src', 'machines'].flatMap((folder) =>
  (readdirSync(join(ROOT, folder), { recursive: true }) as string[]).filter((file) => file.endsWith('.ts')).map((file) => join(folder, file)),
);

describe('function length in src/ and machines/', () => {
  it(`no function is longer than ${MAX_LINES} lines`, () => {
    const all = sources.flatMap((file) => functionLengths(file, readFileSync(join(ROOT, file), 'utf8')));
    expect(all.length).toBeGreaterThan(1_000);
    expect(all.filter((f) => f.lines > MAX_LINES)).toEqual([]);
  });

  it('the measure sees a long function (a canary: the check can fail)', () => {
    const long = `export function long() {\n${'  call();\n'.repeat(130)}}\nconst short = () => 1;\n`;
    expect(functionLengths('x.ts', long)).toEqual([{ name: 'x.ts:1 long', lines: 132 }, { name: 'x.ts:133 short', lines: 1 }]);
  });
});
