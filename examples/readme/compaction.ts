// examples/readme/compaction.ts
import { createAgentMachine, readFileTool, summarizingCompactor } from 'loopchart';
import { scriptedModel } from 'loopchart/testing';

const model = scriptedModel([{ text: 'Nothing to compact yet.' }]);
const agent = createAgentMachine({
  model,
  tools: [readFileTool({ root: '.' })],
  policy: { contextWindow: 128_000, compactThreshold: 80 },
  pruning: { threshold: 50, protectTokens: 4_000 }, // the prune line, below compactThreshold
  compactor: summarizingCompactor({ keepTokens: 2_000 }),
});
console.log(agent.id); // agent
