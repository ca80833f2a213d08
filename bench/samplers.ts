// The sampler backends in one run, on the same weights (issue 17's benchmark):
//   1. throughput: the embedded engine (serve's default precision) against llama.cpp F16 and Q8_0
//      (node-llama-cpp in-process, our LlamaCppSampler, CPU), for prefill, single-stream decode and
//      8-stream decode, at the tiny and Qwen3-0.6B shapes; rounds alternate the backends and each
//      ratio is the median of the rounds' ratios;
//   2. what serve adds to a request through each backend (embedded, llama.cpp, vLLM and SGLang;
//      see bench/serve-overhead.ts for what is compared and why), against the target of at most
//      1 ms p50.
//
//   npm run bench:samplers                   # both shapes, then the added time
//   npm run bench:samplers -- tiny overhead  # the quick run
//   npm run bench:samplers -- qwen3-0.6b     # one shape's throughput only
//   npm run bench:samplers -- overhead       # the added time only
//
// Knobs: BENCH_THREADS (2), BENCH_LLAMA_THREADS (llama.cpp's, default BENCH_THREADS), BENCH_ROUNDS (5 tiny,
// 3 otherwise), BENCH_OVERHEAD_ROUNDS (5), BENCH_OVERHEAD_THREADS (the backends' threads in the added
// time, default one less than the cores: a GPU server or a spare core does that work in deployment).

import { availableParallelism, loadavg } from 'node:os';
import { loadChatBackend } from '../src/cli/chat-model.js';
import { openRemoteSampler } from '../src/cli/sampler-choice.js';
import { LocalEngine } from '../src/engine/local/engine.js';
import { LlamaCppSampler } from '../src/engine/llama-cpp/sampler.js';
import type { Sampler } from '../src/engine/types.js';
import { LLAMA_PREFIX, NODE_LLAMA_CPP_VERSION } from './llama-cpp.js';
import { median, printMachine } from './machine.js';
import { benchModel, type BenchPreset } from './models.js';
import { measureThroughput, type Throughput, type ThroughputShape } from './sampler-throughput.js';
import {
  benchPromptIds,
  ClientProcess,
  inProcessDirect,
  measureOverhead,
  type Overhead,
  remoteDirect,
  type ServerUnderTest,
  startBareProxy,
  startBareServer,
  startDoubleProcess,
  startGateway,
} from './serve-overhead.js';

const THREADS = Number(process.env.BENCH_THREADS ?? 2);
// ggml's threads spin at barriers: on a small machine llama.cpp can be fastest on fewer threads than cores.
const LLAMA_THREADS = Number(process.env.BENCH_LLAMA_THREADS ?? THREADS);
const OVERHEAD_ROUNDS = Number(process.env.BENCH_OVERHEAD_ROUNDS ?? 5);
// The backend's threads in the added-time measurement: a GPU server or a spare core does the
// backend's work in deployment, so by default one core is left to serve and the client.
const OVERHEAD_THREADS = Number(process.env.BENCH_OVERHEAD_THREADS ?? Math.max(1, availableParallelism() - 1));
const OVERHEAD_TOKENS = 16;
const TARGET_MS = 1;
/** The overhead table's row for the bare HTTP server: the floor, not a backend. */
const FLOOR_ROW = 'floor: bare node:http';
const isFloor = (r: Overhead) => r.backend.startsWith(FLOOR_ROW);

interface Candidate {
  name: string;
  sampler: Sampler;
  close(): Promise<void>;
}

async function llamaCpp(
  dir: string,
  type: 'F16' | 'Q8_0',
  sequences: number,
  threads = LLAMA_THREADS,
): Promise<Candidate> {
  const sampler = await LlamaCppSampler.open({
    modelDir: dir,
    ggufType: type,
    gpu: 'off',
    threads,
    contextSize: 2048,
    sequences,
    nodeLlamaCppFallback: LLAMA_PREFIX,
  });
  return { name: `llama.cpp ${type}`, sampler, close: () => sampler.close() };
}

const fmt = (x: number) => x.toFixed(1).padStart(9);

async function throughput(preset: BenchPreset): Promise<void> {
  const dir = benchModel(preset);
  const rounds = Number(process.env.BENCH_ROUNDS ?? (preset === 'tiny' ? 5 : 3));
  // At the 0.6B shape on two cores each backend decodes 10-25 tokens/s: 16 tokens per stream keeps a
  // round near a minute per backend (64 took several).
  const decodeTokens = preset === 'tiny' ? 64 : 16;
  const shape: ThroughputShape = { prefillTokens: 512, decodePrompt: 64, decodeTokens, streams: 8, vocab: 0 };
  // serve's default precision: int8 where the CPU has VNNI, bf16 where it has bf16 instructions.
  const engine = await LocalEngine.open(dir, { threads: THREADS, precision: 'auto' });
  shape.vocab = Math.min(engine.folder.config.vocabSize, 4096);
  const candidates: Candidate[] = [
    { name: `embedded ${engine.info.precision}`, sampler: engine, close: () => engine.close() },
    await llamaCpp(dir, 'F16', shape.streams),
    await llamaCpp(dir, 'Q8_0', shape.streams),
  ];
  const load = loadavg()
    .map((x) => x.toFixed(2))
    .join(' ');
  console.log(
    `\n== ${preset}: prefill ${shape.prefillTokens} tokens; decode ${shape.decodeTokens} tokens after ${shape.decodePrompt}, 1 and ${shape.streams} streams; temperature 1; ${THREADS} threads; ${rounds} rounds (load ${load} on ${availableParallelism()} cores) ==`,
  );
  const results = candidates.map(() => [] as Throughput[]);
  for (const c of candidates) await measureThroughput(c.sampler, shape, 0); // warm-up
  for (let round = 1; round <= rounds; round++)
    for (const [i, c] of candidates.entries()) {
      const r = await measureThroughput(c.sampler, shape, round);
      results[i]!.push(r);
      // As it comes, so a long run that is stopped still shows what it measured.
      console.log(
        `  round ${round} ${c.name}: prefill ${r.prefill.toFixed(1)}, 1 stream ${r.decode1.toFixed(1)}, ${shape.streams} streams ${r.decodeN.toFixed(1)} tok/s`,
      );
    }
  for (const c of candidates) await c.close();

  const keys: (keyof Throughput)[] = ['prefill', 'decode1', 'decodeN'];
  console.log(
    `${'backend'.padEnd(18)} ${'prefill'.padStart(9)} ${'1 stream'.padStart(9)} ${`${shape.streams} streams`.padStart(9)}   tok/s (median); embedded / it (median of rounds)`,
  );
  for (const [i, c] of candidates.entries()) {
    const mine = results[i]!;
    const ratios = keys.map((k) => median(mine.map((r, round) => results[0]![round]![k] / r[k])));
    console.log(
      `${c.name.padEnd(18)} ${keys.map((k) => fmt(median(mine.map((r) => r[k])))).join(' ')}   ${i === 0 ? '' : ratios.map((r) => `${r.toFixed(2)}x`).join(' ')}`,
    );
  }
}

async function overhead(): Promise<Overhead[]> {
  const dir = benchModel('tiny');
  const out: Overhead[] = [];
  const client = new ClientProcess();
  const common = { client, tokens: OVERHEAD_TOKENS, rounds: OVERHEAD_ROUNDS, perRound: 20 };
  const embedded = await loadChatBackend(dir, 'bench', { threads: OVERHEAD_THREADS, precision: 'auto' });
  const ids = benchPromptIds(embedded);
  /** One row: the backend's generation directly, and through `server` (closed after). */
  const row = async (name: string, server: ServerUnderTest, direct: (seeds: number[]) => Promise<number[]>) => {
    try {
      out.push(await measureOverhead({ name, server, direct, ...common }));
    } finally {
      await server.close();
    }
  };
  try {
    const embeddedDirect = inProcessDirect(embedded.sampler, ids, OVERHEAD_TOKENS);
    const precision = (embedded.sampler as LocalEngine).info.precision;
    await row(`embedded ${precision}`, await startGateway(embedded), embeddedDirect);
    await row(FLOOR_ROW, await startBareServer(embedded.sampler, ids), embeddedDirect);
    const llama = await llamaCpp(dir, 'Q8_0', 4, OVERHEAD_THREADS);
    try {
      const backend = { ...embedded, sampler: llama.sampler };
      await row('llama.cpp Q8_0', await startGateway(backend), inProcessDirect(llama.sampler, ids, OVERHEAD_TOKENS));
    } finally {
      await llama.close();
    }
    for (const kind of ['vllm', 'sglang'] as const) {
      const double = await startDoubleProcess(kind, dir, OVERHEAD_THREADS);
      try {
        const model = 'double-base';
        const router = openRemoteSampler({ kind, urls: [double.url], model }, { name: model, contextLength: 2048 });
        const direct = remoteDirect(client, kind, double.url, model, ids, OVERHEAD_TOKENS);
        await row(`${kind} (test double)`, await startGateway({ ...embedded, sampler: router }), direct);
        await row(`${FLOOR_ROW} proxy to ${kind}`, await startBareProxy(kind, double.url, model, ids), direct);
      } finally {
        double.child.kill('SIGTERM');
      }
    }
  } finally {
    client.close();
    await embedded.close();
  }
  return out;
}

async function main(): Promise<void> {
  const args = process.argv.slice(2);
  const which = args.filter((a) => a !== 'overhead') as BenchPreset[];
  printMachine(THREADS);
  console.log(
    `llama.cpp: node-llama-cpp ${NODE_LLAMA_CPP_VERSION}, CPU (gpu off), ${LLAMA_THREADS} threads, through LlamaCppSampler`,
  );
  const presets = which.length || args.includes('overhead') ? which : (['tiny', 'qwen3-0.6b'] as BenchPreset[]);
  for (const preset of presets) await throughput(preset);
  if (args.length > 0 && !args.includes('overhead')) return;

  console.log(
    `\n== added time through serve: tiny model, ${OVERHEAD_TOKENS} tokens per request, streamed, ${OVERHEAD_ROUNDS} alternating rounds of 20; backends on ${OVERHEAD_THREADS} thread(s) ==`,
  );
  const rows = await overhead();
  console.log(
    `${'backend'.padEnd(38)} ${'direct'.padStart(8)} ${'via serve'.padStart(9)} ${'added'.padStart(7)} ${'gateway'.padStart(8)} ${'serve CPU'.padStart(9)}   added per round (ms, p50s)`,
  );
  for (const r of rows) {
    const added = r.viaServe - r.direct;
    console.log(
      `${r.backend.padEnd(38)} ${r.direct.toFixed(2).padStart(8)} ${r.viaServe.toFixed(2).padStart(9)} ${added.toFixed(2).padStart(7)} ${(r.gateway === null ? '-' : r.gateway.toFixed(2)).padStart(8)} ${r.serveCpuMs.toFixed(2).padStart(9)}   ${r.perRound.map((x) => x.toFixed(2)).join(' ')}`,
    );
  }
  console.log(
    `target: serve adds <= ${TARGET_MS} ms p50 whichever backend -> ${rows
      .filter((r) => !isFloor(r))
      .map((r) => {
        const added = median(r.perRound);
        return `${r.backend} ${added.toFixed(2)} ms ${added <= TARGET_MS ? 'MET' : 'NOT MET'}`;
      })
      .join('; ')} (median of the rounds' added p50s)`,
  );
  console.log(
    `floors on this machine (median of the rounds' added p50s): ${rows
      .filter(isFloor)
      .map((r) => `${r.backend} ${median(r.perRound).toFixed(2)} ms`)
      .join('; ')}: a bare HTTP server around the embedded sampler, a bare proxy in front of each ` +
      "remote server; serve's own work is the rest",
  );
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
