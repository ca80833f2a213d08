// A deterministic byte-level BPE trainer producing Hugging Face tokenizer files shaped like Qwen2's
// (same pre-tokenizer, normalizer, decoder and ChatML added tokens), so `model init` can create a
// tokenizer from text alone and everything downstream treats it exactly like a real Qwen tokenizer.

import { Tokenizer } from '@huggingface/tokenizers';
import { OPENCLAW_CHAT_TEMPLATE } from '../tokenizer/chat-template.js';

export { builtinCorpus, type CorpusOptions } from './corpus.js';

export const DEFAULT_SPECIAL_TOKENS: readonly string[] = ['<|endoftext|>', '<|im_start|>', '<|im_end|>'];
export const DEFAULT_ADDED_TOKENS: readonly string[] = [
  '<think>',
  '</think>',
  '<tool_call>',
  '</tool_call>',
  '<tool_response>',
  '</tool_response>',
];
const EOS_TOKEN = '<|im_end|>';
const PAD_TOKEN = '<|endoftext|>';

/**
 * The Qwen2 pre-tokenizer split, in the Oniguruma dialect tokenizer.json uses: contractions, words
 * with at most one leading non-letter, single digits, punctuation runs (with trailing newlines),
 * newline runs, and other whitespace.
 */
const QWEN2_SPLIT_REGEX =
  "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

const BYTE_LEVEL = { type: 'ByteLevel', add_prefix_space: false, trim_offsets: false, use_regex: false };

/** Pair keys pack two ids into one number; ids must stay below this. */
const PAIR_BASE = 2 ** 20;

/** A pair seen only once would just memorize one word. */
const MIN_PAIR_COUNT = 2;

export interface TrainOptions {
  /** Upper bound on largest id + 1, added tokens included; training stops early when pairs run out. */
  vocabSize: number;
  /** Added tokens flagged special (skipped by skipSpecialTokens); must include <|im_end|> and <|endoftext|>. */
  specialTokens: readonly string[];
  /** Added tokens that are ordinary text but always one id, e.g. <think>. */
  addedTokens: readonly string[];
  /** Stored as tokenizer_config.json's chat_template. Default: our ChatML template. */
  chatTemplate?: string;
  /** Stored as model_max_length. Default 32768. */
  modelMaxLength?: number;
}

export interface TokenizerFiles {
  /** Contents of tokenizer.json. */
  tokenizerJson: Record<string, unknown>;
  /** Contents of tokenizer_config.json. */
  tokenizerConfig: Record<string, unknown>;
  /** The id of every special and added token. */
  addedTokenIds: Record<string, number>;
  /** The id of any token (byte-level spelling for vocabulary tokens); throws for unknown ones. */
  idOf(token: string): number;
  mergeCount: number;
  /** Largest id + 1; at most TrainOptions.vocabSize. */
  vocabSize: number;
}

/** Learns merges from `corpus` until the vocabulary would exceed opts.vocabSize. */
export function trainByteLevelBpe(corpus: readonly string[], opts: TrainOptions): TokenizerFiles {
  const added = [...opts.specialTokens, ...opts.addedTokens];
  validate(opts, added);
  const byteSymbols = byteLevelAlphabet();
  const pipeline = pipelineJson();
  const words = countWords(
    corpus,
    added,
    new Tokenizer({ ...pipeline, model: bpeModel(byteSymbols, []), added_tokens: [] }, {}),
  );
  const { tokens, merges } = learnMerges(words, byteSymbols, opts.vocabSize - added.length);

  const addedTokens = added.map((content, i) => ({
    id: tokens.length + i,
    content,
    single_word: false,
    lstrip: false,
    rstrip: false,
    normalized: false,
    special: opts.specialTokens.includes(content),
  }));
  const tokenizerJson = {
    version: '1.0',
    truncation: null,
    padding: null,
    added_tokens: addedTokens,
    ...pipeline,
    model: bpeModel(tokens, merges),
  };
  const tokenizerConfig = {
    tokenizer_class: 'Qwen2Tokenizer',
    add_bos_token: false,
    add_prefix_space: false,
    added_tokens_decoder: Object.fromEntries(addedTokens.map(({ id, ...token }) => [String(id), token])),
    additional_special_tokens: [...opts.specialTokens],
    bos_token: null,
    eos_token: EOS_TOKEN,
    pad_token: PAD_TOKEN,
    unk_token: null,
    clean_up_tokenization_spaces: false,
    errors: 'replace',
    split_special_tokens: false,
    model_max_length: opts.modelMaxLength ?? 32768,
    chat_template: opts.chatTemplate ?? OPENCLAW_CHAT_TEMPLATE,
  };
  const ids = new Map([
    ...tokens.map((token, id) => [token, id] as const),
    ...addedTokens.map(({ content, id }) => [content, id] as const),
  ]);
  const idOf = (token: string): number => {
    const id = ids.get(token);
    if (id === undefined) throw new Error(`${JSON.stringify(token)} is not in the trained vocabulary`);
    return id;
  };
  const addedTokenIds = Object.fromEntries(addedTokens.map(({ content, id }) => [content, id]));
  return {
    tokenizerJson,
    tokenizerConfig,
    addedTokenIds,
    idOf,
    mergeCount: merges.length,
    vocabSize: tokens.length + added.length,
  };
}

function validate(opts: TrainOptions, added: readonly string[]): void {
  const minimum = 256 + added.length;
  if (!Number.isInteger(opts.vocabSize) || opts.vocabSize < minimum || opts.vocabSize > PAIR_BASE) {
    throw new RangeError(`vocabSize must be an integer in [${minimum}, ${PAIR_BASE}], got ${opts.vocabSize}`);
  }
  if (new Set(added).size !== added.length || added.some((token) => token === '')) {
    throw new Error('special and added tokens must be distinct and non-empty');
  }
  for (const required of [EOS_TOKEN, PAD_TOKEN]) {
    if (!opts.specialTokens.includes(required)) throw new Error(`specialTokens must include ${required}`);
  }
}

/** Normalizer, pre-tokenizer, post-processor and decoder, as in Qwen2's tokenizer.json. */
function pipelineJson() {
  return {
    normalizer: { type: 'NFC' },
    pre_tokenizer: {
      type: 'Sequence',
      pretokenizers: [
        { type: 'Split', pattern: { Regex: QWEN2_SPLIT_REGEX }, behavior: 'Isolated', invert: false },
        BYTE_LEVEL,
      ],
    },
    post_processor: BYTE_LEVEL,
    decoder: BYTE_LEVEL,
  };
}

/**
 * `tokens[id]` is the byte-level spelling of id; fromEntries keeps a token named "__proto__" a plain
 * key. Merges use the "left right" string form every tokenizers version reads (the pair-array form
 * needs tokenizers >= 0.20); byte-level symbols never contain a space, so it is unambiguous.
 */
function bpeModel(tokens: readonly string[], merges: readonly (readonly [string, string])[]) {
  return {
    type: 'BPE',
    dropout: null,
    unk_token: null,
    continuing_subword_prefix: null,
    end_of_word_suffix: null,
    fuse_unk: false,
    byte_fallback: false,
    ignore_merges: false,
    vocab: Object.fromEntries(tokens.map((token, id) => [token, id])),
    merges: merges.map(([left, right]) => `${left} ${right}`),
  };
}

/**
 * GPT-2's byte-to-unicode table, ordered by character: bytes that are printable Latin-1 stand for
 * themselves, the others (controls, space, soft hyphen) map in byte order to U+0100 and up. Sorting
 * by character gives Qwen's and GPT-2's id order for the 256 byte symbols ("!" is id 0).
 */
function byteLevelAlphabet(): string[] {
  const symbols: string[] = [];
  let next = 256;
  for (let byte = 0; byte < 256; byte++) {
    const printable =
      (byte >= 0x21 && byte <= 0x7e) || (byte >= 0xa1 && byte <= 0xac) || (byte >= 0xae && byte <= 0xff);
    symbols.push(String.fromCharCode(printable ? byte : next++));
  }
  return symbols.sort();
}

/**
 * Pre-tokenizes the corpus with the very normalizer and pre-tokenizer that will encode text later,
 * so training words are exactly encode-time words. Added tokens are cut out first, as at encode time.
 */
function countWords(corpus: readonly string[], added: readonly string[], pipeline: Tokenizer): Map<string, number> {
  const longestFirst = [...added].sort((a, b) => b.length - a.length).map(escapeRegExp);
  const addedPattern = new RegExp(longestFirst.join('|'), 'g');
  const counts = new Map<string, number>();
  for (const text of corpus) {
    for (const segment of text.split(addedPattern)) {
      if (segment === '') continue;
      const normalized = pipeline.normalizer ? pipeline.normalizer(segment) : segment;
      const words = pipeline.pre_tokenizer ? pipeline.pre_tokenizer(normalized) : [normalized];
      for (const word of words) counts.set(word, (counts.get(word) ?? 0) + 1);
    }
  }
  return counts;
}

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

/**
 * Classic BPE with incremental pair statistics: every merge only revisits the words that contain
 * the merged pair and adjusts the counts of the pairs around each occurrence. The best pair comes
 * from a lazy max-heap whose stale entries are re-checked against the live counts when popped.
 * Ties go to the smaller (left id, right id), which makes training deterministic.
 */
function learnMerges(wordCounts: Map<string, number>, byteSymbols: readonly string[], maxTokens: number) {
  const tokens = [...byteSymbols];
  const idOf = new Map(tokens.map((token, id) => [token, id]));
  const words = [...wordCounts.keys()].map((word) => Array.from(word, (symbol) => idOf.get(symbol)!));
  const weights = [...wordCounts.values()];

  const pairCounts = new Map<number, number>();
  const pairWords = new Map<number, Set<number>>();
  const bump = (key: number, delta: number, wordIndex: number): void => {
    pairCounts.set(key, (pairCounts.get(key) ?? 0) + delta);
    if (delta > 0) {
      let holders = pairWords.get(key);
      if (!holders) pairWords.set(key, (holders = new Set()));
      holders.add(wordIndex);
    }
  };
  words.forEach((word, w) => {
    for (let i = 0; i + 1 < word.length; i++) bump(word[i]! * PAIR_BASE + word[i + 1]!, weights[w]!, w);
  });
  const heap = new PairHeap();
  for (const [key, count] of pairCounts) heap.push(count, key);

  const merges: [string, string][] = [];
  while (tokens.length < maxTokens) {
    const best = popLive(heap, pairCounts);
    if (best === undefined || best.count < MIN_PAIR_COUNT) break;
    const left = Math.floor(best.key / PAIR_BASE);
    const right = best.key % PAIR_BASE;
    const merged = tokens[left]! + tokens[right]!;
    // Different merge orders can spell the same string; like HF's trainer, reuse its id then.
    let mergedId = idOf.get(merged);
    if (mergedId === undefined) {
      mergedId = tokens.push(merged) - 1;
      idOf.set(merged, mergedId);
    }
    merges.push([tokens[left]!, tokens[right]!]);

    const raised = new Set<number>();
    for (const w of pairWords.get(best.key) ?? []) {
      words[w] = mergeInWord(words[w]!, left, right, mergedId, (key, delta) => {
        bump(key, delta * weights[w]!, w);
        if (delta > 0) raised.add(key);
      });
    }
    pairCounts.delete(best.key);
    pairWords.delete(best.key);
    for (const key of raised) heap.push(pairCounts.get(key)!, key);
  }
  return { tokens, merges };
}

/** Replaces each left-to-right occurrence of (left, right) and reports the pair-count changes. */
function mergeInWord(
  word: number[],
  left: number,
  right: number,
  mergedId: number,
  change: (key: number, delta: number) => void,
): number[] {
  const out: number[] = [];
  let i = 0;
  while (i < word.length) {
    if (i + 1 < word.length && word[i] === left && word[i + 1] === right) {
      const before = out.length > 0 ? out[out.length - 1] : undefined;
      const after = i + 2 < word.length ? word[i + 2] : undefined;
      change(left * PAIR_BASE + right, -1);
      if (before !== undefined) {
        change(before * PAIR_BASE + left, -1);
        change(before * PAIR_BASE + mergedId, 1);
      }
      if (after !== undefined) {
        change(right * PAIR_BASE + after, -1);
        change(mergedId * PAIR_BASE + after, 1);
      }
      out.push(mergedId);
      i += 2;
    } else {
      out.push(word[i]!);
      i += 1;
    }
  }
  return out;
}

/** Pops until an entry matches its pair's live count; stale entries with a live count go back in. */
function popLive(heap: PairHeap, pairCounts: Map<number, number>): { count: number; key: number } | undefined {
  for (let top = heap.pop(); top !== undefined; top = heap.pop()) {
    const live = pairCounts.get(top.key) ?? 0;
    if (live === top.count) return top;
    if (live > 0) heap.push(live, top.key);
  }
  return undefined;
}

/** Binary max-heap of (count, pair key): higher count first, then smaller key. */
class PairHeap {
  private counts: number[] = [];
  private keys: number[] = [];

  push(count: number, key: number): void {
    this.counts.push(count);
    this.keys.push(key);
    let i = this.counts.length - 1;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (!this.before(i, parent)) break;
      this.swap(i, parent);
      i = parent;
    }
  }

  pop(): { count: number; key: number } | undefined {
    if (this.counts.length === 0) return undefined;
    const top = { count: this.counts[0]!, key: this.keys[0]! };
    const lastCount = this.counts.pop()!;
    const lastKey = this.keys.pop()!;
    if (this.counts.length > 0) {
      this.counts[0] = lastCount;
      this.keys[0] = lastKey;
      let i = 0;
      for (;;) {
        const l = 2 * i + 1;
        const r = l + 1;
        let best = i;
        if (l < this.counts.length && this.before(l, best)) best = l;
        if (r < this.counts.length && this.before(r, best)) best = r;
        if (best === i) break;
        this.swap(i, best);
        i = best;
      }
    }
    return top;
  }

  private before(a: number, b: number): boolean {
    return this.counts[a]! > this.counts[b]! || (this.counts[a] === this.counts[b] && this.keys[a]! < this.keys[b]!);
  }

  private swap(a: number, b: number): void {
    [this.counts[a], this.counts[b]] = [this.counts[b]!, this.counts[a]!];
    [this.keys[a], this.keys[b]] = [this.keys[b]!, this.keys[a]!];
  }
}
