import { describe, expect, expectTypeOf, it } from 'vitest';
import { z } from 'zod';
import { LoopchartError } from '../../src/errors.js';
import { runToolCalls } from '../../src/tools/run-tools.js';
import { defineTool, toolDefinitions, ToolSet, type ToolContext } from '../../src/tools/define-tool.js';
import { DuplicateToolError, InvalidToolError } from '../../src/tools/errors.js';

const echo = defineTool({
  name: 'echo',
  description: 'Repeats a text.',
  input: z.object({ text: z.string().describe('what to repeat'), times: z.number().int().min(1).default(1) }),
  execute: ({ text, times }) => text.repeat(times),
});

describe('defineTool', () => {
  it('types execute arguments as the schema output', () => {
    defineTool({
      name: 't',
      description: '',
      input: z.object({ n: z.number(), tag: z.string().optional() }),
      execute(args, ctx) {
        expectTypeOf(args).toEqualTypeOf<{ n: number; tag?: string | undefined }>();
        expectTypeOf(ctx).toEqualTypeOf<ToolContext>();
        return args.n;
      },
    });
  });

  it('exports the input-side JSON Schema, without $schema', () => {
    expect(echo.definition).toEqual({
      name: 'echo',
      description: 'Repeats a text.',
      inputSchema: {
        type: 'object',
        properties: {
          text: { type: 'string', description: 'what to repeat' },
          times: { type: 'integer', minimum: 1, maximum: Number.MAX_SAFE_INTEGER, default: 1 },
        },
        // `times` has a default, so the model may leave it out.
        required: ['text'],
      },
    });
  });

  it('refuses a name providers would reject', () => {
    const bad = () => defineTool({ name: 'read file', description: '', input: z.object({}), execute: () => '' });
    expect(bad).toThrow(InvalidToolError);
    expect(bad).toThrow(/read file.*a-z/s);
    // One line naming the option, as every other refusal of the spec (before: zod's "✖ must be …\n  → at name").
    expect(bad).toThrow(new InvalidToolError('read file', 'name: must be 1-64 characters of a-z, A-Z, 0-9, _ or -'));
    const both = () => defineTool({ name: 'a.b', description: 3 as never, input: z.object({}), execute: () => '' });
    expect(both).toThrow(/^tool "a\.b": name: must be 1-64 characters of a-z, A-Z, 0-9, _ or -; description: Invalid input: expected string, received number$/);
  });

  it('refuses a non-positive timeout', () => {
    expect(() => defineTool({ name: 'x', description: '', input: z.object({}), timeoutMs: 0, execute: () => '' })).toThrow(
      InvalidToolError,
    );
  });

  it('refuses a needsApproval that is no boolean or function, and an execute that is no function', () => {
    // Before: needsApproval 'yes' was accepted and every run that called the tool Failed; execute 'x' was accepted too.
    for (const needsApproval of ['yes', 1, {}]) {
      const bad = () => defineTool({ name: 'x', description: '', input: z.object({}), needsApproval: needsApproval as never, execute: () => '' });
      expect(bad).toThrow(InvalidToolError);
      expect(bad).toThrow(/needsApproval must be a boolean or a function/);
    }
    const noRun = () => defineTool({ name: 'x', description: '', input: z.object({}), execute: 'x' as never });
    expect(noRun).toThrow(InvalidToolError);
    expect(noRun).toThrow(/execute must be a function/);
    expect(defineTool({ name: 'x', description: '', input: z.object({}), needsApproval: false, execute: () => '' }).needsApproval).toBe(false);
  });

  it('refuses arguments that are not an object', () => {
    expect(() => defineTool({ name: 'x', description: '', input: z.string(), execute: () => '' })).toThrow(
      /must describe an object/,
    );
  });

  it('refuses a schema with no JSON Schema form, at definition time', () => {
    expect(() => defineTool({ name: 'x', description: '', input: z.object({ at: z.date() }), execute: () => '' })).toThrow(
      /no JSON Schema form/,
    );
  });
});

describe('ToolSet', () => {
  const other = defineTool({ name: 'other', description: 'd', input: z.object({}), execute: () => 'ok' });

  it('indexes tools by name and keeps their order for definitions', () => {
    const set = new ToolSet([echo, other]);
    expect(set.get('echo')).toBe(echo);
    expect(set.has('missing')).toBe(false);
    expect(set.names).toEqual(['echo', 'other']);
    expect(set.size).toBe(2);
    expect([...set]).toEqual([echo, other]);
    expect(set.definitions).toEqual(toolDefinitions([echo, other]));
  });

  it('throws a typed error for a duplicate name', () => {
    const twin = defineTool({ name: 'echo', description: 'another', input: z.object({}), execute: () => '' });
    let caught: unknown;
    try {
      new ToolSet([echo, other, twin]);
    } catch (error) {
      caught = error;
    }
    expect(caught).toBeInstanceOf(DuplicateToolError);
    expect(caught).toBeInstanceOf(LoopchartError);
    expect(caught).toMatchObject({ code: 'DuplicateTool', toolName: 'echo', name: 'DuplicateToolError' });
    expect((caught as Error).message).toContain('"echo"');
  });

  it('treats names that are also Object.prototype keys as plain names', async () => {
    const names = ['constructor', 'toString', '__proto__', 'valueOf', 'hasOwnProperty'];
    const tools = names.map((name) => defineTool({ name, description: '', input: z.object({}), execute: () => `ran ${name}` }));
    const set = new ToolSet(tools);
    expect(set.names).toEqual(names);
    for (const tool of tools) expect(set.get(tool.name)).toBe(tool);
    expect(set.has('isPrototypeOf')).toBe(false);
    const calls = names.map((name, i) => ({ call: { id: i === 0 ? '__proto__' : name, name, args: {} } }));
    const results = await runToolCalls(calls, set, { idempotencyKey: (call) => call.id });
    expect(results.map((r) => [r.toolCallId, r.content, r.isError])).toEqual(
      names.map((name, i) => [i === 0 ? '__proto__' : name, `ran ${name}`, undefined]),
    );
  });
});
