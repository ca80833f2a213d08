// An SGLang test double: an HTTP server answering the routes SglangSampler uses in SGLang's
// formats, with real tokens and log-probs from the embedded LocalEngine. Written from
// sgl-project/sglang's python/sglang/srt/managers/io_struct.py (GenerateReqInput: input_ids,
// sampling_params, return_logprob, logprob_start_len, top_logprobs_num, lora_path, stream;
// meta_info's [logprob, token_id, text] triples; LoadLoRAAdapterReqInput,
// UnloadLoRAAdapterReqInput, UpdateWeightFromDiskReqInput) and
// python/sglang/srt/sampling/sampling_params.py. Streams cumulatively, SGLang's default.
// Not SGLang: it holds an adapter only while the engine keeps its version; text fields are empty.

import type { GenerationEvent, SamplingParams, TokenLogprob } from '../../src/engine/types.js';
import { DoubleError, type DoubleOptions, eventStream, type InferenceDouble, startDouble } from './inference-double.js';

type Triple = [number | null, number, null];

export function startSglangDouble(modelDir: string, opts: DoubleOptions = {}): Promise<InferenceDouble> {
  return startDouble(
    modelDir,
    (engine, versions) => async (route, body, res, aborted) => {
      if (route === '/load_lora_adapter') {
        await versions.loadAdapter(String(body.lora_name), String(body.lora_path));
        return { success: true, error_message: '', loaded_adapters: Object.fromEntries(versions.adapters) };
      }
      if (route === '/unload_lora_adapter') {
        versions.unloadAdapter(String(body.lora_name));
        return { success: true, error_message: '', loaded_adapters: Object.fromEntries(versions.adapters) };
      }
      if (route === '/update_weights_from_disk') {
        await versions.loadFull(String(body.model_path));
        return { success: true, message: 'Succeeded to update model weights.', num_paused_requests: 0 };
      }
      if (route !== '/generate') throw new DoubleError(404, `no route ${route}`);

      const ids = body.input_ids as number[];
      if (!Array.isArray(ids) || !ids.every(Number.isInteger)) throw new DoubleError(400, 'the double takes input_ids');
      const version = versions.versionOf(body.lora_path as string | undefined);
      const sp = (body.sampling_params ?? {}) as Record<string, unknown>;
      const topN = (body.top_logprobs_num as number) ?? 0;
      const triples = (top: TokenLogprob[] | undefined): Triple[] => (top ?? []).map((a) => [a.logprob, a.id, null]);
      const maxNew = (sp.max_new_tokens as number) ?? 128;

      if (maxNew === 0) {
        const start = Math.max(0, (body.logprob_start_len as number) ?? 0);
        const scored = await engine.logprobs(ids.slice(0, 1), ids.slice(1), {
          version,
          ...(topN ? { topK: topN } : {}),
        });
        const input: Triple[] = [];
        const inputTop: (Triple[] | null)[] = [];
        for (let p = start; p < ids.length; p++) {
          input.push([p === 0 ? null : scored.logprobs[p - 1]!, ids[p]!, null]);
          inputTop.push(p === 0 ? null : triples(scored.top?.[p - 1]));
        }
        return {
          text: '',
          output_ids: [],
          meta_info: {
            id: 'double',
            finish_reason: { type: 'length', length: 0 },
            prompt_tokens: ids.length,
            completion_tokens: 0,
            cached_tokens: 0,
            input_token_logprobs: input,
            input_top_logprobs: inputTop,
            output_token_logprobs: [],
            output_top_logprobs: [],
          },
        };
      }
      const topK = (sp.top_k as number) ?? -1;
      const params: SamplingParams = {
        maxTokens: maxNew,
        temperature: (sp.temperature as number) ?? 1,
        topP: (sp.top_p as number) ?? 1,
        topK: topK === -1 ? 0 : topK,
        stop: (sp.stop as string[]) ?? [],
        stopTokenIds: (sp.stop_token_ids as number[]) ?? [],
        topLogprobs: topN,
        version,
        ...(sp.sampling_seed === undefined ? {} : { seed: sp.sampling_seed as number }),
      };
      const outIds: number[] = [];
      const out: Triple[] = [];
      const outTop: Triple[][] = [];
      const meta = (finish: Extract<GenerationEvent, { type: 'finish' }> | null) => ({
        id: 'double',
        finish_reason: finish === null ? null : finishOf(finish, outIds.at(-1)),
        prompt_tokens: ids.length,
        completion_tokens: outIds.length,
        cached_tokens: finish?.cachedTokens ?? 0,
        ...(body.return_logprob ? { output_token_logprobs: out, output_top_logprobs: outTop } : {}),
      });
      const sse = body.stream ? eventStream(res) : null;
      let finish: Extract<GenerationEvent, { type: 'finish' }> | null = null;
      for await (const e of engine.generate(ids, params, aborted)) {
        if (e.type === 'token') {
          outIds.push(e.token.id);
          out.push([e.token.logprob, e.token.id, null]);
          outTop.push(triples(e.token.top));
          sse?.send({ text: '', output_ids: outIds, meta_info: meta(null) });
        } else finish = e;
      }
      if (finish?.reason === 'cancelled') return sse?.done();
      if (!sse) return { text: '', output_ids: outIds, meta_info: meta(finish) };
      sse.send({ text: '', output_ids: outIds, meta_info: meta(finish) });
      sse.done();
    },
    opts,
  );
}

function finishOf(e: Extract<GenerationEvent, { type: 'finish' }>, last: number | undefined) {
  if (e.reason === 'stop_sequence') return { type: 'stop', matched: e.stopSequence };
  if (e.reason === 'stop_token') return { type: 'stop', matched: last };
  return { type: 'length', length: e.completionTokens };
}
