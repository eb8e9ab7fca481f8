import { createHash } from 'node:crypto';
import { z } from 'zod';
import type { Model } from '../model.js';
import type { Message } from '../schemas.js';
import type { Scorer } from './scorers.js';

const VerdictSchema = z.object({ score: z.number().min(0).max(1), reason: z.string().optional() });

export interface JudgeOptions {
  /** Any model: it is asked once per case, with no tools. */
  model: Model;
  /** What a good answer is, in words. */
  rubric: string;
  /** Default `judge`. */
  name?: string | undefined;
  /** Default 0.5. */
  passAt?: number | undefined;
  threshold?: number | undefined;
  /** How long the judge may take per case, in ms (default 30 000); past it that case's score fails as a ScorerError. */
  timeoutMs?: number | undefined;
}

/** The judge's reply read as a score: the first JSON object in it, `{ "score": 0..1, "reason": "..." }`. */
export function readVerdict(text: string): z.infer<typeof VerdictSchema> {
  const start = text.indexOf('{');
  const end = text.lastIndexOf('}');
  if (start === -1 || end < start) throw new Error(`the judge answered no JSON object: ${JSON.stringify(text.slice(0, 120))}`);
  let json: unknown;
  try {
    json = JSON.parse(text.slice(start, end + 1));
  } catch (error) {
    throw new Error(`the judge's answer is not JSON: ${(error as Error).message}`);
  }
  const parsed = VerdictSchema.safeParse(json);
  if (!parsed.success) throw new Error(`the judge's answer is not { score: 0..1, reason }: ${z.prettifyError(parsed.error).split('\n').join(' ')}`);
  return parsed.data;
}

/**
 * The judge call's idempotency key: the case and a digest of what is graded (rubric, input,
 * outcome, answer). A provider that honours the key answers a repeat of the same grading from
 * its cache; another answer of the same case (a changed agent, a new evaluation) is a new call,
 * never the cached grade of the old one.
 */
function judgeKey(caseId: string, messages: readonly Message[]): string {
  return `judge:${caseId}:${createHash('sha256').update(JSON.stringify(messages)).digest('hex').slice(0, 32)}`;
}

/**
 * A scorer that asks a model to grade the run's final answer against a rubric. The judge gets the
 * case's input and the answer and must reply `{ "score": 0..1, "reason": "..." }`; a judge that
 * throws, answers otherwise or takes longer than `timeoutMs` fails that case's score with a
 * `ScorerError`, and the other cases are still judged.
 *
 * @example
 * ```ts
 * const helpful = judge({ model, rubric: 'The answer states the refund policy and the next step.', threshold: 0.7 });
 * ```
 */
export function judge(options: JudgeOptions): Scorer {
  const { model, rubric } = options;
  return {
    name: options.name ?? 'judge',
    passAt: options.passAt ?? 0.5,
    ...(options.threshold !== undefined && { threshold: options.threshold }),
    ...(options.timeoutMs !== undefined && { timeoutMs: options.timeoutMs }),
    async score(evalCase, run, { signal }) {
      const messages: Message[] = [
        {
          role: 'system',
          content: 'You grade the answer of an AI agent against a rubric. Reply with one JSON object and nothing else: {"score": <a number from 0 to 1>, "reason": "<one sentence>"}.',
        },
        {
          role: 'user',
          content: `Rubric:\n${rubric}\n\nWhat the user asked:\n${evalCase.input.join('\n---\n')}\n\nHow the run ended: ${run.outcome.type}\n\nThe agent's final answer:\n${run.text}`,
        },
      ];
      const reply = await model.generate({ messages, tools: [], signal, idempotencyKey: judgeKey(evalCase.id, messages) });
      const verdict = readVerdict(reply.message.content);
      return verdict.reason === undefined ? { score: verdict.score } : { score: verdict.score, reason: verdict.reason };
    },
  };
}
