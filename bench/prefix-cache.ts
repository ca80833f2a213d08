// Time to first token of a growing session with the prefix cache on and off: turn 1 sends a
// 16k-token prompt, each later turn the previous prompt plus its answer plus 300 new tokens (an
// agent resending its history). With the cache a turn computes only its new tokens; without it,
// the whole prompt again. Same seeds on both engines, so the answers (and so the prompts) match;
// the two engines take turns, so that both see the same load on a shared machine.
//
//   npm run build && node dist/bench/prefix-cache.js            # tiny
//   node dist/bench/prefix-cache.js tiny small                  # both presets
//
// Last, the cost of one lookup at OpenClaw's scale (40 entries of ~17k ids sharing 16k).
//
// Models (the preset's shape, context raised to 32k) are generated once into .cache/bench-models/.
// BENCH_THREADS sets the BLAS threads (default 2), BENCH_TURNS the turns (default 5).

import { LocalEngine } from '../src/engine/local/engine.js';
import { modelConfigOf, PRESETS } from '../src/engine/local/model/init.js';
import { createKvCache } from '../src/engine/local/model/kv-cache.js';
import { PrefixCache } from '../src/engine/local/runtime/prefix-cache.js';
import type { PrefixCacheStats } from '../src/engine/local/runtime/prefix-cache-stats.js';
import { benchModel, type BenchPreset } from './models.js';

const THREADS = Number(process.env.BENCH_THREADS ?? 2);
const FIRST_PROMPT = 16_000;
const NEW_PER_TURN = 300;
const ANSWER = 32;
const TURNS = Number(process.env.BENCH_TURNS ?? 5);
const CONTEXT = 32_768;

const ids = (n: number, salt: number, vocab: number) =>
  Array.from({ length: n }, (_, i) => ((i * 7919 + salt * 104_729) % (vocab - 10)) + 10);

interface Turn {
  promptTokens: number;
  ttftMs: number;
  answer: number[];
}

/** One turn: the time to the first token, and the answer. */
async function turn(engine: LocalEngine, prompt: number[], seed: number): Promise<Turn> {
  const answer: number[] = [];
  const t0 = performance.now();
  let ttftMs = 0;
  for await (const e of engine.generate(prompt, { maxTokens: ANSWER, temperature: 1, seed, stopTokenIds: [] })) {
    if (e.type !== 'token') continue;
    if (answer.length === 0) ttftMs = performance.now() - t0;
    answer.push(e.token.id);
  }
  return { promptTokens: prompt.length, ttftMs, answer };
}

/**
 * The session on an engine without the cache and on one with it (default budget), turn by turn
 * in alternation, so that both see the same load on a shared machine.
 */
async function sessions(dir: string): Promise<{ off: Turn[]; on: Turn[]; stats: PrefixCacheStats }> {
  const engines = {
    off: await LocalEngine.open(dir, { threads: THREADS, kvCacheBytes: 0 }),
    on: await LocalEngine.open(dir, { threads: THREADS }),
  };
  try {
    const vocab = engines.on.folder.config.vocabSize;
    const turns = { off: [] as Turn[], on: [] as Turn[] };
    const prompts = { off: ids(FIRST_PROMPT, 1, vocab), on: ids(FIRST_PROMPT, 1, vocab) };
    for (let t = 1; t <= TURNS; t++) {
      for (const k of ['off', 'on'] as const) {
        const r = await turn(engines[k], prompts[k], t);
        turns[k].push(r);
        prompts[k] = [...prompts[k], ...r.answer, ...ids(NEW_PER_TURN, t + 1, vocab)];
      }
    }
    return { ...turns, stats: engines.on.prefixCacheStats() };
  } finally {
    await engines.off.close();
    await engines.on.close();
  }
}

/** Microseconds per lookup: 40 sessions' entries that share a 16k system prompt, each ~17k ids. */
function lookupMicros(): number {
  // One layer of one 1-wide head: the ids are what a lookup reads, the rows do not matter.
  const shape = {
    family: 'qwen3' as const,
    ...PRESETS.tiny!,
    numLayers: 1,
    numKvHeads: 1,
    headDim: 1,
    maxPositionEmbeddings: CONTEXT,
  };
  const cfg = modelConfigOf(shape, [0]);
  const cache = new PrefixCache(Number.MAX_SAFE_INTEGER);
  const system = ids(FIRST_PROMPT, 1, 500);
  for (let s = 0; s < 40; s++) {
    const entry = [...system, ...ids(1000, s + 2, 500)];
    const kv = createKvCache(cfg, entry.length);
    kv.length = entry.length;
    cache.insert(0, entry, kv);
  }
  const request = [...system, ...ids(1000, 20, 500), ...ids(300, 99, 500)];
  const reps = 200;
  const t0 = performance.now();
  for (let r = 0; r < reps; r++) cache.longest(0, request, request.length - 1);
  return ((performance.now() - t0) / reps) * 1000;
}

async function main(): Promise<void> {
  const presets = process.argv.slice(2);
  for (const preset of presets.length > 0 ? presets : ['tiny']) {
    const { off, on, stats } = await sessions(benchModel(preset as BenchPreset, CONTEXT));
    const setup = `${THREADS} threads, first prompt ${FIRST_PROMPT}, +${ANSWER} answer +${NEW_PER_TURN} new per turn`;
    console.log(`\n== ${preset} (${setup}) ==`);
    console.log('turn  prompt   TTFT off (ms)   TTFT on (ms)   ratio');
    on.forEach((t, i) => {
      const o = off[i]!;
      const cells = [
        String(i + 1).padStart(4),
        String(t.promptTokens).padStart(6),
        o.ttftMs.toFixed(1).padStart(14),
        t.ttftMs.toFixed(1).padStart(13),
        `${(o.ttftMs / t.ttftMs).toFixed(1).padStart(6)}x`,
      ];
      console.log(cells.join('  '));
    });
    const same = on.every((t, i) => t.answer.join() === off[i]!.answer.join());
    console.log(`answers identical on and off: ${same ? 'yes' : 'NO'}`);
    console.log(`cache: ${JSON.stringify(stats)}`);
  }
  console.log(`\nlookup, 40 entries of ~17k ids sharing 16k: ${lookupMicros().toFixed(0)} us`);
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
