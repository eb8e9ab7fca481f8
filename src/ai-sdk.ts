/**
 * `loopchart/ai-sdk`: any AI SDK provider model (OpenAI, Anthropic, Google, ...) of AI SDK 5, 6
 * or 7 (`LanguageModelV2`, `V3`, `V4`) as a loopchart `Model`. Nothing here loads
 * `@ai-sdk/provider` at run time; its types are structural, so any installed major fits.
 */
export { aiSdkModel, type AiSdkModelOptions } from './models/ai-sdk.js';
export { UnsupportedModelError, type AiSdkLanguageModel, type AiSdkSpecificationVersion } from './models/ai-sdk-spec.js';
