// Server-sent events for streamed completions. Data is always one line of JSON (JSON.stringify
// never emits a raw newline); event names and ids are refused if they contain CR or LF, which
// would let a value start a new field. Writes respect backpressure, and events written in the
// same turn of the event loop are sent together, as one HTTP chunk: one write per tick and stream
// however many tokens the engine delivered, and still one event per write when they come one by one.
// With an interval, a stream writes at most once per interval: events that come sooner wait for
// the rest of it (each socket write and each client read costs tens of microseconds of CPU, which
// 32 fast streams take from the engine on a small machine). The first write and the end never wait.

import type { ServerResponse } from 'node:http';

/** Pending text that is written at once rather than at the end of the tick (the socket's high-water mark). */
const FLUSH_CHARS = 16 * 1024;

export class SseWriter {
  private started = false;
  /** Events written in this turn of the event loop (or interval), not yet handed to the socket. */
  private pending = '';
  /** performance.now() of the last write to the socket. */
  private lastWrite = -Infinity;
  private timer: NodeJS.Timeout | null = null;

  constructor(
    private readonly res: ServerResponse,
    private readonly intervalMs = 0,
  ) {}

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
    if (!this.write(text)) await this.drained();
  }

  /**
   * Writes `data: <json>` for JSON already serialised by JSON.stringify (one line). Returns false
   * when the socket is full: the caller then awaits drained(). No promise per event on the hot path.
   */
  send(json: string): boolean {
    return this.write(`data: ${json}\n\n`);
  }

  /** Resolves once the socket can take more, or the response is gone. */
  drained(): Promise<void> {
    if (!this.isOpen || !this.res.writableNeedDrain) return Promise.resolve();
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

  /** The OpenAI terminator `data: [DONE]`, then the end of the response. */
  done(): void {
    if (this.isOpen) this.res.end(`${this.take()}data: [DONE]\n\n`);
  }

  end(): void {
    if (this.isOpen) this.res.end(this.take());
  }

  /** Queues the text for the end of this turn of the event loop (or interval); false when the socket is full. */
  private write(text: string): boolean {
    if (!this.isOpen) return true;
    if (this.pending === '') {
      const wait = this.lastWrite + this.intervalMs - performance.now();
      if (wait > 0) this.timer = setTimeout(() => this.flush(), wait);
      else setImmediate(() => this.flush());
    }
    this.pending += text;
    // A tick that produces a lot (a sampler that answers at once) is not held whole in memory.
    if (this.pending.length >= FLUSH_CHARS) this.flush();
    return !this.res.writableNeedDrain;
  }

  private flush(): void {
    const text = this.take();
    if (text === '' || !this.isOpen) return;
    this.lastWrite = performance.now();
    this.res.write(text);
  }

  private take(): string {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    const text = this.pending;
    this.pending = '';
    return text;
  }
}
