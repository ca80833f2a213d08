// How far bf16 and int8 logits are from fp32's on the bench models (bench/models.ts), on the
// prompts bench/decode-vs-llama.ts decodes: for each prompt the first generated token's logits
// (the prompt's last row) and the logits of one decode step after it (every product on the int8
// copies at int8), each against fp32: max |diff|, KL(fp32 || other) in nats, whether the argmax
// agrees, and fp32's top-1 minus top-2 margin (a flip needs an error of about that size).
// "int8 head only" and "int8 layers only" split int8's error between the LM head and the layers;
// on a CPU with AVX512-VNNI, "fp32 activations" is int8 with gemmInt8 capped to the variant that
// does not quantize the activations. Every variant runs on the KV cache it serves with (bf16 rows);
// the "fp32 KV" rows run bf16 and int8 on fp32 caches, to show what the bf16 cache adds.
//
//   npm run build && node dist/bench/precision-logits.js tiny small qwen3-0.6b
//
// Knobs: BENCH_PROMPTS (8 prompts, salts 0..n-1).

import { loadKernels } from '../src/engine/local/kernels/index.js';
import { readModelFolder } from '../src/engine/local/model/folder.js';
import { createKvCache, type KvDtype } from '../src/engine/local/model/kv-cache.js';
import { int8Tensors, Transformer } from '../src/engine/local/model/transformer.js';
import { loadWeights } from '../src/engine/local/model/weights.js';
import { bf16ParamsOf, int8ParamsOf } from '../src/engine/local/precision.js';
import { benchModel, type BenchPreset } from './models.js';

const PROMPTS = Number(process.env.BENCH_PROMPTS ?? 8);
const PROMPT = 128;
/** gemmInt8 reads this cap on every call: the fp32-activation variant, to compare with VNNI's. */
const CAP = 'OPENCLAW_RL_INT8_DOT';
const FP32_ACTIVATIONS = 'avx512';
const promptIds = (salt: number) => Array.from({ length: PROMPT }, (_, i) => ((i * 31 + salt * 17) % 400) + 10);

interface Comparison {
  maxAbs: number;
  kl: number;
  sameTop1: boolean;
  /** How much the other logits move fp32's top-1 minus top-2 margin (negative: toward a flip). */
  marginShift: number;
}

function logSoftmax(row: Float32Array): Float64Array {
  let max = -Infinity,
    sum = 0;
  for (const v of row) max = Math.max(max, v);
  for (const v of row) sum += Math.exp(v - max);
  const lse = max + Math.log(sum);
  return Float64Array.from(row, (v) => v - lse);
}

function argmax(row: Float32Array): number {
  let best = 0;
  for (let i = 1; i < row.length; i++) if (row[i]! > row[best]!) best = i;
  return best;
}

/** The indices of the largest and the second largest logit. */
function topTwo(row: Float32Array): [number, number] {
  const top = argmax(row);
  let second = top === 0 ? 1 : 0;
  for (let i = 0; i < row.length; i++) if (i !== top && row[i]! > row[second]!) second = i;
  return [top, second];
}

function margin(row: Float32Array): number {
  const [top, second] = topTwo(row);
  return row[top]! - row[second]!;
}

function compare(ref: Float32Array, other: Float32Array): Comparison {
  const p = logSoftmax(ref),
    q = logSoftmax(other);
  let maxAbs = 0,
    kl = 0;
  for (let i = 0; i < ref.length; i++) {
    maxAbs = Math.max(maxAbs, Math.abs(ref[i]! - other[i]!));
    kl += Math.exp(p[i]!) * (p[i]! - q[i]!);
  }
  const [top, second] = topTwo(ref);
  const marginShift = other[top]! - other[second]! - (ref[top]! - ref[second]!);
  return { maxAbs, kl, sameTop1: argmax(ref) === argmax(other), marginShift };
}

/** The logits of the prompt's last row, and of one decode step feeding fp32's greedy token. */
function firstTwo(model: Transformer, prompt: number[], next: number, kv: KvDtype): [Float32Array, Float32Array] {
  const cache = createKvCache(model.cfg, 64, model.cfg.maxPositionEmbeddings, kv);
  const first = model.forward([{ cache, tokens: prompt, logitsFrom: prompt.length - 1 }])[0]!.slice();
  const second = model.forward([{ cache, tokens: [next], logitsFrom: 0 }])[0]!.slice();
  return [first, second];
}

function run(preset: BenchPreset): void {
  const dir = benchModel(preset);
  const cfg = readModelFolder(dir).config;
  const params = loadWeights(dir, cfg);
  const k = loadKernels();
  const bf16 = bf16ParamsOf(k, params.specs, params.data);
  const head = (s: { name: string }) =>
    s.name === (cfg.tieWordEmbeddings ? 'model.embed_tokens.weight' : 'lm_head.weight');
  const all = int8Tensors(cfg);
  const int8 = new Transformer(cfg, params, k, bf16, int8ParamsOf(k, params.specs, params.data, all));
  /** [name, model, whether gemmInt8 is capped to its fp32-activation variant, the cache's rows] */
  const bf16Model = new Transformer(cfg, params, k, bf16);
  const variants: [string, Transformer, boolean?, KvDtype?][] = [
    ['bf16', bf16Model],
    ['bf16, fp32 KV', bf16Model, false, 'f32'],
    [`int8 (${k.info.int8Dot})`, int8],
    [`int8, fp32 KV`, int8, false, 'f32'],
    ['int8 head only', new Transformer(cfg, params, k, bf16, int8ParamsOf(k, params.specs, params.data, head))],
    [
      'int8 layers only',
      new Transformer(
        cfg,
        params,
        k,
        bf16,
        int8ParamsOf(k, params.specs, params.data, (s) => all(s) && !head(s)),
      ),
    ],
  ];
  if (k.info.int8Dot === 'vnni') variants.splice(2, 0, [`int8 (${FP32_ACTIVATIONS}, fp32 activations)`, int8, true]);
  const fp32 = new Transformer(cfg, params, k);
  const stats = new Map<string, Comparison[][]>(variants.map(([name]) => [name, [[], []]]));
  const margins: number[][] = [[], []];
  console.log(`\n== ${preset}: ${PROMPTS} prompts of ${PROMPT} tokens, against fp32 ==`);
  for (let salt = 0; salt < PROMPTS; salt++) {
    const prompt = promptIds(salt);
    const cache = createKvCache(cfg);
    const first = fp32.forward([{ cache, tokens: prompt, logitsFrom: prompt.length - 1 }])[0]!.slice();
    const next = argmax(first);
    const second = fp32.forward([{ cache, tokens: [next], logitsFrom: 0 }])[0]!.slice();
    margins[0]!.push(margin(first));
    margins[1]!.push(margin(second));
    const shifts: string[] = [];
    for (const [name, model, capped, kv] of variants) {
      if (capped) process.env[CAP] = FP32_ACTIVATIONS;
      const [a, b] = firstTwo(model, prompt, next, kv ?? model.kvDtype);
      delete process.env[CAP];
      const c = compare(first, a);
      stats.get(name)![0]!.push(c);
      stats.get(name)![1]!.push(compare(second, b));
      shifts.push(`${name} ${c.marginShift.toExponential(1)}${c.sameTop1 ? '' : ' FLIPPED'}`);
    }
    console.log(
      `prompt ${salt}: first token's fp32 margin ${margin(first).toExponential(2)}, moved by ${shifts.join(', ')}`,
    );
  }
  const fmt = (xs: number[]) => `median ${median(xs).toExponential(2)} max ${Math.max(...xs).toExponential(2)}`;
  for (const [step, label] of ['first token (prompt row)', 'one decode step'].entries()) {
    console.log(
      `${label}: fp32 top-1 - top-2 margin ${fmt(margins[step]!)}, min ${Math.min(...margins[step]!).toExponential(2)}`,
    );
    for (const [name] of variants) {
      const rows = stats.get(name)![step]!;
      const agree = rows.filter((r) => r.sameTop1).length;
      console.log(
        `  ${name.padEnd(20)} max|diff| ${fmt(rows.map((r) => r.maxAbs))}; KL ${fmt(rows.map((r) => r.kl))}; ` +
          `|margin shift| ${fmt(rows.map((r) => Math.abs(r.marginShift)))}; top-1 = fp32 ${agree}/${rows.length}`,
      );
    }
  }
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
}

const presets = (process.argv.slice(2).length ? process.argv.slice(2) : ['tiny', 'small']) as BenchPreset[];
for (const p of presets) run(p);
