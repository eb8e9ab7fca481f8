import { z as zod3 } from 'zod3';
import { z as zod3v4 } from 'zod3/v4';
import { createActor, toPromise } from 'xstate';
import { describe, expect, it } from 'vitest';
import { createAgentMachine, defineTool, InvalidToolError, type Tool } from '../../src/index.js';
import { scriptedModel } from '../../src/testing.js';

/**
 * zod is a peer dependency: a user's schema may come from another copy than loopchart's own.
 * `zod3` is zod 3.25 installed under an npm alias, so both majors sit side by side here.
 */
describe('zod versions in tool schemas', () => {
  it('a zod 3 schema is refused at definition time with the cause and the fix', () => {
    let error: unknown;
    try {
      defineTool({ name: 'add', description: 'adds', input: zod3.object({ a: zod3.number() }) as never, execute: () => 0 });
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(InvalidToolError);
    const message = (error as Error).message;
    expect(message).toContain('tool "add"');
    expect(message).toContain('zod 3 schema');
    expect(message).toContain('npm install zod@^4');
    expect(message).toContain("'zod/v4'");
    expect(message).not.toContain("reading 'def'");
  });

  it('something that is not a schema at all is named as such', () => {
    expect(() => defineTool({ name: 'x', description: 'x', input: { type: 'object' } as never, execute: () => 0 })).toThrow(
      /not a zod schema/,
    );
  });

  it("a zod 3.25 'zod/v4' schema works end to end: JSON Schema for the model, validation of the arguments", async () => {
    // zod 3.25's v4 types carry their own version, which zod 4.x's types refuse: a cast is the price.
    const add = defineTool({
      name: 'add',
      description: 'adds two numbers',
      input: zod3v4.object({ a: zod3v4.number(), b: zod3v4.number() }) as never,
      execute: (args: { a: number; b: number }) => String(args.a + args.b),
    }) as Tool;
    expect(add.definition.inputSchema).toMatchObject({ type: 'object', required: ['a', 'b'] });
    const model = scriptedModel([
      { toolCalls: [{ id: 'bad', name: 'add', args: { a: 'one', b: 2 } }, { id: 'good', name: 'add', args: { a: 1, b: 2 } }] },
      { text: 'done' },
    ]);
    const actor = createActor(createAgentMachine({ model, tools: [add] }), { input: { prompt: 'add' } }).start();
    const output = await toPromise(actor);
    const results = output.messages.filter((m) => m.role === 'tool');
    expect(results).toEqual([
      expect.objectContaining({ toolCallId: 'bad', isError: true }),
      expect.objectContaining({ toolCallId: 'good', content: '3' }),
    ]);
  });
});
