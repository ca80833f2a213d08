// The Sampler contract: stream one completion of a prompt, token by token, with log-probs.

import type { PolicyVersion } from './policy-version.js';

/** How to sample one completion. Unset fields take the documented defaults. */
export interface SamplingParams {
  /** 0 means greedy. Default 1. */
  temperature?: number;
  /** Nucleus sampling mass in (0, 1]. Default 1 (off). */
  topP?: number;
  /** Keep only the k most likely tokens; 0 = off. Default 0. */
  topK?: number;
  /** Upper bound on generated tokens. Default: the rest of the model's context. */
  maxTokens?: number;
  /** Stop when the decoded completion contains one of these strings. */
  stop?: string[];
  /** Stop after sampling one of these ids (the model's eos ids are always included). */
  stopTokenIds?: number[];
  /** Seed for a reproducible sample; omitted means a fresh random seed. */
  seed?: number;
  /** Also report the k most likely tokens (at temperature 1) per position; 0 = off. */
  topLogprobs?: number;
  /** Sample from this policy version (0 = the frozen base, e.g. for a self-judge); default: the serving one. */
  version?: number;
  /**
   * Requests with the same key go to the same server where a sampler fronts several (the gateway
   * passes the session id, so a server's prefix cache sees the session's turns); others ignore it.
   */
  routingKey?: string;
}

/** SamplingParams with the defaults filled in and checked (seed null: the backend draws one). */
export interface ResolvedParams {
  temperature: number;
  topP: number;
  topK: number;
  maxTokens: number;
  stop: string[];
  stopTokenIds: number[];
  seed: number | null;
  topLogprobs: number;
  /** null: the version serving when the request starts. */
  version: number | null;
}

/**
 * The request's parameters with the contract's defaults, or a RangeError naming the wrong one:
 * every backend accepts and refuses the same requests with the same words.
 */
export function resolveSamplingParams(p: SamplingParams, promptTokens: number, contextLength: number): ResolvedParams {
  const check = (ok: boolean, what: string) => {
    if (!ok) throw new RangeError(what);
  };
  check(promptTokens > 0, 'the prompt is empty');
  const temperature = p.temperature ?? 1;
  check(Number.isFinite(temperature) && temperature >= 0, `temperature must be >= 0, got ${temperature}`);
  const topP = p.topP ?? 1;
  check(topP > 0 && topP <= 1, `topP must be in (0, 1], got ${topP}`);
  const topK = p.topK ?? 0;
  check(Number.isInteger(topK) && topK >= 0, `topK must be a non-negative integer, got ${topK}`);
  const room = contextLength - promptTokens;
  check(room > 0, `prompt is ${promptTokens} tokens, the model's context is ${contextLength}`);
  const maxTokens = Math.min(p.maxTokens ?? room, room);
  check(Number.isInteger(maxTokens) && maxTokens > 0, `maxTokens must be a positive integer, got ${p.maxTokens}`);
  const topLogprobs = p.topLogprobs ?? 0;
  check(
    Number.isInteger(topLogprobs) && topLogprobs >= 0 && topLogprobs <= 20,
    `topLogprobs must be an integer in 0..20, got ${topLogprobs}`,
  );
  check(p.seed === undefined || Number.isInteger(p.seed), `seed must be an integer, got ${p.seed}`);
  const version = p.version ?? null;
  check(
    version === null || (Number.isInteger(version) && version >= 0),
    `version must be a non-negative integer, got ${version}`,
  );
  return {
    temperature,
    topP,
    topK,
    maxTokens,
    stop: p.stop ?? [],
    stopTokenIds: p.stopTokenIds ?? [],
    seed: p.seed ?? null,
    topLogprobs,
    version,
  };
}

/** One token alternative with its log-prob under the model at temperature 1. */
export interface TokenLogprob {
  id: number;
  logprob: number;
}

/** One sampled token. */
export interface SampledToken {
  id: number;
  /** log p(id) under the model at temperature 1: what the trainer needs. */
  logprob: number;
  /** log q(id) under the distribution actually sampled from (temperature, top-k, top-p applied). */
  sampledLogprob: number;
  /** Present when topLogprobs > 0. */
  top?: TokenLogprob[];
}

/**
 * Why a generation ended. `stop_token`: an eos or requested stop id was sampled (it is part of
 * the completion). `stop_sequence`: the decoded text contains a stop string. `length`: maxTokens.
 * `context`: the model's context is full. `cancelled`: the caller stopped it.
 */
export type FinishReason = 'stop_token' | 'stop_sequence' | 'length' | 'context' | 'cancelled';

/** What a generation stream yields: tokens as they are sampled, then exactly one finish. */
export type GenerationEvent =
  | { type: 'token'; token: SampledToken }
  | {
      type: 'finish';
      reason: FinishReason;
      stopSequence?: string;
      version: number;
      promptTokens: number;
      completionTokens: number;
      /** Prompt tokens whose keys and values came from a prefix cache instead of being computed (absent: no cache). */
      cachedTokens?: number;
    };

export interface Sampler {
  /**
   * True when generate() reads params.routingKey (a router over several servers): the gateway then
   * identifies the session before it asks for a sample. Others are asked first, and prefill while
   * the gateway records the request.
   */
  readonly routesBySession?: boolean;
  /**
   * Streams one completion of promptIds. The generation starts when this is called, not when the
   * stream is first read (./start-now.ts for samplers written as async generators). Breaking out
   * of the loop cancels it; so does aborting `signal`, read or not.
   */
  generate(promptIds: readonly number[], params: SamplingParams, signal?: AbortSignal): AsyncIterable<GenerationEvent>;
  /** Switches new requests to `version` (in-flight ones finish on theirs); resolves with the switch's ms. */
  use(version: PolicyVersion): Promise<number>;
}
