/**
 * A Restate object's name goes into the ingress path as it is, so it is checked where it enters by
 * Restate's own rule for a service name (its endpoint manifest's pattern: a letter, or `_` and a
 * letter or digit, then letters, digits, `.`, `_`, `-`; `restate…` and `openapi` reserved):
 * `restateScheduleClient` and `restateSchedules` refuse another with an InvalidScheduleError,
 * `restateSession` with an InvalidConfigError. Before, `name: 'a/b'` was taken: the client called
 * `/a/b/<id>/get`, a path no object answers (Restate's SDK refuses the `/` only when the object
 * is bound), and a name Restate refuses at registration was taken too. A local HTTP server on
 * 127.0.0.1 stands in for the ingress only to record the paths the client calls.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { InvalidConfigError } from '../../src/errors.js';
import { createAgentMachine } from '../../src/index.js';
import { restateScheduleClient } from '../../src/restate/schedule-client.js';
import { restateSchedules } from '../../src/restate/schedule-object.js';
import { restateSession } from '../../src/restate/session-object.js';
import { InvalidScheduleError } from '../../src/schedules.js';
import { scriptedModel } from '../../src/testing.js';
import { startRecordingIngress } from './recording-ingress.js';

const machine = createAgentMachine({ model: scriptedModel([{ text: 'Hello!' }]) });

/** Names Restate would not register, or that are no one segment of a path. */
const REFUSED = ['a/b', 'a b', '1abc', '_', '-a', '.a', 'é', 'a%2Fb', 'a?b', 'restateX', 'RestateSession', 'openapi', 'OpenAPI'];
/** Names Restate registers, each one path segment as it is. */
const TAKEN = ['loopchartSession', 'support', 'my.Sessions', 'a-b_c', '_1x', 'Restat'];

const ingress = await startRecordingIngress();
const { base, paths } = ingress;
afterAll(() => ingress.close());

describe('Restate object names: refused where they enter', () => {
  it("restateScheduleClient({ name: 'a/b' }) is an InvalidScheduleError, and no call reaches the ingress (before: get went to /a/b/nightly/get)", async () => {
    paths.length = 0;
    const error = await (async () => restateScheduleClient(base, { name: 'a/b' }).get('nightly'))().catch((caught: unknown) => caught);
    expect(paths).toEqual([]);
    expect(InvalidScheduleError.isInstance(error)).toBe(true);
  });

  it.each(REFUSED)('restateScheduleClient refuses the name %j, saying why', (name) => {
    expect(() => restateScheduleClient(base, { name })).toThrow(InvalidScheduleError);
    expect(() => restateScheduleClient(base, { name })).toThrow(/restateScheduleClient: name: .*(Restate service name|reserves)/);
  });

  it.each(REFUSED)('restateSchedules refuses %j as its name and as the session name', (name) => {
    expect(() => restateSchedules({ name })).toThrow(InvalidScheduleError);
    expect(() => restateSchedules({ name })).toThrow(/restateSchedules: name: /);
    expect(() => restateSchedules({ session: name })).toThrow(/restateSchedules: session: /);
  });

  it.each(REFUSED)('restateSession refuses the name %j (InvalidConfigError)', (name) => {
    expect(() => restateSession({ machine, name })).toThrow(InvalidConfigError);
    expect(() => restateSession({ machine, name })).toThrow(/restateSession: name: /);
  });

  it.each(TAKEN)('the name %j is taken, and the client calls /<name>/<id>/<handler> with it', async (name) => {
    expect(restateSession({ machine, name }).session.name).toBe(name);
    expect(restateSchedules({ name, session: name }).schedule.name).toBe(name);
    paths.length = 0;
    expect(await restateScheduleClient(base, { name }).get('nightly')).toBeUndefined();
    expect(paths).toEqual([`/${name}/nightly/get`]);
  });
});
