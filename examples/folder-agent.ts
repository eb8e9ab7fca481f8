/**
 * The demo's agent, shared by `demo.ts` and `inspect.ts`: it answers a question about the files
 * of a folder with the real `list_dir`, `read_file` and `calculator` tools.
 *
 * With OPENAI_BASE_URL set it runs on that endpoint (see `chooseModel`). Otherwise it runs offline
 * on the scripted model, whose replies are functions of the conversation: it lists the folder,
 * reads up to three of its files, adds their line counts with the calculator and answers with text
 * built from what the tools actually returned. Point it at another folder and the answer changes
 * with the files.
 */
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  createAgentMachine,
  openAICompatibleModel,
  type AgentInput,
  type AssistantMessage,
  type Message,
  type Model,
  type ModelRequest,
  type ToolCall,
  type ToolMessage,
} from '../src/index.js';
import { scriptedModel, type ScriptEntry } from '../src/testing.js';
import { sleep } from '../src/models/sleep.js';
import { calculatorTool, DirListingSchema, listDirTool, readFileTool, writeFileTool, type DirEntry } from '../src/tools/builtin.js';
import { defineTool, type Tool } from '../src/tools/define-tool.js';

/** The folder `npm start` asks about when none is given: a small, stable fixture. */
export const DEFAULT_FOLDER = fileURLToPath(new URL('./fixtures', import.meta.url));
export const DEFAULT_QUESTION = 'How many lines do the files in this folder have, and which one is the largest?';

const SYSTEM_PROMPT =
  'You answer questions about the files of one folder. Use list_dir to see what is there, read_file to read ' +
  'files (paths relative to the folder), and calculator for any arithmetic instead of doing it in your head. ' +
  'Answer briefly, with the numbers you found.';

/** How long the scripted model "thinks" before its first token, then how long its text takes to stream. */
const THINKING_MS = 500;
const STREAMING_MS = 300;

/** The model name asked for when `OPENAI_BASE_URL` is set and `LOOPCHART_MODEL` is not. */
export const DEFAULT_REAL_MODEL = 'gpt-4o-mini';

/**
 * The model the demo runs on: a real one when the environment names an endpoint, else the offline
 * scripted model. Nothing else in the demo depends on which model answers.
 *
 *   OPENAI_BASE_URL   any Chat Completions endpoint: https://api.openai.com/v1, Ollama's
 *                     http://localhost:11434/v1, vLLM, LM Studio, OpenRouter...
 *   OPENAI_API_KEY    sent as a bearer token (optional: local servers usually need none)
 *   LOOPCHART_MODEL   the model name (default gpt-4o-mini)
 *
 * A key or a model name without a base URL does not switch on a real model (a key left in the
 * environment must not make the offline demo spend money): the demo says so and stays scripted.
 */
export function chooseModel(folderLabel: string, env: NodeJS.ProcessEnv = process.env): Model {
  const baseURL = env.OPENAI_BASE_URL?.trim();
  if (baseURL) {
    const apiKey = env.OPENAI_API_KEY?.trim();
    return openAICompatibleModel({
      baseURL,
      model: env.LOOPCHART_MODEL?.trim() || DEFAULT_REAL_MODEL,
      ...(apiKey ? { apiKey } : {}),
    });
  }
  if (env.LOOPCHART_MODEL?.trim() || env.OPENAI_API_KEY?.trim()) {
    process.stderr.write(
      'note: LOOPCHART_MODEL / OPENAI_API_KEY are set but OPENAI_BASE_URL is not: using the scripted model ' +
        '(set OPENAI_BASE_URL, e.g. https://api.openai.com/v1, to use a real model)\n',
    );
  }
  const model = scriptedModel(folderAnalystScript(folderLabel), { name: 'scripted-folder-analyst', delayMs: STREAMING_MS });
  return withThinkingTime(model, THINKING_MS);
}

/** Waits before each call, as a remote model does before its first token; an abort cuts the wait short. */
export function withThinkingTime(model: Model, ms: number): Model {
  return {
    name: model.name,
    async generate(request) {
      await sleep(ms, request.signal);
      return model.generate(request);
    },
  };
}

export interface FolderAgent {
  machine: ReturnType<typeof createAgentMachine>;
  /** Single-run input: the actor starts on the question and finishes with the run's output. */
  input: AgentInput;
  folder: string;
  /** The folder as the user sees it (relative to the working directory). */
  label: string;
  model: Model;
}

export interface FolderAgentOptions {
  folder?: string;
  question?: string;
  /**
   * Adds `write_file`, rooted at this directory (never the folder asked about) and asking for
   * approval before every write: the agent then writes its answer to `report.md` there.
   */
  reportRoot?: string;
}

/** The file the agent writes its answer to when it has `write_file`. */
export const REPORT_FILE = 'report.md';

export function createFolderAgent(options: FolderAgentOptions = {}): FolderAgent {
  const folder = path.resolve(options.folder ?? DEFAULT_FOLDER);
  const relative = path.relative(process.cwd(), folder);
  const label = relative === '' ? '.' : relative.startsWith('..') ? folder : relative;
  const model = chooseModel(label);
  const tools: Tool[] = [listDirTool({ root: folder }), readFileTool({ root: folder }), calculatorTool()];
  if (options.reportRoot) tools.push(needingApproval(writeFileTool({ root: options.reportRoot })));
  const machine = createAgentMachine({ model, tools, policy: { maxTurns: 10 } });
  const system = options.reportRoot ? `${SYSTEM_PROMPT} ${REPORT_PROMPT}` : SYSTEM_PROMPT;
  const input: AgentInput = {
    sessionId: 'demo',
    history: [{ role: 'system', content: system }],
    prompt: options.question ?? DEFAULT_QUESTION,
  };
  return { machine, input, folder, label, model };
}

const REPORT_PROMPT =
  `Before your final answer, write that answer to ${REPORT_FILE} with write_file (the user approves each write); ` +
  'if the write is denied, answer without it.';

/** The same tool, asking a human before each call runs. */
function needingApproval(tool: Tool): Tool {
  const { name, description, input, execute, timeoutMs } = tool;
  return defineTool({ name, description, input, execute, ...(timeoutMs !== undefined && { timeoutMs }), needsApproval: true });
}

// ---------------------------------------------------------------------------------------------
// The scripted "model": one function per turn, each reading the tool results so far.

/** How many files the analyst reads at most (in one turn, so they run in parallel). */
const MAX_FILES = 3;
const MAX_FILE_BYTES = 64 * 1024;

export function folderAnalystScript(folderLabel: string): ScriptEntry[] {
  const listFolder: ScriptEntry = () => ({
    text: `Let me look at what is in ${folderLabel}.`,
    toolCalls: [{ name: 'list_dir', args: { path: '.' } }],
  });

  const readFiles: ScriptEntry = (request) => {
    const listing = listingOf(request);
    if (!listing) return { text: `I could not list ${folderLabel}: ${lastResult(request, 'list_dir')?.content ?? 'no result'}.` };
    const files = filesToRead(listing.entries);
    if (files.length === 0) {
      const why = listing.entries.some((e) => e.type === 'file') ? 'none of its files is small enough to read' : 'there is no file to read';
      return { text: `${folderLabel} ${describeEntries(listing.entries)}: ${why}.` };
    }
    return {
      text: `It ${describeEntries(listing.entries)}. Reading ${joinNames(files.map((f) => f.name))}.`,
      toolCalls: files.map((file) => ({ name: 'read_file', args: { path: file.name } })),
    };
  };

  const addUp: ScriptEntry = (request) => {
    const read = filesRead(request);
    if (read.length === 0) return { text: `I could not read any file of ${folderLabel}.` };
    return {
      text: `Adding up the line counts: ${read.map((f) => `${f.path} has ${f.lines}`).join(', ')}.`,
      toolCalls: [{ name: 'calculator', args: { expression: read.map((f) => f.lines).join(' + ') } }],
    };
  };

  /** The answer, built from what the tools returned. */
  const answerText = (request: ModelRequest): string => {
    const listing = listingOf(request)!;
    const read = filesRead(request);
    const sum = lastResult(request, 'calculator');
    const total = sum && !sum.isError ? sum.content : String(read.reduce((n, f) => n + f.lines, 0));
    const files = listing.entries.filter((e) => e.type === 'file');
    const largest = files.reduce<DirEntry | undefined>((a, b) => ((b.size ?? 0) > (a?.size ?? -1) ? b : a), undefined);
    const sentences = [
      `${folderLabel} ${describeEntries(listing.entries)}.`,
      `The ${read.length === 1 ? 'file' : `${read.length} files`} I read (${joinNames(read.map((f) => `${f.path}: ${f.lines} lines`))}) have ${total} lines in all.`,
      largest ? `The largest file is ${largest.name}, ${largest.size} bytes.` : '',
      files.length > read.length ? `I did not read the other ${files.length - read.length} file(s).` : '',
    ];
    return sentences.filter(Boolean).join(' ');
  };

  // With write_file (demo --approve), the answer goes to the report first; a human approves the write.
  const answer: ScriptEntry = (request) => {
    const text = answerText(request);
    if (!request.tools.some((tool) => tool.name === 'write_file')) return { text };
    return {
      text: `Writing the answer to ${REPORT_FILE}.`,
      toolCalls: [{ name: 'write_file', args: { path: REPORT_FILE, content: `${text}\n` } }],
    };
  };

  const afterReport: ScriptEntry = (request) => {
    const written = lastResult(request, 'write_file');
    const note = !written ? '' : written.isError ? ` I did not write ${REPORT_FILE} (${written.content}).` : ` The report is in ${REPORT_FILE}.`;
    return { text: `${answerText(request)}${note}` };
  };

  return [listFolder, readFiles, addUp, answer, afterReport];
}

/** A tool call and its result, as they appear in the conversation. */
interface Exchange {
  call: ToolCall;
  result: ToolMessage;
}

function exchanges(messages: readonly Message[], toolName: string): Exchange[] {
  const calls = new Map<string, ToolCall>();
  for (const message of messages) {
    if (message.role === 'assistant') for (const call of (message as AssistantMessage).toolCalls ?? []) calls.set(call.id, call);
  }
  return messages.flatMap((message) => {
    if (message.role !== 'tool' || message.toolName !== toolName) return [];
    const call = calls.get(message.toolCallId);
    return call ? [{ call, result: message }] : [];
  });
}

const lastResult = (request: ModelRequest, toolName: string): ToolMessage | undefined =>
  exchanges(request.messages, toolName).at(-1)?.result;

function listingOf(request: ModelRequest) {
  const result = lastResult(request, 'list_dir');
  if (!result || result.isError) return undefined;
  const parsed = DirListingSchema.safeParse(JSON.parse(result.content));
  return parsed.success ? parsed.data : undefined;
}

function filesToRead(entries: readonly DirEntry[]): DirEntry[] {
  return entries.filter((e) => e.type === 'file' && (e.size ?? 0) > 0 && (e.size ?? 0) <= MAX_FILE_BYTES).slice(0, MAX_FILES);
}

const TRUNCATION_NOTE = /\n\[truncated: showed the first \d+ of \d+ bytes\]$/;

/** The files read successfully, with their line counts (as `wc -l` counts them). */
function filesRead(request: ModelRequest): { path: string; lines: number }[] {
  return exchanges(request.messages, 'read_file').flatMap(({ call, result }) => {
    if (result.isError) return [];
    const text = result.content.replace(TRUNCATION_NOTE, '');
    const lines = text === '' ? 0 : text.split('\n').length - (text.endsWith('\n') ? 1 : 0);
    return [{ path: String((call.args as { path?: unknown }).path), lines }];
  });
}

function describeEntries(entries: readonly DirEntry[]): string {
  const files = entries.filter((e) => e.type === 'file');
  const dirs = entries.filter((e) => e.type === 'directory');
  const bytes = files.reduce((n, f) => n + (f.size ?? 0), 0);
  const parts = [`${files.length} file${files.length === 1 ? '' : 's'} (${bytes} bytes)`];
  if (dirs.length > 0) parts.push(`${dirs.length} director${dirs.length === 1 ? 'y' : 'ies'} (${joinNames(dirs.map((d) => d.name))})`);
  return `holds ${parts.join(' and ')}`;
}

function joinNames(names: readonly string[]): string {
  if (names.length <= 1) return names.join('');
  return `${names.slice(0, -1).join(', ')} and ${names.at(-1)}`;
}
