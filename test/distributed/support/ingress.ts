/** A plain HTTP client of Restate's ingress (Node's fetch): what any caller in any language does. */

export interface IngressReply {
  status: number;
  body: unknown;
}

export class IngressClient {
  constructor(readonly url: string, readonly objectName = 'loopchartSession') {}

  /** Calls a handler and waits for its result (`timeoutMs`, 60 s by default). */
  async call(key: string, handler: string, body?: unknown, timeoutMs = 60_000): Promise<IngressReply> {
    const response = await fetch(`${this.url}/${this.objectName}/${encodeURIComponent(key)}/${handler}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body ?? null),
      signal: AbortSignal.timeout(timeoutMs),
    });
    const text = await response.text();
    return { status: response.status, body: text ? JSON.parse(text) : null };
  }

  /** Like `call`, but throws unless the status is 200. */
  async ok<T>(key: string, handler: string, body?: unknown, timeoutMs?: number): Promise<T> {
    const reply = await this.call(key, handler, body, timeoutMs);
    if (reply.status !== 200) throw new Error(`${handler} ${key}: ${reply.status} ${JSON.stringify(reply.body)}`);
    return reply.body as T;
  }

  /** Enqueues a call without waiting (`/send`); resolves with the invocation id. */
  async enqueue(key: string, handler: string, body?: unknown): Promise<string> {
    const reply = await this.call(key, `${handler}/send`, body);
    if (reply.status !== 202 && reply.status !== 200) throw new Error(`${handler}/send ${key}: ${reply.status} ${JSON.stringify(reply.body)}`);
    return (reply.body as { invocationId: string }).invocationId;
  }

  /** Waits for an invocation's result (`/restate/invocation/<id>/attach`). */
  async attach<T>(invocationId: string, timeoutMs = 60_000): Promise<T> {
    const response = await fetch(`${this.url}/restate/invocation/${invocationId}/attach`, {
      signal: AbortSignal.timeout(timeoutMs),
    });
    const text = await response.text();
    if (response.status !== 200) throw new Error(`attach ${invocationId}: ${response.status} ${text}`);
    return JSON.parse(text) as T;
  }
}
