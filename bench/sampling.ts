// One sampled token's cost over a Qwen3-sized vocabulary (151,936 logits), with the tempered
// weights computed by the native kernel against the float64 JavaScript ones (the portable kernel,
// what every draw at a temperature above 0 used before), alternated in one process. The logits
// are drawn from a normal distribution (sd 3) with a few hundred raised ids, so top-p keeps a
// nucleus of some hundreds of ids as a real model's row often does.
//
//   npm run bench:sampling
//
// Knobs: BENCH_ROUNDS (7), BENCH_DRAWS (200 a round and side).

import { loadNativeKernels } from '../src/engine/local/kernels/native.js';
import { portableKernels } from '../src/engine/local/kernels/portable.js';
import { createRng } from '../src/engine/local/sampling/random.js';
import { type SampleSettings, sampleToken, type WeighLogits } from '../src/engine/local/sampling/sample.js';
import { median, printMachine } from './machine.js';

const V = 151_936;
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 7);
const DRAWS = Number(process.env.BENCH_DRAWS ?? 200);

const SETTINGS: [string, SampleSettings][] = [
  ['T=1 (OpenAI default)', { temperature: 1, topK: 0, topP: 1, topLogprobs: 0 }],
  ['T=0.6 top-k 20 top-p 0.95 (Qwen3 default)', { temperature: 0.6, topK: 20, topP: 0.95, topLogprobs: 0 }],
  ['T=0.7 top-p 0.8', { temperature: 0.7, topK: 0, topP: 0.8, topLogprobs: 0 }],
  ['greedy (no weights)', { temperature: 0, topK: 0, topP: 1, topLogprobs: 0 }],
];

function logitsRow(): Float32Array {
  const rng = createRng(2026);
  const normal = () => Math.sqrt(-2 * Math.log(1 - rng.next())) * Math.cos(2 * Math.PI * rng.next());
  return Float32Array.from({ length: V }, (_, i) => 3 * normal() + (i % 509 === 0 ? 8 : 0));
}

function msPerDraw(logits: Float32Array, s: SampleSettings, weigh: WeighLogits, seed: number): number {
  const rng = createRng(seed);
  const start = performance.now();
  for (let i = 0; i < DRAWS; i++) sampleToken(logits, s, rng, 0, weigh);
  return (performance.now() - start) / DRAWS;
}

function main(): void {
  printMachine(1);
  const nativeWeigh = loadNativeKernels().temperedWeights;
  const jsWeigh = portableKernels.temperedWeights;
  const logits = logitsRow();
  for (const [name, s] of SETTINGS) {
    msPerDraw(logits, s, jsWeigh, 0);
    msPerDraw(logits, s, nativeWeigh, 0);
    const js: number[] = [],
      nat: number[] = [],
      ratios: number[] = [];
    for (let r = 0; r < ROUNDS; r++) {
      js.push(msPerDraw(logits, s, jsWeigh, r + 1));
      nat.push(msPerDraw(logits, s, nativeWeigh, r + 1));
      ratios.push(js[r]! / nat[r]!);
    }
    console.log(
      `${name}: float64 JS weights ${median(js).toFixed(3)} ms a token, native ${median(nat).toFixed(3)} ms; ` +
        `median ratio ${median(ratios).toFixed(2)}x`,
    );
  }
}

main();
