// What the vLLM and SGLang backends share: parameter checks, the version a request holds for its
// whole life, cancellation (aborting the HTTP request), and the finish event. Each subclass turns
// one request into its server's wire format and the answer back into tokens.
//
// Log-probs: both servers report, per sampled token, its log-prob under the model's raw
// distribution (temperature 1, before top-k/top-p), which is `logprob`. Neither reports the
// log-prob under the distribution actually sampled from, so `sampledLogprob` is filled where it is
// known exactly, from the request alone: equal to `logprob` when nothing reshapes the distribution
// (temperature 1, top-p 1, no top-k), 0 for greedy (temperature 0), and NaN otherwise (unknown:
// the renormalizer over the kept tokens is not on the wire).

import type { PolicyVersion } from '../policy-version.js';
import { type ResolvedParams, resolveSamplingParams } from '../sampler.js';
import { startNow } from '../start-now.js';
import type {
  FinishReason,
  GenerationEvent,
  SampledToken,
  Sampler,
  SamplingParams,
  ScoredCompletion,
  ScoreOptions,
  Scorer,
} from '../types.js';
import { samplerKeyFromEnv, ServerClient } from './http.js';
import { ServedVersions, type VersionLease } from './served-versions.js';

export interface RemoteSamplerOptions {
  /** The server's base URL, e.g. http://10.0.0.5:8000 (no /v1). */
  url: string;
  /** The base model's name on the server (vLLM's --served-model-name; SGLang ignores it). */
  model: string;
  /** The model's context (prompt + completion); an unset maxTokens fills the rest of it. */
  contextLength: number;
  /** Bearer key; default OPENCLAW_RL_SAMPLER_API_KEY. */
  apiKey?: string;
  /** Longest wait for a response's status line, in ms (default 30 s). */
  timeoutMs?: number;
}

/** How a server's stream ended, in the contract's terms. */
export interface StreamEnd {
  reason: Exclude<FinishReason, 'cancelled'>;
  stopSequence?: string;
  promptTokens?: number;
  cachedTokens?: number;
}

export abstract class HttpSampler implements Sampler, Scorer {
  readonly url: string;
  protected readonly client: ServerClient;
  protected readonly versions: ServedVersions;

  constructor(
    protected readonly opts: RemoteSamplerOptions,
    protocol: string,
  ) {
    this.url = opts.url;
    const apiKey = opts.apiKey ?? samplerKeyFromEnv();
    this.client = new ServerClient(opts.url, { ...(apiKey ? { apiKey } : {}), timeoutMs: opts.timeoutMs ?? 30_000 });
    this.versions = new ServedVersions(`${protocol} at ${this.client.baseUrl}`, this);
  }

  /** The version new requests run on. */
  get version(): number {
    return this.versions.serving;
  }

  abstract loadAdapter(name: string, path: string): Promise<void>;
  abstract unloadAdapter(name: string): Promise<void>;
  abstract loadFullWeights(path: string): Promise<void>;

  /** One request on the wire: yields its tokens, returns how it ended. */
  protected abstract stream(
    promptIds: readonly number[],
    p: ResolvedParams,
    adapter: string | null,
    signal: AbortSignal,
  ): AsyncGenerator<SampledToken, StreamEnd>;

  protected abstract score(
    promptIds: readonly number[],
    completionIds: readonly number[],
    topK: number,
    adapter: string | null,
  ): Promise<ScoredCompletion>;

  use(version: PolicyVersion): Promise<number> {
    return this.versions.use(version);
  }

  /** The request's parameters with defaults, or a RangeError naming the wrong one. */
  check(promptIds: readonly number[], p: SamplingParams): ResolvedParams {
    return resolveSamplingParams(p, promptIds.length, this.opts.contextLength);
  }

  /** Starts at once: the request goes out while the caller does its own work before reading. */
  generate(promptIds: readonly number[], params: SamplingParams, signal?: AbortSignal): AsyncIterable<GenerationEvent> {
    return startNow(this.run(promptIds, this.check(promptIds, params), signal), signal);
  }

  private async *run(
    promptIds: readonly number[],
    p: ResolvedParams,
    signal?: AbortSignal,
  ): AsyncGenerator<GenerationEvent, void> {
    const controller = new AbortController();
    const onAbort = () => controller.abort();
    if (signal?.aborted) controller.abort();
    signal?.addEventListener('abort', onAbort, { once: true });
    let lease: VersionLease | null = null;
    let n = 0;
    let streamEnded = false;
    try {
      lease = await this.versions.acquire(p.version ?? undefined);
      const tokens = this.stream(promptIds, p, lease.adapter, controller.signal);
      let next = await tokens.next();
      while (!next.done) {
        n++;
        yield { type: 'token', token: next.value } satisfies GenerationEvent;
        next = await tokens.next();
      }
      const end = next.value;
      streamEnded = true;
      yield {
        type: 'finish',
        reason: end.reason,
        ...(end.stopSequence === undefined ? {} : { stopSequence: end.stopSequence }),
        version: lease.version,
        promptTokens: end.promptTokens ?? promptIds.length,
        completionTokens: n,
        ...(end.cachedTokens === undefined ? {} : { cachedTokens: end.cachedTokens }),
      } satisfies GenerationEvent;
    } catch (e) {
      if (!controller.signal.aborted) throw e;
      yield {
        type: 'finish',
        reason: 'cancelled',
        version: lease?.version ?? this.versions.serving,
        promptTokens: promptIds.length,
        completionTokens: n,
      } satisfies GenerationEvent;
    } finally {
      signal?.removeEventListener('abort', onAbort);
      // Stops the server's generation when the caller broke out of the loop (a stream read to its
      // end has nothing to stop, and an abort costs an exception's stack).
      if (!streamEnded) controller.abort();
      lease?.release();
    }
  }

  async logprobs(
    promptIds: readonly number[],
    completionIds: readonly number[],
    opts: ScoreOptions = {},
  ): Promise<ScoredCompletion> {
    if (promptIds.length === 0) throw new RangeError('scoring needs a non-empty prompt');
    if (completionIds.length === 0) return { logprobs: [], ...(opts.topK ? { top: [] } : {}) };
    if (promptIds.length + completionIds.length >= this.opts.contextLength)
      throw new RangeError(
        `prompt and completion are ${promptIds.length + completionIds.length} tokens, ` +
          `the model's context is ${this.opts.contextLength} (scoring needs one more)`,
      );
    const lease = await this.versions.acquire(opts.version ?? 0);
    try {
      return await this.score(promptIds, completionIds, opts.topK ?? 0, lease.adapter);
    } finally {
      lease.release();
    }
  }
}

/** log q(token) where the request alone tells it (see the head of this file); NaN where it does not. */
export function sampledLogprobOf(logprob: number, p: ResolvedParams): number {
  if (p.temperature === 0) return 0;
  return p.temperature === 1 && p.topP === 1 && p.topK === 0 ? logprob : Number.NaN;
}
