// AdamW around the kernel: several steps against a float64 computation written here (decay
// mask, warm-up, clipping, accumulation), what it hands the kernel per segment, skipped steps
// and resuming from saved state.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { bf16Bits } from '../src/engine/local/kernels/bf16.js';
import type { Kernels } from '../src/engine/local/kernels/kernels.js';
import { portableKernels } from '../src/engine/local/kernels/portable.js';
import { modelConfigOf, PRESETS } from '../src/engine/local/model/init.js';
import { tensorSpecs } from '../src/engine/local/model/weights.js';
import { createRng } from '../src/engine/local/sampling/random.js';
import { Lora } from '../src/engine/local/train/lora.js';
import {
  AdamW,
  type AdamWConfig,
  DEFAULT_ADAMW,
  loraSegments,
  type ParamSegment,
  paramSegments,
} from '../src/engine/local/train/optimizer.js';

const rng = createRng(99);
const randoms = (n: number, scale: number) => Float64Array.from({ length: n }, () => (rng.next() * 2 - 1) * scale);

/** The float64 reference: torch.optim.AdamW after clip_grad_norm_, per element. */
function referenceRun(
  p0: Float64Array,
  gradsPerStep: Float64Array[],
  decay: boolean[],
  cfg: AdamWConfig,
  gradScale: number,
): Float64Array {
  const p = Float64Array.from(p0),
    m = new Float64Array(p.length),
    v = new Float64Array(p.length);
  gradsPerStep.forEach((raw, i) => {
    const step = i + 1;
    const g = raw.map((x) => x * gradScale);
    const norm = Math.sqrt(g.reduce((a, x) => a + x * x, 0));
    const clip = cfg.maxGradNorm === null ? 1 : Math.min(1, cfg.maxGradNorm / (norm + 1e-6));
    const lr = cfg.lr * Math.min(1, step / Math.max(1, cfg.warmupSteps));
    for (let j = 0; j < p.length; j++) {
      const gj = g[j]! * clip;
      m[j] = cfg.beta1 * m[j]! + (1 - cfg.beta1) * gj;
      v[j] = cfg.beta2 * v[j]! + (1 - cfg.beta2) * gj * gj;
      const mHat = m[j]! / (1 - cfg.beta1 ** step),
        vHat = v[j]! / (1 - cfg.beta2 ** step);
      p[j] = p[j]! * (1 - lr * (decay[j] ? cfg.weightDecay : 0)) - (lr * mHat) / (Math.sqrt(vHat) + cfg.eps);
    }
  });
  return p;
}

// Three segments (decay, no decay, decay) and a gap of 3 values the optimizer must not touch.
const segments: ParamSegment[] = [
  { offset: 0, size: 5, decay: true },
  { offset: 5, size: 4, decay: false },
  { offset: 12, size: 6, decay: true },
];
const N = 18;
const decayOf = Array.from({ length: N }, (_, j) => j < 5 || j >= 12);
const inSegment = (j: number) => j < 9 || j >= 12;

function runOptimizer(
  cfg: AdamWConfig,
  p0: Float64Array,
  gradsPerStep: Float64Array[][],
  gradScale: number,
  k: Kernels = portableKernels,
) {
  const params = Float32Array.from(p0),
    grads = new Float32Array(N);
  const opt = new AdamW(params, grads, segments, cfg, k);
  const results = gradsPerStep.map((micro) => {
    opt.zeroGrad();
    for (const g of micro) for (let j = 0; j < N; j++) grads[j] = grads[j]! + g[j]!; // backward adds
    return opt.step(gradScale);
  });
  return { params, results, opt };
}

const cases: [string, Partial<AdamWConfig>, number][] = [
  ['plain, with decay mask', { lr: 1e-2, maxGradNorm: null }, 1],
  ['warm-up over 3 steps', { lr: 1e-2, warmupSteps: 3, maxGradNorm: null }, 1],
  ['clipping at 0.5', { lr: 1e-2, maxGradNorm: 0.5 }, 1],
  ['accumulation of 2 micro-batches, clipping, warm-up', { lr: 3e-3, warmupSteps: 2, maxGradNorm: 1 }, 0.5],
];

for (const [name, overrides, gradScale] of cases) {
  test(`AdamW matches a float64 computation over 6 steps: ${name}`, () => {
    const cfg = { ...DEFAULT_ADAMW, weightDecay: 0.1, ...overrides };
    const p0 = randoms(N, 1);
    const micro = gradScale === 1 ? 1 : Math.round(1 / gradScale);
    // Gradient sizes vary per step so clipping is active on some steps only.
    const steps = Array.from({ length: 6 }, (_, s) =>
      Array.from({ length: micro }, () => randoms(N, s % 2 ? 2 : 0.05)),
    );
    const summed = steps.map((m) => m.reduce((acc, g) => acc.map((x, j) => x + g[j]!), new Float64Array(N)));
    const { params, results } = runOptimizer(cfg, p0, steps, gradScale);
    const expected = referenceRun(
      p0,
      summed.map((g) => g.map((x, j) => (inSegment(j) ? x : 0))),
      decayOf,
      cfg,
      gradScale,
    );
    for (let j = 0; j < N; j++) {
      if (!inSegment(j))
        assert.equal(params[j], Math.fround(p0[j]!), `value ${j} lies outside every segment and must not move`);
      else assert.ok(Math.abs(params[j]! - expected[j]!) <= 2e-6, `param ${j}: ${params[j]} vs float64 ${expected[j]}`);
    }
    results.forEach((r, i) => {
      const g = summed[i]!.map((x, j) => (inSegment(j) ? x * gradScale : 0));
      const norm = Math.sqrt(g.reduce((a, x) => a + x * x, 0));
      assert.ok(Math.abs(r.gradNorm - norm) <= 1e-5 * norm, `step ${i + 1}: pre-clip norm ${r.gradNorm} vs ${norm}`);
      assert.equal(r.step, i + 1);
      assert.equal(r.applied, true);
    });
    if (cfg.maxGradNorm !== null)
      assert.ok(
        results.some((r) => r.gradNorm > cfg.maxGradNorm!) && results.some((r) => r.gradNorm < cfg.maxGradNorm!),
        'clipping active on some steps only',
      );
  });
}

test('AdamW hands the kernel each segment with its decay, lr and bias corrections', () => {
  const calls: { n: number; lr: number; wd: number; bc1: number; bc2: number }[] = [];
  const recording: Kernels = {
    ...portableKernels,
    adamw: (_p, _g, _m, _v, n, lr, _b1, _b2, _eps, wd, bc1, bc2, gradScale, pBf16, zeroGrad) => {
      assert.equal(gradScale, 1, 'a gradient norm under the clip: scale 1');
      assert.equal(pBf16, null);
      assert.equal(zeroGrad, true);
      calls.push({ n, lr, wd, bc1, bc2 });
    },
  };
  const cfg = { ...DEFAULT_ADAMW, lr: 1, beta1: 0.5, beta2: 0.75, weightDecay: 0.3, warmupSteps: 4 };
  const params = new Float32Array(N),
    grads = new Float32Array(N).fill(0.01);
  const opt = new AdamW(params, grads, segments, cfg, recording);
  opt.step();
  opt.step();
  assert.deepEqual(calls, [
    { n: 5, lr: 0.25, wd: 0.3, bc1: 0.5, bc2: 0.25 },
    { n: 4, lr: 0.25, wd: 0, bc1: 0.5, bc2: 0.25 },
    { n: 6, lr: 0.25, wd: 0.3, bc1: 0.5, bc2: 0.25 },
    { n: 5, lr: 0.5, wd: 0.3, bc1: 0.75, bc2: 1 - 0.75 ** 2 },
    { n: 4, lr: 0.5, wd: 0, bc1: 0.75, bc2: 1 - 0.75 ** 2 },
    { n: 6, lr: 0.5, wd: 0.3, bc1: 0.75, bc2: 1 - 0.75 ** 2 },
  ]);
  assert.equal(opt.lrAt(4), 1);
  assert.equal(opt.lrAt(100), 1);
});

test('a step clears the gradients it read and writes the bf16 copy; one not applied does neither', () => {
  const cfg = { ...DEFAULT_ADAMW, lr: 1e-2, maxGradNorm: 0.5 };
  const params = Float32Array.from(randoms(N, 1)),
    grads = Float32Array.from(randoms(N, 2));
  const bf16 = new Uint16Array(N).fill(0xffff);
  const opt = new AdamW(params, grads, segments, cfg, portableKernels);
  assert.equal(opt.step(0.5, bf16).applied, true);
  for (let j = 0; j < N; j++) {
    if (inSegment(j)) {
      assert.equal(grads[j], 0, `gradient ${j} cleared`);
      assert.equal(bf16[j], bf16Bits(params[j]!), `bf16 copy of ${j}`);
    } else {
      assert.notEqual(grads[j], 0, `gradient ${j} lies outside every segment: untouched`);
      assert.equal(bf16[j], 0xffff, `bf16 ${j} lies outside every segment: untouched`);
    }
  }
  grads.set(randoms(N, 1));
  grads[2] = Infinity;
  const before = grads.slice();
  assert.equal(opt.step(1, bf16).applied, false);
  assert.deepEqual(grads, before, 'a step not applied leaves the gradients for zeroGrad');
});

test('a non-finite gradient skips the step and changes nothing', () => {
  const params = Float32Array.from(randoms(N, 1)),
    before = params.slice();
  const grads = Float32Array.from(randoms(N, 1));
  const opt = new AdamW(params, grads, segments, DEFAULT_ADAMW, portableKernels);
  grads[3] = NaN;
  const r = opt.step();
  assert.equal(r.applied, false);
  assert.ok(Number.isNaN(r.gradNorm));
  assert.equal(opt.steps, 0);
  assert.deepEqual(params, before);
  assert.ok(opt.m.every((x) => x === 0) && opt.v.every((x) => x === 0));
});

test('resuming from saved state continues exactly where an uninterrupted run would be', () => {
  const cfg = { ...DEFAULT_ADAMW, lr: 1e-2, warmupSteps: 2 };
  const p0 = randoms(N, 1);
  const steps = Array.from({ length: 5 }, () => randoms(N, 1));
  const straight = runOptimizer(
    cfg,
    p0,
    steps.map((g) => [g]),
    1,
  ).params;
  const first = runOptimizer(
    cfg,
    p0,
    steps.slice(0, 3).map((g) => [g]),
    1,
  );
  const state = { m: first.opt.m.slice(), v: first.opt.v.slice(), step: first.opt.steps };
  const params = first.params.slice(),
    grads = new Float32Array(N);
  const resumed = new AdamW(params, grads, segments, cfg, portableKernels, state);
  for (const g of steps.slice(3)) {
    resumed.zeroGrad();
    grads.set(g);
    resumed.step();
  }
  assert.deepEqual(params, straight);
  assert.equal(resumed.steps, 5);
  assert.throws(
    () => new AdamW(params, grads, segments, cfg, portableKernels, { ...state, m: new Float32Array(3) }),
    /saved moments hold 3 and 18 values, the parameters 18/,
  );
});

test('segments: no decay on norms and biases, neighbours merged; one decaying segment for a LoRA', () => {
  const cfg = modelConfigOf({ family: 'qwen2', ...PRESETS.tiny! }, [0]);
  const specs = tensorSpecs(cfg);
  const segs = paramSegments(specs);
  const total = specs.reduce((a, s) => a + s.size, 0);
  assert.equal(
    segs.reduce((a, s) => a + s.size, 0),
    total,
  );
  assert.ok(segs.length < specs.length);
  for (const s of specs) {
    const seg = segs.find((g) => s.offset >= g.offset && s.offset < g.offset + g.size)!;
    assert.equal(seg.decay, s.kind === 'matrix' || s.kind === 'embedding', `${s.name} (${s.kind})`);
  }
  const lora = new Lora(cfg, { rank: 2, alpha: 4, targets: ['q', 'v'] });
  assert.deepEqual(loraSegments(lora), [{ offset: 0, size: lora.data.length, decay: true }]);
  assert.throws(
    () =>
      new AdamW(
        new Float32Array(4),
        new Float32Array(4),
        [{ offset: 2, size: 3, decay: true }],
        DEFAULT_ADAMW,
        portableKernels,
      ),
    /segment 0 \[2, 5\) must be ascending, non-overlapping and inside 4 parameters/,
  );
});

test('resetMoments: the next step is a first step again (bias corrections restart), the step count goes on', () => {
  const cfg = { ...DEFAULT_ADAMW, lr: 1e-2 };
  const g = randoms(N, 1);
  const fresh = runOptimizer(cfg, randoms(N, 1), [[g]], 1);
  const params = fresh.params.slice(),
    grads = new Float32Array(N);
  const opt = new AdamW(params, grads, segments, cfg, portableKernels);
  for (let i = 0; i < 3; i++) {
    grads.set(randoms(N, 1));
    opt.step();
  }
  // From the same weights, a reset optimizer and a new one take the same step.
  const start = params.slice();
  opt.resetMoments();
  assert.ok(opt.m.every((x) => x === 0) && opt.v.every((x) => x === 0));
  const other = start.slice(),
    otherGrads = Float32Array.from(g);
  new AdamW(other, otherGrads, segments, cfg, portableKernels).step();
  grads.set(g);
  opt.step();
  assert.deepEqual(params, other);
  assert.equal(opt.steps, 4);
  assert.equal(opt.state().momentsFrom, 3);
  // And a checkpointed state resumes with the same bias corrections.
  assert.throws(
    () => new AdamW(params, grads, segments, cfg, portableKernels, { ...opt.state(), momentsFrom: 5 }),
    /momentsFrom must be an integer in \[0, 4\], got 5/,
  );
});
