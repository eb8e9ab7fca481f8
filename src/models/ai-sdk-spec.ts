import { z } from 'zod';
import { LoopchartError } from '../errors.js';
import type { AiSdkFunctionTool, AiSdkPrompt } from './ai-sdk-prompt.js';

/*
 * What the adapter needs of an AI SDK provider model, the same in every specification version
 * it speaks: V2 (AI SDK 5, `@ai-sdk/provider@2`), V3 (AI SDK 6, `@ai-sdk/provider@3`) and V4
 * (AI SDK 7, `@ai-sdk/provider@4`). The versions differ where the reply ends: V2's finish part
 * carries a plain finish reason and flat token counts, V3 and V4 carry `{ unified, raw }` and
 * nested counts (`inputTokens.total`). Those parts are checked here, where they enter.
 */

/** The specification versions `aiSdkModel` accepts: AI SDK 5, 6 and 7. */
export const AI_SDK_SPECIFICATION_VERSIONS = ['v2', 'v3', 'v4'] as const;
export type AiSdkSpecificationVersion = (typeof AI_SDK_SPECIFICATION_VERSIONS)[number];

/** The call options the adapter passes: the same fields, in the same shapes, in V2, V3 and V4. */
export interface AiSdkStreamOptions {
  prompt: AiSdkPrompt;
  tools?: AiSdkFunctionTool[] | undefined;
  toolChoice?: { type: 'auto' } | undefined;
  /** JSON matching `schema` (the provider's JSON-schema mode); the same shape in V2, V3 and V4. */
  responseFormat?: { type: 'json'; schema: Record<string, unknown>; name?: string | undefined; description?: string | undefined } | undefined;
  abortSignal?: AbortSignal | undefined;
  headers?: Record<string, string | undefined> | undefined;
}

/**
 * Any AI SDK provider model of a supported specification version: a `LanguageModelV2`,
 * `LanguageModelV3` or `LanguageModelV4` from whichever `@ai-sdk/provider` major is installed.
 * Structural, so the adapter's types fit every major at once.
 *
 * @example
 * ```ts
 * import { createOpenAICompatible } from '@ai-sdk/openai-compatible'; // v1 (V2), v2 (V3) or v3 (V4)
 * import { aiSdkModel, type AiSdkLanguageModel } from 'loopchart/ai-sdk';
 *
 * const languageModel: AiSdkLanguageModel = createOpenAICompatible({ name: 'local', baseURL }).chatModel('llama3.2');
 * const model = aiSdkModel(languageModel);
 * ```
 */
export interface AiSdkLanguageModel {
  readonly specificationVersion: AiSdkSpecificationVersion;
  readonly provider: string;
  readonly modelId: string;
  /**
   * What it takes is left open (`never`): each major names its own call options, and where a
   * project sets `exactOptionalPropertyTypes` (as `tsc --init` does) no one type fits them all,
   * since their optional fields refuse `undefined`. The adapter calls it with
   * `AiSdkStreamOptions`, the fields every version shares (see `AiSdkDriven`).
   */
  doStream(options: never): PromiseLike<{ stream: ReadableStream<unknown> }>;
}

/** A model as the adapter calls it, once `specificationVersionOf` has checked it. */
export interface AiSdkDriven extends Omit<AiSdkLanguageModel, 'doStream'> {
  doStream(options: AiSdkStreamOptions): PromiseLike<{ stream: ReadableStream<unknown> }>;
}

/**
 * A model `aiSdkModel` cannot drive: not an object with `doStream`, or a specification version
 * it does not speak (a V1 model from AI SDK 4, or a version newer than this build).
 *
 * @example
 * ```ts
 * try {
 *   aiSdkModel({ specificationVersion: 'v1', provider: 'old', modelId: 'x' } as never); // a model from AI SDK 4
 * } catch (error) {
 *   if (UnsupportedModelError.isInstance(error)) console.error(error.specificationVersion, error.message);
 * }
 * ```
 */
export class UnsupportedModelError extends LoopchartError {
  readonly specificationVersion: string | undefined;
  constructor(specificationVersion: string | undefined, problem: string) {
    super('UnsupportedModel', `aiSdkModel: ${problem}`);
    this.specificationVersion = specificationVersion;
  }
}

/** The model's version, checked before the first call: a wrong model fails when it is wrapped. */
export function specificationVersionOf(model: unknown): AiSdkSpecificationVersion {
  if (model === null || typeof model !== 'object' || typeof (model as { doStream?: unknown }).doStream !== 'function') {
    throw new UnsupportedModelError(undefined, 'expected an AI SDK language model (an object with doStream)');
  }
  const version = (model as { specificationVersion?: unknown }).specificationVersion;
  const known = AI_SDK_SPECIFICATION_VERSIONS.find((v) => v === version);
  if (!known) {
    const shown = typeof version === 'string' ? version.slice(0, 20) : undefined;
    throw new UnsupportedModelError(
      shown,
      `specification version ${JSON.stringify(shown ?? String(version).slice(0, 20))} is not supported (this build speaks ${AI_SDK_SPECIFICATION_VERSIONS.join(', ')})`,
    );
  }
  return known;
}

/** A finish part, as the adapter reads it in any version. */
export interface FinishPart {
  /** The provider's reason in the SDK's spelling (see `isUnfinished` for the ones that are no reply). */
  reason: string;
  /** Token counts as sent, for `normalizeUsage`; undefined when the part carried none usable. */
  usage: { inputTokens: unknown; outputTokens: unknown } | undefined;
}

const V2Finish = z.object({
  finishReason: z.string(),
  usage: z.object({ inputTokens: z.unknown(), outputTokens: z.unknown() }).nullish(),
});

const nested = z.object({ total: z.unknown() }).nullish();
const V3Finish = z.object({
  finishReason: z.object({ unified: z.string(), raw: z.string().nullish() }),
  // Checked apart from the reason: a usage in the wrong shape (say a V2 provider's flat counts
  // behind a V3 wrapper) is dropped, as any impossible usage is, and the reply still counts.
  usage: z.unknown(),
});
const V3Usage = z.object({ inputTokens: nested, outputTokens: nested });

/**
 * Every version reports a reply that did not finish as `error` (the stream broke off, the provider
 * says so in an error part first, or not at all), as `unknown` (a provider flushing a stream cut
 * before its finish reason) or, in V4, `interrupted`: no reply the loop may act on.
 */
const UNFINISHED = new Set(['error', 'unknown', 'interrupted']);

/** Whether a finish part's reason means the model did not finish its reply. */
export function isUnfinished(finish: FinishPart): boolean {
  return UNFINISHED.has(finish.reason);
}

/** The finish part of `version`, or a description of what is wrong with it. */
export function readFinishPart(version: AiSdkSpecificationVersion, part: unknown): FinishPart | { problem: string } {
  if (version === 'v2') {
    const parsed = V2Finish.safeParse(part);
    if (!parsed.success) return { problem: `finish part: ${z.prettifyError(parsed.error)}` };
    const usage = parsed.data.usage;
    return { reason: parsed.data.finishReason, usage: usage ? { inputTokens: usage.inputTokens, outputTokens: usage.outputTokens } : undefined };
  }
  const parsed = V3Finish.safeParse(part);
  if (!parsed.success) return { problem: `finish part: ${z.prettifyError(parsed.error)}` };
  const { unified } = parsed.data.finishReason;
  const usage = V3Usage.safeParse(parsed.data.usage);
  return {
    reason: unified,
    usage: usage.success ? { inputTokens: usage.data.inputTokens?.total, outputTokens: usage.data.outputTokens?.total } : undefined,
  };
}
