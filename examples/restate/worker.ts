/**
 * A Restate worker serving loopchart sessions: `PORT=9080 npx tsx examples/restate/worker.ts`.
 * Bound to 127.0.0.1; put a load balancer in front of several of them and register its URL with
 * the Restate server (`POST <admin>/deployments {"uri": "..."}`). INGRESS (Restate's ingress URL)
 * turns on live text deltas in the event stream.
 */
import http2 from 'node:http2';
import * as restate from '@restatedev/restate-sdk';
import { restateSession } from 'loopchart/restate';
import { machine } from './agent.js';

const { session, channel } = restateSession({ machine, ...(process.env.INGRESS && { ingressUrl: process.env.INGRESS }) });
const server = http2.createServer(restate.createEndpointHandler({ services: [session, channel] }));
server.listen(Number(process.env.PORT ?? 9080), '127.0.0.1', () => {
  console.log(`worker listening on http://127.0.0.1:${(server.address() as { port: number }).port}`);
});
