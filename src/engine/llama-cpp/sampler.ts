// The Sampler and Scorer contracts (../types.ts) over llama.cpp in-process (node-llama-cpp).
//
// Token-exact: prompt ids go in as ids; each token's log-prob at temperature 1 and under the
// sampled distribution (temperature, top-k, top-p, as the embedded engine samples) are those of
// the logits llama.cpp computed (the normalizer summed in float32 where llama.cpp sums it), seeds
// reproduce, and the scorer's log-probs come from the same arithmetic. Greedy and temperature-1
// requests are sampled by llama.cpp, which returns the few numbers the log-probs need; top-p and
// top-k sample its largest logits here; other settings the whole row (./next-token.ts).
// What differs from the learner's fp32 log-probs is llama.cpp's arithmetic and the GGUF's F16/Q8_0
// weights: the mismatch truncated importance sampling corrects.
//
// Versions: the base model (version 0) stays loaded for the judge and teacher. A LoRA version is
// written as a GGUF adapter and served by a new context over the base weights; a full version is
// converted to a GGUF of its own and loaded while the previous one serves. Either way the switch
// happens when the new one is ready: new requests take it, in-flight ones finish on theirs (./served-version.ts).

import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { TextTokenizer } from '../../chat/tokenizer/tokenizer.js';
import type { ModelConfig } from '../local/model/config.js';
import { readModelFolder } from '../local/model/folder.js';
import { readPolicyUpdate } from '../local/policy-versions.js';
import { createRng, randomSeed } from '../local/sampling/random.js';
import { Lora } from '../local/train/lora.js';
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
import { convertInWorker } from './convert-worker.js';
import { cachedModelGguf, type GgufWeightType } from './gguf.js';
import { writeLoraGguf } from './gguf-lora.js';
import {
  type ControlledEvaluateInput,
  type GpuChoice,
  importNodeLlamaCpp,
  type Llama,
  type LlamaContextOptions,
  type LlamaContextSequence,
  openLlama,
} from './node-llama-cpp.js';
import type { TokenLogprob } from '../types.js';
import { GenerationSteps, scoredToken, scoreRequest } from './next-token.js';
import { ModelRef, ServedVersion } from './served-version.js';

export interface LlamaCppSamplerOptions {
  /** The Hugging Face model folder; its GGUF is cached in <modelDir>/gguf/. */
  modelDir: string;
  /** The base model's weight type in llama.cpp (default F16). */
  ggufType?: GgufWeightType;
  /** auto: the best GPU backend installed (all layers offloaded), else the CPU; off: the CPU. */
  gpu?: GpuChoice;
  threads?: number;
  /** Tokens per sequence (prompt + completion); default the model's context, at most 8192. */
  contextSize?: number;
  /** Requests one version runs at once (llama.cpp batches them); more wait. Default 4. */
  sequences?: number;
  /** LoRA versions served from one copy of the base model before it is loaded afresh (default 16; see reloadBase). */
  loraAdaptersPerModel?: number;
  /** Where version GGUFs are written; default <modelDir>/gguf/versions. */
  versionsCacheDir?: string;
  /** Tests and benches: a folder holding node-llama-cpp under node_modules, tried when it is not installed. */
  nodeLlamaCppFallback?: string;
  /** Hears conversions and loads (no conversation text). */
  log?: (event: string, fields: Record<string, unknown>) => void;
}

export class LlamaCppSampler implements Sampler, Scorer {
  private serving: ServedVersion;
  private readonly live = new Map<number, ServedVersion>();
  private switching: Promise<unknown> = Promise.resolve();
  private closed = false;
  /** LoRA adapters loaded into the current base model. */
  private adaptersOnBase = 0;

  private constructor(
    private readonly llama: Llama,
    /** The base model new LoRA versions run on (held by the sampler besides its versions). */
    private base: ModelRef,
    private readonly basePath: string,
    zero: ServedVersion,
    private readonly opts: Required<Omit<LlamaCppSamplerOptions, 'threads' | 'nodeLlamaCppFallback' | 'log'>> &
      Pick<LlamaCppSamplerOptions, 'log'>,
    readonly config: ModelConfig,
    private readonly eosIds: readonly number[],
    private readonly tokenizer: TextTokenizer,
    /** Shared with the contexts' dispatch (contextOptionsOf). */
    private readonly activity: Activity,
  ) {
    this.serving = zero;
    this.live.set(0, zero);
  }

  static async open(o: LlamaCppSamplerOptions): Promise<LlamaCppSampler> {
    const folder = readModelFolder(o.modelDir);
    const mod = await importNodeLlamaCpp(o.nodeLlamaCppFallback);
    const ggufType = o.ggufType ?? 'F16';
    const path = cachedModelGguf(o.modelDir, ggufType, (p) => o.log?.('gguf_convert', { path: p, type: ggufType }));
    const llama = await openLlama(mod, o.gpu ?? 'auto', o.threads);
    const opts = {
      modelDir: o.modelDir,
      ggufType,
      gpu: o.gpu ?? 'auto',
      contextSize: o.contextSize ?? Math.min(folder.config.maxPositionEmbeddings, 8192),
      sequences: o.sequences ?? 4,
      loraAdaptersPerModel: o.loraAdaptersPerModel ?? 16,
      versionsCacheDir: o.versionsCacheDir ?? join(o.modelDir, 'gguf', 'versions'),
      log: o.log,
    };
    const tokenizer = await TextTokenizer.fromModelDir(o.modelDir);
    const model = await llama.loadModel({ modelPath: path, gpuLayers: opts.gpu === 'off' ? 0 : 'auto' });
    const base = new ModelRef(model).hold();
    const activity: Activity = { running: 0 };
    const context = await model.createContext(contextOptionsOf(opts, activity));
    o.log?.('llama_cpp_loaded', { gguf: path, gpu: llama.gpu });
    return new LlamaCppSampler(
      llama,
      base,
      path,
      new ServedVersion(0, context, base),
      opts,
      folder.config,
      folder.eosTokenIds,
      tokenizer,
      activity,
    );
  }

  /** The version new requests run on. */
  get version(): number {
    return this.serving.version;
  }

  /** Tokens one request may span (prompt + completion). */
  get contextSize(): number {
    return this.opts.contextSize;
  }

  /** The GPU backend llama.cpp runs on ("cuda", "vulkan", "metal"), or false. */
  get gpu(): string | false {
    return this.llama.gpu;
  }

  /** Generations and scorings running now. */
  inFlight(): number {
    return this.activity.running;
  }

  /** Starts at once: the prompt prefills while the caller does its own work before reading. */
  generate(promptIds: readonly number[], params: SamplingParams, signal?: AbortSignal): AsyncIterable<GenerationEvent> {
    return startNow(this.run(promptIds, params, this.resolve(params, promptIds), signal), signal);
  }

  private async *run(
    promptIds: readonly number[],
    params: SamplingParams,
    s: ResolvedParams & { seed: number },
    signal?: AbortSignal,
  ): AsyncGenerator<GenerationEvent, void> {
    const served = this.versionFor(params.version ?? this.serving.version);
    this.activity.running++;
    let seq: LlamaContextSequence;
    try {
      seq = await served.acquire();
    } catch (e) {
      this.activity.running--;
      throw e;
    }
    const rng = createRng(s.seed);
    const stopIds = new Set([...this.eosIds, ...(params.stopTokenIds ?? [])]);
    const stops = (params.stop ?? []).filter((x) => x.length > 0);
    const decoder = this.tokenizer.createStreamDecoder();
    let text = '';
    let n = 0;
    let reason: FinishReason = 'cancelled';
    let stopSequence: string | undefined;
    const steps = new GenerationSteps(seq, s, rng, this.config.vocabSize);
    // The step after a token runs while the caller handles that token (a server streams it, records
    // it): pulled only once the caller asked for it, the caller's time would add to every step.
    let pending: Promise<SampledToken> | null = null;
    try {
      let r = await steps.next(promptIds);
      for (;;) {
        if (signal?.aborted) break;
        n++;
        let end: FinishReason | null = null;
        if (stopIds.has(r.id)) end = 'stop_token';
        else if (stops.length > 0) {
          const before = text.length;
          text += decoder.push(r.id);
          stopSequence = stops.find((x) => text.indexOf(x, Math.max(0, before - x.length + 1)) >= 0);
          if (stopSequence !== undefined) end = 'stop_sequence';
        }
        if (end === null && n >= s.maxTokens) end = 'length';
        if (end === null && promptIds.length + n >= this.opts.contextSize) end = 'context';
        if (end === null) {
          pending = steps.next([r.id]);
          // Awaited below or in `finally`; a caller that leaves first must not make it unhandled.
          pending.catch(() => undefined);
        }
        yield { type: 'token', token: r };
        if (signal?.aborted) break;
        if (end !== null) {
          reason = end;
          break;
        }
        r = await pending!;
        pending = null;
      }
      yield {
        type: 'finish',
        reason,
        ...(stopSequence !== undefined ? { stopSequence } : {}),
        version: served.version,
        promptTokens: promptIds.length,
        completionTokens: n,
      };
    } finally {
      // The sequence goes back only once no step runs on it.
      await pending?.catch(() => undefined);
      served.release(seq);
      this.activity.running--;
    }
  }

  async logprobs(
    promptIds: readonly number[],
    completionIds: readonly number[],
    opts: ScoreOptions = {},
  ): Promise<ScoredCompletion> {
    if (promptIds.length === 0) throw new Error('scoring needs a non-empty prompt');
    const ids = [...promptIds, ...completionIds];
    this.checkIds(ids);
    if (ids.length > this.opts.contextSize)
      throw new RangeError(`prompt and completion are ${ids.length} tokens, the context is ${this.opts.contextSize}`);
    const topK = opts.topK ?? 0;
    const served = this.versionFor(opts.version ?? 0);
    this.activity.running++;
    let seq: LlamaContextSequence;
    try {
      seq = await served.acquire();
    } catch (e) {
      this.activity.running--;
      throw e;
    }
    try {
      const first = promptIds.length - 1;
      const out = await seq.controlledEvaluate(
        ids.map(
          (t, i): ControlledEvaluateInput =>
            i >= first && i < ids.length - 1 ? [t, { generateNext: scoreRequest(ids[i + 1]!, topK) }] : t,
        ),
      );
      const logprobs: number[] = [];
      const top: TokenLogprob[][] = [];
      completionIds.forEach((id, j) => {
        const scored = scoredToken(out[first + j]?.next, id, topK);
        logprobs.push(scored.logprob);
        if (scored.top) top.push(scored.top);
      });
      return { logprobs, ...(topK > 0 ? { top } : {}) };
    } finally {
      served.release(seq);
      this.activity.running--;
    }
  }

  /**
   * Makes `version` the one new requests run on once it is loaded (LoRA: an adapter over the base
   * weights; full: a model of its own, converted and loaded in the background while the previous
   * one serves); in-flight requests finish on theirs. Switches go live in the order asked.
   * Resolves with the ms from the call to the switch.
   */
  use(version: PolicyVersion): Promise<number> {
    const t0 = performance.now();
    const next = this.switching.then(() => this.load(version));
    this.switching = next.catch(() => undefined);
    return next.then(() => performance.now() - t0);
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.switching;
    await Promise.all([...this.live.values()].map((v) => v.dispose()));
    await this.base.release();
    await this.llama.dispose();
  }

  private async load(v: PolicyVersion): Promise<void> {
    if (this.closed) throw new Error('the llama-cpp sampler is closed');
    if (v.version <= this.serving.version)
      throw new Error(`version ${v.version} is not newer than the serving version ${this.serving.version}`);
    const update = readPolicyUpdate(v, this.config);
    mkdirSync(this.opts.versionsCacheDir, { recursive: true });
    const t0 = performance.now();
    let served: ServedVersion;
    const contextOptions = contextOptionsOf(this.opts, this.activity);
    if (update.kind === 'lora') {
      const path = join(this.opts.versionsCacheDir, `v-${v.version}.lora.gguf`);
      writeLoraGguf(this.config, new Lora(this.config, update.spec, update.data), path);
      if (this.adaptersOnBase >= this.opts.loraAdaptersPerModel) await this.reloadBase();
      this.adaptersOnBase++;
      const context = await this.base.model.createContext({
        ...contextOptions,
        lora: { adapters: [{ filePath: path }] },
      });
      served = new ServedVersion(v.version, context, this.base);
    } else {
      const path = join(this.opts.versionsCacheDir, `v-${v.version}-${this.opts.ggufType.toLowerCase()}.gguf`);
      // readPolicyUpdate checked every tensor's shape against the base model.
      await convertInWorker({
        params: update.params,
        modelDir: this.opts.modelDir,
        config: this.config,
        out: path,
        type: this.opts.ggufType,
        name: `openclaw-rl v-${v.version}`,
      });
      const model = await this.llama.loadModel({ modelPath: path, gpuLayers: this.opts.gpu === 'off' ? 0 : 'auto' });
      served = new ServedVersion(v.version, await model.createContext(contextOptions), new ModelRef(model));
    }
    const previous = this.serving;
    this.serving = served;
    this.live.set(v.version, served);
    if (previous.version !== 0) {
      this.live.delete(previous.version);
      previous.retire();
    }
    this.opts.log?.('llama_cpp_version', {
      version: v.version,
      kind: v.kind,
      loadMs: Math.round(performance.now() - t0),
    });
  }

  /**
   * node-llama-cpp frees a LoRA adapter only with its model: after `loraAdaptersPerModel` LoRA
   * versions, the base is loaded afresh (version 0 moves to it) and the old copy, with its
   * adapters, is disposed once the versions still running on it have finished.
   */
  private async reloadBase(): Promise<void> {
    const model = await this.llama.loadModel({
      modelPath: this.basePath,
      gpuLayers: this.opts.gpu === 'off' ? 0 : 'auto',
    });
    const next = new ModelRef(model).hold();
    const zero = new ServedVersion(0, await model.createContext(contextOptionsOf(this.opts, this.activity)), next);
    const oldZero = this.live.get(0)!;
    this.live.set(0, zero);
    if (this.serving === oldZero) this.serving = zero;
    oldZero.retire();
    const old = this.base;
    this.base = next;
    this.adaptersOnBase = 0;
    await old.release();
    this.opts.log?.('llama_cpp_base_reloaded', {});
  }

  private versionFor(version: number): ServedVersion {
    if (this.closed) throw new Error('the llama-cpp sampler is closed');
    const v = this.live.get(version);
    if (!v)
      throw new Error(`policy version ${version} is not loaded (live versions: ${[...this.live.keys()].join(', ')})`);
    return v;
  }

  private checkIds(ids: readonly number[]): void {
    for (const id of ids)
      if (!(Number.isInteger(id) && id >= 0 && id < this.config.vocabSize))
        throw new RangeError(`token id ${id} is outside the vocabulary (0..${this.config.vocabSize - 1})`);
  }

  private resolve(p: SamplingParams, promptIds: readonly number[]): ResolvedParams & { seed: number } {
    const resolved = resolveSamplingParams(p, promptIds.length, this.opts.contextSize);
    this.checkIds(promptIds);
    return { ...resolved, seed: resolved.seed ?? randomSeed() };
  }
}

/** Generations and scorings running on the sampler's contexts now. */
interface Activity {
  running: number;
}

/**
 * Flash attention off: with it, llama.cpp's log-probs of one sequence evaluated as a batch (the
 * scorer) and token by token (generation) drift apart with length (2e-2 after 200 tokens of the
 * tiny test model, against 2e-3 without), so the trainer would not score what was sampled.
 * A context's queued evaluations go to llama.cpp on a setImmediate (node-llama-cpp's default), so
 * that several sequences' steps share one batch; that waits behind the server's I/O callbacks. With
 * one request running there is nothing to batch with, and they go on the next tick instead (0.07-0.1
 * ms less per request through serve, measured on the tiny model).
 */
function contextOptionsOf(o: { contextSize: number; sequences: number }, activity: Activity): LlamaContextOptions {
  return {
    contextSize: o.contextSize,
    sequences: o.sequences,
    flashAttention: false,
    batching: {
      dispatchSchedule: (dispatch) => (activity.running > 1 ? setImmediate(dispatch) : process.nextTick(dispatch)),
    },
  };
}
