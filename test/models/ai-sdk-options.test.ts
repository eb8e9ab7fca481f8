/**
 * aiSdkModel's own options are checked when the model is made (InvalidConfigError naming them):
 * options that are no object, a structuredOutputs that is no boolean.
 */
import { MockLanguageModelV2 } from 'ai/test';
import { describe, expect, it } from 'vitest';
import { InvalidConfigError } from '../../src/errors.js';
import { aiSdkModel, type AiSdkModelOptions } from '../../src/models/ai-sdk.js';

const languageModel = () => new MockLanguageModelV2({ provider: 'mock', modelId: 'm' });
const made = (options: unknown) => () => aiSdkModel(languageModel(), options as AiSdkModelOptions);

describe('aiSdkModel: options refused when the model is made', () => {
  it.each([
    ['null', null],
    ['a string', 'fast'],
    ['a list', [{ readTimeoutMs: 5 }]],
    ['a function', () => ({})],
  ])('options that are %s (before: null threw a raw TypeError, the others were ignored)', (_, options) => {
    expect(made(options)).toThrow(InvalidConfigError);
    expect(made(options)).toThrow(/aiSdkModel: options must be an object/);
  });

  it.each([['yes'], ['false'], [1], [null]])('structuredOutputs: %j (before: \'yes\', \'false\' and 1 were read as true, null as the default)', (structuredOutputs) => {
    expect(made({ structuredOutputs })).toThrow(InvalidConfigError);
    expect(made({ structuredOutputs })).toThrow(/aiSdkModel: structuredOutputs must be a boolean/);
  });

  it('valid values still make a model', () => {
    expect(made(undefined)().supports).toBeDefined();
    expect(made({})().supports).toBeDefined();
    expect(made({ structuredOutputs: false })().supports).toBeUndefined();
    expect(made({ structuredOutputs: true, readTimeoutMs: Infinity, secrets: [undefined] })().supports).toBeDefined();
  });
});
