import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { seededRandom } from '../src/chat/tokenizer-training/corpus.js';
import {
  builtinCorpus,
  DEFAULT_ADDED_TOKENS,
  DEFAULT_SPECIAL_TOKENS,
  trainByteLevelBpe,
  type TokenizerFiles,
} from '../src/chat/tokenizer-training/train-bpe.js';
import { TextTokenizer, WindowStreamDecoder } from '../src/chat/tokenizer/tokenizer.js';
import { ByteLevelStreamDecoder } from '../src/chat/tokenizer/byte-level-decoder.js';

const TOKENS = { specialTokens: DEFAULT_SPECIAL_TOKENS, addedTokens: DEFAULT_ADDED_TOKENS };
const files = trainByteLevelBpe(builtinCorpus({ targetChars: 100_000 }), { vocabSize: 1500, ...TOKENS });
const tokenizer = TextTokenizer.fromJson(files.tokenizerJson, files.tokenizerConfig);

const SAMPLES = [
  'Hello, world! The session reads the config before the next turn starts.',
  'Grüße aus Zürich: Straße, Größe, naïve café, déjà vu. ÀÉÎÕÜ ß',
  '你好，世界。こんにちは、世界。Привет, мир! مرحبا بالعالم שלום עולם',
  'Emoji: 🎉🚀👍🏽 👨‍👩‍👧‍👦 🦜 🇨🇭 and a lone ✓ ★ ∑ ≈ €',
  'export function add(a: number, b: number): number {\n\treturn a + b; // sum\r\n}\n\n\n',
  '{"name": "read", "arguments": {"path": "notes.txt", "n": [1, 2.5, null, true]}}',
  '<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\nok\n</think>\n\n<tool_call>\n{}\n</tool_call><|im_end|>',
  '   leading and trailing spaces   ',
];

function vocabOf(json: Record<string, unknown>): Record<string, number> {
  return (json.model as { vocab: Record<string, number> }).vocab;
}

function mergesOf(json: Record<string, unknown>): [string, string][] {
  return (json.model as { merges: string[] }).merges.map((merge) => merge.split(' ') as [string, string]);
}

/** GPT-2's bytes_to_unicode: each byte's visible character in byte-level tokens. */
const BYTE_CHARS: readonly string[] = (() => {
  const table: string[] = [];
  let next = 256;
  for (let b = 0; b < 256; b++) {
    const visible = (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff);
    table.push(String.fromCharCode(visible ? b : next++));
  }
  return table;
})();

/** Byte-level spelling of text as in GPT-2: each UTF-8 byte becomes one visible character. */
function byteLevel(text: string): string {
  return Array.from(Buffer.from(text, 'utf8'), (b) => BYTE_CHARS[b]).join('');
}

/** Textbook BPE on one pre-token: repeatedly apply the best-ranked merge present. */
function referenceBpe(word: string, merges: [string, string][]): string[] {
  const rank = new Map(merges.map(([a, b], i) => [`${a} ${b}`, i]));
  let parts = Array.from(word);
  for (;;) {
    let best = -1;
    let bestRank = Infinity;
    for (let i = 0; i + 1 < parts.length; i++) {
      const r = rank.get(`${parts[i]} ${parts[i + 1]}`);
      if (r !== undefined && r < bestRank) [best, bestRank] = [i, r];
    }
    if (best < 0) return parts;
    parts = [...parts.slice(0, best), parts[best]! + parts[best + 1]!, ...parts.slice(best + 2)];
  }
}

test('training is deterministic', () => {
  const corpus = builtinCorpus({ targetChars: 30_000 });
  assert.deepEqual(builtinCorpus({ targetChars: 30_000 }), corpus);
  const a = trainByteLevelBpe(corpus, { vocabSize: 600, ...TOKENS });
  const b = trainByteLevelBpe(corpus, { vocabSize: 600, ...TOKENS });
  assert.equal(JSON.stringify(a.tokenizerJson), JSON.stringify(b.tokenizerJson));
  assert.equal(JSON.stringify(a.tokenizerConfig), JSON.stringify(b.tokenizerConfig));
});

test('ids: 256 byte symbols, then merges, then the added tokens', () => {
  const vocab = vocabOf(files.tokenizerJson);
  assert.equal(vocab['!'], 0);
  assert.equal(vocab.Ġ, 188 + 32, 'space is the 33rd remapped byte, after the 188 visible ones');
  const merges = mergesOf(files.tokenizerJson);
  assert.equal(merges.length, files.mergeCount);
  assert.ok(files.mergeCount > 1000);
  const added = [...DEFAULT_SPECIAL_TOKENS, ...DEFAULT_ADDED_TOKENS];
  added.forEach((token, i) => assert.equal(files.addedTokenIds[token], files.vocabSize - added.length + i));
  assert.equal(files.idOf('<|im_end|>'), files.addedTokenIds['<|im_end|>']);
  assert.equal(files.idOf('!'), 0);
  assert.throws(() => files.idOf('no such token'), /not in the trained vocabulary/);
  assert.ok(files.vocabSize <= 1500);
  assert.equal(tokenizer.vocabSize, files.vocabSize);
  assert.deepEqual([...tokenizer.specialIds].sort(), DEFAULT_SPECIAL_TOKENS.map((t) => files.addedTokenIds[t]).sort());
  const config = files.tokenizerConfig;
  assert.equal(config.eos_token, '<|im_end|>');
  assert.equal(config.pad_token, '<|endoftext|>');
  assert.equal(config.bos_token, null);
  assert.equal(typeof config.chat_template, 'string');
  const decoderEntry = (config.added_tokens_decoder as Record<string, { content: string; special: boolean }>)[
    String(files.addedTokenIds['<think>'])
  ];
  assert.deepEqual([decoderEntry?.content, decoderEntry?.special], ['<think>', false]);
});

test('options are validated', () => {
  assert.throws(() => trainByteLevelBpe(['x'], { vocabSize: 100, ...TOKENS }), /vocabSize must be an integer/);
  assert.throws(
    () => trainByteLevelBpe(['x'], { vocabSize: 400, specialTokens: ['<|im_end|>'], addedTokens: [] }),
    /<\|endoftext\|>/,
  );
  assert.throws(
    () =>
      trainByteLevelBpe(['x'], { vocabSize: 400, specialTokens: DEFAULT_SPECIAL_TOKENS, addedTokens: ['<|im_end|>'] }),
    /distinct/,
  );
});

test('a tiny corpus stops at the pairs it has', () => {
  const small = trainByteLevelBpe(['ab ab ab cd'], { vocabSize: 1000, ...TOKENS });
  assert.deepEqual(mergesOf(small.tokenizerJson), [
    ['a', 'b'],
    ['Ġ', 'ab'],
  ]);
  assert.equal(small.vocabSize, 256 + 2 + 9);
});

test('200 KB of text trains 2000 merges in a few seconds', () => {
  const started = performance.now();
  const big = trainByteLevelBpe(builtinCorpus(), { vocabSize: 2300, ...TOKENS });
  const seconds = (performance.now() - started) / 1000;
  assert.ok(big.mergeCount >= 2000, `only ${big.mergeCount} merges`);
  assert.ok(seconds < 10, `took ${seconds.toFixed(1)} s`);
});

test('encode/decode round-trips multilingual text, emoji and code', () => {
  for (const text of SAMPLES) {
    const ids = tokenizer.encode(text);
    assert.ok(ids.every((id) => Number.isInteger(id) && id >= 0 && id < tokenizer.vocabSize));
    assert.equal(tokenizer.decode(ids), text);
  }
  assert.deepEqual(tokenizer.encode(''), []);
  assert.equal(tokenizer.decode([]), '');
  // The NFC normalizer composes "e" + combining acute into "é".
  assert.equal(tokenizer.decode(tokenizer.encode('e\u0301')), '\u00e9');
});

test('every special and added token is one id, also inside text', () => {
  for (const token of [...DEFAULT_SPECIAL_TOKENS, ...DEFAULT_ADDED_TOKENS]) {
    const id = files.addedTokenIds[token]!;
    assert.deepEqual(tokenizer.encode(token), [id]);
    assert.equal(tokenizer.tokenToId(token), id);
    assert.equal(tokenizer.idToToken(id), token);
    const ids = tokenizer.encode(`x${token}y`);
    assert.equal(ids.filter((i) => i === id).length, 1);
    assert.equal(tokenizer.decode(ids), `x${token}y`);
  }
});

test('skipSpecialTokens drops special tokens but keeps <think> and <tool_call>', () => {
  const ids = tokenizer.encode(
    '<|im_start|>assistant\n<think>\nhm\n</think>\n\n<tool_call>\n{}\n</tool_call><|im_end|>',
  );
  assert.equal(
    tokenizer.decode(ids, { skipSpecialTokens: true }),
    'assistant\n<think>\nhm\n</think>\n\n<tool_call>\n{}\n</tool_call>',
  );
});

test('the library applies our merges as textbook BPE does', () => {
  const merges = mergesOf(files.tokenizerJson);
  for (const word of [' session', ' the', ' request', ' tokenizer', ' Zürich', 'function', ' reviewer']) {
    const expected = referenceBpe(byteLevel(word), merges);
    const ids = tokenizer.encode(word);
    assert.deepEqual(
      ids.map((id) => tokenizer.idToToken(id)),
      expected,
      word,
    );
    assert.ok(ids.length < Buffer.byteLength(word), `${word} should be fewer tokens than bytes`);
  }
});

test('ids outside the vocabulary decode to nothing', () => {
  assert.equal(tokenizer.decode([...tokenizer.encode('ok'), tokenizer.vocabSize + 3]), 'ok');
});

test('the stream decoder matches the full decode at every step and never splits a character', () => {
  for (const text of SAMPLES) {
    for (const skipSpecialTokens of [false, true]) {
      const ids = tokenizer.encode(text);
      const full = tokenizer.decode(ids, { skipSpecialTokens });
      const stream = tokenizer.createStreamDecoder({ skipSpecialTokens });
      let emitted = '';
      for (const id of ids) {
        const piece = stream.push(id);
        assert.ok(!piece.includes('\uFFFD'), `U+FFFD streamed for ${JSON.stringify(text)}`);
        emitted += piece;
        assert.ok(full.startsWith(emitted));
      }
      emitted += stream.flush();
      assert.equal(emitted, full);
    }
  }
});

test('the stream decoder holds back a split character and flushes it as U+FFFD', () => {
  const ids = tokenizer.encode('🦜');
  assert.ok(ids.length > 1, 'this emoji must span several tokens for the test to mean anything');
  const stream = tokenizer.createStreamDecoder();
  assert.equal(stream.push(ids[0]!), '');
  assert.equal(stream.flush(), '\uFFFD');
  // flush resets: the decoder is ready for a new text.
  assert.equal(ids.map((id) => stream.push(id)).join('') + stream.flush(), '🦜');
});

test('the stream decoder does not hold invalid bytes forever', () => {
  const leadByte = tokenizer.tokenToId(byteLevel('🦜')[0]!)!;
  const stream = tokenizer.createStreamDecoder();
  let out = '';
  for (let i = 0; i < 40; i++) out += stream.push(leadByte);
  assert.ok(out.length > 0);
});

/**
 * Our tokenizer plus cases real ones have: holes in the ids, a token with characters outside the
 * byte table, a U+FEFF token, added tokens with multi-byte content or spelled like a vocabulary
 * token, and additional_special_tokens naming a non-special added token.
 */
function oddTokenizer(): TextTokenizer {
  const json = structuredClone(files.tokenizerJson) as Record<string, unknown> & { added_tokens: object[] };
  const top = files.vocabSize;
  vocabOf(json)['€x😀'] = top + 2;
  vocabOf(json)[byteLevel('\uFEFF')] = top + 6;
  const added = (id: number, content: string, special: boolean) => ({
    id,
    content,
    single_word: false,
    lstrip: false,
    rstrip: false,
    normalized: false,
    special,
  });
  json.added_tokens.push(
    added(top + 3, '<|🦜|>', true),
    added(top + 4, 'ü', false),
    added(top + 5, byteLevel(' the'), false),
  );
  const config = {
    ...files.tokenizerConfig,
    additional_special_tokens: ['<|endoftext|>', '<|im_start|>', '<|im_end|>', '<tool_call>'],
  };
  return TextTokenizer.fromJson(json, config);
}

/** Random ids mixing arbitrary bytes (so invalid UTF-8), U+FEFF, split multi-byte text, added and unknown ids. */
function randomIds(tok: TextTokenizer, next: () => number): number[] {
  const byteIds = BYTE_CHARS.map((char) => tok.tokenToId(char)!);
  const oddIds = [...Object.values(files.addedTokenIds), ...[2, 3, 4, 5, 6].map((i) => files.vocabSize + i)];
  const unknownIds = [files.vocabSize, files.vocabSize + 1, tok.vocabSize, tok.vocabSize + 100, -1];
  const pick = <T>(items: readonly T[]) => items[Math.floor(next() * items.length)]!;
  const ids: number[] = [];
  const length = 1 + Math.floor(next() * 40);
  while (ids.length < length) {
    const r = next();
    if (r < 0.03)
      ids.push(...Array.from(Buffer.from('\uFEFF'), (b) => byteIds[b]!)); // text, not a byte order mark
    else if (r < 0.25) ids.push(pick(byteIds));
    else if (r < 0.35) ids.push(byteIds[0xc2 + Math.floor(next() * (0xf5 - 0xc2))]!);
    else if (r < 0.6) {
      const encoded = tokenizer.encode(pick(SAMPLES));
      const start = Math.floor(next() * encoded.length);
      ids.push(...encoded.slice(start, start + 1 + Math.floor(next() * 8)));
    } else if (r < 0.75) ids.push(Math.floor(next() * tok.vocabSize));
    else if (r < 0.9) ids.push(pick(oddIds));
    else ids.push(pick(unknownIds));
  }
  return ids;
}

test('the ByteLevel stream decoder equals the library decode on random ids, invalid bytes included', () => {
  const next = seededRandom(1);
  for (const tok of [tokenizer, oddTokenizer()]) {
    assert.ok(tok.createStreamDecoder() instanceof ByteLevelStreamDecoder);
    for (let trial = 0; trial < 1500; trial++) {
      const ids = randomIds(tok, next);
      for (const skipSpecialTokens of [false, true]) {
        const full = tok.decode(ids, { skipSpecialTokens });
        const stream = tok.createStreamDecoder({ skipSpecialTokens });
        let emitted = '';
        for (const id of ids) {
          const piece = stream.push(id);
          assert.ok(!/[\uD800-\uDBFF]$/.test(piece), 'a piece ends inside a surrogate pair');
          emitted += piece;
        }
        assert.ok(
          full.startsWith(emitted),
          `ids ${JSON.stringify(ids)} skip=${skipSpecialTokens}: streamed text departs from decode`,
        );
        emitted += stream.flush();
        assert.equal(emitted, full, `ids ${JSON.stringify(ids)} skip=${skipSpecialTokens}`);
      }
    }
  }
});

test('ByteLevel decode: unmapped characters, added tokens verbatim, bytes decoded apart around them', () => {
  const odd = oddTokenizer();
  const top = files.vocabSize;
  // A character outside the byte table becomes byte 0; added tokens are verbatim, matched by spelling.
  assert.equal(odd.decode([top + 2]), '\0x\0');
  assert.equal(odd.decode([top + 3, top + 4, top + 5]), `<|🦜|>ü${byteLevel(' the')}`);
  assert.equal(odd.decode([top + 6, top + 6]), '\uFEFF\uFEFF');
  assert.equal(odd.decode([top + 3, top + 4], { skipSpecialTokens: true }), 'ü');
  assert.equal(odd.decode(odd.encode('<tool_call>x'), { skipSpecialTokens: true }), 'x');
  // Bytes on either side of an added token are decoded apart, unless a skipped special token sits there.
  const [lead, ...rest] = tokenizer.encode('€');
  assert.ok(rest.length > 0, '€ must span several tokens for this to mean anything');
  const imEnd = files.addedTokenIds['<|im_end|>']!;
  assert.equal(odd.decode([lead!, imEnd, ...rest], { skipSpecialTokens: true }), '€');
  assert.ok(odd.decode([lead!, imEnd, ...rest]).startsWith('\uFFFD<|im_end|>'));
});

test('the fast stream decoder is used exactly for a plain ByteLevel decoder', () => {
  assert.ok(tokenizer.createStreamDecoder() instanceof ByteLevelStreamDecoder);
  const json = structuredClone(files.tokenizerJson) as Record<string, unknown>;
  json.decoder = { type: 'Sequence', decoders: [json.decoder] };
  const sequence = TextTokenizer.fromJson(json, files.tokenizerConfig);
  assert.ok(sequence.createStreamDecoder() instanceof WindowStreamDecoder);
  const ids = sequence.encode(SAMPLES[3]!);
  const stream = sequence.createStreamDecoder();
  assert.equal(ids.map((id) => stream.push(id)).join('') + stream.flush(), SAMPLES[3]);
});

test('a Metaspace tokenizer streams through the window decoder without its leading space', () => {
  const vocab = Object.fromEntries(
    ['</s>', '▁', 'H', 'e', 'l', 'o', 'w', 'r', 'd', '▁Hello', '▁world'].map((token, id) => [token, id]),
  );
  const metaspace = { type: 'Metaspace', replacement: '▁', prepend_scheme: 'always', split: true };
  const sentencePiece = TextTokenizer.fromJson(
    {
      added_tokens: [
        { id: 0, content: '</s>', single_word: false, lstrip: false, rstrip: false, normalized: false, special: true },
      ],
      normalizer: null,
      pre_tokenizer: metaspace,
      post_processor: null,
      decoder: metaspace,
      model: { type: 'BPE', unk_token: null, fuse_unk: false, byte_fallback: false, vocab, merges: [] },
    },
    {},
  );
  const ids = [vocab['▁Hello']!, vocab['▁world']!, vocab['▁']!, vocab.H!, vocab.e!, 0];
  for (const skipSpecialTokens of [false, true]) {
    const stream = sentencePiece.createStreamDecoder({ skipSpecialTokens });
    assert.ok(stream instanceof WindowStreamDecoder);
    const full = sentencePiece.decode(ids, { skipSpecialTokens });
    assert.equal(full, skipSpecialTokens ? 'Hello world He' : 'Hello world He</s>');
    assert.equal(ids.map((id) => stream.push(id)).join('') + stream.flush(), full);
  }
});

test('fromModelDir loads files and reports missing or malformed ones by name', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'tokenizer-test-'));
  try {
    await assert.rejects(TextTokenizer.fromModelDir(dir), { message: `tokenizer.json not found in ${dir}` });
    writeFileSync(join(dir, 'tokenizer.json'), '{"model": ');
    await assert.rejects(TextTokenizer.fromModelDir(dir), (e: Error) =>
      e.message.startsWith(`tokenizer.json in ${dir} is not valid JSON: `),
    );
    writeFileSync(join(dir, 'tokenizer.json'), '{"model": {"type": "BPE"}}');
    writeFileSync(join(dir, 'tokenizer_config.json'), '{}');
    await assert.rejects(TextTokenizer.fromModelDir(dir), { message: `tokenizer.json in ${dir} has no model.vocab` });
    writeFileSync(join(dir, 'tokenizer.json'), JSON.stringify(files.tokenizerJson));
    writeFileSync(join(dir, 'tokenizer_config.json'), '[]');
    await assert.rejects(TextTokenizer.fromModelDir(dir), {
      message: `tokenizer_config.json in ${dir} is not a JSON object`,
    });
    writeFileSync(join(dir, 'tokenizer_config.json'), JSON.stringify(files.tokenizerConfig));
    const loaded = await TextTokenizer.fromModelDir(dir);
    for (const text of SAMPLES) assert.deepEqual(loaded.encode(text), tokenizer.encode(text));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('TokenizerFiles serialize to plain JSON', () => {
  const roundTripped: TokenizerFiles['tokenizerJson'] = JSON.parse(JSON.stringify(files.tokenizerJson));
  const again = TextTokenizer.fromJson(roundTripped, JSON.parse(JSON.stringify(files.tokenizerConfig)));
  assert.deepEqual(again.encode(SAMPLES[2]!), tokenizer.encode(SAMPLES[2]!));
});
