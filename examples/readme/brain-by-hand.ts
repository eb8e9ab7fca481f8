// examples/readme/brain-by-hand.ts
import { LoopMachine } from 'loopchart';

const brain = new LoopMachine();
brain.acceptInput({ role: 'user', content: 'What is 6 * 7?' });

for (let step = brain.nextStep(); ; step = brain.nextStep()) {
  if (step.type === 'CallLLM') {
    // Your model call goes here; this one asks for a tool on turn 1 and answers on turn 2.
    const reply = step.turn === 1
      ? { role: 'assistant' as const, content: '', toolCalls: [{ id: 'c1', name: 'calculator', args: { expression: '6*7' } }] }
      : { role: 'assistant' as const, content: 'It is 42.' };
    brain.modelResponse(reply, 120 * step.turn, ['calculator']);
  } else if (step.type === 'CallTools') {
    brain.toolResults(step.calls.map(({ call, preAnswered }) =>
      preAnswered ?? { role: 'tool' as const, toolCallId: call.id, toolName: call.name, content: '42' }));
  } else if (step.type === 'Compact') {
    brain.compactionNoop(brain.contextTokens(), brain.contextTokens());
  } else {
    console.log(step.outcome); // { type: 'Completed', finalText: 'It is 42.' }
    break;
  }
}
brain.commitPending();
console.log(`${brain.history().length} messages committed`); // 4 messages committed
const saved = JSON.stringify(brain.toJSON()); // resume anywhere:
const again = LoopMachine.restore(JSON.parse(saved));
console.log(`restored: ${again.history().length} messages, ${again.turnsTaken()} turns`); // restored: 4 messages, 2 turns
