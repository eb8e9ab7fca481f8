import { realpath } from 'node:fs/promises';
import path from 'node:path';
import { z } from 'zod';
import { resolveInRoot } from '../../tools/fs-root.js';
import { InvalidConfigError } from '../../errors.js';
import type { ToolPolicy, ToolPolicyVerdict } from './tool-policy.js';

/**
 * Two small tool policies that show the idea: a call budget per tool, and a path rule for file
 * tools. Both are plain `ToolPolicy` functions: list them in `toolPolicy` beside your own.
 */

const BudgetSchema = z.record(z.string().min(1), z.number().int().nonnegative(), { error: 'callBudget takes { toolName: maxCalls } with whole numbers >= 0' });

/**
 * At most `limits[name]` calls of each named tool per run; the call past it is denied with a
 * reason the model reads ("call budget for read_file spent: 3 per run"). Tools not named are
 * not limited. Counts every call the run asked for, earlier calls of the same batch included.
 *
 * @example
 * ```ts
 * import { createAgentMachine, readFileTool } from 'loopchart';
 * import { callBudget } from 'loopchart/policies';
 *
 * const agent = createAgentMachine({ model, tools: [readFileTool({ root: '.' })], toolPolicy: callBudget({ read_file: 3 }) });
 * ```
 */
export function callBudget(limits: Record<string, number>): ToolPolicy {
  const parsed = BudgetSchema.safeParse(limits);
  if (!parsed.success) throw new InvalidConfigError(parsed.error.issues.map((issue) => `${issue.path.join('.')}: ${issue.message}`).join('; '));
  // Tool names come from the model: looked up in a Map, never on an object's prototype chain.
  const budget = new Map(Object.entries(parsed.data));
  return function callBudget({ call, earlierCalls }): ToolPolicyVerdict {
    const limit = budget.get(call.name);
    if (limit === undefined) return { type: 'allow' };
    const used = earlierCalls.filter((earlier) => earlier.call.name === call.name).length;
    return used < limit ? { type: 'allow' } : { type: 'deny', reason: `call budget for ${call.name} spent: ${limit} per run` };
  };
}

const PathRuleSchema = z.strictObject({
  roots: z.array(z.string().min(1)).min(1, { error: 'pathRule needs at least one root' }),
  base: z.string().min(1).optional(),
  tools: z.record(z.string().min(1), z.array(z.string().min(1)).min(1)).optional(),
});

/** The options of `pathRule`. */
export type PathRuleOptions = z.input<typeof PathRuleSchema>;

/** The built-in file tools and the argument that names their path. */
const FILE_TOOLS: Record<string, string[]> = { read_file: ['path'], write_file: ['path'], list_dir: ['path'] };

/**
 * Refuses a file tool's path whose real location is outside every allowed root: `..` is
 * resolved and so is every symlink on the way (a link inside a root that points out is
 * refused; so is a dangling one that would create a file outside). Relative paths are resolved
 * against `base` (default: the first root). `tools` maps each tool to the arguments holding a
 * path (default: the built-in `read_file`, `write_file` and `list_dir`, argument `path`); other
 * tools are allowed. A path argument that is not a string is refused.
 *
 * @example
 * ```ts
 * import { createAgentMachine, readFileTool, writeFileTool } from 'loopchart';
 * import { pathRule } from 'loopchart/policies';
 *
 * const tools = [readFileTool({ root: '.' }), writeFileTool({ root: '.' })];
 * const agent = createAgentMachine({ model, tools, toolPolicy: pathRule({ roots: ['./docs'], base: '.' }) });
 * ```
 */
export function pathRule(options: PathRuleOptions): ToolPolicy {
  const parsed = PathRuleSchema.safeParse(options);
  if (!parsed.success) throw new InvalidConfigError(parsed.error.issues.map((issue) => `pathRule ${issue.path.join('.')}: ${issue.message}`).join('; '));
  const roots = parsed.data.roots.map((root) => path.resolve(root));
  const base = path.resolve(parsed.data.base ?? roots[0]!);
  const tools = new Map(Object.entries(parsed.data.tools ?? FILE_TOOLS));
  return async function pathRule({ call }): Promise<ToolPolicyVerdict> {
    const names = tools.get(call.name);
    if (!names) return { type: 'allow' };
    for (const name of names) {
      const args = call.args as Record<string, unknown>;
      const value = Object.hasOwn(args, name) ? args[name] : undefined;
      if (value === undefined) continue;
      if (typeof value !== 'string') return { type: 'deny', reason: `argument ${name} of ${call.name} must be a path string` };
      const problem = await outsideProblem(roots, path.resolve(base, value));
      if (problem) return { type: 'deny', reason: `${call.name}: path "${value}" ${problem}` };
    }
    return { type: 'allow' };
  };
}

/** Why an absolute path's real location is not inside any root's real location, or null when one holds it. */
async function outsideProblem(roots: readonly string[], target: string): Promise<string | null> {
  let real: string;
  let realRoots: string[];
  try {
    // Walked from the file system's root: every link on the way is followed, a dangling one to where it points.
    real = await resolveInRoot(path.parse(target).root, target);
    realRoots = await Promise.all(roots.map((root) => realpath(root)));
  } catch (error) {
    return `cannot be checked: ${(error as Error).message}`;
  }
  return realRoots.some((root) => isInside(root, real)) ? null : 'is outside the allowed roots';
}

function isInside(root: string, candidate: string): boolean {
  const relative = path.relative(root, candidate);
  return relative === '' || (relative !== '..' && !relative.startsWith(`..${path.sep}`) && !path.isAbsolute(relative));
}
