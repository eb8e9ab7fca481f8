/**
 * `aiSdkModel` takes an AI SDK 5 (`LanguageModelV2`) or AI SDK 6 (`LanguageModelV3`) model in a
 * project with `exactOptionalPropertyTypes` on, as `tsc --init` writes it. Before, both were a
 * TS2345: the adapter's own call options (whose optional fields admit `undefined`, as this
 * package's types do) were checked against each major's call options, whose optional fields do
 * not. The probe is compiled with the TypeScript API; only its own diagnostics count (this
 * repository's sources are not written for that setting).
 */
import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';

const probeFile = fileURLToPath(new URL('./ai-sdk-strict-probe.ts', import.meta.url));

function probeErrors(): string[] {
  const program = ts.createProgram([probeFile], {
    module: ts.ModuleKind.NodeNext,
    moduleResolution: ts.ModuleResolutionKind.NodeNext,
    target: ts.ScriptTarget.ES2022,
    strict: true,
    exactOptionalPropertyTypes: true,
    noEmit: true,
    skipLibCheck: true,
    types: ['node'],
  });
  const source = program.getSourceFile(probeFile)!;
  return ts.getPreEmitDiagnostics(program, source).map((d) => `${d.start === undefined ? '' : source.getLineAndCharacterOfPosition(d.start).line + 1}: ${ts.flattenDiagnosticMessageText(d.messageText, '\n').split('\n')[0]}`);
}

describe('aiSdkModel in a strict project', () => {
  // Without the setting the probe is compiled by `npm run typecheck` (tsconfig.json takes test/).
  it('takes a LanguageModelV2 and a LanguageModelV3 with exactOptionalPropertyTypes on', () => {
    expect(probeErrors()).toEqual([]);
  });
});
