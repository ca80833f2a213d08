// A Sampler and Scorer over one vLLM server (`vllm serve`), through its OpenAI-compatible
// completions route with the prompt as token ids. Formats followed (vllm-project/vllm):
// vllm/entrypoints/openai/completion/protocol.py (CompletionRequest, CompletionResponse,
// CompletionStreamResponse, CompletionLogProbs), vllm/entrypoints/serve/lora/api_router.py (the
// adapter routes: plain text answers, errors as {error: {message, code}}) and
// vllm/entrypoints/serve/dev/rpc/api_router.py (collective_rpc).
//
// Generation: POST /v1/completions {prompt: ids, stream: true, logprobs: k, return_token_ids,
// return_tokens_as_token_ids, seed, stop_token_ids, ...}. Each chunk carries the new tokens' ids
// (`token_ids`) and log-probs (`logprobs.token_logprobs`, vLLM's default raw log-probs: the model
// at temperature 1) and top alternatives keyed "token_id:<id>".
// Scoring: POST /v1/completions {prompt: prompt + completion, max_tokens: 1, prompt_logprobs: k}:
// `prompt_logprobs[i]` maps token ids to {logprob, rank} for position i (null for the first).
// Versions: LoRA through POST /v1/load_lora_adapter and /v1/unload_lora_adapter {lora_name,
// lora_path} (the server needs --enable-lora and VLLM_ALLOW_RUNTIME_LORA_UPDATING=True); full
// weights through the development route POST /collective_rpc {method: "reload_weights", kwargs:
// {weights_path}} (VLLM_SERVER_DEV_MODE=1; the worker method's arguments differ between vLLM
// releases, so this one is checked against the test double only), then POST /reset_prefix_cache.
// Paths are the version folders as the server must read them (a shared folder, or the same path
// on each machine).

import type { SampledToken, ScoredCompletion, TokenLogprob } from '../types.js';
import type { ResolvedParams } from '../sampler.js';
import { expectShape, RemoteServerError, wrapped } from './http.js';
import { HttpSampler, type RemoteSamplerOptions, sampledLogprobOf, type StreamEnd } from './http-sampler.js';

interface StreamChoice {
  token_ids?: number[] | null;
  logprobs?: { token_logprobs?: (number | null)[]; top_logprobs?: (Record<string, number> | null)[] } | null;
  finish_reason?: string | null;
  stop_reason?: number | string | null;
}

interface CompletionChunk {
  choices?: StreamChoice[];
  usage?: { prompt_tokens?: number; prompt_tokens_details?: { cached_tokens?: number } | null } | null;
}

export class VllmSampler extends HttpSampler {
  constructor(opts: RemoteSamplerOptions) {
    super(opts, 'vLLM');
  }

  protected async *stream(
    promptIds: readonly number[],
    p: ResolvedParams,
    adapter: string | null,
    signal: AbortSignal,
  ): AsyncGenerator<SampledToken, StreamEnd> {
    const body = {
      model: adapter ?? this.opts.model,
      prompt: promptIds,
      max_tokens: p.maxTokens,
      temperature: p.temperature,
      top_p: p.topP,
      ...(p.topK > 0 ? { top_k: p.topK } : {}),
      ...(p.seed === null ? {} : { seed: p.seed }),
      stop: p.stop,
      stop_token_ids: p.stopTokenIds,
      logprobs: p.topLogprobs,
      return_token_ids: true,
      return_tokens_as_token_ids: true,
      skip_special_tokens: false,
      stream: true,
      stream_options: { include_usage: true },
    };
    const server = `vLLM at ${this.client.baseUrl}`;
    let finish: StreamChoice | null = null;
    let usage: CompletionChunk['usage'] = null;
    let n = 0;
    for await (const event of this.client.postStream('/v1/completions', body, signal)) {
      const chunk = event as CompletionChunk;
      if (chunk.usage) usage = chunk.usage;
      const choice = chunk.choices?.[0];
      if (!choice) continue;
      const ids = choice.token_ids ?? [];
      const lps = choice.logprobs?.token_logprobs ?? [];
      expectShape(Array.isArray(ids), server, 'token_ids is not a list (is return_token_ids supported?)');
      expectShape(lps.length === ids.length, server, `${ids.length} token ids but ${lps.length} log-probs`);
      for (let i = 0; i < ids.length; i++) {
        const logprob = lps[i];
        expectShape(typeof logprob === 'number', server, `token ${ids[i]} has no log-prob`);
        const top = p.topLogprobs > 0 ? topOf(choice.logprobs?.top_logprobs?.[i], p.topLogprobs, server) : undefined;
        n++;
        yield { id: ids[i]!, logprob, sampledLogprob: sampledLogprobOf(logprob, p), ...(top ? { top } : {}) };
      }
      if (choice.finish_reason) finish = choice;
    }
    if (!finish) throw new RemoteServerError(`${server}: the stream ended without a finish_reason`);
    return {
      ...finishOf(finish, n, p.maxTokens, server),
      ...(usage?.prompt_tokens === undefined ? {} : { promptTokens: usage.prompt_tokens }),
      ...(typeof usage?.prompt_tokens_details?.cached_tokens === 'number'
        ? { cachedTokens: usage.prompt_tokens_details.cached_tokens }
        : {}),
    };
  }

  protected async score(
    promptIds: readonly number[],
    completionIds: readonly number[],
    topK: number,
    adapter: string | null,
  ): Promise<ScoredCompletion> {
    const server = `vLLM at ${this.client.baseUrl}`;
    const answer = (await this.client.postJson('/v1/completions', {
      model: adapter ?? this.opts.model,
      prompt: [...promptIds, ...completionIds],
      max_tokens: 1,
      temperature: 0,
      prompt_logprobs: topK,
    })) as { choices?: { prompt_logprobs?: (Record<string, { logprob: number; rank?: number }> | null)[] }[] };
    const rows = answer?.choices?.[0]?.prompt_logprobs;
    expectShape(Array.isArray(rows), server, 'no prompt_logprobs in the answer');
    expectShape(
      rows.length === promptIds.length + completionIds.length,
      server,
      'prompt_logprobs has the wrong length',
    );
    const logprobs: number[] = [];
    const top: TokenLogprob[][] = [];
    completionIds.forEach((id, i) => {
      const row = rows[promptIds.length + i];
      const own = row?.[String(id)];
      expectShape(typeof own?.logprob === 'number', server, `no log-prob for completion token ${i} (id ${id})`);
      logprobs.push(own.logprob);
      if (topK > 0)
        top.push(
          Object.entries(row!)
            .map(([k, v]) => ({ id: Number(k), logprob: v.logprob }))
            .sort((a, b) => b.logprob - a.logprob)
            .slice(0, topK),
        );
    });
    return topK > 0 ? { logprobs, top } : { logprobs };
  }

  async loadAdapter(name: string, path: string): Promise<void> {
    await this.admin('/v1/load_lora_adapter', { lora_name: name, lora_path: path }, `load the LoRA adapter ${path}`);
  }

  async unloadAdapter(name: string): Promise<void> {
    await this.admin('/v1/unload_lora_adapter', { lora_name: name }, `unload the LoRA adapter ${name}`);
  }

  async loadFullWeights(path: string): Promise<void> {
    const what = `load the weights of ${path}`;
    await this.admin('/collective_rpc', { method: 'reload_weights', kwargs: { weights_path: path } }, what);
    await this.admin('/reset_prefix_cache', {}, 'reset its prefix cache');
  }

  private async admin(route: string, body: unknown, what: string): Promise<void> {
    try {
      await this.client.postText(route, body, 600_000);
    } catch (e) {
      throw wrapped(e, `vLLM at ${this.client.baseUrl} could not ${what}`);
    }
  }
}

function topOf(row: Record<string, number> | null | undefined, k: number, server: string): TokenLogprob[] {
  expectShape(row !== null && typeof row === 'object', server, 'a token has no top_logprobs');
  return Object.entries(row)
    .map(([key, logprob]) => {
      const m = /^token_id:(\d+)$/.exec(key);
      expectShape(m !== null, server, `top_logprobs key ${JSON.stringify(key)} is not token_id:<id>`);
      return { id: Number(m[1]), logprob };
    })
    .sort((a, b) => b.logprob - a.logprob)
    .slice(0, k);
}

function finishOf(choice: StreamChoice, n: number, maxTokens: number, server: string): StreamEnd {
  if (choice.finish_reason === 'length') return { reason: n >= maxTokens ? 'length' : 'context' };
  if (choice.finish_reason === 'stop') {
    // stop_reason: the stop string matched, a requested stop id, or null for the model's eos.
    return typeof choice.stop_reason === 'string'
      ? { reason: 'stop_sequence', stopSequence: choice.stop_reason }
      : { reason: 'stop_token' };
  }
  throw new RemoteServerError(`${server} ended the generation with finish_reason ${choice.finish_reason}`);
}
