import { request } from 'node:http';

/**
 * One request to a local server with exactly these headers (`setHost: false`: the test writes the
 * Host, the viewer's checks read it; the default is the server's own). Resolves with the status
 * and the body; an event stream, which never ends by itself, is cut at its first bytes.
 */
export function get(port: number, path: string, headers: Record<string, string> = { host: `127.0.0.1:${port}` }, method = 'GET'): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, path, method, headers, setHost: false, timeout: 10_000 }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => {
        body += chunk;
        if (res.headers['content-type'] === 'text/event-stream') req.destroy();
      });
      res.on('end', () => resolve({ status: res.statusCode!, body }));
      res.on('close', () => resolve({ status: res.statusCode!, body }));
    });
    req.on('timeout', () => req.destroy(new Error(`${method} ${path} timed out`)));
    req.on('error', reject);
    req.end();
  });
}
