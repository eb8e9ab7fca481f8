/**
 * `defineTool` with a JSON Schema input (`inputSchema`): the model sees the schema as given (less a
 * top-level `$schema`), the arguments are validated against it before `execute`, and a schema
 * from outside that is malformed or unenforceable is a typed error at definition time.
 */
import { describe, expect, expectTypeOf, it } from 'vitest';
import { defineTool, InvalidToolError, LoopchartError } from '../../src/index.js';
import { runToolCalls } from '../../src/tools/run-tools.js';

const schema = {
  $schema: 'http://json-schema.org/draft-07/schema#',
  type: 'object',
  properties: {
    path: { type: 'string', minLength: 1, description: 'where' },
    depth: { type: 'integer', minimum: 0, maximum: 5 },
    mode: { enum: ['list', 'tree'] },
    tags: { type: 'array', items: { type: 'string', pattern: '^[a-z]+$' } },
  },
  required: ['path'],
  additionalProperties: false,
};

const seen: unknown[] = [];
const tool = defineTool({
  name: 'list',
  description: 'Lists a path.',
  inputSchema: schema,
  execute(args) {
    expectTypeOf(args).toEqualTypeOf<Record<string, unknown>>();
    seen.push(args);
    return `listed ${String(args.path)}`;
  },
});

const run = (args: unknown) =>
  runToolCalls([{ call: { id: 'c1', name: 'list', args } }], [tool], { idempotencyKey: () => 'k' }).then(([result]) => result!);

describe('defineTool with a JSON Schema input', () => {
  it('the model sees the schema as given, without its top-level $schema', () => {
    const { $schema: _dialect, ...rest } = schema;
    expect(tool.definition).toEqual({ name: 'list', description: 'Lists a path.', inputSchema: rest });
    // The given object is not changed.
    expect(schema.$schema).toBe('http://json-schema.org/draft-07/schema#');
  });

  it('valid arguments reach execute', async () => {
    seen.length = 0;
    expect(await run({ path: 'docs', depth: 2, mode: 'tree', tags: ['a'] })).toEqual({
      role: 'tool',
      toolCallId: 'c1',
      toolName: 'list',
      content: 'listed docs',
    });
    expect(seen).toEqual([{ path: 'docs', depth: 2, mode: 'tree', tags: ['a'] }]);
  });

  it.each([
    ['a required property missing', {}, 'path'],
    ['a wrong type', { path: 3 }, 'path'],
    ['a string below minLength', { path: '' }, 'path'],
    ['an integer above maximum', { path: 'a', depth: 9 }, 'depth'],
    ['a number where an integer is asked', { path: 'a', depth: 1.5 }, 'depth'],
    ['a value outside the enum', { path: 'a', mode: 'flat' }, 'mode'],
    ['an array item against the pattern', { path: 'a', tags: ['A1'] }, 'tags[0]'],
    ['a property additionalProperties: false forbids', { path: 'a', extra: 1 }, 'extra'],
  ])('refuses %s before execute runs', async (_what, args, where) => {
    seen.length = 0;
    const result = await run(args);
    expect(result.isError).toBe(true);
    expect(result.content).toContain('invalid arguments for tool "list"');
    expect(result.content).toContain(where);
    expect(seen).toEqual([]);
  });

  it.each([
    ['not an object schema', { type: 'string' }, 'must describe an object'],
    ['an array', [{ type: 'object' }], 'must be a JSON Schema object'],
    ['a nested unknown type', { type: 'object', properties: { a: { type: 'objekt' } } }, 'inputSchema.properties.a.type'],
    ['properties that are not an object', { type: 'object', properties: 5 }, 'inputSchema.properties'],
    ['required that is not a list', { type: 'object', required: 'a' }, 'inputSchema.required'],
    ['a $ref to nothing', { type: 'object', properties: { a: { $ref: '#/$defs/missing' } } }, 'Reference not found'],
    ['conditionals the validator cannot enforce', { type: 'object', if: { required: ['a'] }, then: { required: ['b'] } }, 'not supported'],
    ['a pattern that is no regular expression', { type: 'object', properties: { a: { type: 'string', pattern: '([' } } }, 'cannot be used'],
    ['a function inside', { type: 'object', properties: { a: () => 1 } }, 'not plain JSON'],
  ])('a malformed schema (%s) is an InvalidToolError, not a crash', (_what, inputSchema, message) => {
    let error: unknown;
    try {
      defineTool({ name: 'bad', description: '', inputSchema: inputSchema as never, execute: () => '' });
    } catch (e) {
      error = e;
    }
    expect(InvalidToolError.isInstance(error)).toBe(true);
    expect((error as LoopchartError).code).toBe('InvalidTool');
    expect((error as Error).message).toContain('tool "bad"');
    expect((error as Error).message).toContain(message);
  });

  it('a schema nested deeper than the JSON limit is refused without overflowing the stack', () => {
    let deep: Record<string, unknown> = { type: 'string' };
    for (let i = 0; i < 10_000; i++) deep = { type: 'object', properties: { a: deep } };
    expect(() => defineTool({ name: 'deep', description: '', inputSchema: deep, execute: () => '' })).toThrow(/not plain JSON/);
  });

  it('a recursive schema ($ref to the root) validates nested values', async () => {
    const tree = defineTool({
      name: 'tree',
      description: '',
      inputSchema: { type: 'object', properties: { name: { type: 'string' }, child: { $ref: '#' } }, required: ['name'] },
      execute: () => 'ok',
    });
    const [good, bad] = await runToolCalls(
      [
        { call: { id: 'g', name: 'tree', args: { name: 'a', child: { name: 'b' } } } },
        { call: { id: 'b', name: 'tree', args: { name: 'a', child: { name: 3 } } } },
      ],
      [tree],
      { idempotencyKey: (call) => call.id },
    );
    expect(good!.content).toBe('ok');
    expect(bad!.isError).toBe(true);
  });

  it('refuses input and inputSchema together', () => {
    expect(() =>
      defineTool({ name: 'both', description: '', inputSchema: { type: 'object' }, input: {} as never, execute: () => '' } as never),
    ).toThrow(/either `input`.*or `inputSchema`/);
  });
});
