/**
 * restateScheduleClient's ingress URL carries no credentials, query or fragment: each is refused
 * where it enters, and no message repeats a credential. Before, credentials were taken and every
 * call failed with a StoreError quoting them (its label, shown as the viewer's title, too), and a
 * query or fragment swallowed the path every call appends.
 */
import { describe, expect, it } from 'vitest';
import { restateScheduleClient } from '../../src/restate/schedule-client.js';
import { InvalidScheduleError } from '../../src/schedules.js';

const SECRET = 'sk-SECRET-123';

describe('restateScheduleClient: the ingress URL', () => {
  it.each([
    ['user info', `http://admin:${SECRET}@127.0.0.1:8080`, /the ingress URL must not contain credentials/],
    ['a user alone', `https://${SECRET}@restate.example`, /the ingress URL must not contain credentials/],
    ['a query', `http://127.0.0.1:8080/?token=${SECRET}`, /the ingress URL must not have a query or a #fragment/],
    ['a fragment', 'http://127.0.0.1:8080/#ingress', /the ingress URL must not have a query or a #fragment/],
  ])('with %s is an InvalidScheduleError that does not repeat it', (_, url, problem) => {
    expect(() => restateScheduleClient(url)).toThrow(InvalidScheduleError);
    expect(() => restateScheduleClient(url)).toThrow(problem);
    expect(() => restateScheduleClient(url)).not.toThrow(new RegExp(SECRET));
  });

  it('one that is no http(s) URL is not quoted when it holds credentials', () => {
    expect(() => restateScheduleClient(`ftp://admin:${SECRET}@127.0.0.1/`)).toThrow(/restateScheduleClient takes the ingress URL \(http:\/\/host:port\)/);
    expect(() => restateScheduleClient(`ftp://admin:${SECRET}@127.0.0.1/`)).not.toThrow(new RegExp(SECRET));
  });
});
