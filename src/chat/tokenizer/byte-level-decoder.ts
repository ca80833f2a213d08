// Streaming detokenizer for tokenizers whose decoder is a plain ByteLevel one (Qwen, GPT-2 style):
// there decoding is "token strings -> bytes -> UTF-8", so each id's bytes can be precomputed and fed
// to one streaming UTF-8 decoder, instead of re-decoding a window of ids through the library per id.

import type { Tokenizer } from '@huggingface/tokenizers';
import type { StreamDecoder } from './tokenizer.js';

/** What is used here of the library's ByteLevel decoder (its typings do not resolve under NodeNext). */
interface ByteLevelDecoder {
  readonly config: { readonly type: string };
  readonly added_tokens: readonly { readonly content: string }[];
  readonly end_of_word_suffix: string | null | undefined;
  /** GPT-2's bytes_to_unicode table inverted: a token character to its byte. */
  readonly byte_decoder: Readonly<Record<string, number>>;
}

/** What one id contributes to `Tokenizer.decode` under a plain ByteLevel decoder. */
interface IdPiece {
  /** Whether skip_special_tokens drops it. */
  readonly special: boolean;
  /** An added token's content: the library emits it verbatim and decodes the bytes before it on their own. */
  readonly added: string | undefined;
  readonly bytes: Uint8Array;
  /** The text of `bytes` where they are valid UTF-8 by themselves. */
  readonly text: string | undefined;
  /** Whether a streaming UTF-8 decoder holds no bytes back after `bytes`, whatever preceded them. */
  readonly endsClean: boolean;
}

/** Ids the tokenizer does not know decode to nothing (see TextTokenizer.decode). */
const UNKNOWN: IdPiece = { special: false, added: undefined, bytes: new Uint8Array(0), text: '', endsClean: false };
const STREAM = { stream: true } as const;
// ignoreBOM as in the library's ByteLevel decoder: a leading U+FEFF is text, not a byte order mark.
const strictUtf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

/** Per-id pieces of a ByteLevel tokenizer, computed on first use and shared by all its stream decoders. */
export class ByteLevelPieces {
  private readonly pieces: (IdPiece | undefined)[];
  private readonly addedContents: ReadonlySet<string>;

  private constructor(
    private readonly inner: Tokenizer,
    private readonly decoder: ByteLevelDecoder,
    vocabSize: number,
  ) {
    this.pieces = new Array<IdPiece | undefined>(vocabSize).fill(undefined);
    this.addedContents = new Set(decoder.added_tokens.map((token) => token.content));
  }

  /**
   * Only for exactly the library's ByteLevel decoder (not inside a Sequence) and no BPE
   * end-of-word suffix, which decode() would replace with spaces afterwards.
   */
  static forTokenizer(inner: Tokenizer, vocabSize: number): ByteLevelPieces | undefined {
    const decoder: ByteLevelDecoder | null = inner.decoder;
    if (decoder?.config.type !== 'ByteLevel' || decoder.end_of_word_suffix) return undefined;
    return new ByteLevelPieces(inner, decoder, vocabSize);
  }

  piece(id: number): IdPiece {
    if (!(Number.isInteger(id) && id >= 0 && id < this.pieces.length)) return UNKNOWN;
    return (this.pieces[id] ??= this.compute(id));
  }

  private compute(id: number): IdPiece {
    const token: string | undefined = this.inner.id_to_token(id);
    if (token === undefined) return UNKNOWN;
    // The library skips by token string, also for tokenizer_config's additional_special_tokens, and
    // a non-empty token never decodes to "" otherwise, so asking it is exact.
    const special =
      token !== '' &&
      this.inner.decode([id], { skip_special_tokens: true, clean_up_tokenization_spaces: false }) === '';
    if (this.addedContents.has(token))
      return { special, added: token, bytes: UNKNOWN.bytes, text: undefined, endsClean: false };
    // As the library does: per code point, and a character outside the byte table becomes byte 0.
    const bytes = new Uint8Array(Array.from(token, (char) => this.decoder.byte_decoder[char] ?? 0));
    return { special, added: undefined, bytes, text: strictDecode(bytes), endsClean: endsClean(bytes) };
  }
}

/**
 * Its pieces concatenate to `TextTokenizer.decode(allIds, opts)`: a streaming TextDecoder emits
 * exactly what decoding all bytes at once does, only holding back up to 3 bytes of a character
 * that may still complete. Invalid bytes become U+FFFD as soon as they are known to be invalid.
 */
export class ByteLevelStreamDecoder implements StreamDecoder {
  private readonly utf8 = new TextDecoder('utf-8', { fatal: false, ignoreBOM: true });
  /** Whether `utf8` holds no bytes, so a token that is valid UTF-8 alone can skip it. */
  private clean = true;

  constructor(
    private readonly pieces: ByteLevelPieces,
    private readonly skipSpecialTokens: boolean,
  ) {}

  push(id: number): string {
    const piece = this.pieces.piece(id);
    if (piece.special && this.skipSpecialTokens) return '';
    if (piece.added !== undefined) return this.flush() + piece.added;
    if (this.clean && piece.text !== undefined) return piece.text;
    if (piece.bytes.length === 0) return '';
    this.clean = piece.endsClean;
    return this.utf8.decode(piece.bytes, STREAM);
  }

  flush(): string {
    if (this.clean) return '';
    this.clean = true;
    return this.utf8.decode();
  }
}

function strictDecode(bytes: Uint8Array): string | undefined {
  try {
    return strictUtf8.decode(bytes);
  } catch {
    return undefined;
  }
}

/** True when the bytes end in ASCII or in one complete character that starts within them. */
function endsClean(bytes: Uint8Array): boolean {
  let start = bytes.length - 1;
  while (start >= 0 && (bytes[start]! & 0xc0) === 0x80) start--;
  return start >= 0 && strictDecode(bytes.subarray(start)) !== undefined;
}
