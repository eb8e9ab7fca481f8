// examples/readme/guardrails.ts
import { GuardrailTrippedError, runAgent, type Guardrail } from 'loopchart';
import { scriptedModel } from 'loopchart/testing';

// Input: nothing that looks like an API key reaches the model.
const noKeys: Guardrail = {
  name: 'no-keys',
  check: ({ text }) => (/sk-[A-Za-z0-9]{16,}/.test(text) ? { type: 'trip', info: { found: 'api key' } } : { type: 'pass' }),
};
// Output: an answer without a source goes back to the model once more.
const citesSource: Guardrail = {
  name: 'cites-source',
  check: ({ text }) => (text.includes('(source:') ? { type: 'pass' } : { type: 'feedback', message: 'Name your source as (source: ...).' }),
};
const guardrails = { input: [noKeys], output: [citesSource] };

const model = scriptedModel([{ text: 'Refunds take 5 days.' }, { text: 'Refunds take 5 days (source: the refund policy).' }]);
const answered = await runAgent({ model, prompt: 'How long do refunds take?', guardrails });
console.log(answered.text); // Refunds take 5 days (source: the refund policy).
console.log(answered.messages[2]?.content); // Your answer was not accepted:

let called = false;
const untouched = scriptedModel([() => ((called = true), { text: 'never' })]);
const refused = await runAgent({ model: untouched, prompt: 'Use my key sk-abcdefghijklmnopqrstu', guardrails });
console.log(refused.outcome.type, called); // Failed false
if (GuardrailTrippedError.isInstance(refused.error)) console.log(refused.error.guardrail, JSON.stringify(refused.error.info)); // no-keys {"found":"api key"}
