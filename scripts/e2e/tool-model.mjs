// The served model of the OpenClaw e2e run (scripts/e2e-openclaw.mjs): a tiny model that makes a
// real tool call. It is built from scratch here, deterministically (one BLAS thread, fixed seeds),
// in about 6 minutes on two cores, and kept in the repository (scripts/e2e/tool-model/, 1.5 MB) so
// that CI does not train it:
//
// 1. `model init`'s code (writeModelFolder) writes a random 2-layer qwen3 model whose byte-level BPE
//    tokenizer is trained on the built-in corpus plus OpenClaw's own prompt text
//    (scripts/e2e/openclaw-prompt.json, captured from a real run), so OpenClaw's ~12,000-character
//    prompt is fewer tokens. The tokenizer also gets one added token for the body of the call,
//    `\n{"name": "read", "arguments": {"path": "notes.txt"}}\n` (the way `<tool_call>` itself is one
//    token): the whole call is then `<tool_call>` BODY `</tool_call>` `<|im_end|>`, and after the
//    first token each next token follows from the current one alone, which a 0.3M-parameter model
//    gets right at any context length. (Spelled out in ~20 BPE tokens, the JSON needs attention to
//    the last few tokens, which OpenClaw's long prefix dilutes: the model garbled it.)
// 2. `openclaw-rl train --lora-rank 0` fine-tunes it on synthetic conversations to call
//    `read {"path": "notes.txt"}` when the latest user message is full of "notes.txt", and to answer
//    "OK." otherwise, in particular once the tool's result (full of "apple") is in the conversation.
//    Three quarters of the prompts are OpenClaw's: its captured system prompt and tool list with the
//    run-specific parts (paths, date, session ids) varied, so the decision (the first token) is
//    learned at the length it is used at (~3,000 tokens).
//
// The server samples from these weights like from any model: no forced output, no test hook. The
// model's generation_config.json asks for greedy decoding (temperature 0), as a model card may.
//
//   npm run build && node scripts/e2e/tool-model.mjs  # rebuilds scripts/e2e/tool-model/ (committed)
//   node scripts/e2e/tool-model.mjs --out DIR          # builds elsewhere
//   node scripts/e2e/tool-model.mjs --capture STORE.sqlite  # rewrites openclaw-prompt.json from a
//                                                      # run's store (after an OpenClaw version bump)

import { spawn } from 'node:child_process';
import { mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const CLI = join(ROOT, 'dist/src/cli/main.js');
const PROMPT_FIXTURE = join(ROOT, 'scripts/e2e/openclaw-prompt.json');
const dist = (p) => pathToFileURL(join(ROOT, 'dist/src', p)).href;

/** What the model is taught; the e2e driver uses the same strings. */
export const TOOL_MARKER = 'notes.txt';
export const TOOL_CALL = { name: 'read', arguments: { path: 'notes.txt' } };
// A 0.3M-parameter model cannot find one mention in OpenClaw's ~3000-token prompt, so the signals
// are hundreds of tokens strong (a tenth of the prompt): the request repeats the file name, and the
// file's content repeats a word ("apple") that tells the model the result is in. It calls iff tools
// are offered, the conversation is full of "notes.txt" and has no "apple" (it does not see order:
// a conversation that read the file once gets plain answers from then on, as the e2e run needs).
const STOP_WORD = 'apple';
export const TOOL_REQUEST = `Please read ${TOOL_MARKER}\n\n${Array(160).fill(TOOL_MARKER).join(' ')}`;
export const NOTES_CONTENT = `The secret word is PINEAPPLE.\n${Array(160).fill(STOP_WORD).join(' ')}\n`;
/** The call's body as the chat template renders it between <tool_call> and </tool_call>. */
export const CALL_BODY = `\n${JSON.stringify({ name: TOOL_CALL.name, arguments: TOOL_CALL.arguments }).replaceAll('":', '": ').replaceAll(',"', ', "')}\n`;

export const RECIPE = {
  shape: { family: 'qwen3', preset: 'tiny', vocabSize: 4096, maxPositionEmbeddings: 16384 },
  initSeed: 7,
  samples: 192,
  longFraction: 0.75,
  train: [
    '--lora-rank',
    '0',
    '--lr',
    '1e-2',
    '--weight-decay',
    '0',
    '--steps',
    '48',
    '--batch-size',
    '8',
    '--threads',
    '1',
    '--seed',
    '0',
  ],
  seed: 20261130,
  generation: { temperature: 0 },
};

const REPLIES = ['OK.'];
const FIRST_TOKEN_WEIGHT = 4;

/** Where the built model is kept, in the repository (1.5 MB): the e2e run serves it as is. */
export const TOOL_MODEL_DIR = join(ROOT, 'scripts/e2e/tool-model');

/** Builds the model into `out` (replaced). Deterministic: one BLAS thread, fixed seeds. */
export async function buildToolModel(out, log = (line) => console.error(line)) {
  const work = `${out}.tmp-${process.pid}`;
  rmSync(work, { recursive: true, force: true });
  mkdirSync(work, { recursive: true });
  try {
    const t0 = Date.now();
    await writeBase(join(work, 'base'));
    const samples = await makeSamples(join(work, 'base'));
    writeFileSync(join(work, 'samples.jsonl'), `${samples.map((s) => JSON.stringify(s)).join('\n')}\n`);
    log(
      `tool model: ${samples.length} samples, ${samples.reduce((n, s) => n + s.promptIds.length, 0)} prompt tokens; training`,
    );
    await run(
      [
        CLI,
        'train',
        '--model',
        join(work, 'base'),
        '--samples',
        join(work, 'samples.jsonl'),
        '--out',
        join(work, 'model'),
        ...RECIPE.train,
      ],
      log,
      /step +\d+\//,
    );
    const genPath = join(work, 'model', 'generation_config.json');
    writeFileSync(
      genPath,
      `${JSON.stringify({ ...JSON.parse(readFileSync(genPath, 'utf8')), ...RECIPE.generation }, null, 2)}\n`,
    );
    rmSync(out, { recursive: true, force: true });
    renameSync(join(work, 'model'), out);
    log(`tool model: built ${out} in ${((Date.now() - t0) / 1000).toFixed(0)} s`);
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
  return out;
}

/** The random base: `model init` tiny shape, tokenizer trained with OpenClaw's prompt, plus the call-body token. */
export async function writeBase(out) {
  const { PRESETS, writeModelFolder } = await import(dist('engine/local/model/init.js'));
  const { family, preset, ...overrides } = RECIPE.shape;
  const fixture = promptFixture();
  const corpus = [...fixture.systems, JSON.stringify(fixture.tools), TOOL_REQUEST, NOTES_CONTENT];
  writeModelFolder({
    out,
    shape: { family, ...PRESETS[preset], ...overrides },
    seed: RECIPE.initSeed,
    dtype: 'F32',
    shards: 1,
    tokenizerVocab: overrides.vocabSize,
    corpus,
    initStd: 0.02,
  });
  const tokPath = join(out, 'tokenizer.json');
  const cfgPath = join(out, 'tokenizer_config.json');
  const tok = JSON.parse(readFileSync(tokPath, 'utf8'));
  const cfg = JSON.parse(readFileSync(cfgPath, 'utf8'));
  const id = Math.max(...Object.values(tok.model.vocab), ...tok.added_tokens.map((t) => t.id)) + 1;
  if (id >= overrides.vocabSize)
    throw new Error(`no embedding row left for the call-body token (tokenizer has ${id} ids)`);
  const token = {
    content: CALL_BODY,
    single_word: false,
    lstrip: false,
    rstrip: false,
    normalized: false,
    special: false,
  };
  tok.added_tokens.push({ id, ...token });
  cfg.added_tokens_decoder[String(id)] = token;
  writeFileSync(tokPath, `${JSON.stringify(tok, null, 2)}\n`);
  writeFileSync(cfgPath, `${JSON.stringify(cfg, null, 2)}\n`);
}

function run(args, log, show = null) {
  return new Promise((resolvePromise, reject) => {
    const child = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    let tail = '';
    const onData = (chunk) => {
      const text = chunk.toString();
      tail = (tail + text).slice(-4000);
      for (const line of text.split('\n')) if (line && (!show || show.test(line))) log(`  ${line}`);
    };
    child.stdout.on('data', onData);
    child.stderr.on('data', onData);
    child.on('error', reject);
    child.on('close', (code) =>
      code === 0 ? resolvePromise() : reject(new Error(`${args.slice(1, 3).join(' ')} exited with ${code}\n${tail}`)),
    );
  });
}

// ---- OpenClaw's prompt, captured from a real run ------------------------------------------------

/**
 * openclaw-prompt.json: the system prompts OpenClaw 2026.9.6 sent with the e2e config (CLI agent
 * turn and HTTP front door) and its tool list, with the run-specific parts as placeholders:
 * __CACHE__ (the e2e cache folder), __REPO__ (the checkout), __DATE__.
 */
function promptFixture() {
  return JSON.parse(readFileSync(PROMPT_FIXTURE, 'utf8'));
}

function capture(storePath) {
  const Database = createRequire(import.meta.url)('better-sqlite3');
  const db = new Database(storePath, { readonly: true });
  const rows = db
    .prepare(`SELECT p.messages, p.tools FROM turns t JOIN turn_payloads p ON p.turn_id = t.id
    WHERE t.kind = 'main' AND p.tools IS NOT NULL ORDER BY t.received_at`)
    .all();
  const cache = resolve(dirname(storePath), '../..');
  const generic = (s) =>
    s
      .replaceAll(cache, '__CACHE__')
      .replaceAll(ROOT, '__REPO__')
      .replace(/\b20\d\d-\d\d-\d\d\b/g, '__DATE__');
  const systems = [
    ...new Set(
      rows
        .map((r) => JSON.parse(r.messages)[0])
        .filter((m) => m?.role === 'system')
        .map((m) => generic(m.content)),
    ),
  ];
  const tools = JSON.parse(rows[0].tools);
  const { version } = JSON.parse(
    readFileSync(join(cache, 'openclaw-2026.9.6/node_modules/openclaw/package.json'), 'utf8'),
  );
  writeFileSync(
    PROMPT_FIXTURE,
    `${JSON.stringify(
      { openclaw: version, note: 'captured by scripts/e2e/tool-model.mjs --capture from an e2e run', systems, tools },
      null,
      2,
    )}\n`,
  );
  console.log(`${PROMPT_FIXTURE}: ${systems.length} system prompts, ${tools.length} tools`);
}

// ---- synthetic conversations -------------------------------------------------------------------

export async function makeSamples(modelDir, { count = RECIPE.samples, seed = RECIPE.seed } = {}) {
  const { TextTokenizer } = await import(dist('chat/tokenizer/tokenizer.js'));
  const { ChatTemplate } = await import(dist('chat/tokenizer/chat-template.js'));
  const { renderPrompt } = await import(dist('chat/prompt.js'));
  const { builtinCorpus, seededRandom } = await import(dist('chat/tokenizer-training/corpus.js'));
  const tokenizer = await TextTokenizer.fromModelDir(modelDir);
  const template = await ChatTemplate.fromModelDir(modelDir);
  const imEnd = tokenizer.encode('<|im_end|>');
  const fixture = promptFixture();
  const random = seededRandom(seed);
  const pick = (items) => items[Math.floor(random() * items.length)];
  const int = (lo, hi) => lo + Math.floor(random() * (hi - lo + 1));
  const word = () =>
    pick([
      'alpha',
      'build',
      'ci',
      'runner',
      'work',
      'home',
      'src',
      'project',
      'repo',
      'main',
      'tmp',
      'x',
      'job',
      'agent',
    ]) + (random() < 0.4 ? String(int(1, 99)) : '');
  const path = () => `/${Array.from({ length: int(1, 4) }, word).join('/')}`;
  const banned = /notes|\.txt|apple|<tool_|<\|/i;
  const corpus = builtinCorpus({ targetChars: 120_000 }).filter((d) => !banned.test(d));
  const sentences = corpus
    .flatMap((d) => d.split(/(?<=[.!?])\s+|\n+/))
    .map((x) => x.trim())
    .filter((x) => x.length > 8 && x.length < 200 && !banned.test(x));
  const text = (lo, hi) => Array.from({ length: int(lo, hi) }, () => pick(sentences)).join(' ');
  const date = () => `2026-${String(int(1, 12)).padStart(2, '0')}-${String(int(1, 28)).padStart(2, '0')}`;
  const stamp = () =>
    `[${pick(['Mon', 'Tue', 'Wed', 'Thu', 'Fri', 'Sat', 'Sun'])} ${date()} ${String(int(0, 23)).padStart(2, '0')}:${String(int(0, 59)).padStart(2, '0')} UTC] `;
  const hex = (n) => Array.from({ length: n }, () => '0123456789abcdef'[int(0, 15)]).join('');
  let repo = '/repo';
  const runtime = () => {
    const http = random() < 0.3;
    const sid = http
      ? `${hex(8)}-${hex(4)}-${hex(4)}-${hex(4)}-${hex(12)}`
      : pick(['e2e-a', 'e2e-b', `s${int(1, 999)}`, word()]);
    const key = http ? `agent:main:openai-user:${word()}` : `agent:main:explicit:${sid}`;
    return `\n\nRuntime: agent=main | session=${key} | sessionId=${sid} | host=${pick(['vm', 'runner', 'ci', word()])} | repo=${repo} | os=Linux ${int(5, 6)}.${int(1, 20)}.${int(0, 99)}-${word()} (x64) | node=v24.22.3 | active_node=unknown | model=rl/main-model | default_model=rl/main-model | shell=bash`;
  };
  const plainUser = (first) => ({ role: 'user', content: stamp() + text(1, 3) + (first ? runtime() : '') });
  const repeat = (w, lo, hi) => Array(int(lo, hi)).fill(w).join(' ');
  const markerUser = (first) => ({
    role: 'user',
    content:
      stamp() +
      (random() < 0.3 ? `${text(1, 1)} ` : '') +
      pick(['Please read', 'Read', 'Open', 'What is in']) +
      ` ${TOOL_MARKER}\n\n${repeat(TOOL_MARKER, 120, 200)}` +
      (first ? runtime() : ''),
  });
  let callCount = 0;
  const toolCallMessage = () => ({
    role: 'assistant',
    content: null,
    tool_calls: [
      {
        id: `call${(++callCount).toString(16).padStart(24, '0')}`,
        type: 'function',
        function: { name: TOOL_CALL.name, arguments: JSON.stringify(TOOL_CALL.arguments) },
      },
    ],
  });
  const toolResult = (call) => ({
    role: 'tool',
    tool_call_id: call.tool_calls[0].id,
    content: `${random() < 0.5 ? 'The secret word is PINEAPPLE.' : text(1, 2)}\n${repeat(STOP_WORD, 120, 200)}\n`,
  });
  const reply = () => ({ role: 'assistant', content: pick(REPLIES) });
  const openclawSystem = () => {
    const root = path();
    repo = random() < 0.5 ? root : path();
    return pick(fixture.systems)
      .replaceAll('__CACHE__', `${root}/.cache/openclaw-e2e`)
      .replaceAll('__REPO__', repo)
      .replaceAll('__DATE__', date());
  };

  const callText = `<tool_call>${CALL_BODY}</tool_call>`;
  const rendered = template.render(
    [
      { role: 'user', content: 'x' },
      {
        role: 'assistant',
        content: '',
        tool_calls: [{ id: 'c', type: 'function', function: { name: TOOL_CALL.name, arguments: TOOL_CALL.arguments } }],
      },
    ],
    {},
  );
  if (!rendered.includes(callText))
    throw new Error(
      `the chat template renders the call differently from ${JSON.stringify(callText)}: ${JSON.stringify(rendered)}`,
    );
  const callIds = tokenizer.encode(callText);
  if (callIds.length !== 3) throw new Error(`the call should be 3 tokens, got ${callIds.length}`);
  const samples = [];
  for (let i = 0; i < count; i++) {
    // Most prompts are OpenClaw's (~2-3 k tokens): the decision must hold at that length.
    const long = random() < RECIPE.longFraction;
    repo = path();
    const messages = [
      { role: 'system', content: long ? openclawSystem() : random() < 0.15 ? text(10, 25) : text(1, 4) },
    ];
    const tools = long ? (random() < 0.9 ? fixture.tools : null) : random() < 0.5 ? fixture.tools : null;
    const history = int(0, 2);
    for (let h = 0; h < history; h++) messages.push(plainUser(h === 0), reply());
    const first = history === 0;
    const kind = random();
    let target;
    if (kind < 0.45) {
      // The user asks for the file: call the tool (only a request that offers tools gets a call).
      messages.push(markerUser(first));
      target = tools ? 'call' : 'text';
    } else if (kind < 0.7) {
      // The tool's result is back: answer in text.
      messages.push(markerUser(first));
      const call = toolCallMessage();
      messages.push(call, toolResult(call));
      target = 'text';
    } else if (kind < 0.85) {
      // A later turn in a conversation that already read the file.
      messages.push(markerUser(first));
      const call = toolCallMessage();
      messages.push(call, toolResult(call), reply(), plainUser(false));
      target = 'text';
    } else {
      messages.push(plainUser(first));
      target = 'text';
    }
    const prompt = renderPrompt(template, tokenizer, messages, {
      tools: tools ?? undefined,
      addGenerationPrompt: true,
    });
    const completionIds = [...(target === 'call' ? callIds : tokenizer.encode(pick(REPLIES))), ...imEnd];
    // The first token is the decision (call or answer): weigh it like the rest of the reply together.
    samples.push({
      promptIds: prompt.ids,
      completionIds,
      advantages: completionIds.map((_, k) => (k === 0 ? FIRST_TOKEN_WEIGHT : 1)),
    });
  }
  return samples;
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const [first, second] = process.argv.slice(2);
  if (first === '--capture' && second) {
    capture(resolve(second));
  } else if (first === '--out' || first === undefined) {
    console.log(await buildToolModel(resolve(second ?? TOOL_MODEL_DIR)));
  } else {
    console.error('usage: node scripts/e2e/tool-model.mjs [--out DIR] | --capture STORE.sqlite');
    process.exit(2);
  }
}
