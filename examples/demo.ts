/**
 * `npm start`: an agent answers a question about the files of a folder with the real
 * list_dir / read_file / calculator tools, and prints a live trace. Offline (the scripted model)
 * unless the environment names a real model.
 *
 *   npm start                                   # the fixture folder examples/fixtures
 *   npm start -- src/tools "What is in here?"   # any folder; the rest of the line is the question
 *   OPENAI_BASE_URL=http://localhost:11434/v1 LOOPCHART_MODEL=qwen3 npm start   # a real model
 *
 * A real model is used when OPENAI_BASE_URL is set (with OPENAI_API_KEY and LOOPCHART_MODEL,
 * default gpt-4o-mini); see `chooseModel` in folder-agent.ts.
 *
 * Exits 0 when the run is Completed, 130 when cancelled (Ctrl+C), 1 otherwise.
 */
import { statSync } from 'node:fs';
import { createActor, toPromise } from 'xstate';
import { createFolderAgent, DEFAULT_QUESTION } from './folder-agent.js';
import { exitCodeOf, traceAgent } from './trace.js';

const [folderArg, ...questionWords] = process.argv.slice(2);
if (folderArg === '--help' || folderArg === '-h') {
  console.log('usage: tsx examples/demo.ts [folder] [question...]');
  process.exit(0);
}
if (folderArg !== undefined && !statSync(folderArg, { throwIfNoEntry: false })?.isDirectory()) {
  console.error(`not a directory: ${folderArg}\nusage: tsx examples/demo.ts [folder] [question...]`);
  process.exit(2);
}

const agent = createFolderAgent({ folder: folderArg, question: questionWords.join(' ') || DEFAULT_QUESTION });
console.log(`loopchart demo · model: ${agent.model.name} · tools: list_dir, read_file, calculator`);
console.log(`folder:   ${agent.label}`);
console.log(`question: ${agent.input.prompt}\n`);

const actor = createActor(agent.machine, { input: agent.input });
// Listen before start(): the run begins on entry.
const trace = traceAgent(actor);
// Ctrl+C cancels the run: in-flight calls are aborted and the history stays coherent.
process.once('SIGINT', () => actor.send({ type: 'cancel' }));

actor.start();
try {
  const output = await toPromise(actor);
  trace.stop();
  process.exitCode = exitCodeOf(output);
} catch (error) {
  trace.stop();
  console.error('the agent actor crashed:', error);
  process.exitCode = 1;
}
