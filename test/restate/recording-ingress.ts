import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';

/** A stand-in for Restate's ingress that records the paths a client calls. */
export interface RecordingIngress {
  /** `http://127.0.0.1:<port>`. */
  base: string;
  /** Every path asked for, in order (clear it between tests). */
  paths: string[];
  close(): Promise<void>;
}

/**
 * A local HTTP server on 127.0.0.1 that answers every call with JSON `null`: it stands in for the
 * ingress only to show which path a client calls, never for what Restate answers.
 */
export async function startRecordingIngress(): Promise<RecordingIngress> {
  const paths: string[] = [];
  const server = createServer((request, response) => {
    paths.push(request.url ?? '');
    request.resume();
    response.writeHead(200, { 'content-type': 'application/json' }).end('null');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    base: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    paths,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
