import { z } from 'zod';

/**
 * An MCP tool result as the text the model reads. Text blocks are the text; structured content
 * is serialized as JSON when no text block carries the result (the spec asks servers to repeat
 * structured results in a text block for readers of text, so that block wins when present);
 * images, audio and binary resources are noted with their type and size, never inlined; a block
 * of a type MCP does not define, or a malformed one, is noted by its type.
 */

const TextBlock = z.object({ type: z.literal('text'), text: z.string() });
const MediaBlock = z.object({ type: z.enum(['image', 'audio']), data: z.string(), mimeType: z.string() });
const ResourceBlock = z.object({
  type: z.literal('resource'),
  resource: z.object({ uri: z.string(), mimeType: z.string().optional(), text: z.string().optional(), blob: z.string().optional() }),
});
const LinkBlock = z.object({ type: z.literal('resource_link'), uri: z.string(), mimeType: z.string().optional() });
const Block = z.union([TextBlock, MediaBlock, ResourceBlock, LinkBlock]);

/**
 * A tools/call result as read from the server: each content block only needs a `type` (an
 * unknown or malformed block is noted in the text, not a failed call).
 */
export const CallResultSchema = z.looseObject({
  content: z.array(z.looseObject({ type: z.string() })).default([]),
  structuredContent: z.record(z.string(), z.unknown()).optional(),
  isError: z.boolean().optional(),
});
export type CallResult = z.input<typeof CallResultSchema>;

/** Bytes a base64 payload decodes to, without decoding it. */
const base64Bytes = (data: string): number => Buffer.byteLength(data, 'base64');

function blockText(raw: { type: string }): string {
  const parsed = Block.safeParse(raw);
  if (!parsed.success) return `[${raw.type.slice(0, 40)} content]`;
  const block = parsed.data;
  switch (block.type) {
    case 'text':
      return block.text;
    case 'image':
    case 'audio':
      return `[${block.type}: ${block.mimeType}, ${base64Bytes(block.data)} bytes]`;
    case 'resource': {
      const { uri, mimeType, text, blob } = block.resource;
      if (text !== undefined) return `[resource: ${uri}]\n${text}`;
      return `[resource: ${uri}${mimeType ? `, ${mimeType}` : ''}${blob !== undefined ? `, ${base64Bytes(blob)} bytes` : ''}]`;
    }
    case 'resource_link':
      return `[resource link: ${block.uri}${block.mimeType ? `, ${block.mimeType}` : ''}]`;
  }
}

/**
 * The text of an MCP tool result, and whether the server flagged it as an error (what `mcpTools`
 * hands the model for each call).
 *
 * @example
 * ```ts
 * resultText({ content: [{ type: 'image', data: 'iVBORw0KGgo=', mimeType: 'image/png' }, { type: 'text', text: 'a chart' }] });
 * // { text: '[image: image/png, 8 bytes]\na chart', isError: false }
 * ```
 */
export function resultText(result: CallResult): { text: string; isError: boolean } {
  const parsed = CallResultSchema.parse(result);
  const hasText = parsed.content.some((block) => block.type === 'text');
  const parts = parsed.content.map(blockText);
  if (parsed.structuredContent !== undefined && !hasText) parts.unshift(JSON.stringify(parsed.structuredContent));
  return { text: parts.join('\n'), isError: parsed.isError === true };
}
