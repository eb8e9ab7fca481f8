/**
 * restateSession checks its options when the objects are made (InvalidConfigError naming the
 * option), not when Restate first calls a handler. Before, every value below was accepted: a
 * machine that is none failed each turn, an ingress URL that is none (or holds credentials) lost
 * every live delta without a word (its fetch errors are swallowed), an inactivity timeout of -1 or
 * NaN went to the Restate SDK as it was, and a misspelt option was ignored.
 */
import { describe, expect, it } from 'vitest';
import { InvalidConfigError } from '../../src/errors.js';
import { createAgentMachine } from '../../src/index.js';
import { restateSession, type RestateSessionOptions } from '../../src/restate/session-object.js';
import { scriptedModel } from '../../src/testing.js';

const machine = createAgentMachine({ model: scriptedModel([{ text: 'Hello!' }]) });
const SECRET = 'sk-SECRET-123';

describe('restateSession: options refused when the objects are made', () => {
  it.each([
    ['options null (before: a raw TypeError)', null, /restateSession: .*expected object/],
    ['a machine that is no agent', { machine: 'agent' }, /restateSession: machine: must be an agent machine \(createAgentMachine\)/],
    ['no machine', {}, /restateSession: machine: must be an agent machine/],
    ['an empty name', { machine, name: '' }, /restateSession: name:/],
    ['a name that is no string', { machine, name: 5 }, /restateSession: name:/],
    ['an ingressUrl that is no URL', { machine, ingressUrl: 'not a url' }, /restateSession: ingressUrl: .*does not parse as a URL/],
    ['an ingressUrl that is no http(s)', { machine, ingressUrl: 'ftp://127.0.0.1:8080' }, /restateSession: ingressUrl: .*got a ftp: URL/],
    ['an ingressUrl that is no string', { machine, ingressUrl: 8080 }, /restateSession: ingressUrl:/],
    ['an ingressUrl with credentials', { machine, ingressUrl: `http://admin:${SECRET}@127.0.0.1:8080` }, /restateSession: ingressUrl: .*must not contain credentials/],
    ['an ingressUrl with a query', { machine, ingressUrl: 'http://127.0.0.1:8080/?x=1' }, /restateSession: ingressUrl: .*must not have a query or a #fragment/],
    ['inactivityTimeoutMs -1', { machine, inactivityTimeoutMs: -1 }, /restateSession: inactivityTimeoutMs:/],
    ['inactivityTimeoutMs NaN', { machine, inactivityTimeoutMs: Number.NaN }, /restateSession: inactivityTimeoutMs:/],
    ['inactivityTimeoutMs 1.5', { machine, inactivityTimeoutMs: 1.5 }, /restateSession: inactivityTimeoutMs:/],
    ["inactivityTimeoutMs '60000'", { machine, inactivityTimeoutMs: '60000' }, /restateSession: inactivityTimeoutMs:/],
    ['a misspelt option', { machine, ingressURL: 'http://127.0.0.1:8080' }, /restateSession: unknown option "ingressURL" — did you mean "ingressUrl"\?/],
  ])('%s', (_, options, problem) => {
    expect(() => restateSession(options as RestateSessionOptions)).toThrow(InvalidConfigError);
    expect(() => restateSession(options as RestateSessionOptions)).toThrow(problem);
    expect(() => restateSession(options as RestateSessionOptions)).not.toThrow(new RegExp(SECRET));
  });

  it('valid options still make the session and channel objects', () => {
    for (const options of [{ machine }, { machine, name: 'support', ingressUrl: 'http://127.0.0.1:8080/', inactivityTimeoutMs: 60_000 }]) {
      const { session, channel } = restateSession(options);
      expect(session.name).toBe(options.name ?? 'loopchartSession');
      expect(channel.name).toBe(`${options.name ?? 'loopchartSession'}Channel`);
    }
  });
});
