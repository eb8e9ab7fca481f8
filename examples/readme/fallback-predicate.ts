// examples/readme/fallback-predicate.ts
import { runAgent } from 'loopchart';
import { scriptedModel } from 'loopchart/testing';

// A custom model that throws a plain Error: no status, no network code, so by default no fallback.
const myModel = scriptedModel([() => { throw new Error('upstream overloaded, try later'); }], { name: 'mine' });
const backupModel = scriptedModel([{ text: 'Refunds take 5 days.' }], { name: 'backup' });

const { outcome } = await runAgent({
  model: [myModel, backupModel],
  fallbackOn: (error) => error instanceof Error && /overloaded/i.test(error.message),
  retry: false,
  prompt: 'How long do refunds take?',
});
console.log(outcome.type === 'Completed' && outcome.finalText); // Refunds take 5 days.
