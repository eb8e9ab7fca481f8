// Compiled by ai-sdk-strict-types.slow.test.ts under exactOptionalPropertyTypes; never run.
import type { LanguageModelV2 } from '@ai-sdk/provider';
import type { LanguageModelV3 } from 'ai-sdk-provider-v3';
import { aiSdkModel } from '../../src/ai-sdk.js';

declare const v2: LanguageModelV2;
declare const v3: LanguageModelV3;
export const models = [aiSdkModel(v2), aiSdkModel(v3)];
// Still a type error: not a model at all.
// @ts-expect-error a string is no language model
aiSdkModel('gpt-4o');
