// Server-sent events for streamed completions. Data is always one line of JSON (JSON.stringify
// never emits a raw newline); event names and ids are refused if they contain CR or LF, which
// would let a value start a new field. Writes respect backpressure, and events written in the
// same tick are sent together.

import type { ServerResponse } from 'node:http';

export class SseWriter {
  private started = false;
  private corked = false;

  constructor(private readonly res: ServerResponse) {}

  get isOpen(): boolean {
    return !this.res.writableEnded && !this.res.destroyed;
  }

  start(headers: Record<string, string> = {}): void {
    if (this.started) return;
    this.started = true;
    this.res.writeHead(200, {
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-cache',
      'x-accel-buffering': 'no',
      ...headers,
    });
    // No flushHeaders(): the headers leave with the first event, in one write.
  }

  /** Writes `data: <json>`; resolves once the socket can take more (backpressure). */
  async data(value: unknown, fields: { event?: string; id?: string } = {}): Promise<void> {
    let text = '';
    for (const [name, v] of Object.entries(fields)) {
      if (v === undefined) continue;
      if (/[\r\n]/.test(v)) throw new Error(`SSE ${name} must not contain a line break`);
      text += `${name}: ${v}\n`;
    }
    text += `data: ${JSON.stringify(value)}\n\n`;
    await this.write(text);
  }

  /** The OpenAI terminator `data: [DONE]`, then the end of the response. */
  done(): void {
    if (this.isOpen) this.res.end('data: [DONE]\n\n');
  }

  end(): void {
    if (this.isOpen) this.res.end();
  }

  /** Events written in one turn of the event loop leave together: cork now, uncork after it. */
  private write(text: string): Promise<void> {
    if (!this.isOpen) return Promise.resolve();
    if (!this.corked && typeof this.res.cork === 'function') {
      this.corked = true;
      this.res.cork();
      setImmediate(() => {
        this.corked = false;
        this.res.uncork();
      });
    }
    if (this.res.write(text)) return Promise.resolve();
    return new Promise((resolve) => {
      const done = () => {
        this.res.off('drain', done);
        this.res.off('close', done);
        resolve();
      };
      this.res.on('drain', done);
      this.res.on('close', done);
    });
  }
}
