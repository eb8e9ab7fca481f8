// examples/readme/fallback.ts
import { createAgentMachine, runAgent } from 'loopchart';
import { scriptedModel } from 'loopchart/testing';

// The primary is overloaded (HTTP 503 on every attempt); the backup answers.
const overloaded = { error: { message: 'the provider returned HTTP 503: overloaded', status: 503 } };
const primary = scriptedModel([overloaded, overloaded, { text: 'never reached' }], { name: 'primary' });
const backup = scriptedModel([{ text: 'Refunds take 5 days.', usage: { inputTokens: 120, outputTokens: 8 } }], { name: 'backup' });

const { outcome, usageByModel, costUsd } = await runAgent({
  model: [primary, { model: backup, prices: { inputPerMillionUsd: 0.5, outputPerMillionUsd: 1.5 } }],
  fallbackOn: ['rate-limit', 'server-error', 'timeout'], // default: those and 'context-length'
  retry: { maxRetries: 1, baseDelayMs: 1 }, // the primary's own retries come first
  prompt: 'How long do refunds take?',
});
console.log(outcome.type === 'Completed' && outcome.finalText); // Refunds take 5 days.
console.log(JSON.stringify(usageByModel)); // [{"model":"backup","usage":{"inputTokens":120,"outputTokens":8},"costUsd":0.000072}]
console.log(costUsd); // 0.000072

// A list with something that is not a model is refused where the agent is made.
try {
  createAgentMachine({ model: [primary, 'gpt-4.1' as never] });
} catch (error) {
  console.log((error as Error).message); // invalid agent configuration: model[1] is not a model (with a name and generate()) nor { model, prices? }: got a string
}
