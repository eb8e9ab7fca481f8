/**
 * `loopchart/ai-sdk`: any AI SDK `LanguageModelV2` (OpenAI, Anthropic, Google, ...) as a
 * loopchart `Model`. Its types need `@ai-sdk/provider` installed next to loopchart.
 */
export { aiSdkModel, type AiSdkModelOptions } from './models/ai-sdk.js';
