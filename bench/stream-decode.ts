// Streaming detokenization cost per token: the ByteLevel fast path that createStreamDecoder picks
// for Qwen-style tokenizers against the generic window decoder (two library decodes per token).
// Streams the built-in corpus (prose, code, JSON, multilingual text, chat transcripts with special
// tokens), one decoder per document as per request, with and without skipping special tokens.
//
//   npm run bench:decode [-- tokens]   # default 20000

import assert from 'node:assert/strict';
import { builtinCorpus } from '../src/chat/tokenizer-training/corpus.js';
import {
  TextTokenizer,
  WindowStreamDecoder,
  type DecodeOptions,
  type StreamDecoder,
} from '../src/chat/tokenizer/tokenizer.js';
import { benchModel } from './models.js';

const TOKENS = Number(process.argv[2] ?? 20_000);
const WARMUP_ROUNDS = 3;
const ROUNDS = 7;

const tokenizer = await TextTokenizer.fromModelDir(benchModel('tiny'));
const documents: number[][] = [];
let total = 0;
for (const text of builtinCorpus({ targetChars: 400_000 })) {
  if (total >= TOKENS) break;
  const ids = tokenizer.encode(text).slice(0, TOKENS - total);
  documents.push(ids);
  total += ids.length;
}

/** Streams every document; returns microseconds per token and the text, to check both agree. */
function stream(newDecoder: () => StreamDecoder): { usPerToken: number; text: string } {
  const pieces: string[] = [];
  const t0 = performance.now();
  for (const ids of documents) {
    const decoder = newDecoder();
    for (const id of ids) pieces.push(decoder.push(id));
    pieces.push(decoder.flush());
  }
  return { usPerToken: ((performance.now() - t0) * 1000) / total, text: pieces.join('') };
}

/** Median over rounds after warm-up rounds (which also fill the fast path's per-id cache). */
function measure(newDecoder: () => StreamDecoder): { usPerToken: number; text: string } {
  const text = stream(newDecoder).text;
  for (let i = 1; i < WARMUP_ROUNDS; i++) stream(newDecoder);
  const times = Array.from({ length: ROUNDS }, () => stream(newDecoder).usPerToken).sort((a, b) => a - b);
  return { usPerToken: times[Math.floor(ROUNDS / 2)]!, text };
}

console.log(`${total} tokens in ${documents.length} documents`);
for (const opts of [{ skipSpecialTokens: false }, { skipSpecialTokens: true }] satisfies DecodeOptions[]) {
  const window = measure(() => new WindowStreamDecoder((ids) => tokenizer.decode(ids, opts)));
  const fast = measure(() => tokenizer.createStreamDecoder(opts));
  assert.equal(fast.text, window.text);
  console.log(
    `skipSpecialTokens=${opts.skipSpecialTokens}: window ${window.usPerToken.toFixed(3)} us/token, ` +
      `ByteLevel ${fast.usPerToken.toFixed(3)} us/token, ${(window.usPerToken / fast.usPerToken).toFixed(1)}x`,
  );
}
