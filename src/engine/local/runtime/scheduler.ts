// Runs every in-flight request on one model, a step at a time. Each step feeds one token of
// every decoding generation plus a chunk of pending prompt (or scoring) tokens, up to a token
// budget, through a single forward pass; so concurrent generations share each weight read and a
// long prompt delays the others by at most one bounded step.

import type { GenerationEvent, ScoredCompletion, TokenLogprob } from '../../types.js';
import type { ModelConfig } from '../model/config.js';
import { createKvCache, type KvCache } from '../model/kv-cache.js';
import type { ForwardSegment, Transformer } from '../model/transformer.js';
import type { Lora } from '../train/lora.js';
import { createRng, type Rng } from '../sampling/random.js';
import { logSumExp, sampleToken, topLogprobs } from '../sampling/sample.js';
import type { ResolvedSampling } from './protocol.js';

/** Incremental detokenizer: returns only complete text for each pushed id. */
export interface StreamDecoder {
  push(id: number): string;
}

/** The weights of one policy version: a transformer over its parameters, plus its adapter. */
export interface PolicyWeights {
  version: number;
  model: Transformer;
  lora: Lora | null;
}

interface GenerationJob {
  kind: 'generate';
  id: number;
  policy: PolicyWeights;
  cache: KvCache;
  /** Tokens not yet fed to the model: the prompt at first, then the last sampled token. */
  pending: number[];
  promptTokens: number;
  sampling: ResolvedSampling;
  rng: Rng;
  stopIds: Set<number>;
  decoder: StreamDecoder;
  text: string;
  generated: number;
}

interface ScoreJob {
  kind: 'score';
  id: number;
  policy: PolicyWeights;
  cache: KvCache;
  tokens: number[];
  promptTokens: number;
  fed: number;
  topK: number;
  logprobs: number[];
  top: TokenLogprob[][];
}

type Job = GenerationJob | ScoreJob;

export interface StepOutput {
  events: { id: number; event: GenerationEvent }[];
  scored: { id: number; result: ScoredCompletion }[];
}

export class Scheduler {
  private readonly jobs: Job[] = [];
  private readonly cancelled = new Set<number>();
  /** Version 0 is the base model as loaded; it stays, as the frozen teacher. */
  private readonly versions = new Map<number, PolicyWeights>();
  private current: PolicyWeights;

  constructor(
    base: PolicyWeights,
    private readonly cfg: ModelConfig,
    private readonly eosIds: readonly number[],
    private readonly newDecoder: () => StreamDecoder,
    private readonly maxStepTokens: number,
    /** activity[0] = jobs in flight, for a learner that yields to serving; notified when it becomes 0. */
    private readonly activity: Int32Array | null = null,
  ) {
    this.versions.set(base.version, base);
    this.current = base;
  }

  get version(): number {
    return this.current.version;
  }

  /** New requests run on `policy` from now on; requests in flight finish on theirs. */
  publish(policy: PolicyWeights): void {
    if (this.versions.has(policy.version)) throw new Error(`policy version ${policy.version} was already published`);
    this.versions.set(policy.version, policy);
    this.current = policy;
    this.releaseUnused();
  }

  /** Versions kept in memory: the base, the current one and those requests still run on. */
  get liveVersions(): number[] {
    return [...this.versions.keys()].sort((a, b) => a - b);
  }

  private releaseUnused(): void {
    const inUse = new Set(this.jobs.map((j) => j.policy.version));
    for (const v of this.versions.keys()) {
      if (v !== 0 && v !== this.current.version && !inUse.has(v)) this.versions.delete(v);
    }
  }

  get idle(): boolean {
    return this.jobs.length === 0;
  }

  addGeneration(id: number, promptIds: number[], sampling: ResolvedSampling): void {
    if (promptIds.length === 0) throw new Error('the prompt is empty');
    const policy = sampling.version === null ? this.current : this.versions.get(sampling.version);
    if (!policy) throw new Error(`policy version ${sampling.version} is not loaded (live versions: ${this.liveVersions.join(', ')})`);
    this.checkIds(promptIds);
    if (promptIds.length >= this.cfg.maxPositionEmbeddings) {
      throw new RangeError(`prompt is ${promptIds.length} tokens, the model's context is ${this.cfg.maxPositionEmbeddings}`);
    }
    this.jobs.push({
      kind: 'generate', id, policy, cache: createKvCache(this.cfg, Math.min(promptIds.length + 64, this.cfg.maxPositionEmbeddings)),
      pending: promptIds.slice(), promptTokens: promptIds.length, sampling, rng: createRng(sampling.seed),
      stopIds: new Set([...this.eosIds, ...sampling.stopTokenIds]), decoder: this.newDecoder(), text: '', generated: 0,
    });
    this.reportActivity();
  }

  addScore(id: number, promptIds: number[], completionIds: number[], topK: number, version: number): void {
    if (promptIds.length === 0) throw new Error('scoring needs a non-empty prompt');
    const policy = this.versions.get(version);
    if (!policy) throw new Error(`policy version ${version} is not loaded (live versions: ${this.liveVersions.join(', ')})`);
    const tokens = [...promptIds, ...completionIds];
    this.checkIds(tokens);
    if (tokens.length > this.cfg.maxPositionEmbeddings) {
      throw new RangeError(`prompt and completion are ${tokens.length} tokens, the model's context is ${this.cfg.maxPositionEmbeddings}`);
    }
    this.jobs.push({
      kind: 'score', id, policy, cache: createKvCache(this.cfg, tokens.length), tokens, promptTokens: promptIds.length,
      fed: 0, topK, logprobs: [], top: [],
    });
    this.reportActivity();
  }

  /** Drops every job (after a failed step) and returns their ids, so each caller gets the error. */
  failAll(): number[] {
    const ids = this.jobs.map((j) => j.id);
    this.jobs.length = 0;
    this.cancelled.clear();
    this.reportActivity();
    return ids;
  }

  cancel(id: number): void {
    if (this.jobs.some((j) => j.id === id)) this.cancelled.add(id);
  }

  /** One forward pass over the work that is ready. */
  step(): StepOutput {
    const out = this.runStep();
    this.reportActivity();
    return out;
  }

  private reportActivity(): void {
    if (!this.activity) return;
    const n = this.jobs.length;
    if (Atomics.exchange(this.activity, 0, n) !== 0 && n === 0) Atomics.notify(this.activity, 0);
  }

  private runStep(): StepOutput {
    const out: StepOutput = { events: [], scored: [] };
    this.dropCancelled(out);
    if (this.jobs.length === 0) return out;

    // Decoding generations first (one token each), then prompt and scoring chunks in arrival order.
    const planned: { job: Job; segment: ForwardSegment }[] = [];
    let budget = this.maxStepTokens;
    for (const job of this.jobs) {
      if (job.kind === 'generate' && job.generated > 0) {
        planned.push({ job, segment: { cache: job.cache, tokens: job.pending, logitsFrom: 0, lora: job.policy.lora } });
        budget -= 1;
      }
    }
    for (const job of this.jobs) {
      if (budget <= 0) break;
      if (job.kind === 'generate' && job.generated === 0) {
        const n = Math.min(budget, job.pending.length);
        const chunk = job.pending.slice(0, n);
        const last = n === job.pending.length;
        planned.push({ job, segment: { cache: job.cache, tokens: chunk, logitsFrom: last ? n - 1 : n, lora: job.policy.lora } });
        budget -= n;
      } else if (job.kind === 'score') {
        const n = Math.min(budget, job.tokens.length - 1 - job.fed);
        const chunk = job.tokens.slice(job.fed, job.fed + n);
        // logits at position p predict token p + 1; the completion starts at promptTokens.
        const logitsFrom = Math.min(n, Math.max(0, job.promptTokens - 1 - job.fed));
        planned.push({ job, segment: { cache: job.cache, tokens: chunk, logitsFrom, lora: job.policy.lora } });
        budget -= n;
      }
    }

    // One forward per set of base weights (LoRA versions share the base; full fine-tuned
    // versions each have their own), adapters applied per segment inside it.
    const logits = new Map<Job, Float32Array>();
    for (const model of new Set(planned.map((p) => p.job.policy.model))) {
      const group = planned.filter((p) => p.job.policy.model === model);
      model.forward(group.map((p) => p.segment)).forEach((rows, i) => logits.set(group[i]!.job, rows));
    }
    const V = this.cfg.vocabSize;
    planned.forEach(({ job, segment }) => {
      const rows = logits.get(job)!;
      if (job.kind === 'score') {
        const firstPos = job.fed + segment.logitsFrom;
        for (let r = 0; r * V < rows.length; r++) {
          const row = rows.subarray(r * V, (r + 1) * V);
          const target = job.tokens[firstPos + r + 1]!;
          const lse = logSumExp(row);
          job.logprobs.push(row[target]! - lse);
          if (job.topK > 0) job.top.push(topLogprobs(row, job.topK, lse));
        }
        job.fed += segment.tokens.length;
        if (job.fed >= job.tokens.length - 1) {
          out.scored.push({ id: job.id, result: { logprobs: job.logprobs, ...(job.topK > 0 ? { top: job.top } : {}) } });
          this.remove(job);
        }
        return;
      }
      job.pending = job.pending.slice(segment.tokens.length);
      if (rows.length === 0) return; // prompt not finished yet
      this.emitSample(job, rows.subarray(rows.length - V), out);
    });
    return out;
  }

  private emitSample(job: GenerationJob, row: Float32Array, out: StepOutput): void {
    const s = job.sampling;
    const r = sampleToken(row, { temperature: s.temperature, topK: s.topK, topP: s.topP, topLogprobs: s.topLogprobs }, job.rng);
    job.generated += 1;
    out.events.push({ id: job.id, event: { type: 'token', token: { id: r.id, logprob: r.logprob, sampledLogprob: r.sampledLogprob, ...(r.top ? { top: r.top } : {}) } } });

    const before = job.text.length;
    job.text += job.decoder.push(r.id);
    let reason: 'stop_token' | 'stop_sequence' | 'length' | 'context' | null = null;
    let stopSequence: string | undefined;
    if (job.stopIds.has(r.id)) reason = 'stop_token';
    else if ((stopSequence = findStop(job.text, before, s.stop)) !== undefined) reason = 'stop_sequence';
    else if (job.generated >= s.maxTokens) reason = 'length';
    else if (job.cache.length + 1 >= this.cfg.maxPositionEmbeddings) reason = 'context';
    if (reason) {
      out.events.push({ id: job.id, event: this.finish(job, reason, stopSequence) });
      this.remove(job);
    } else {
      job.pending = [r.id];
    }
  }

  private finish(job: GenerationJob, reason: 'stop_token' | 'stop_sequence' | 'length' | 'context' | 'cancelled', stopSequence?: string): GenerationEvent {
    return {
      type: 'finish', reason, ...(stopSequence !== undefined ? { stopSequence } : {}),
      version: job.policy.version, promptTokens: job.promptTokens, completionTokens: job.generated,
    };
  }

  private dropCancelled(out: StepOutput): void {
    if (this.cancelled.size === 0) return;
    for (const job of [...this.jobs]) {
      if (!this.cancelled.has(job.id)) continue;
      if (job.kind === 'generate') out.events.push({ id: job.id, event: this.finish(job, 'cancelled') });
      this.remove(job);
    }
    this.cancelled.clear();
  }

  private remove(job: Job): void {
    const i = this.jobs.indexOf(job);
    if (i >= 0) this.jobs.splice(i, 1);
    if (job.policy !== this.current && !this.jobs.some((j) => j.policy === job.policy)) this.releaseUnused();
  }

  private checkIds(ids: readonly number[]): void {
    for (const id of ids) {
      if (!Number.isInteger(id) || id < 0 || id >= this.cfg.vocabSize) throw new RangeError(`token id ${id} is outside the vocabulary of ${this.cfg.vocabSize}`);
    }
  }
}

/** The first stop string that appears in text and ends after index `from` (new text only). */
function findStop(text: string, from: number, stops: readonly string[]): string | undefined {
  for (const stop of stops) {
    if (stop.length === 0) continue;
    if (text.indexOf(stop, Math.max(0, from - stop.length + 1)) >= 0) return stop;
  }
  return undefined;
}
