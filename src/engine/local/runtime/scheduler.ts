// Runs every in-flight request on one model, a step at a time. Each step feeds one token of
// every decoding generation plus a chunk of pending prompt (or scoring) tokens, up to a token
// budget, through a single forward pass; so concurrent generations share each weight read and a
// long prompt delays the others by at most one bounded step.
//
// With a prefix cache, a job first copies the keys and values of the longest prefix of its
// prompt that an earlier job computed (a cache entry, or a job of its version still in flight)
// and computes only the rest; finished jobs hand their caches to the prefix cache.

import type { GenerationEvent, ScoredCompletion, TokenLogprob } from '../../types.js';
import type { ModelConfig } from '../model/config.js';
import { copyKvPrefix, type KvCache } from '../model/kv-cache.js';
import type { ForwardSegment, Transformer } from '../model/transformer.js';
import type { Lora } from '../train/lora.js';
import { createRng, type Rng } from '../sampling/random.js';
import { sampleToken, topLogprobs } from '../sampling/sample.js';
import { commonPrefixLength, PrefixCache } from './prefix-cache.js';
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

interface JobBase {
  id: number;
  policy: PolicyWeights;
  /** A generation's prompt, then each sampled token; a score's prompt and completion. */
  ids: number[];
  /** Keys and values of ids[0, cache.length): the next token fed is ids[cache.length]. */
  cache: KvCache;
  promptTokens: number;
  /** False until the job has taken what it can from cached keys and values and starts computing. */
  admitted: boolean;
  /** Not admitted yet: a job in flight computes more of this one's prompt than is cached; wait for it. */
  awaiting: { donor: Job; length: number } | null;
  /** Prompt tokens whose keys and values were copied when the job was admitted. */
  cachedTokens: number;
}

interface GenerationJob extends JobBase {
  kind: 'generate';
  sampling: ResolvedSampling;
  rng: Rng;
  stopIds: Set<number>;
  decoder: StreamDecoder;
  text: string;
  generated: number;
}

interface ScoreJob extends JobBase {
  kind: 'score';
  topK: number;
  logprobs: number[];
  top: TokenLogprob[][];
}

type Job = GenerationJob | ScoreJob;

/** How far a job's cache will grow: a score never feeds its last token, a generation feeds all. */
const reach = (job: Job) => (job.kind === 'score' ? job.ids.length - 1 : job.ids.length);

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
    private readonly prefix = new PrefixCache(0),
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
      if (v === 0 || v === this.current.version || inUse.has(v)) continue;
      this.versions.delete(v);
      this.prefix.retire(v);
    }
  }

  get idle(): boolean {
    return this.jobs.length === 0;
  }

  addGeneration(id: number, promptIds: number[], sampling: ResolvedSampling): void {
    if (promptIds.length === 0) throw new Error('the prompt is empty');
    const policy = sampling.version === null ? this.current : this.versions.get(sampling.version);
    if (!policy)
      throw new Error(
        `policy version ${sampling.version} is not loaded (live versions: ${this.liveVersions.join(', ')})`,
      );
    this.checkIds(promptIds);
    if (promptIds.length >= this.cfg.maxPositionEmbeddings) {
      throw new RangeError(
        `prompt is ${promptIds.length} tokens, the model's context is ${this.cfg.maxPositionEmbeddings}`,
      );
    }
    this.jobs.push({
      kind: 'generate',
      id,
      policy,
      cache: policy.model.newKvCache(Math.min(promptIds.length + 64, this.cfg.maxPositionEmbeddings)),
      ids: promptIds.slice(),
      promptTokens: promptIds.length,
      admitted: false,
      awaiting: null,
      cachedTokens: 0,
      sampling,
      rng: createRng(sampling.seed),
      stopIds: new Set([...this.eosIds, ...sampling.stopTokenIds]),
      decoder: this.newDecoder(),
      text: '',
      generated: 0,
    });
    this.reportActivity();
  }

  addScore(id: number, promptIds: number[], completionIds: number[], topK: number, version: number): void {
    if (promptIds.length === 0) throw new Error('scoring needs a non-empty prompt');
    const policy = this.versions.get(version);
    if (!policy)
      throw new Error(`policy version ${version} is not loaded (live versions: ${this.liveVersions.join(', ')})`);
    const tokens = [...promptIds, ...completionIds];
    this.checkIds(tokens);
    if (tokens.length > this.cfg.maxPositionEmbeddings) {
      throw new RangeError(
        `prompt and completion are ${tokens.length} tokens, the model's context is ${this.cfg.maxPositionEmbeddings}`,
      );
    }
    this.jobs.push({
      kind: 'score',
      id,
      policy,
      cache: policy.model.newKvCache(tokens.length),
      ids: tokens,
      promptTokens: promptIds.length,
      admitted: false,
      awaiting: null,
      cachedTokens: 0,
      topK,
      logprobs: [],
      top: [],
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
    // `start` is the cache length before the step: the position of the segment's first token.
    const planned: { job: Job; segment: ForwardSegment; start: number }[] = [];
    let budget = this.maxStepTokens;
    for (const job of this.jobs) {
      if (job.kind === 'generate' && job.generated > 0) {
        const start = job.cache.length;
        const segment = { cache: job.cache, tokens: job.ids.slice(start), logitsFrom: 0, lora: job.policy.lora };
        planned.push({ job, start, segment });
        budget -= 1;
      }
    }
    for (const job of this.jobs) {
      if (budget <= 0) break;
      if (job.kind === 'generate' && job.generated > 0) continue;
      if (!job.admitted && !this.admit(job)) continue;
      const start = job.cache.length;
      let n: number, logitsFrom: number;
      if (job.kind === 'generate') {
        n = Math.min(budget, job.promptTokens - start);
        logitsFrom = start + n === job.promptTokens ? n - 1 : n;
      } else {
        n = Math.min(budget, job.ids.length - 1 - start);
        // logits at position p predict token p + 1; the completion starts at promptTokens.
        logitsFrom = Math.min(n, Math.max(0, job.promptTokens - 1 - start));
      }
      const segment = { cache: job.cache, tokens: job.ids.slice(start, start + n), logitsFrom, lora: job.policy.lora };
      planned.push({ job, start, segment });
      this.prefix.countMiss(n);
      budget -= n;
    }

    // One forward per set of base weights (LoRA versions share the base; full fine-tuned
    // versions each have their own), adapters applied per segment inside it.
    const logits = new Map<Job, Float32Array>();
    for (const model of new Set(planned.map((p) => p.job.policy.model))) {
      const group = planned.filter((p) => p.job.policy.model === model);
      model.forward(group.map((p) => p.segment)).forEach((rows, i) => logits.set(group[i]!.job, rows));
    }
    const V = this.cfg.vocabSize;
    planned.forEach(({ job, segment, start }) => {
      const rows = logits.get(job)!;
      if (job.kind === 'score') {
        const firstPos = start + segment.logitsFrom;
        const lse = job.policy.model.logNormalizers(rows);
        for (let r = 0; r * V < rows.length; r++) {
          const row = rows.subarray(r * V, (r + 1) * V);
          const target = job.ids[firstPos + r + 1]!;
          job.logprobs.push(row[target]! - lse[r]!);
          if (job.topK > 0) job.top.push(topLogprobs(row, job.topK, lse[r]!));
        }
        if (job.cache.length >= job.ids.length - 1) {
          out.scored.push({
            id: job.id,
            result: { logprobs: job.logprobs, ...(job.topK > 0 ? { top: job.top } : {}) },
          });
          this.remove(job);
        }
        return;
      }
      if (rows.length === 0) return; // prompt not finished yet
      const last = rows.subarray(rows.length - V);
      this.emitSample(job, last, job.policy.model.logNormalizers(last)[0]!, out);
    });
    return out;
  }

  private emitSample(job: GenerationJob, row: Float32Array, lse: number, out: StepOutput): void {
    const s = job.sampling;
    const r = sampleToken(
      row,
      { temperature: s.temperature, topK: s.topK, topP: s.topP, topLogprobs: s.topLogprobs },
      job.rng,
      lse,
      job.policy.model.weighLogits,
    );
    job.generated += 1;
    job.ids.push(r.id);
    out.events.push({
      id: job.id,
      event: {
        type: 'token',
        token: { id: r.id, logprob: r.logprob, sampledLogprob: r.sampledLogprob, ...(r.top ? { top: r.top } : {}) },
      },
    });

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
    }
  }

  private finish(
    job: GenerationJob,
    reason: 'stop_token' | 'stop_sequence' | 'length' | 'context' | 'cancelled',
    stopSequence?: string,
  ): GenerationEvent {
    return {
      type: 'finish',
      reason,
      ...(stopSequence !== undefined ? { stopSequence } : {}),
      version: job.policy.version,
      promptTokens: job.promptTokens,
      completionTokens: job.generated,
      cachedTokens: job.cachedTokens,
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

  /**
   * Takes a finished or cancelled job out. Its keys and values go to the prefix cache (no copy):
   * a generation's cover the prompt and every sampled token but the last, which the next turn of
   * a conversation usually starts with.
   */
  private remove(job: Job): void {
    const i = this.jobs.indexOf(job);
    if (i >= 0) this.jobs.splice(i, 1);
    if (job.policy !== this.current && !this.jobs.some((j) => j.policy === job.policy)) this.releaseUnused();
    if (this.versions.get(job.policy.version) === job.policy) {
      this.prefix.insert(job.policy.version, job.ids.slice(0, job.cache.length), job.cache);
    }
  }

  /**
   * Before a job computes anything, copies the keys and values of the longest prefix of its
   * prompt available on its version: from a cache entry, or from a job in flight (whose rows
   * below its cache length never change). At least the last prompt token is left to compute:
   * a generation samples from its logits, a score needs logits from promptTokens - 1 on.
   *
   * Returns false when the job should wait instead: a job in flight shares more of the prompt
   * than anything ready but has not computed that much yet (m judge votes on one prompt, two
   * sessions with one system prompt). The wait ends when that job has computed the shared part
   * or leaves; it cannot deadlock, since only a job that has not started waits, and only on one
   * that has, which keeps getting budget in arrival order.
   */
  private admit(job: Job): boolean {
    const waited = job.awaiting;
    if (waited && waited.donor.cache.length < waited.length && this.jobs.includes(waited.donor)) return false;
    job.awaiting = null;
    const limit = job.promptTokens - 1;
    if (!this.prefix.enabled || limit <= 0) return (job.admitted = true);
    const match = this.prefix.longest(job.policy.version, job.ids, limit);
    let length = match?.length ?? 0;
    let donor: Job | null = null;
    for (const other of this.jobs) {
      if (other === job || !other.admitted || other.policy !== job.policy) continue;
      const shared = commonPrefixLength(other.ids, job.ids, Math.min(limit, reach(other)));
      if (shared > length) [length, donor] = [shared, other];
    }
    if (donor && donor.cache.length < length) {
      job.awaiting = { donor, length };
      return false;
    }
    if (donor) copyKvPrefix(donor.cache, job.cache, length);
    else if (match) {
      copyKvPrefix(match.entry.cache, job.cache, length);
      this.prefix.touch(match.entry);
    }
    this.prefix.countHit(length);
    job.cachedTokens = length;
    return (job.admitted = true);
  }

  private checkIds(ids: readonly number[]): void {
    for (const id of ids) {
      if (!Number.isInteger(id) || id < 0 || id >= this.cfg.vocabSize)
        throw new RangeError(`token id ${id} is outside the vocabulary of ${this.cfg.vocabSize}`);
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
