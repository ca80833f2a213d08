// Several inference servers as one Sampler and Scorer. A request with a routing key (serve sends
// the session id) always goes to the same server while it is up, so that server's prefix cache
// holds the conversation; requests without one take turns. A server that refuses the connection
// or does not answer in time is marked down for `retryAfterMs` and the request goes to the next
// server in its order; once a stream has begun it is not moved (its tokens could not be
// continued token-exactly elsewhere). use() loads the version on every server before any new
// request is sent: new requests wait meanwhile (none is refused), those in flight finish on theirs.

import { createHash } from 'node:crypto';
import type { PolicyVersion } from '../policy-version.js';
import type { GenerationEvent, Sampler, SamplingParams, ScoredCompletion, ScoreOptions, Scorer } from '../types.js';
import { ServerUnavailableError } from './http.js';
import type { ResolvedParams } from '../sampler.js';
import { startNow } from '../start-now.js';

/** One server's backend (VllmSampler, SglangSampler). */
export interface RoutedSampler extends Sampler, Scorer {
  readonly url: string;
  check(promptIds: readonly number[], params: SamplingParams): ResolvedParams;
}

export interface ServerHealth {
  url: string;
  up: boolean;
  /** Failures in a row; 0 once it answers again. */
  failures: number;
  lastError: string | null;
  /** A version published while it was down, loaded before it serves again. */
  behind: number | null;
}

interface Server {
  sampler: RoutedSampler;
  health: ServerHealth;
  downUntil: number;
}

export class SamplerRouter implements Sampler, Scorer {
  private readonly servers: Server[];
  private turn = 0;
  private latest: PolicyVersion | null = null;
  private publishing: Promise<void> | null = null;
  private switching: Promise<void> = Promise.resolve();

  constructor(
    samplers: RoutedSampler[],
    private readonly opts: { retryAfterMs?: number } = {},
  ) {
    if (samplers.length === 0) throw new Error('the router needs at least one server');
    this.servers = samplers.map((sampler) => ({
      sampler,
      health: { url: sampler.url, up: true, failures: 0, lastError: null, behind: null },
      downUntil: 0,
    }));
  }

  /**
   * With several servers the gateway identifies the session first, so that its requests go to one
   * server (its prefix cache); with one there is nothing to choose, and the request goes out at once.
   */
  get routesBySession(): boolean {
    return this.servers.length > 1;
  }

  health(): ServerHealth[] {
    return this.servers.map((s) => ({ ...s.health }));
  }

  generate(promptIds: readonly number[], params: SamplingParams, signal?: AbortSignal): AsyncIterable<GenerationEvent> {
    this.servers[0]!.sampler.check(promptIds, params);
    return startNow(this.route(promptIds, params, signal), signal);
  }

  private async *route(
    promptIds: readonly number[],
    params: SamplingParams,
    signal?: AbortSignal,
  ): AsyncGenerator<GenerationEvent, void> {
    const failures: string[] = [];
    for (const server of await this.candidates(params.routingKey)) {
      let started = false;
      try {
        await this.catchUp(server);
        for await (const e of server.sampler.generate(promptIds, params, signal)) {
          started = true;
          yield e;
        }
        this.markUp(server);
        return;
      } catch (e) {
        if (started || !(e instanceof ServerUnavailableError) || signal?.aborted) throw e;
        this.markDown(server, e);
        failures.push(e.message);
      }
    }
    throw new ServerUnavailableError(`no inference server answered: ${failures.join('; ')}`);
  }

  async logprobs(
    promptIds: readonly number[],
    completionIds: readonly number[],
    opts?: ScoreOptions,
  ): Promise<ScoredCompletion> {
    const failures: string[] = [];
    for (const server of await this.candidates(undefined)) {
      try {
        await this.catchUp(server);
        const scored = await server.sampler.logprobs(promptIds, completionIds, opts);
        this.markUp(server);
        return scored;
      } catch (e) {
        if (!(e instanceof ServerUnavailableError)) throw e;
        this.markDown(server, e);
        failures.push(e.message);
      }
    }
    throw new ServerUnavailableError(`no inference server answered: ${failures.join('; ')}`);
  }

  /**
   * Loads `version` on every server that is up, holding new requests until all have it. A server
   * that cannot be reached is marked down and loads it before it next serves; any other refusal
   * rejects (the servers that did load it serve it).
   */
  use(version: PolicyVersion): Promise<number> {
    const run = this.switching.then(
      () => this.publish(version),
      () => this.publish(version),
    );
    const settled = run.then(
      () => {},
      () => {},
    );
    this.switching = settled;
    // Held from this call on (not from when the switch starts), so a request sent after use()
    // was called never gets the old version.
    this.publishing = settled;
    settled.then(() => {
      if (this.publishing === settled) this.publishing = null;
    });
    return run;
  }

  private async publish(version: PolicyVersion): Promise<number> {
    const started = performance.now();
    const results = await Promise.allSettled(
      this.servers.map(async (s) => {
        if (!this.isUp(s)) {
          s.health.behind = version.version;
          return;
        }
        try {
          await s.sampler.use(version);
          s.health.behind = null;
        } catch (e) {
          if (!(e instanceof ServerUnavailableError)) throw e;
          this.markDown(s, e);
          s.health.behind = version.version;
        }
      }),
    );
    const refused = results.find((r): r is PromiseRejectedResult => r.status === 'rejected');
    if (refused) throw refused.reason;
    this.latest = version;
    return performance.now() - started;
  }

  /** The servers' URLs in the order a routing key tries them (rendezvous hashing), up or not. */
  orderOf(key: string): string[] {
    return this.order(key).map((s) => s.health.url);
  }

  private order(key: string | undefined): Server[] {
    if (key === undefined) {
      const start = this.turn++ % this.servers.length;
      return [...this.servers.slice(start), ...this.servers.slice(0, start)];
    }
    const score = (s: Server) => createHash('sha256').update(`${s.health.url}\n${key}`).digest().readUInt32BE(0);
    return [...this.servers].sort((a, b) => score(b) - score(a));
  }

  /** The servers in the order to try: the key's own order, or the next turn; those up first. */
  private async candidates(key: string | undefined): Promise<Server[]> {
    while (this.publishing) await this.publishing;
    const order = this.order(key);
    const up = order.filter((s) => this.isUp(s));
    // With every server down, try them all anyway: one may be back.
    return up.length > 0 ? [...up, ...order.filter((s) => !up.includes(s))] : order;
  }

  private isUp(s: Server): boolean {
    return s.health.up || performance.now() >= s.downUntil;
  }

  /** A server back from being down first loads the version published meanwhile. */
  private async catchUp(s: Server): Promise<void> {
    if (s.health.behind !== null && this.latest && this.latest.version === s.health.behind) {
      await s.sampler.use(this.latest);
      s.health.behind = null;
    }
  }

  private markUp(s: Server): void {
    s.health.up = true;
    s.health.failures = 0;
  }

  private markDown(s: Server, e: Error): void {
    s.health.up = false;
    s.health.failures++;
    s.health.lastError = e.message;
    s.downUntil = performance.now() + (this.opts.retryAfterMs ?? 2000);
  }
}
