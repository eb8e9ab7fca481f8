/**
 * The API reference, read from the sources with the TypeScript checker: for each public entry
 * (package.json "exports", resolved through tsconfig `paths` as the tests do), every export with
 * its kind, its declaration as written (bodies left out) and its TSDoc as Markdown (`@example`
 * blocks, which the suite already compiles, shown as they are).
 */
import { existsSync, readFileSync } from 'node:fs';
import { join, relative, resolve } from 'node:path';
import ts from 'typescript';

export interface ApiExport {
  name: string;
  kind: 'function' | 'class' | 'interface' | 'type' | 'const' | 'enum' | 'namespace';
  /** The declaration(s) as TypeScript, without bodies. */
  signature: string;
  /** The TSDoc as Markdown (empty when there is none). */
  doc: string;
  /** Where it is declared, relative to the repository (`src/agent/run-agent.ts`). */
  source: string;
}

export interface ApiEntry {
  /** The import specifier (`loopchart`, `loopchart/sqlite`). */
  specifier: string;
  exports: ApiExport[];
}

const MAX_SIGNATURE_LINES = 60;

/** The source file of each public subpath. */
export function publicEntries(repo: string): Array<{ specifier: string; file: string }> {
  const manifest = JSON.parse(readFileSync(join(repo, 'package.json'), 'utf8')) as { exports: Record<string, unknown> };
  const config = ts.readConfigFile(join(repo, 'tsconfig.json'), ts.sys.readFile).config as { compilerOptions: { paths: Record<string, string[]> } };
  const paths = config.compilerOptions.paths;
  return Object.keys(manifest.exports)
    .filter((subpath) => !subpath.endsWith('.json'))
    .map((subpath) => {
      const specifier = subpath === '.' ? 'loopchart' : `loopchart/${subpath.slice(2)}`;
      const target = paths[specifier]?.[0] ?? paths['loopchart/*']![0]!.replace('*', subpath.slice(2));
      return { specifier, file: resolve(repo, target) };
    });
}

/** A doc comment's text as Markdown: tags become short headed paragraphs. */
function docMarkdown(node: ts.Node): string {
  const source = node.getSourceFile().text;
  const comments = ts.getLeadingCommentRanges(source, node.getFullStart()) ?? [];
  const doc = comments.filter((c) => source.startsWith('/**', c.pos)).at(-1);
  if (!doc) return '';
  const lines = source
    .slice(doc.pos + 3, doc.end - 2)
    .split('\n')
    .map((line) => line.replace(/^\s*\* ?/, ''));
  const out: string[] = [];
  const params: string[] = [];
  for (const line of lines) {
    const tag = /^@(\w+)\s*(.*)$/.exec(line);
    if (!tag) {
      (params.length && out.at(-1) === '@params' ? params : out).push(line);
      continue;
    }
    const [, name, rest] = tag as unknown as [string, string, string];
    if (name === 'param') {
      const [, param = '', text = ''] = /^(\S+)\s*-?\s*(.*)$/.exec(rest) ?? [];
      if (out.at(-1) !== '@params') out.push('@params');
      params.push(`- \`${param}\`: ${text}`);
    } else if (name === 'example') out.push('', '**Example**', '', rest);
    else if (name === 'returns') out.push('', `**Returns** ${rest}`);
    else if (name === 'throws') out.push('', `**Throws** ${rest}`);
    else if (name === 'deprecated') out.push('', `**Deprecated** ${rest}`);
    else out.push('', `**@${name}** ${rest}`);
  }
  return out
    .flatMap((line) => (line === '@params' ? ['', '**Parameters**', '', ...params] : [line]))
    .join('\n')
    .trim();
}

/** A declaration's text without the bodies of functions and methods. */
function withoutBodies(node: ts.Node): string {
  const source = node.getSourceFile().text;
  const cuts: Array<[number, number]> = [];
  const visit = (child: ts.Node): void => {
    // What a user cannot call is no part of the reference: #private and private/protected members.
    if (ts.isClassElement(child) && (child.name && ts.isPrivateIdentifier(child.name) || ts.getCombinedModifierFlags(child as ts.Declaration) & (ts.ModifierFlags.Private | ts.ModifierFlags.Protected))) {
      cuts.push([child.getFullStart(), child.end]);
      return;
    }
    if ((ts.isFunctionLike(child) || ts.isClassStaticBlockDeclaration(child)) && 'body' in child && child.body) {
      const body = child.body as ts.Node;
      cuts.push([body.getStart(), body.end]);
      return;
    }
    if (ts.isPropertyDeclaration(child) && child.initializer) cuts.push([child.initializer.getStart() - 3, child.initializer.end]);
    ts.forEachChild(child, visit);
  };
  visit(node);
  let text = '';
  let at = node.getStart();
  for (const [from, to] of cuts.sort((a, b) => a[0] - b[0])) {
    if (from < at) continue;
    text += source.slice(at, from).trimEnd();
    at = to;
  }
  text += source.slice(at, node.end);
  // Doc comments inside (members) stay out of the signature: the page shows the declaration's own.
  text = text.replace(/\/\*\*[\s\S]*?\*\/\s*/g, '');
  const lines = text.split('\n');
  return lines.length > MAX_SIGNATURE_LINES ? [...lines.slice(0, MAX_SIGNATURE_LINES), '  // …'].join('\n') : text;
}

function describeDeclaration(name: string, declaration: ts.Declaration): Pick<ApiExport, 'kind' | 'signature'> & { docNode: ts.Node } {
  if (ts.isVariableDeclaration(declaration)) {
    const statement = declaration.parent.parent;
    // The annotation when there is one, else the initializer as written (bodies left out): asking
    // the checker for inferred types (zod schemas) costs seconds per export and reads worse.
    const signature = declaration.type ? `const ${name}: ${declaration.type.getText()}` : `const ${withoutBodies(declaration)}`;
    return { kind: 'const', signature, docNode: statement };
  }
  const kind = ts.isFunctionDeclaration(declaration)
    ? 'function'
    : ts.isClassDeclaration(declaration)
      ? 'class'
      : ts.isInterfaceDeclaration(declaration)
        ? 'interface'
        : ts.isTypeAliasDeclaration(declaration)
          ? 'type'
          : ts.isEnumDeclaration(declaration)
            ? 'enum'
            : 'namespace';
  return { kind, signature: withoutBodies(declaration).replace(/^export (declare )?(default )?/, ''), docNode: declaration };
}

/** Every public entry with its exports, in package.json order, names sorted. */
export function readApi(repo: string): ApiEntry[] {
  const entries = publicEntries(repo).filter(({ specifier, file }) => {
    // An entry named in package.json before its file is written (work in progress) is left out, said once.
    if (!existsSync(file)) console.warn(`api reference: ${specifier} has no source file yet (${relative(repo, file)}); left out`);
    return existsSync(file);
  });
  // Only the package's own files: the reference shows declarations as written, so neither the
  // standard library nor the dependencies' types need reading (a third of the time they took).
  const options: ts.CompilerOptions = { target: ts.ScriptTarget.ES2022, module: ts.ModuleKind.NodeNext, moduleResolution: ts.ModuleResolutionKind.NodeNext, noLib: true, types: [], noEmit: true };
  const host = ts.createCompilerHost(options);
  host.resolveModuleNameLiterals = (literals, containing, _redirect, resolution) =>
    literals.map((literal) => (literal.text.startsWith('.') ? ts.resolveModuleName(literal.text, containing, resolution, host) : { resolvedModule: undefined }));
  const program = ts.createProgram(entries.map((entry) => entry.file), options, host);
  const checker = program.getTypeChecker();
  return entries.map(({ specifier, file }) => {
    const moduleSymbol = checker.getSymbolAtLocation(program.getSourceFile(file)!);
    const exports = (moduleSymbol ? checker.getExportsOfModule(moduleSymbol) : [])
      .map((symbol): ApiExport | undefined => {
        const target = symbol.flags & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(symbol) : symbol;
        const declarations = (target.declarations ?? []).filter((d) => !ts.isSourceFile(d));
        if (declarations.length === 0) return undefined;
        // Overloads and declaration merging: every declaration's signature, the doc of the first that has one.
        const described = declarations.map((d) => describeDeclaration(symbol.name, d));
        const doc = described.map((d) => docMarkdown(d.docNode)).find(Boolean) ?? '';
        const kinds = new Set(described.map((d) => d.kind));
        return {
          name: symbol.name,
          kind: kinds.has('class') ? 'class' : kinds.has('function') ? 'function' : described[0]!.kind,
          signature: [...new Set(described.map((d) => d.signature))].join('\n\n'),
          doc,
          source: relative(repo, declarations[0]!.getSourceFile().fileName).split('\\').join('/'),
        };
      })
      .filter((entry): entry is ApiExport => entry !== undefined)
      .sort((a, b) => a.name.localeCompare(b.name));
    return { specifier, exports };
  });
}
