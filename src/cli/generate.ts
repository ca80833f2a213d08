// openclaw-rl generate --model DIR --prompt TEXT [--json] [sampling flags]
//
//   openclaw-rl generate --model models/tiny --prompt "Write a haiku" --max-tokens 48
//   openclaw-rl generate --model models/tiny --prompt "Hi" --json --seed 1 --temperature 0.7
//
// The prompt is sent as one user message through the model's chat template (--raw: as plain
// text). Text streams to stdout; --json prints one object with token ids and both log-probs.

import { renderPrompt } from '../chat/prompt.js';
import { loadChatModel } from './chat-model.js';
import {
  KV_CACHE_DTYPE_USAGE,
  kvCacheDtypeFlag,
  numberFlag,
  parseFlags,
  precisionFlag,
  SERVE_PRECISION_USAGE,
  stringFlag,
} from './args.js';

const USAGE = `usage: openclaw-rl generate --model DIR --prompt TEXT [options]

options:
  --json             print {text, promptIds, completionIds, logprobs, sampledLogprobs, finishReason, tokensPerSecond}
  --raw              use the prompt text as is, without the chat template
  --system TEXT      a system message before the prompt
  --think            let the model think (Qwen3 enable_thinking); default off
  --max-tokens N     default 128
  --temperature X    default 1 (0 = greedy)
  --top-p X          default 1
  --top-k N          default 0 (off)
  --seed N           reproducible sampling
  --stop TEXT        stop sequence (repeatable)
  --threads N        BLAS threads
  ${SERVE_PRECISION_USAGE}
  ${KV_CACHE_DTYPE_USAGE}`;

export async function runGenerate(argv: string[]): Promise<number> {
  const v = parseFlags(
    argv,
    {
      model: { type: 'string' },
      prompt: { type: 'string' },
      json: { type: 'boolean' },
      raw: { type: 'boolean' },
      system: { type: 'string' },
      think: { type: 'boolean' },
      'max-tokens': { type: 'string' },
      temperature: { type: 'string' },
      'top-p': { type: 'string' },
      'top-k': { type: 'string' },
      seed: { type: 'string' },
      stop: { type: 'string', multiple: true },
      threads: { type: 'string' },
      precision: { type: 'string' },
      'kv-cache-dtype': { type: 'string' },
    },
    USAGE,
  );
  if (v.help) {
    console.log(USAGE);
    return 0;
  }
  const modelDir = stringFlag(v, 'model', USAGE);
  const prompt = stringFlag(v, 'prompt', USAGE);
  const threads = numberFlag(v, 'threads', { integer: true, min: 1 });
  const precision = precisionFlag(v);
  const kvCacheDtype = kvCacheDtypeFlag(v);
  const model = await loadChatModel(modelDir, {
    precision,
    kvCacheDtype,
    ...(threads === undefined ? {} : { threads }),
  });
  try {
    const messages = [
      ...(v.system ? [{ role: 'system' as const, content: v.system as string }] : []),
      { role: 'user' as const, content: prompt },
    ];
    const promptIds = v.raw
      ? model.tokenizer.encode(prompt)
      : renderPrompt(model.template, model.tokenizer, messages, {
          addGenerationPrompt: true,
          enableThinking: Boolean(v.think),
        }).ids;
    const params = {
      maxTokens: numberFlag(v, 'max-tokens', { integer: true, min: 1 }) ?? 128,
      temperature: numberFlag(v, 'temperature', { min: 0 }) ?? 1,
      topP: numberFlag(v, 'top-p', { min: 0, max: 1 }) ?? 1,
      topK: numberFlag(v, 'top-k', { integer: true, min: 0 }) ?? 0,
      stop: (v.stop as unknown as string[] | undefined) ?? [],
      ...(v.seed !== undefined ? { seed: numberFlag(v, 'seed', { integer: true, min: 0 })! } : {}),
    };
    const ids: number[] = [],
      logprobs: number[] = [],
      sampledLogprobs: number[] = [];
    const decoder = model.tokenizer.createStreamDecoder({ skipSpecialTokens: true });
    const t0 = performance.now();
    let firstTokenAt = 0;
    let finishReason = '';
    for await (const e of model.engine.generate(promptIds, params)) {
      if (e.type === 'token') {
        if (ids.length === 0) firstTokenAt = performance.now();
        ids.push(e.token.id);
        logprobs.push(e.token.logprob);
        sampledLogprobs.push(e.token.sampledLogprob);
        if (!v.json) process.stdout.write(decoder.push(e.token.id));
      } else {
        finishReason = e.reason;
      }
    }
    const end = performance.now();
    const decodeSeconds = (end - firstTokenAt) / 1000;
    const tokensPerSecond = ids.length > 1 ? (ids.length - 1) / decodeSeconds : 0;
    const stats = {
      promptTokens: promptIds.length,
      completionTokens: ids.length,
      timeToFirstTokenMs: Math.round(firstTokenAt - t0),
      tokensPerSecond: Number(tokensPerSecond.toFixed(2)),
      kernels: model.engine.info.kernels,
      kernelInfo: model.engine.info.kernelInfo,
      precision: model.engine.info.precision,
      kvDtype: model.engine.info.kvDtype,
    };
    if (v.json) {
      const text = model.tokenizer.decode(ids, { skipSpecialTokens: true });
      console.log(
        JSON.stringify({ text, promptIds, completionIds: ids, logprobs, sampledLogprobs, finishReason, ...stats }),
      );
    } else {
      process.stdout.write(`${decoder.flush()}\n`);
      console.error(
        `[${stats.completionTokens} tokens, ${stats.tokensPerSecond} tok/s decode, first token after ${stats.timeToFirstTokenMs} ms, prompt ${stats.promptTokens} tokens, finish: ${finishReason}, kernels: ${stats.kernels}, precision: ${stats.precision}, keys and values: ${stats.kvDtype}]`,
      );
    }
    return 0;
  } finally {
    await model.engine.close();
  }
}
