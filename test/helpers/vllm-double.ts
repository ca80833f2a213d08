// A vLLM test double: an HTTP server answering the routes VllmSampler uses in vLLM's formats,
// with real tokens and log-probs from the embedded LocalEngine. Written from vllm-project/vllm's
// vllm/entrypoints/openai/completion/protocol.py (CompletionRequest, CompletionStreamResponse,
// CompletionLogProbs, CompletionResponseChoice.prompt_logprobs),
// vllm/entrypoints/serve/lora/api_router.py (load_lora_adapter / unload_lora_adapter) and
// vllm/entrypoints/serve/dev/rpc/api_router.py (collective_rpc).
// Not vLLM: it holds an adapter only while the engine keeps its version (the newest and those in
// flight), where vLLM keeps up to --max-loras; text fields are empty (token ids are what count).

import type { GenerationEvent, SamplingParams } from '../../src/engine/types.js';
import {
  DoubleError,
  type DoubleOptions,
  eventStream,
  type InferenceDouble,
  type ServedGeneration,
  startDouble,
} from './inference-double.js';

export const VLLM_DOUBLE_MODEL = 'double-base';

export function startVllmDouble(modelDir: string, opts: DoubleOptions = {}): Promise<InferenceDouble> {
  return startDouble(
    modelDir,
    (engine, versions, served) => async (route, body, res, aborted) => {
      if (route === '/v1/load_lora_adapter') {
        await versions.loadAdapter(String(body.lora_name), String(body.lora_path));
        return `Success: LoRA adapter '${body.lora_name}' added successfully.`;
      }
      if (route === '/v1/unload_lora_adapter') {
        versions.unloadAdapter(String(body.lora_name));
        return `Success: LoRA adapter '${body.lora_name}' removed successfully.`;
      }
      if (route === '/collective_rpc') {
        const kwargs = body.kwargs as { weights_path?: string } | undefined;
        if (body.method !== 'reload_weights' || !kwargs?.weights_path)
          throw new DoubleError(400, 'the double knows only reload_weights with kwargs.weights_path');
        await versions.loadFull(kwargs.weights_path);
        return { results: [null] };
      }
      if (route === '/reset_prefix_cache') return '';
      if (route !== '/v1/completions') throw new DoubleError(404, `no route ${route}`);

      const prompt = body.prompt as number[];
      if (!Array.isArray(prompt) || !prompt.every(Number.isInteger))
        throw new DoubleError(400, 'the double takes prompts as token ids');
      const model = body.model === VLLM_DOUBLE_MODEL ? null : (body.model as string);
      const version = versions.versionOf(model);
      const topLogprobs = (body.logprobs as number | null) ?? 0;
      const stopTokenIds = (body.stop_token_ids as number[]) ?? [];
      const params: SamplingParams = {
        maxTokens: (body.max_tokens as number) ?? 16,
        temperature: (body.temperature as number) ?? 1,
        topP: (body.top_p as number) ?? 1,
        topK: (body.top_k as number) ?? 0,
        stop: (body.stop as string[]) ?? [],
        stopTokenIds,
        topLogprobs,
        version,
        ...(body.seed === undefined ? {} : { seed: body.seed as number }),
      };
      const asIds = body.return_tokens_as_token_ids === true;
      const key = (id: number) => (asIds ? `token_id:${id}` : String(id));
      const events = engine.generate(prompt, params, aborted);
      const finishOf = (e: Extract<GenerationEvent, { type: 'finish' }>, last: number | undefined) => ({
        finish_reason: e.reason === 'length' || e.reason === 'context' ? 'length' : 'stop',
        stop_reason:
          e.reason === 'stop_sequence'
            ? e.stopSequence
            : e.reason === 'stop_token' && last !== undefined && stopTokenIds.includes(last)
              ? last
              : null,
      });
      const usageOf = (e: Extract<GenerationEvent, { type: 'finish' }>) => ({
        prompt_tokens: e.promptTokens,
        completion_tokens: e.completionTokens,
        total_tokens: e.promptTokens + e.completionTokens,
        prompt_tokens_details: { cached_tokens: e.cachedTokens ?? 0 },
      });
      const logprobsOf = (t: Extract<GenerationEvent, { type: 'token' }>['token']) => ({
        text_offset: [0],
        token_logprobs: [t.logprob],
        tokens: [key(t.id)],
        top_logprobs: [
          Object.fromEntries([[key(t.id), t.logprob], ...(t.top ?? []).map((a) => [key(a.id), a.logprob])]),
        ],
      });

      const record: ServedGeneration = { promptIds: prompt, ids: [], logprobs: [] };
      if (body.stream) {
        const sse = eventStream(res);
        let last: number | undefined;
        for await (const e of events) {
          if (e.type === 'token') {
            last = e.token.id;
            record.ids.push(e.token.id);
            record.logprobs.push(e.token.logprob);
            sse.send({
              object: 'text_completion',
              model: body.model,
              choices: [
                { index: 0, text: '', logprobs: logprobsOf(e.token), finish_reason: null, token_ids: [e.token.id] },
              ],
            });
          } else if (e.reason !== 'cancelled') {
            sse.send({ model: body.model, choices: [{ index: 0, text: '', token_ids: [], ...finishOf(e, last) }] });
            const includeUsage = (body.stream_options as { include_usage?: boolean } | undefined)?.include_usage;
            if (includeUsage) sse.send({ model: body.model, choices: [], usage: usageOf(e) });
            served.push(record);
          }
        }
        sse.done();
        return;
      }
      const ids: number[] = [];
      let finish: Extract<GenerationEvent, { type: 'finish' }> | null = null;
      for await (const e of events)
        if (e.type === 'token') ids.push(e.token.id);
        else finish = e;
      const promptLogprobs = body.prompt_logprobs;
      let rows: (Record<string, { logprob: number; rank: number }> | null)[] | undefined;
      if (typeof promptLogprobs === 'number') {
        const k = promptLogprobs;
        const scored = await engine.logprobs(prompt.slice(0, 1), prompt.slice(1), {
          version,
          ...(k ? { topK: k } : {}),
        });
        rows = [
          null,
          ...scored.logprobs.map((lp, i) => {
            const row: Record<string, { logprob: number; rank: number }> = {};
            (scored.top?.[i] ?? []).forEach((a, r) => {
              row[String(a.id)] = { logprob: a.logprob, rank: r + 1 };
            });
            row[String(prompt[i + 1])] ??= { logprob: lp, rank: k + 1 };
            return row;
          }),
        ];
      }
      return {
        object: 'text_completion',
        model: body.model,
        choices: [
          {
            index: 0,
            text: '',
            token_ids: ids,
            ...finishOf(finish!, ids.at(-1)),
            ...(rows ? { prompt_logprobs: rows } : {}),
          },
        ],
        usage: usageOf(finish!),
      };
    },
    opts,
  );
}
