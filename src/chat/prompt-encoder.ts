// Prompt tokenization with a cache. OpenClaw resends a ~40 KB system prompt and the whole history
// on every request, and the JS tokenizer costs about 1.3 us per character, which on the event loop
// would stall every stream. A tokenizer cuts the text at its added tokens (<|im_start|>, <think>,
// ...) before normalizing and pre-tokenizing, so encoding the pieces between them separately gives
// the same ids; pieces (the system prompt, each past message) repeat across requests and are cached.
// The equivalence is checked against a full encode on the first requests and then on a sample; a
// single mismatch turns the cache off for good. With a checker thread (serve has one) the full
// encode runs there, after the request went on with the piecewise ids: a 100 kB prompt's full
// encode takes 130 ms, which on the event loop stalled that request and every stream. Training
// never depends on this: recorded prompt ids are what the sampler was given, correct either way.

import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { TextTokenizer } from './tokenizer/tokenizer.js';
import type { PiecesEncode, WholeEncodeCheck } from './tokenizer-thread.js';

export interface AddedToken {
  content: string;
  lstrip?: boolean;
  rstrip?: boolean;
  single_word?: boolean;
  normalized?: boolean;
}

export interface PromptEncoderOptions {
  /** Characters of cached pieces kept at most (default 8 M). */
  maxCachedChars?: number;
  /** Full-encode checks on the first N calls (default 32), then on 1 call in `sampleEvery` (default 64). */
  verifyFirst?: number;
  sampleEvery?: number;
  /** Told once when a mismatch disables the cache. */
  onMismatch?: (detail: string) => void;
  /** Runs the full-encode checks elsewhere (TokenizerThread); without it they run here, synchronously. */
  check?: WholeEncodeCheck;
  /** Encodes long uncached text elsewhere (TokenizerThread); without it encodeBounded encodes here. */
  encodeAway?: PiecesEncode;
}

/** A prompt's ids, or a count of tokens it certainly has at least (not below the limit asked). */
export type BoundedEncoding = { ids: number[] } | { atLeast: number };

/** Pieces joined by one concat call at most (its arguments go on the stack). */
const MAX_CONCAT_ARGS = 10_000;

/**
 * Uncached characters one request may encode on the event loop (about 2.7 ms at 1.3 us each);
 * the rest goes to the tokenizer thread.
 */
const INLINE_CHARS = 2048;

/** Checks in flight on the checker thread at most; a sampled check beyond them is skipped. */
const MAX_PENDING_CHECKS = 2;

export class PromptEncoder {
  private readonly cache = new Map<string, number[]>();
  private cachedChars = 0;
  private readonly splitter: RegExp | null;
  private calls = 0;
  private enabled: boolean;
  private pendingChecks = 0;
  /** The checker thread failed: checks run synchronously from then on. */
  private checkerFailed = false;

  constructor(
    private readonly tokenizer: TextTokenizer,
    addedTokens: readonly AddedToken[],
    private readonly opts: PromptEncoderOptions = {},
  ) {
    // Tokens that strip neighbouring whitespace or match only whole words change the pieces; then
    // splitting is not equivalent, and every prompt is encoded whole.
    const plain = addedTokens.every((t) => !t.lstrip && !t.rstrip && !t.single_word && !t.normalized);
    const contents = addedTokens
      .map((t) => t.content)
      .filter((c) => c.length > 0)
      .sort((a, b) => b.length - a.length);
    this.splitter = plain && contents.length > 0 ? new RegExp(`(${contents.map(escapeRegExp).join('|')})`) : null;
    this.enabled = this.splitter !== null;
  }

  /** Reads the added tokens of a model folder's tokenizer.json. */
  static forModelDir(dir: string, tokenizer: TextTokenizer, opts: PromptEncoderOptions = {}): PromptEncoder {
    const json = JSON.parse(readFileSync(join(dir, 'tokenizer.json'), 'utf8')) as { added_tokens?: AddedToken[] };
    return new PromptEncoder(tokenizer, json.added_tokens ?? [], opts);
  }

  get caching(): boolean {
    return this.enabled;
  }

  encode(text: string): number[] {
    if (!this.enabled) return this.tokenizer.encode(text);
    return this.verify(text, this.encodePieces(text));
  }

  /**
   * Like encode(), for prompts that must stay under `limit` tokens: what certainly does not fit is
   * refused first in O(1) from the text's length, then (on the tokenizer thread) from a count
   * without BPE; long uncached text is encoded on that thread, never on the event loop.
   */
  async encodeBounded(text: string, limit: number): Promise<BoundedEncoding> {
    const cheap = Math.ceil(text.length / this.tokenizer.maxUnitsPerToken);
    if (cheap >= limit) return { atLeast: cheap };
    const away = this.opts.encodeAway;
    if (!away || text.length <= INLINE_CHARS) return within(this.encode(text), limit);
    const parts = this.splitter ? text.split(this.splitter) : [text];
    if (!this.enabled) {
      // The whole text, counted by its text pieces (odd parts are added tokens, one id each).
      const r = await away(
        parts.filter((p, i) => i % 2 === 0 && p !== ''),
        limit - (parts.length - 1) / 2,
        text,
      );
      return 'atLeast' in r ? { atLeast: r.atLeast + (parts.length - 1) / 2 } : within(r.ids[0]!, limit);
    }
    const ids: (number[] | undefined)[] = [];
    const later: number[] = [];
    let inline = 0;
    let known = 0;
    parts.forEach((part, i) => {
      if (part === '') return;
      const cached = this.cached(part);
      if (cached || i % 2 === 1 || inline + part.length <= INLINE_CHARS) {
        if (!cached && i % 2 === 0) inline += part.length;
        ids[i] = cached ?? this.remember(part, this.tokenizer.encode(part));
        known += ids[i]!.length;
      } else {
        later.push(i);
      }
    });
    if (known >= limit) return { atLeast: known };
    if (later.length > 0) {
      const r = await away(
        later.map((i) => parts[i]!),
        limit - known,
      );
      if ('atLeast' in r) return { atLeast: known + r.atLeast };
      later.forEach((at, k) => {
        ids[at] = this.remember(parts[at]!, r.ids[k]!);
      });
    }
    const all = ids.filter((x): x is number[] => x !== undefined);
    return within(
      this.verify(text, all.length <= MAX_CONCAT_ARGS ? ([] as number[]).concat(...all) : all.flat()),
      limit,
    );
  }

  /** Checks piecewise ids against the whole text on the first calls and a sample of the rest. */
  private verify(text: string, ids: number[]): number[] {
    const n = this.calls++;
    if (n >= (this.opts.verifyFirst ?? 32) && n % (this.opts.sampleEvery ?? 64) !== 0) return ids;
    const check = this.checkerFailed ? undefined : this.opts.check;
    if (check) {
      if (this.pendingChecks < MAX_PENDING_CHECKS) this.checkLater(check, text, ids);
      return ids;
    }
    const whole = this.tokenizer.encode(text);
    if (whole.length !== ids.length || whole.some((id, i) => id !== ids[i])) {
      this.disable(
        `piecewise encoding differs from the whole (${ids.length} vs ${whole.length} ids); prompt caching is off`,
      );
      return whole;
    }
    return ids;
  }

  private checkLater(check: WholeEncodeCheck, text: string, ids: number[]): void {
    this.pendingChecks++;
    check(text, ids)
      .then(
        ({ same, wholeLength }) => {
          if (!same && this.enabled)
            this.disable(
              `piecewise encoding differed from the whole (${ids.length} vs ${wholeLength} ids) in a request already served; prompt caching is off`,
            );
        },
        () => {
          this.checkerFailed = true;
        },
      )
      .finally(() => {
        this.pendingChecks--;
      });
  }

  private disable(detail: string): void {
    this.enabled = false;
    this.cache.clear();
    this.opts.onMismatch?.(detail);
  }

  private encodePieces(text: string): number[] {
    // Collected, then joined with one concat: pushing id by id cost 1.8 ms for a 55k-token prompt
    // (a long agent session) against 0.4 ms.
    const parts: number[][] = [];
    for (const piece of text.split(this.splitter!)) {
      if (piece === '') continue;
      parts.push(this.cached(piece) ?? this.remember(piece, this.tokenizer.encode(piece)));
    }
    return parts.length <= MAX_CONCAT_ARGS ? ([] as number[]).concat(...parts) : parts.flat();
  }

  private cached(piece: string): number[] | undefined {
    const ids = this.cache.get(piece);
    if (ids) {
      this.cache.delete(piece); // most recently used last
      this.cache.set(piece, ids);
    }
    return ids;
  }

  private remember(piece: string, ids: number[]): number[] {
    if (!this.enabled) return ids;
    this.cache.set(piece, ids);
    this.cachedChars += piece.length;
    const max = this.opts.maxCachedChars ?? 8_000_000;
    for (const [key] of this.cache) {
      if (this.cachedChars <= max) break;
      this.cache.delete(key);
      this.cachedChars -= key.length;
    }
    return ids;
  }
}

function within(ids: number[], limit: number): BoundedEncoding {
  return ids.length >= limit ? { atLeast: ids.length } : { ids };
}

function escapeRegExp(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}
