// A Sampler and Scorer over one SGLang server (`python -m sglang.launch_server`), through its
// native /generate route with input ids. Formats followed (sgl-project/sglang):
// python/sglang/srt/managers/io_struct.py (GenerateReqInput; LoadLoRAAdapterReqInput,
// UnloadLoRAAdapterReqInput, UpdateWeightFromDiskReqInput) and python/sglang/srt/sampling/
// sampling_params.py (the sampling_params keys).
//
// Generation: POST /generate {input_ids, sampling_params, return_logprob: true, top_logprobs_num,
// stream: true, lora_path: <adapter name>}. meta_info.output_token_logprobs holds
// [logprob, token_id, text] per generated token (the model at temperature 1), cumulative over the
// stream unless the server runs --incremental-streaming-output (both are read), and finish_reason
// {type: "stop" | "length" | "abort", matched: the stop id or string}.
// Scoring: POST /generate {input_ids: prompt + completion, max_new_tokens: 0, return_logprob,
// logprob_start_len: the prompt's last position, top_logprobs_num}: meta_info.input_token_logprobs
// from that position on (the first may be null), so the completion's are the last entries.
// Versions: POST /load_lora_adapter and /unload_lora_adapter {lora_name, lora_path} (the server
// needs --enable-lora with --max-lora-rank and --lora-target-modules covering the adapters), and
// POST /update_weights_from_disk {model_path} for full weights, which SGLang applies once its
// requests in flight are done. Paths are folders the server itself reads.

import type { SampledToken, ScoredCompletion, TokenLogprob } from '../types.js';
import type { ResolvedParams } from '../sampler.js';
import { expectShape, RemoteServerError, wrapped } from './http.js';
import { HttpSampler, type RemoteSamplerOptions, sampledLogprobOf, type StreamEnd } from './http-sampler.js';

/** [logprob, token id, text or null], SGLang's per-token triple. */
type Triple = [number | null, number, string | null];

interface MetaInfo {
  prompt_tokens?: number;
  completion_tokens?: number;
  cached_tokens?: number;
  finish_reason?: { type: string; matched?: number | string | null } | null;
  output_token_logprobs?: Triple[];
  output_top_logprobs?: (Triple[] | null)[];
  input_token_logprobs?: Triple[];
  input_top_logprobs?: (Triple[] | null)[];
}

export class SglangSampler extends HttpSampler {
  constructor(opts: RemoteSamplerOptions) {
    super(opts, 'SGLang');
  }

  protected async *stream(
    promptIds: readonly number[],
    p: ResolvedParams,
    adapter: string | null,
    signal: AbortSignal,
  ): AsyncGenerator<SampledToken, StreamEnd> {
    const body = {
      input_ids: promptIds,
      sampling_params: {
        max_new_tokens: p.maxTokens,
        temperature: p.temperature,
        top_p: p.topP,
        // SGLang's "no top-k" is -1.
        top_k: p.topK > 0 ? p.topK : -1,
        stop: p.stop,
        stop_token_ids: p.stopTokenIds,
        skip_special_tokens: false,
        ...(p.seed === null ? {} : { sampling_seed: p.seed }),
      },
      return_logprob: true,
      top_logprobs_num: p.topLogprobs,
      stream: true,
      ...(adapter ? { lora_path: adapter } : {}),
    };
    const server = `SGLang at ${this.client.baseUrl}`;
    let meta: MetaInfo | null = null;
    let n = 0;
    // Read to the stream's end even after the finish: a response left unread closes its connection,
    // and the next request would wait for a new one (0.1-0.2 ms here).
    for await (const event of this.client.postStream('/generate', body, signal)) {
      if (meta?.finish_reason) continue;
      meta = (event as { meta_info?: MetaInfo }).meta_info ?? null;
      expectShape(meta !== null && typeof meta === 'object', server, 'an event without meta_info');
      const all = meta.output_token_logprobs ?? [];
      const tops = meta.output_top_logprobs ?? [];
      expectShape(Array.isArray(all), server, 'output_token_logprobs is not a list');
      // Cumulative: the list covers every token so far; incremental: only the new ones.
      const cumulative = all.length === meta.completion_tokens && all.length >= n;
      const from = cumulative ? n : 0;
      for (let i = from; i < all.length; i++) {
        const [logprob, id] = all[i]!;
        expectShape(typeof logprob === 'number' && Number.isInteger(id), server, `bad output_token_logprobs entry`);
        const top = p.topLogprobs > 0 ? topOf(tops[i], p.topLogprobs, server) : undefined;
        n++;
        yield { id, logprob, sampledLogprob: sampledLogprobOf(logprob, p), ...(top ? { top } : {}) };
      }
    }
    const finish = meta?.finish_reason;
    if (!finish) throw new RemoteServerError(`${server}: the stream ended without a finish_reason`);
    return {
      ...finishOf(finish, n, p.maxTokens, server),
      ...(typeof meta!.prompt_tokens === 'number' ? { promptTokens: meta!.prompt_tokens } : {}),
      ...(typeof meta!.cached_tokens === 'number' ? { cachedTokens: meta!.cached_tokens } : {}),
    };
  }

  protected async score(
    promptIds: readonly number[],
    completionIds: readonly number[],
    topK: number,
    adapter: string | null,
  ): Promise<ScoredCompletion> {
    const server = `SGLang at ${this.client.baseUrl}`;
    const answer = (await this.client.postJson('/generate', {
      input_ids: [...promptIds, ...completionIds],
      sampling_params: { max_new_tokens: 0, temperature: 0 },
      return_logprob: true,
      logprob_start_len: promptIds.length - 1,
      top_logprobs_num: topK,
      ...(adapter ? { lora_path: adapter } : {}),
    })) as { meta_info?: MetaInfo };
    const rows = answer?.meta_info?.input_token_logprobs;
    expectShape(Array.isArray(rows) && rows.length >= completionIds.length, server, 'too few input_token_logprobs');
    const skip = rows.length - completionIds.length;
    const tops = answer.meta_info!.input_top_logprobs ?? [];
    const logprobs: number[] = [];
    const top: TokenLogprob[][] = [];
    completionIds.forEach((id, i) => {
      const [logprob, at] = rows[skip + i]!;
      expectShape(at === id, server, `input_token_logprobs[${skip + i}] is token ${at}, expected ${id}`);
      expectShape(typeof logprob === 'number', server, `no log-prob for completion token ${i}`);
      logprobs.push(logprob);
      if (topK > 0) top.push(topOf(tops[skip + i], topK, server));
    });
    return topK > 0 ? { logprobs, top } : { logprobs };
  }

  async loadAdapter(name: string, path: string): Promise<void> {
    await this.admin('/load_lora_adapter', { lora_name: name, lora_path: path }, `load the LoRA adapter ${path}`);
  }

  async unloadAdapter(name: string): Promise<void> {
    await this.admin('/unload_lora_adapter', { lora_name: name }, `unload the LoRA adapter ${name}`);
  }

  async loadFullWeights(path: string): Promise<void> {
    await this.admin('/update_weights_from_disk', { model_path: path }, `load the weights of ${path}`);
  }

  /** The admin routes answer {success, message | error_message}; success false is an error. */
  private async admin(route: string, body: unknown, what: string): Promise<void> {
    let answer: { success?: boolean; message?: string; error_message?: string } | null;
    try {
      answer = (await this.client.postJson(route, body, undefined, 600_000)) as typeof answer;
    } catch (e) {
      throw wrapped(e, `SGLang at ${this.client.baseUrl} could not ${what}`);
    }
    if (answer && answer.success === false)
      throw new RemoteServerError(
        `SGLang at ${this.client.baseUrl} could not ${what}: ` +
          (answer.error_message ?? answer.message ?? 'no reason given'),
      );
  }
}

function topOf(row: Triple[] | null | undefined, k: number, server: string): TokenLogprob[] {
  expectShape(Array.isArray(row), server, 'a token has no top log-probs');
  return row
    .map(([logprob, id]) => ({ id, logprob: logprob ?? Number.NEGATIVE_INFINITY }))
    .sort((a, b) => b.logprob - a.logprob)
    .slice(0, k);
}

function finishOf(f: NonNullable<MetaInfo['finish_reason']>, n: number, maxTokens: number, server: string): StreamEnd {
  if (f.type === 'length') return { reason: n >= maxTokens ? 'length' : 'context' };
  if (f.type === 'stop')
    return typeof f.matched === 'string'
      ? { reason: 'stop_sequence', stopSequence: f.matched }
      : { reason: 'stop_token' };
  throw new RemoteServerError(`${server} ended the generation with finish_reason ${JSON.stringify(f)}`);
}
