/**
 * A request body read within a size and a time bound: the chat handler's and the MCP handler's
 * one way to take a body (a foundation file, so both layers use it).
 */

/** The longest a body may be given to arrive, in ms (the `bodyTimeoutMs` options' bound). */
export const MAX_BODY_TIMEOUT_MS = 600_000;
/** How long a body may take to arrive once its headers have, by default (`bodyTimeoutMs`): 30 s. */
export const DEFAULT_BODY_TIMEOUT_MS = 30_000;

/** Why a body cannot be taken, with its status: 413 too large, 408 too slow, 400 anything else. */
export interface BodyProblem {
  problem: string;
  status: 400 | 408 | 413;
}

/**
 * The body's bytes, read up to `maxBytes` (a larger one is refused before it is all read) and
 * within `timeoutMs` (a client that stops sending mid-body is let go, on any runtime: Node's own
 * `requestTimeout`, 300 s, is not there under every framework), or why it cannot be taken. A
 * request without a body reads as no bytes.
 *
 * @example
 * ```ts
 * const read = await readBody(new Request('http://localhost/', { method: 'POST', body: '{}' }), 1 << 20, 30_000);
 * if ('problem' in read) console.log(read.status, read.problem);
 * else console.log(read.bytes.byteLength); // 2
 * ```
 */
export async function readBody(request: Request, maxBytes: number, timeoutMs: number): Promise<{ bytes: Uint8Array<ArrayBuffer> } | BodyProblem> {
  const declared = Number(request.headers.get('content-length') ?? NaN);
  if (declared > maxBytes) return { problem: `the body is ${declared} bytes; the limit is ${maxBytes}`, status: 413 };
  if (!request.body) return { bytes: new Uint8Array() };
  const reader = request.body.getReader();
  const parts: Uint8Array[] = [];
  let size = 0;
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<'late'>((resolve) => (timer = setTimeout(() => resolve('late'), timeoutMs)));
  try {
    for (;;) {
      // A client that goes away mid-body rejects the read: its request is over, no fault of ours.
      const read = await Promise.race([reader.read(), late]).catch(() => 'cut' as const);
      if (read === 'cut') return { problem: 'the body was cut off before its end', status: 400 };
      if (read === 'late') {
        await reader.cancel().catch(() => {});
        return { problem: `the body did not arrive within ${timeoutMs} ms`, status: 408 };
      }
      if (read.done) break;
      size += read.value.byteLength;
      if (size > maxBytes) {
        await reader.cancel().catch(() => {});
        return { problem: `the body is over the limit of ${maxBytes} bytes`, status: 413 };
      }
      parts.push(read.value);
    }
  } finally {
    clearTimeout(timer);
  }
  return { bytes: Buffer.concat(parts) };
}
