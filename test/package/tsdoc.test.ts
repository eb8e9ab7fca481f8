/**
 * The public exports a user meets first carry TSDoc with an `@example` (what an editor shows on
 * hover, and what the .d.ts files ship).
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const ROOTS = ['../../src', '../../machines'].map((dir) => fileURLToPath(new URL(dir, import.meta.url)));

function files(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) =>
    entry.isDirectory() ? files(join(dir, entry.name)) : entry.name.endsWith('.ts') ? [join(dir, entry.name)] : [],
  );
}
const sources = ROOTS.flatMap(files).map((file) => readFileSync(file, 'utf8'));

/** The doc comment right before `export … name`, or undefined. */
function docOf(name: string): string | undefined {
  const declaration = new RegExp(`(/\\*\\*(?:(?!\\*/)[\\s\\S])*\\*/)\\s*export (?:declare )?(?:async )?(?:function\\*? |class |interface |type |const )${name}\\b`);
  for (const source of sources) {
    const match = declaration.exec(source);
    if (match) return match[1];
  }
  return undefined;
}

const DOCUMENTED = [
  'runAgent',
  'streamAgent',
  'defineTool',
  'Model',
  'SessionStore',
  'openSessionStore',
  'MemorySessionStore',
  'SqliteSessionStore',
  'PostgresSessionStore',
  'summarizingCompactor',
  'pruneToolResults',
  'LoopchartError',
  'createAgentMachine',
  'DurableSession',
  'LoopMachine',
  'openAICompatibleModel',
  'aiSdkModel',
  'AiSdkLanguageModel',
  'UnsupportedModelError',
  'TelemetryOptions',
  'TelemetryTracer',
  'TelemetryUnavailableError',
  'scriptedModel',
  'Executor',
  'inProcessExecutor',
  'composeExecutors',
  'restateSession',
  'ToolSource',
  'mcpTools',
  'McpServerStartError',
  'McpServerError',
  'McpToolError',
  'createMcpServer',
  'serveStdio',
  'createMcpHandler',
  'McpServerOptionsError',
  'schedule',
  'startScheduler',
  'parseCron',
  'replaySession',
  'replayTrace',
  'forkSession',
  'readSessionTrace',
  'Operation',
  'OperationError',
  'OperationStateError',
  'AgentStepper',
  'startViewer',
  'exportSessionHtml',
  'viewerInspector',
  'chartOf',
  'runEval',
  'runCase',
  'recordCase',
  'loadDataset',
  'judge',
  'replayAgainst',
  'formatJUnit',
  'createChatHandler',
  'toNodeListener',
  'ChatAuthorizer',
  'ChatKeyMapper',
  'ChatAccessRequest',
  'ChatAuthorization',
  'ChatAction',
];

describe('TSDoc', () => {
  it.each(DOCUMENTED)('%s has a doc comment with an @example code block', (name) => {
    const doc = docOf(name);
    expect(doc, `no doc comment on ${name}`).toBeDefined();
    expect(doc).toMatch(/@example\s*\n\s*\* ```ts\n[\s\S]+\* ```/);
  });
});
