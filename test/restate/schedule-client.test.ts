/** `restateScheduleClient`'s ingress URL is checked where it enters (the calls themselves run against a real server in test/distributed/schedules.test.ts). */
import { describe, expect, it } from 'vitest';
import { restateScheduleClient } from '../../src/restate/schedule-client.js';
import { InvalidScheduleError } from '../../src/schedules.js';

describe('restateScheduleClient', () => {
  it('takes an http(s) URL, named in its label without a trailing slash; anything else is an InvalidScheduleError', () => {
    expect(restateScheduleClient('http://127.0.0.1:8080/').label).toBe('Restate at http://127.0.0.1:8080');
    expect(restateScheduleClient('https://restate.example/ingress').label).toBe('Restate at https://restate.example/ingress');
    for (const bad of ['not a url', 'file:///etc/passwd', 'ftp://127.0.0.1/', '', 42 as never, undefined as never]) {
      expect(() => restateScheduleClient(bad), String(bad)).toThrow(InvalidScheduleError);
      expect(() => restateScheduleClient(bad)).toThrow(/restateScheduleClient takes the ingress URL \(http:\/\/host:port\)/);
    }
  });
});
