import { z } from 'zod';
import { jsonValueProblem } from '../json-value.js';

/**
 * Tool inputs given as JSON Schema (an MCP server's tool list, a schema written by hand). Such a
 * schema comes from outside: it is checked for shape here, then turned into a zod validator with
 * zod 4's `z.fromJSONSchema`, which enforces what it converts and refuses (throws) what it cannot
 * express (`if`/`then`/`else`, `dependentSchemas`, a `$ref` it cannot resolve). zod's converter
 * reads some malformed keywords loosely (`properties: 5` validates nothing), hence the shape
 * check first.
 */

/** A JSON Schema object, as given (it is sent to the model as is). */
export type JsonSchema = Record<string, unknown>;

const TypeName = z.enum(['object', 'array', 'string', 'number', 'integer', 'boolean', 'null']);

/** The keywords the converter reads, with the shape JSON Schema gives them; others pass through. */
const SchemaNode: z.ZodType<unknown> = z.lazy(() =>
  z.union([
    z.boolean(),
    z.looseObject({
      type: z.union([TypeName, z.array(TypeName).min(1)]).optional(),
      properties: z.record(z.string(), SchemaNode).optional(),
      patternProperties: z.record(z.string(), SchemaNode).optional(),
      additionalProperties: SchemaNode.optional(),
      items: z.union([SchemaNode, z.array(SchemaNode)]).optional(),
      prefixItems: z.array(SchemaNode).optional(),
      required: z.array(z.string()).optional(),
      enum: z.array(z.unknown()).optional(),
      anyOf: z.array(SchemaNode).min(1).optional(),
      oneOf: z.array(SchemaNode).min(1).optional(),
      allOf: z.array(SchemaNode).min(1).optional(),
      not: SchemaNode.optional(),
      $defs: z.record(z.string(), SchemaNode).optional(),
      definitions: z.record(z.string(), SchemaNode).optional(),
      $ref: z.string().optional(),
      pattern: z.string().optional(),
      minLength: z.number().int().nonnegative().optional(),
      maxLength: z.number().int().nonnegative().optional(),
      minItems: z.number().int().nonnegative().optional(),
      maxItems: z.number().int().nonnegative().optional(),
      minimum: z.number().optional(),
      maximum: z.number().optional(),
      exclusiveMinimum: z.union([z.number(), z.boolean()]).optional(),
      exclusiveMaximum: z.union([z.number(), z.boolean()]).optional(),
      multipleOf: z.number().positive().optional(),
      description: z.string().optional(),
    }),
  ]),
);

/** Why `schema` cannot be a tool's input schema, or null. Pure; never throws. */
export function jsonSchemaProblem(schema: unknown): string | null {
  const notJson = jsonValueProblem(schema, 'inputSchema');
  if (notJson) return `its input schema is not plain JSON (${notJson})`;
  if (typeof schema !== 'object' || schema === null || Array.isArray(schema)) return 'its input schema must be a JSON Schema object';
  if ((schema as JsonSchema).type !== 'object') {
    return 'its input schema must describe an object (type: "object"): providers send tool arguments as a JSON object';
  }
  const shape = SchemaNode.safeParse(schema);
  if (!shape.success) {
    const { path, message } = deepest(shape.error.issues, []);
    return `its input schema is not a well-formed JSON Schema at ${['inputSchema', ...path.map(String)].join('.')}: ${message}`;
  }
  return null;
}

/**
 * The issue that got furthest into the schema: a sub-schema is a union (boolean or object), whose
 * own issue says only "invalid input" at the union's place; the branch issues say what and where.
 */
function deepest(issues: readonly z.core.$ZodIssue[], base: readonly PropertyKey[]): { path: PropertyKey[]; message: string } {
  let best = { path: [...base], message: 'invalid' };
  for (const issue of issues) {
    const path = [...base, ...issue.path];
    const found =
      issue.code === 'invalid_union' && issue.errors.length > 0
        ? issue.errors.map((branch) => deepest(branch, path)).reduce((a, b) => (b.path.length > a.path.length ? b : a))
        : { path, message: issue.message };
    if (found.path.length >= best.path.length) best = found;
  }
  return best;
}

/**
 * The validator for a JSON Schema input, or the problem. `z.fromJSONSchema` throws on what it
 * cannot express: that is a problem too, never a crash.
 */
export function jsonSchemaValidator(schema: unknown): { validator: z.ZodType<Record<string, unknown>> } | { problem: string } {
  const problem = jsonSchemaProblem(schema);
  if (problem) return { problem };
  try {
    return { validator: z.fromJSONSchema(schema as JsonSchema) as z.ZodType<Record<string, unknown>> };
  } catch (error) {
    return { problem: `its input schema cannot be used for validation: ${error instanceof Error ? error.message : String(error)}` };
  }
}
