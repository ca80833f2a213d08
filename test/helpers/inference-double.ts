// What the vLLM and SGLang test doubles (vllm-double.ts, sglang-double.ts) share: an HTTP server
// over the embedded LocalEngine, JSON bodies, server-sent events, the bearer-key check, the
// abort of a generation whose client went away, and versions loaded from folders by name.
// Test doubles: they answer in each project's published formats, nothing more.

import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { LocalEngine } from '../../src/engine/local/engine.js';
import { policyVersionAt } from '../../src/engine/local/policy-versions.js';

export interface InferenceDouble {
  url: string;
  engine: LocalEngine;
  /** Every request's route, in order (admin routes included). */
  routes: string[];
  /** Every finished generation: its prompt and the tokens and log-probs it sent. */
  served: ServedGeneration[];
  /** Generation requests per routing: how many this double served. */
  generations(): number;
  /** TCP connections clients opened to it (a client that keeps its connection alive opens one). */
  connections(): number;
  /** While true, every route answers 503, as a server that is overloaded or restarting. */
  unavailable: boolean;
  /** Stops listening: new connections are refused, as a server that went down. */
  stop(): Promise<void>;
  close(): Promise<void>;
}

export interface ServedGeneration {
  promptIds: number[];
  ids: number[];
  logprobs: number[];
}

export class DoubleError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

export type Handler = (
  route: string,
  body: Record<string, unknown>,
  res: ServerResponse,
  aborted: AbortSignal,
) => Promise<unknown>;

/** What a double's handler is built from. */
export type HandlerOf = (engine: LocalEngine, versions: DoubleVersions, served: ServedGeneration[]) => Handler;

/** Adapter names and the base's weights, as a server that loads versions by folder keeps them. */
export class DoubleVersions {
  readonly adapters = new Map<string, number>();
  /** The version of the weights the base name serves (0 until a full version is loaded). */
  weights = 0;

  constructor(private readonly engine: LocalEngine) {}

  async loadAdapter(name: string, path: string): Promise<void> {
    if (this.adapters.has(name)) throw new DoubleError(400, `The lora adapter '${name}' has already been loaded.`);
    const v = folderVersion(path);
    await this.engine.use(v);
    this.adapters.set(name, v.version);
  }

  unloadAdapter(name: string): void {
    if (!this.adapters.delete(name)) throw new DoubleError(404, `The lora adapter '${name}' cannot be found.`);
  }

  async loadFull(path: string): Promise<void> {
    const v = folderVersion(path);
    await this.engine.use(v);
    this.weights = v.version;
  }

  /** The engine version a request naming `adapter` (or none: the base name) runs on. */
  versionOf(adapter: string | null | undefined): number {
    if (!adapter) return this.weights;
    const v = this.adapters.get(adapter);
    if (v === undefined) throw new DoubleError(404, `The model or adapter '${adapter}' does not exist.`);
    return v;
  }
}

function folderVersion(path: string) {
  try {
    return policyVersionAt(path);
  } catch (e) {
    throw new DoubleError(400, (e as Error).message);
  }
}

export interface DoubleOptions {
  apiKey?: string;
  /** The engine's threads (default: the engine's own choice). */
  threads?: number;
}

export async function startDouble(
  modelDir: string,
  handler: HandlerOf,
  opts: DoubleOptions = {},
): Promise<InferenceDouble> {
  // No prefix cache: a request computes the same sums whichever came before, so tests compare exactly.
  const engine = await LocalEngine.open(modelDir, {
    kvCacheBytes: 0,
    ...(opts.threads ? { threads: opts.threads } : {}),
  });
  const versions = new DoubleVersions(engine);
  const served: ServedGeneration[] = [];
  const handle = handler(engine, versions, served);
  const routes: string[] = [];
  let generations = 0;
  const double = { unavailable: false } as InferenceDouble;
  const server = createServer(async (req: IncomingMessage, res: ServerResponse) => {
    const route = (req.url ?? '').split('?')[0]!;
    routes.push(route);
    if (route === '/v1/completions' || route === '/generate') generations++;
    const aborted = new AbortController();
    res.on('close', () => {
      if (!res.writableFinished) aborted.abort();
    });
    try {
      if (double.unavailable) throw new DoubleError(503, 'the double is unavailable');
      if (opts.apiKey && req.headers.authorization !== `Bearer ${opts.apiKey}`)
        throw new DoubleError(401, 'Unauthorized');
      const chunks: Buffer[] = [];
      for await (const c of req) chunks.push(c as Buffer);
      const text = Buffer.concat(chunks).toString('utf8');
      const body = (text ? JSON.parse(text) : {}) as Record<string, unknown>;
      const answer = await handle(route, body, res, aborted.signal);
      if (!res.headersSent) {
        if (typeof answer === 'string') res.writeHead(200, { 'content-type': 'text/plain' }).end(answer);
        else res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(answer ?? null));
      }
    } catch (e) {
      const status = e instanceof DoubleError ? e.status : e instanceof RangeError ? 400 : 500;
      const message = (e as Error).message;
      if (!res.headersSent)
        res
          .writeHead(status, { 'content-type': 'application/json' })
          .end(JSON.stringify({ error: { message, code: status }, success: false, error_message: message }));
      else res.destroy();
    }
  });
  let connections = 0;
  server.on('connection', () => connections++);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as AddressInfo;
  let stopped = false;
  const stop = async () => {
    if (stopped) return;
    stopped = true;
    server.closeAllConnections();
    await new Promise<void>((r) => server.close(() => r()));
  };
  Object.assign(double, {
    url: `http://127.0.0.1:${port}`,
    engine,
    routes,
    served,
    generations: () => generations,
    connections: () => connections,
    stop,
    async close() {
      await stop();
      await engine.close();
    },
  });
  return double;
}

/** Starts a server-sent event stream; `send` writes one `data:` event. */
export function eventStream(res: ServerResponse): { send(data: unknown): void; done(): void } {
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
  return {
    send: (data) => res.write(`data: ${JSON.stringify(data)}\n\n`),
    done: () => res.end('data: [DONE]\n\n'),
  };
}
