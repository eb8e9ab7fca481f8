import type { SseSink } from '../viewer/sse.js';

/**
 * A Fetch response body as an SSE sink: bytes are queued in the body's stream until the
 * client's connection takes them, and `writableLength` is that queue (what a stalled reader
 * holds in this process), so the viewer's bounded `SseStream` can drop a reader that falls behind.
 */
export class FetchSink implements SseSink {
  readonly body: ReadableStream<Uint8Array>;
  #controller!: ReadableStreamDefaultController<Uint8Array>;
  /** Nothing more is written (ended, destroyed or cancelled). */
  #done = false;
  /** The client went away or the body was destroyed: nothing is held for it. */
  #gone = false;

  /** `onCancel` runs once when the client goes away (the body is cancelled) or the sink ends. */
  constructor(onCancel: () => void) {
    let called = false;
    const once = () => {
      if (!called) (called = true), onCancel();
    };
    this.#onEnd = once;
    this.body = new ReadableStream<Uint8Array>(
      {
        start: (controller) => {
          this.#controller = controller;
        },
        cancel: () => {
          this.#done = this.#gone = true;
          once();
        },
      },
      // High-water mark 0: desiredSize is minus the bytes queued.
      { highWaterMark: 0, size: (chunk) => chunk.byteLength },
    );
  }

  readonly #onEnd: () => void;

  get writableLength(): number {
    return this.#gone ? 0 : -(this.#controller.desiredSize ?? 0);
  }

  write(chunk: Buffer): void {
    if (!this.#done) this.#controller.enqueue(new Uint8Array(chunk.buffer, chunk.byteOffset, chunk.byteLength));
  }

  end(chunk?: Buffer): void {
    if (this.#done) return;
    if (chunk) this.write(chunk);
    this.#done = true;
    this.#controller.close();
    this.#onEnd();
  }

  /** Drops what is queued, also after `end` (a dropped reader that never read its last bytes). */
  destroy(): void {
    if (this.#gone) return;
    this.#done = this.#gone = true;
    try {
      this.#controller.error(new Error('stream dropped: the client fell behind'));
    } catch {
      // Already read out and closed: nothing is held.
    }
    this.#onEnd();
  }
}
