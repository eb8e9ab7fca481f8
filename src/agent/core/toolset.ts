import { z } from 'zod';
import { listSources, plainDefinitions } from '../../tools/offered-tools.js';
import { InvalidSnapshotError } from '../../errors.js';
import { OfferedSourcesSchema, ToolDefinitionSchema } from './context.js';
import type { SideEffectOutputs } from '../protocol/executor.js';
import type { Handler, IoScope } from '../protocol/io-protocol.js';

/** The `toolset` request: lists the run's tool sources once, keeping the runnable tools for the run's later steps. */
export const toolsetHandler =
  ({ deps, start, execute, finish, fail }: IoScope): Handler<'toolset'> =>
  (request) =>
    start(request.key, async (controller) => {
      const { key } = request;
      const signal = controller.signal;
      try {
        const output = await execute({ key, kind: 'toolset', input: { sources: deps.toolSources.length }, signal }, async () => {
          const { all, listed, sources } = await listSources(deps.tools, deps.toolSources, signal);
          deps.listings.set(key, all);
          return { definitions: plainDefinitions(listed), sources };
        });
        finish(controller, key, { type: 'io.listed', key, output: checkedToolset(key, output) });
      } catch (error) {
        fail(controller, key, 'toolset', error);
      }
    });

const ToolsetOutputSchema = z
  .object({ definitions: z.array(ToolDefinitionSchema), sources: OfferedSourcesSchema.optional() })
  .refine(({ definitions, sources }) => !sources || sources.length === definitions.length, { message: 'sources must name one source per definition' });

/** A toolset step's output, checked: an executor may answer it from a journal written elsewhere. */
function checkedToolset(key: string, output: unknown): SideEffectOutputs['toolset'] {
  const parsed = ToolsetOutputSchema.safeParse(output);
  if (!parsed.success) throw new InvalidSnapshotError(`toolset step ${key}: ${z.prettifyError(parsed.error)}`);
  return parsed.data;
}
