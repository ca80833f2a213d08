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
import type { TextTokenizer } from '../engine/local/tokenizer/tokenizer.js';
import type { WholeEncodeCheck } from './encode-checker.js';

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
  /** Runs the full-encode checks elsewhere (EncodeChecker); without it they run here, synchronously. */
  check?: WholeEncodeCheck;
}

/** Pieces joined by one concat call at most (its arguments go on the stack). */
const MAX_CONCAT_ARGS = 10_000;

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

  constructor(private readonly tokenizer: TextTokenizer, addedTokens: readonly AddedToken[], private readonly opts: PromptEncoderOptions = {}) {
    // Tokens that strip neighbouring whitespace or match only whole words change the pieces; then
    // splitting is not equivalent, and every prompt is encoded whole.
    const plain = addedTokens.every((t) => !t.lstrip && !t.rstrip && !t.single_word && !t.normalized);
    const contents = addedTokens.map((t) => t.content).filter((c) => c.length > 0).sort((a, b) => b.length - a.length);
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
    const ids = this.encodePieces(text);
    const n = this.calls++;
    if (n >= (this.opts.verifyFirst ?? 32) && n % (this.opts.sampleEvery ?? 64) !== 0) return ids;
    const check = this.checkerFailed ? undefined : this.opts.check;
    if (check) {
      if (this.pendingChecks < MAX_PENDING_CHECKS) this.checkLater(check, text, ids);
      return ids;
    }
    const whole = this.tokenizer.encode(text);
    if (whole.length !== ids.length || whole.some((id, i) => id !== ids[i])) {
      this.disable(`piecewise encoding differs from the whole (${ids.length} vs ${whole.length} ids); prompt caching is off`);
      return whole;
    }
    return ids;
  }

  private checkLater(check: WholeEncodeCheck, text: string, ids: number[]): void {
    this.pendingChecks++;
    check(text, ids).then(
      ({ same, wholeLength }) => {
        if (!same && this.enabled) this.disable(`piecewise encoding differed from the whole (${ids.length} vs ${wholeLength} ids) in a request already served; prompt caching is off`);
      },
      () => { this.checkerFailed = true; },
    ).finally(() => { this.pendingChecks--; });
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
      let ids = this.cache.get(piece);
      if (ids) {
        this.cache.delete(piece); // most recently used last
        this.cache.set(piece, ids);
      } else {
        ids = this.tokenizer.encode(piece);
        this.remember(piece, ids);
      }
      parts.push(ids);
    }
    return parts.length <= MAX_CONCAT_ARGS ? ([] as number[]).concat(...parts) : parts.flat();
  }

  private remember(piece: string, ids: number[]): void {
    this.cache.set(piece, ids);
    this.cachedChars += piece.length;
    const max = this.opts.maxCachedChars ?? 8_000_000;
    for (const [key] of this.cache) {
      if (this.cachedChars <= max) break;
      this.cache.delete(key);
      this.cachedChars -= key.length;
    }
  }
}

function escapeRegExp(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}
