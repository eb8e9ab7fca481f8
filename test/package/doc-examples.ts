/**
 * The `@example` blocks of the package's TSDoc (src/**, machines/**), and a compiler for them.
 *
 * Each ```ts block becomes a module of its own and is type-checked with the repo's tsconfig, so
 * `loopchart` and its subpaths resolve to the sources (tsconfig `paths`, as the README snippets
 * do). A block that imports nothing is a fragment: the public names it uses are imported for it
 * (from the root, else the first subpath that has them), then names its own file exports (an
 * internal helper's example), and zod's `z`. A block with imports stands on its own: it must import every
 * package name it uses, from the entry that really has it. Either kind may use the variables
 * `EXAMPLE_GLOBALS` declares (a store, a machine, an actor, …): the things an example is about
 * but does not build.
 */
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import ts from 'typescript';
import { countExports, publicEntries, REPO } from './export-count.js';
const ROOTS = ['src', 'machines'];

export interface DocExample {
  /** Where the block starts: `src/file.ts:line`. */
  where: string;
  /** The source file that documents it (absolute). */
  file: string;
  code: string;
}

export interface ExampleProblem {
  where: string;
  problem: string;
}

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) =>
    entry.isDirectory() ? sourceFiles(join(dir, entry.name)) : entry.name.endsWith('.ts') ? [join(dir, entry.name)] : [],
  );
}

/**
 * Every `@example` of every doc comment, as its ```ts blocks; an `@example` with no such block
 * is a problem of its own (it could not be checked).
 */
export function docExamples(): { examples: DocExample[]; unfenced: ExampleProblem[] } {
  const examples: DocExample[] = [];
  const unfenced: ExampleProblem[] = [];
  for (const file of ROOTS.flatMap((root) => sourceFiles(join(REPO, root)))) {
    const text = readFileSync(file, 'utf8');
    const lineAt = (offset: number) => text.slice(0, offset).split('\n').length;
    for (const comment of text.matchAll(/\/\*\*[\s\S]*?\*\//g)) {
      const lines = comment[0].split('\n').map((line) => line.replace(/^\s*\*?\s?/, ''));
      const start = lineAt(comment.index);
      lines.forEach((line, i) => {
        if (!/^@example\b/.test(line)) return;
        // The tag's text runs to the next tag or the end of the comment.
        const end = lines.findIndex((next, j) => j > i && /^@\w+/.test(next));
        const body = lines.slice(i + 1, end === -1 ? lines.length - 1 : end);
        const where = `${relative(REPO, file)}:${start + i}`;
        let found = 0;
        for (let j = 0; j < body.length; j++) {
          if (body[j]!.trim() !== '```ts') continue;
          const close = body.findIndex((next, k) => k > j && next.trim() === '```');
          if (close === -1) break;
          examples.push({ where: `${relative(REPO, file)}:${start + i + 1 + j}`, file, code: body.slice(j + 1, close).join('\n') });
          found++;
          j = close;
        }
        if (found === 0) unfenced.push({ where, problem: 'an @example without a ```ts block (nothing to type-check)' });
      });
    }
  }
  return { examples, unfenced };
}

/**
 * What an example may use without building it. Each is what a reader of the surrounding doc
 * already has in hand; the types are the package's public ones.
 */
export const EXAMPLE_GLOBALS = `
import type * as lc from 'loopchart';
declare global {
  const store: lc.SessionStore;
  const machine: lc.AgentMachine;
  const actor: lc.AgentActor;
  const session: lc.DurableSession;
  const stepper: lc.AgentStepper;
  const model: lc.Model;
  const request: lc.ModelRequest;
  const messages: lc.Message[];
  const tools: lc.Tool[];
  const tool: lc.Tool;
  const call: lc.ToolCall;
  const ctx: lc.ToolContext;
  const config: lc.AgentConfig;
  const sessionId: string;
  /** A folder (a tool's root, a checkout). */
  const root: string;
  /** A model server's base URL. */
  const baseURL: string;
}
export {};
`;

/** The top-level names a block declares itself (they shadow anything we would add). */
function declaredNames(source: ts.SourceFile): Set<string> {
  const names = new Set<string>();
  const bind = (name: ts.BindingName) => {
    if (ts.isIdentifier(name)) names.add(name.text);
    else for (const element of name.elements) if (!ts.isOmittedExpression(element)) bind(element.name);
  };
  for (const statement of source.statements) {
    if (ts.isVariableStatement(statement)) statement.declarationList.declarations.forEach((d) => bind(d.name));
    else if ((ts.isFunctionDeclaration(statement) || ts.isClassDeclaration(statement) || ts.isInterfaceDeclaration(statement) || ts.isTypeAliasDeclaration(statement) || ts.isEnumDeclaration(statement)) && statement.name) {
      names.add(statement.name.text);
    }
  }
  return names;
}

function identifiers(node: ts.Node, into = new Set<string>()): Set<string> {
  if (ts.isIdentifier(node)) into.add(node.text);
  node.forEachChild((child) => void identifiers(child, into));
  return into;
}

/** The module text of one block: the block, preceded by the imports a fragment needs. */
function moduleText(example: DocExample, publicNames: ReadonlyMap<string, string>, own: ReadonlySet<string>, outDir: string): string {
  const source = ts.createSourceFile('block.ts', example.code, ts.ScriptTarget.ES2022, true);
  if (source.statements.some(ts.isImportDeclaration)) return `${example.code}\nexport {};\n`;
  const declared = declaredNames(source);
  const bySpecifier = new Map<string, string[]>();
  for (const name of identifiers(source)) {
    if (declared.has(name)) continue;
    const specifier =
      publicNames.get(name) ?? (own.has(name) ? relative(outDir, example.file).replace(/\.ts$/, '.js') : name === 'z' ? 'zod' : undefined);
    if (specifier) bySpecifier.set(specifier, [...(bySpecifier.get(specifier) ?? []), name]);
  }
  const imports = [...bySpecifier].map(([specifier, names]) => `import { ${names.join(', ')} } from '${specifier}';`);
  return `${imports.join('\n')}\n${example.code}\nexport {};\n`;
}

/** Every public name, with the entry it comes from: the root first, then the subpaths in package.json order. */
export function publicNameMap(): Map<string, string> {
  const entries = publicEntries();
  const counts = countExports(Object.values(entries));
  const names = new Map<string, string>();
  Object.keys(entries).forEach((specifier, i) => {
    for (const name of counts[i]!.names) if (!names.has(name)) names.set(name, specifier);
  });
  return names;
}

/** Type-checks the blocks; returns each compiler error with the block (file:line) it came from. */
export function compileExamples(examples: readonly DocExample[]): ExampleProblem[] {
  const cacheDir = join(REPO, 'node_modules', '.cache');
  mkdirSync(cacheDir, { recursive: true });
  // Inside the repo's node_modules, so the blocks resolve zod, xstate and @types/node as the sources do.
  const dir = mkdtempSync(join(cacheDir, 'loopchart-doc-examples-'));
  try {
    const publicNames = publicNameMap();
    const documented = [...new Set(examples.map((example) => example.file))].filter((file) => existsSync(file));
    const ownNames = new Map(countExports(documented).map((count) => [count.entry, new Set(count.names)]));
    const files = new Map<string, string>();
    examples.forEach((example, i) => {
      const path = join(dir, `example-${i}.mts`);
      writeFileSync(path, moduleText(example, publicNames, ownNames.get(example.file) ?? new Set(), dir));
      files.set(path, example.where);
    });
    const globals = join(dir, 'globals.d.mts');
    writeFileSync(globals, EXAMPLE_GLOBALS);
    const tsconfig = join(dir, 'tsconfig.json');
    writeFileSync(
      tsconfig,
      JSON.stringify({
        extends: join(REPO, 'tsconfig.json'),
        // Fragments get plain imports for types too; nothing here is emitted. An example names
        // what it shows (a value declared to be read by the reader), so unused locals are fine.
        compilerOptions: { noEmit: true, verbatimModuleSyntax: false, isolatedModules: false, noUnusedLocals: false },
        files: [globals, ...files.keys()],
      }),
    );
    const parsed = ts.getParsedCommandLineOfConfigFile(tsconfig, {}, { ...ts.sys, onUnRecoverableConfigFileDiagnostic: () => {} })!;
    const program = ts.createProgram({ rootNames: parsed.fileNames, options: parsed.options });
    const problems: ExampleProblem[] = [];
    // The blocks' own diagnostics only: the sources they import are checked by `npm run typecheck`.
    const checked = [...program.getOptionsDiagnostics(), ...program.getGlobalDiagnostics()];
    for (const file of [globals, ...files.keys()]) {
      const source = program.getSourceFile(file)!;
      checked.push(...program.getSyntacticDiagnostics(source), ...program.getSemanticDiagnostics(source));
    }
    for (const diagnostic of checked) {
      const message = ts.flattenDiagnosticMessageText(diagnostic.messageText, '\n');
      const file = diagnostic.file?.fileName;
      const where = file ? (files.get(file) ?? relative(REPO, file)) : '(program)';
      const line = diagnostic.file && diagnostic.start !== undefined ? diagnostic.file.getLineAndCharacterOfPosition(diagnostic.start).line + 1 : 0;
      problems.push({ where, problem: `line ${line} of the checked module: ${message}` });
    }
    return problems;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
