/**
 * Tool arguments named like Object.prototype members are validated as own properties (issue 25
 * item 6). zod 4.6.7 reads inherited members and skips `__proto__`; the guard before it (a
 * null-prototype copy, `__proto__` checked against its JSON Schema) makes an optional
 * `toString` optional, a required one required, and a `__proto__` argument enforced, through a
 * zod tool and a JSON Schema tool alike, at the top level and nested.
 */
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { defineTool, InvalidToolError, type Tool } from '../../src/index.js';
import { runToolCalls } from '../../src/tools/run-tools.js';

const NAMES = ['toString', 'constructor', '__proto__', 'hasOwnProperty'] as const;
type Position = 'optional' | 'required' | 'nested';

/** The arguments as a model sends them: JSON text, so `__proto__` is an own key. */
const json = (text: string): unknown => JSON.parse(text);

function zodTool(name: string, position: Position, seen: unknown[]): Tool {
  const field = position === 'optional' ? z.string().optional() : z.string();
  const shape = position === 'nested' ? { outer: z.object({ [name]: field }) } : { [name]: field };
  return defineTool({ name: 'probe', description: 'Records its arguments', input: z.object(shape), execute: (args) => (seen.push(args), 'ok') });
}

function jsonSchemaTool(name: string, position: Position, seen: unknown[]): Tool {
  const inner = { type: 'object', properties: { [name]: { type: 'string' } }, ...(position !== 'optional' && { required: [name] }) };
  const inputSchema = position === 'nested' ? { type: 'object', properties: { outer: inner }, required: ['outer'] } : inner;
  return defineTool({ name: 'probe', description: 'Records its arguments', inputSchema, execute: (args) => (seen.push(args), 'ok') });
}

async function call(tool: Tool, args: unknown) {
  const [result] = await runToolCalls([{ call: { id: 'c1', name: 'probe', args } }], [tool], { idempotencyKey: () => 'k' });
  return result!;
}

const wrap = (position: Position, body: string): string => (position === 'nested' ? `{"outer":${body}}` : body);
const holder = (position: Position, args: unknown): Record<string, unknown> =>
  (position === 'nested' ? (args as { outer: Record<string, unknown> }).outer : args) as Record<string, unknown>;

describe.each([
  ['defineTool with a zod schema', zodTool],
  ['defineTool with a JSON Schema', jsonSchemaTool],
])('%s', (_, make) => {
  describe.each(NAMES)('an argument named %s', (name) => {
    it.each(['optional', 'required', 'nested'] as const)('as a %s key: given, it reaches the tool as an own property', async (position) => {
      const seen: unknown[] = [];
      const result = await call(make(name, position, seen), json(wrap(position, `{"${name}":"given"}`)));
      expect(result.isError, result.content).toBeUndefined();
      const args = holder(position, seen[0]);
      expect(Object.hasOwn(args, name)).toBe(true);
      expect(Object.getOwnPropertyDescriptor(args, name)!.value).toBe('given');
    });

    it.each(['optional', 'required', 'nested'] as const)('as a %s key: the wrong type is refused, naming the argument', async (position) => {
      const seen: unknown[] = [];
      const result = await call(make(name, position, seen), json(wrap(position, `{"${name}":5}`)));
      expect(result.isError).toBe(true);
      expect(result.content).toContain(`- ${position === 'nested' ? `outer.${name}` : name}:`);
      expect(seen).toEqual([]);
    });

    it.each(['required', 'nested'] as const)('as a %s key: missing, it is refused (the inherited member does not count)', async (position) => {
      const seen: unknown[] = [];
      const result = await call(make(name, position, seen), json(wrap(position, '{}')));
      expect(result.isError).toBe(true);
      expect(result.content).toContain(`- ${position === 'nested' ? `outer.${name}` : name}:`);
      expect(seen).toEqual([]);
    });

    it('as an optional key: missing, the tool runs without it', async () => {
      const seen: unknown[] = [];
      const result = await call(make(name, 'optional', seen), {});
      expect(result.isError, result.content).toBeUndefined();
      expect(Object.keys(seen[0] as object)).toEqual([]);
    });
  });
});

describe('the own-property guard', () => {
  it('hands a passed-through object (z.unknown) to the tool as an ordinary object', async () => {
    const seen: unknown[] = [];
    const tool = defineTool({ name: 'probe', description: 'd', input: z.object({ blob: z.unknown() }), execute: ({ blob }) => (seen.push(blob), String(blob)) });
    const result = await call(tool, { blob: { a: 1 } });
    expect(result.content).toBe('[object Object]');
    expect(Object.getPrototypeOf(seen[0])).toBe(Object.prototype);
  });

  it('refuses, when the tool is defined, a __proto__ argument it could not place (inside an array)', () => {
    expect(() =>
      defineTool({
        name: 'probe',
        description: 'd',
        inputSchema: { type: 'object', properties: { list: { type: 'array', items: { type: 'object', properties: { ['__proto__']: { type: 'string' } } } } } },
        execute: () => 'ran',
      }),
    ).toThrow(InvalidToolError);
  });
});
