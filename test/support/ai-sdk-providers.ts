import { createOpenAICompatible as createV2 } from '@ai-sdk/openai-compatible';
import { createOpenAICompatible as createV3 } from 'ai-sdk-openai-compatible-v2';
import type { AiSdkLanguageModel } from '../../src/models/ai-sdk-spec.js';
import { TEST_MODEL } from './chat-server.js';

/**
 * The AI SDK provider majors the adapter suite runs against, each a real
 * `@ai-sdk/openai-compatible` talking HTTP to the local Chat Completions server:
 * V2 (AI SDK 5), V3 (AI SDK 6) and V4 (AI SDK 7, which declares Node >= 22).
 */
export interface ProviderMajor {
  name: string;
  specificationVersion: 'v2' | 'v3' | 'v4';
  /** Why this major does not run on this Node, or undefined when it does. */
  skip: string | undefined;
  make(baseURL: string): Promise<AiSdkLanguageModel>;
}

const nodeMajor = Number(process.versions.node.split('.')[0]);
const settings = (baseURL: string) => ({ name: 'local', baseURL, apiKey: 'sk-test', includeUsage: true });

export const PROVIDER_MAJORS: ProviderMajor[] = [
  {
    name: 'V2 (AI SDK 5, @ai-sdk/openai-compatible@1)',
    specificationVersion: 'v2',
    skip: undefined,
    make: async (baseURL) => createV2(settings(baseURL)).chatModel(TEST_MODEL),
  },
  {
    name: 'V3 (AI SDK 6, @ai-sdk/openai-compatible@2)',
    specificationVersion: 'v3',
    skip: undefined,
    make: async (baseURL) => createV3(settings(baseURL)).chatModel(TEST_MODEL),
  },
  {
    name: 'V4 (AI SDK 7, @ai-sdk/openai-compatible@3)',
    specificationVersion: 'v4',
    skip: nodeMajor >= 22 ? undefined : `AI SDK 7 declares Node >= 22 (this is Node ${process.versions.node}); CI runs it on the Node 24 leg`,
    // Imported only where it runs: the package declares Node >= 22, so it is not in package.json
    // (npm ci on Node 20 warned EBADENGINE); .ci/run links it in for the Node 24 leg
    // (.ci/node22/package.json). Its API is the one of the majors before it.
    make: async (baseURL) => {
      const name = 'ai-sdk-openai-compatible-v3';
      const { createOpenAICompatible } = (await import(name)) as { createOpenAICompatible: typeof createV3 };
      return createOpenAICompatible(settings(baseURL)).chatModel(TEST_MODEL) as unknown as AiSdkLanguageModel;
    },
  },
];
