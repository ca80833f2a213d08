// Text <-> token ids for a Hugging Face tokenizer.json (ours or a real Qwen/Llama-3 one), wrapping
// @huggingface/tokenizers, plus an incremental detokenizer for streaming.

import { Tokenizer } from '@huggingface/tokenizers';
import { ByteLevelPieces, ByteLevelStreamDecoder } from './byte-level-decoder.js';
import { errorMessage, readModelJson } from './model-files.js';

export interface DecodeOptions {
  /** Drop tokens flagged special (e.g. <|im_end|>); non-special added tokens such as <think> stay. */
  skipSpecialTokens?: boolean;
}

/** Turns sampled ids into text piece by piece. */
export interface StreamDecoder {
  /** Adds one id; returns the text it completes (often "", e.g. in the middle of a character). */
  push(id: number): string;
  /** Returns whatever is still held back (incomplete bytes become U+FFFD) and resets. */
  flush(): string;
}

const REPLACEMENT_CHARACTER = '\uFFFD';

/**
 * A valid UTF-8 character spans at most 4 bytes, so text still ending in an incomplete character
 * after this many further tokens is not valid UTF-8; emitting it then (as U+FFFD) keeps a garbage
 * stream, e.g. from a freshly initialized model, from being held back and re-decoded forever.
 */
const MAX_HELD_TOKENS = 16;

/**
 * How many UTF-16 units of text NFC can fold into one: a character whose decomposition is 4 units
 * (U+1F82) composes to 1, and a supplementary character (2 units) can normalize to a BMP one
 * (U+2F800). test/gateway-limits.test.ts checks both figures against every code point.
 */
export const NFC_MAX_SHRINK = 8;

/** The library's internals the token bounds read (not in its typings). */
interface TokenizerInternals {
  normalizer: ((text: string) => string) | null;
  pre_tokenizer: ((text: string, options: { section_index: number }) => string[]) | null;
  remove_space?: boolean;
  do_lowercase_and_remove_accent?: boolean;
  model: { fuse_unk?: boolean } | null;
}

/** Pre-tokenizers that keep every character of the text (Split "Isolated" and ByteLevel only reshape it). */
type PreTokenizerConfig = { type?: string; behavior?: string; invert?: boolean; pretokenizers?: unknown[] } | null;

function keepsCharacters(config: PreTokenizerConfig): boolean {
  if (config === null) return true;
  if (config.type === 'ByteLevel' || config.type === 'Digits') return true;
  if (config.type === 'Split') return config.behavior === 'Isolated' && !config.invert;
  if (config.type === 'Sequence')
    return (config.pretokenizers ?? []).every((c) => keepsCharacters(c as PreTokenizerConfig));
  return false;
}

export class TextTokenizer {
  /** Largest id + 1: every id this tokenizer produces or knows is below it. */
  readonly vocabSize: number;
  readonly specialIds: ReadonlySet<number>;
  /** Set where the decoder is plain ByteLevel, which allows a much cheaper stream decoder. */
  private readonly byteLevel: ByteLevelPieces | undefined;
  /** The longest vocabulary token: no token stands for more characters of a pre-token (Infinity: no bound). */
  private readonly longestToken: number;
  /**
   * At most this many UTF-16 units of raw text become one token (Infinity where the normalizer or
   * pre-tokenizer could drop text): `text.length / maxUnitsPerToken` tokens at least, in O(1).
   */
  readonly maxUnitsPerToken: number;

  private constructor(
    private readonly inner: Tokenizer,
    tokenizerJson: object,
  ) {
    let largestId = -1;
    for (const id of inner.get_vocab(true).values()) largestId = Math.max(largestId, id);
    this.vocabSize = largestId + 1;
    const special = new Set<number>();
    for (const [id, token] of inner.get_added_tokens_decoder()) if (token.special) special.add(id);
    this.specialIds = special;
    this.byteLevel = ByteLevelPieces.forTokenizer(inner, this.vocabSize);
    const internals = inner as unknown as TokenizerInternals;
    // The same test as the prompt encoder's: only then do its pieces hold no added token to miscount.
    const plainAdded = [...inner.get_added_tokens_decoder().values()].every(
      (t) => !t.lstrip && !t.rstrip && !t.single_word && !t.normalized,
    );
    const reshapes = internals.remove_space || internals.do_lowercase_and_remove_accent || internals.model?.fuse_unk;
    const exact = plainAdded && !reshapes;
    let longest = 0;
    // A vocabulary entry that is not a string (a hand-made tokenizer.json) leaves no bound.
    for (const token of inner.get_vocab(true).keys()) {
      longest = Math.max(longest, typeof token === 'string' ? token.length : Infinity);
    }
    this.longestToken = exact && longest > 0 ? longest : Infinity;
    const json = tokenizerJson as { normalizer?: { type?: string } | null; pre_tokenizer?: PreTokenizerConfig };
    const normalizer = json.normalizer?.type;
    const shrink = normalizer === undefined ? 1 : normalizer === 'NFC' ? NFC_MAX_SHRINK : Infinity;
    this.maxUnitsPerToken = keepsCharacters(json.pre_tokenizer ?? null) ? this.longestToken * shrink : Infinity;
  }

  /** Loads tokenizer.json and tokenizer_config.json from a model folder. */
  static async fromModelDir(dir: string): Promise<TextTokenizer> {
    const tokenizerJson = await readModelJson(dir, 'tokenizer.json');
    const config = await readModelJson(dir, 'tokenizer_config.json');
    return TextTokenizer.fromJson(tokenizerJson, config, `tokenizer.json in ${dir}`);
  }

  /** Builds from already parsed files; `source` names them in errors. */
  static fromJson(tokenizerJson: object, config: object, source = 'tokenizer.json'): TextTokenizer {
    const model = (tokenizerJson as { model?: { vocab?: unknown } }).model;
    if (typeof model?.vocab !== 'object' || model.vocab === null) {
      throw new Error(`${source} has no model.vocab`);
    }
    try {
      return new TextTokenizer(new Tokenizer(tokenizerJson, config), tokenizerJson);
    } catch (error) {
      throw new Error(`${source} cannot be loaded: ${errorMessage(error)}`);
    }
  }

  /**
   * Encodes text without adding special tokens (chat templates already contain them). Special
   * and added token strings inside the text, e.g. "<|im_start|>", become their single ids, as in
   * Hugging Face transformers; callers that must not trust a text's markup have to escape it first.
   */
  encode(text: string): number[] {
    if (text === '') return [];
    const { ids, tokens }: { ids: (number | undefined)[]; tokens: string[] } = this.inner.encode(text, {
      add_special_tokens: false,
    });
    // The library yields undefined for a token missing from the vocabulary (no unk token).
    const missing = ids.indexOf(undefined);
    if (missing >= 0) throw new Error(`cannot encode ${JSON.stringify(tokens[missing])}: not in the vocabulary`);
    return ids as number[];
  }

  /**
   * A lower bound on encode(text).length for text without added tokens, without running the model
   * (BPE): the text is normalized and pre-tokenized as encode() does, and no token spans two
   * pre-tokens or covers more characters than the longest vocabulary token. Counting stops once
   * it reaches `stopAt`. 0 where the tokenizer's options (stripping added tokens, lowercasing,
   * fused unknowns) make such a count unsound.
   */
  minTokens(text: string, stopAt = Infinity): number {
    if (!Number.isFinite(this.longestToken) || text === '') return 0;
    const inner = this.inner as unknown as TokenizerInternals;
    const normalized = inner.normalizer ? inner.normalizer(text) : text;
    // section_index 1: a Metaspace "first" prefix is not added, which only makes the count lower.
    const pieces = inner.pre_tokenizer ? inner.pre_tokenizer(normalized, { section_index: 1 }) : [normalized];
    let n = 0;
    for (const piece of pieces) {
      n += Math.ceil(piece.length / this.longestToken);
      if (n >= stopAt) break;
    }
    return n;
  }

  /**
   * Decodes ids to text. Tokenization-space cleanup ("a ." -> "a.") is always off, even where a
   * config asks for it: it would make decoding lossy and the streaming text differ from the whole.
   * Ids the tokenizer does not know (a model's padded vocabulary rows) decode to nothing.
   */
  decode(ids: readonly number[], opts: DecodeOptions = {}): string {
    const known = ids.filter((id) => this.inner.id_to_token(id) !== undefined);
    if (known.length === 0) return '';
    return this.inner.decode(known, {
      skip_special_tokens: opts.skipSpecialTokens ?? false,
      clean_up_tokenization_spaces: false,
    });
  }

  tokenToId(token: string): number | undefined {
    return this.inner.token_to_id(token);
  }

  idToToken(id: number): string | undefined {
    return this.inner.id_to_token(id);
  }

  /**
   * An incremental detokenizer whose pieces concatenate to `decode(allIds, opts)` and never split
   * a character. Byte-level BPE puts the bytes of one character (an emoji, "ü") in several tokens,
   * so text is only released once it no longer ends in an incomplete character.
   */
  createStreamDecoder(opts: DecodeOptions = {}): StreamDecoder {
    if (this.byteLevel) return new ByteLevelStreamDecoder(this.byteLevel, opts.skipSpecialTokens ?? false);
    return new WindowStreamDecoder((ids) => this.decode(ids, opts));
  }
}

/**
 * Decodes a short window of recent tokens rather than single tokens, because some decoders
 * (SentencePiece-style Metaspace) render a token differently at the start of a text: the window
 * begins with tokens whose text was already emitted, and only the text after theirs is new.
 * window[0..readStart) were emitted before the last advance (their text is `prefixTextLength`
 * long); `emittedPastRead` characters after that have been emitted since.
 */
export class WindowStreamDecoder implements StreamDecoder {
  private window: number[] = [];
  private readStart = 0;
  private prefixTextLength = 0;
  private emittedPastRead = 0;

  constructor(private readonly decode: (ids: readonly number[]) => string) {}

  push(id: number): string {
    this.window.push(id);
    const text = this.decode(this.window);
    const complete = !text.endsWith(REPLACEMENT_CHARACTER);
    const forced = this.window.length - this.readStart > MAX_HELD_TOKENS;
    const end = complete || forced ? text.length : lengthWithoutTrailing(text, REPLACEMENT_CHARACTER);
    const from = this.prefixTextLength + this.emittedPastRead;
    const piece = end > from ? text.slice(from, end) : '';
    this.emittedPastRead += piece.length;
    if (complete || forced) {
      // All decoded text is out: the unread tokens become the next window's prefix.
      this.window = this.window.slice(this.readStart);
      this.readStart = this.window.length;
      this.prefixTextLength = this.decode(this.window).length;
      this.emittedPastRead = 0;
    }
    return piece;
  }

  flush(): string {
    const piece = this.decode(this.window).slice(this.prefixTextLength + this.emittedPastRead);
    this.window = [];
    this.readStart = this.prefixTextLength = this.emittedPastRead = 0;
    return piece;
  }
}

function lengthWithoutTrailing(text: string, char: string): number {
  let end = text.length;
  while (end > 0 && text[end - 1] === char) end--;
  return end;
}
