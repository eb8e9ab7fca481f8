/**
 * Counts what a public entry exports, as the TypeScript checker sees it: every name, the names
 * that exist at run time (values: functions, classes, constants), and the names more than one
 * export statement of the entry file exports (a name exported twice).
 *
 *   npx tsx test/package/export-count.ts            # every entry of package.json "exports"
 *   npx tsx test/package/export-count.ts src/index.ts
 */
import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';

export const REPO = fileURLToPath(new URL('../../', import.meta.url));

export interface ExportCount {
  entry: string;
  names: string[];
  runtime: string[];
  /** Names that two or more export statements of the entry file export. */
  twice: string[];
}

/** The source file of each public subpath, read from package.json "exports" and tsconfig `paths`. */
export function publicEntries(): Record<string, string> {
  const manifest = JSON.parse(readFileSync(join(REPO, 'package.json'), 'utf8')) as { exports: Record<string, unknown> };
  const config = ts.readConfigFile(join(REPO, 'tsconfig.json'), ts.sys.readFile).config as { compilerOptions: { paths: Record<string, string[]> } };
  const paths = config.compilerOptions.paths;
  const entries: Record<string, string> = {};
  for (const subpath of Object.keys(manifest.exports)) {
    if (subpath.endsWith('.json')) continue;
    const specifier = subpath === '.' ? 'loopchart' : `loopchart/${subpath.slice(2)}`;
    const target = paths[specifier]?.[0] ?? paths['loopchart/*']![0]!.replace('*', subpath.slice(2));
    entries[specifier] = resolve(REPO, target);
  }
  return entries;
}

export function countExports(files: readonly string[]): ExportCount[] {
  const program = ts.createProgram([...files], {
    target: ts.ScriptTarget.ES2022,
    module: ts.ModuleKind.NodeNext,
    moduleResolution: ts.ModuleResolutionKind.NodeNext,
    strict: true,
    skipLibCheck: true,
    noEmit: true,
  });
  const checker = program.getTypeChecker();
  const namesOf = (node: ts.Node): string[] => {
    const symbol = checker.getSymbolAtLocation(node);
    return symbol ? checker.getExportsOfModule(symbol).map((s) => s.name) : [];
  };
  return files.map((file) => {
    const source = program.getSourceFile(file);
    if (!source) throw new Error(`not in the program: ${file}`);
    const moduleSymbol = checker.getSymbolAtLocation(source)!;
    const exported = checker.getExportsOfModule(moduleSymbol);
    const isValue = (symbol: ts.Symbol) => {
      const target = symbol.flags & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(symbol) : symbol;
      return (target.flags & ts.SymbolFlags.Value) !== 0;
    };
    const statements = new Map<string, number>();
    for (const statement of source.statements) {
      if (!ts.isExportDeclaration(statement)) continue;
      const names =
        statement.exportClause && ts.isNamedExports(statement.exportClause)
          ? statement.exportClause.elements.map((element) => element.name.text)
          : statement.moduleSpecifier
            ? namesOf(statement.moduleSpecifier)
            : [];
      for (const name of new Set(names)) statements.set(name, (statements.get(name) ?? 0) + 1);
    }
    return {
      entry: file,
      names: exported.map((s) => s.name).sort(),
      runtime: exported.filter(isValue).map((s) => s.name).sort(),
      twice: [...statements].filter(([, count]) => count > 1).map(([name]) => name).sort(),
    };
  });
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const wanted = process.argv.slice(2);
  const entries = wanted.length > 0 ? Object.fromEntries(wanted.map((file) => [file, resolve(file)])) : publicEntries();
  const counts = countExports(Object.values(entries));
  const list = (names: string[]) => `${names.length}${names.length ? ` (${names.join(', ')})` : ''}`;
  const rows = Object.keys(entries).map((name, i) => {
    const count = counts[i]!;
    const shared = count.names.filter((n) => counts.some((other, j) => j !== i && other.names.includes(n)));
    return `| ${name} | ${count.names.length} | ${count.runtime.length} | ${list(count.twice)} | ${list(shared)} |`;
  });
  console.log(['| entry | names | run-time names | exported twice | also exported by another entry |', '|---|---|---|---|---|', ...rows].join('\n'));
}
