// examples/readme/ai-sdk-6.ts
// In your project: import { createOpenAICompatible } from '@ai-sdk/openai-compatible' (v2, AI SDK 6).
// This repository installs the provider majors side by side under npm aliases.
import { createOpenAICompatible } from 'ai-sdk-openai-compatible-v2';
import { aiSdkModel } from 'loopchart/ai-sdk';

const provider = createOpenAICompatible({ name: 'local', baseURL: 'http://localhost:11434/v1', includeUsage: true });
const languageModel = provider.chatModel('llama3.2'); // a LanguageModelV3
const model = aiSdkModel(languageModel); // the same call for V2 (AI SDK 5) and V4 (AI SDK 7)

console.log(languageModel.specificationVersion, model.name); // v3 local.chat:llama3.2
