// What the llama-cpp sampler asks llama.cpp for at each position, and the token and log-probs it
// makes of the answer.
//
// node-llama-cpp hands a row of logits to JS as a Map of every token id: at Qwen3's 151,936 ids,
// building it costs about three times the decode step itself (docs/engine.md, Benchmarks of the
// samplers). So where llama.cpp's own sampler draws from exactly the distribution ours would, it
// samples, and returns only a few logits and sum(exp(logit - max)) over the whole vocabulary, from
// which the log-prob at temperature 1 follows: greedy (temperature 0) and the model's own
// distribution (temperature 1, no top-k, no top-p). The scorer asks the same of every position.
// llama.cpp sums in float32, so these log-probs differ from a float64 sum of the row by its
// rounding: 1.6e-5 at most measured on the random Qwen3-0.6B shape, up to ~5e-4 on peaked rows
// (tiny tail terms vanish against a sum near 1; docs/engine.md).
// Other settings need the log-prob at temperature 1 beside a tempered, truncated draw (top-p over
// the tempered distribution, which llama.cpp's chain truncates before tempering), which one answer
// of llama.cpp cannot give. With top-p or top-k at a temperature up to 1 we ask for the largest
// logits and sample them here, draw for draw as the embedded engine samples the whole row
// (../local/sampling/sample.ts), where they provably suffice (./window-sample.ts); where they do
// not (a flat distribution), the last token is evaluated again for the whole row. Otherwise
// (temperature above 1, or below 1 without truncation) every step takes the whole row.

import type { Rng } from '../local/sampling/random.js';
import { type SampleResult, type SampleSettings, sampleToken } from '../local/sampling/sample.js';
import type { TokenLogprob } from '../types.js';
import type {
  ControlledEvaluateInput,
  ControlledEvaluateOutput,
  GenerateNext,
  LlamaContextSequence,
} from './node-llama-cpp.js';
import { sampleFromWindow } from './window-sample.js';

/**
 * greedy: llama.cpp's argmax (the lowest id among equal logits, as ours); model: llama.cpp draws
 * from the model's distribution, seeded from the request's generator; window: the largest logits,
 * sampled here; row: the whole row, sampled here.
 */
export type StepKind = 'greedy' | 'model' | 'window' | 'row';

/** Logits the window asks for (more when topK or topLogprobs need them). */
const WINDOW = 256;
/** Steps a generation takes the whole row straight away, at most, after the window could not decide. */
const MAX_ROW_STEPS = 64;

export function stepKind(s: SampleSettings, vocabSize: number): StepKind {
  if (s.temperature <= 0) return 'greedy';
  const truncated = (s.topP > 0 && s.topP < 1) || (s.topK > 0 && s.topK < vocabSize);
  if (s.temperature === 1 && !truncated) return 'model';
  return s.temperature <= 1 && truncated ? 'window' : 'row';
}

/** What to ask with the token whose successor is sampled; `model` draws its seed from `rng` here. */
export function nextTokenRequest(kind: StepKind, s: SampleSettings, rng: Rng): GenerateNext {
  if (kind === 'row') return { logits: true };
  if (kind === 'greedy') return fewLogits([], s.topLogprobs, { temperature: 0 });
  if (kind === 'window') return fewLogits([], Math.max(WINDOW, s.topK + 1, s.topLogprobs), { temperature: 0 });
  // topK 0 keeps the whole vocabulary sorted, so the largest logit comes without another sort.
  const seed = Math.floor(rng.next() * 2 ** 32);
  return fewLogits([], Math.max(1, s.topLogprobs), { temperature: 1, topK: 0, topP: 1, minP: 0, seed });
}

/** The sampled token of an answer to `nextTokenRequest(kind, s, rng)`; null when a window cannot decide. */
export function nextToken(
  kind: StepKind,
  next: ControlledEvaluateOutput['next'] | undefined,
  s: SampleSettings,
  rng: Rng,
  vocabSize: number,
): SampleResult | null {
  if (kind === 'row') return sampleToken(logitsRow(next?.logits, vocabSize), s, rng);
  if (kind === 'window') {
    const { logits, weight } = fewOf(next);
    return sampleFromWindow(logits, weight, vocabSize, s, rng);
  }
  const id = next?.token;
  if (id === undefined || id === null) throw new Error('llama.cpp sampled no token for a position that asked for one');
  const { logprobOf, top } = readFew(next, s.topLogprobs);
  const logprob = logprobOf(id);
  // At temperature 1 without truncation the sampled distribution is the model's.
  return { id, logprob, sampledLogprob: kind === 'greedy' ? 0 : logprob, ...(top ? { top } : {}) };
}

/** What the scorer asks at the position before `id`: its logit, the largest, the normalizer, and the top `topK`. */
export function scoreRequest(id: number, topK: number): GenerateNext {
  return fewLogits([id], topK, { temperature: 0 });
}

export function scoredToken(
  next: ControlledEvaluateOutput['next'] | undefined,
  id: number,
  topK: number,
): { logprob: number; top?: TokenLogprob[] } {
  const { logprobOf, top } = readFew(next, topK);
  return { logprob: logprobOf(id), ...(top ? { top } : {}) };
}

/** llama.cpp's logits of every token id as one row (ids it left out, if any, at -Infinity). */
export function logitsRow(map: Map<number, number> | undefined, vocabSize: number): Float32Array {
  if (!map) throw new Error('llama.cpp returned no logits for a position that asked for them');
  const row = new Float32Array(vocabSize).fill(Number.NEGATIVE_INFINITY);
  for (const [id, logit] of map) if (id < row.length) row[id] = logit;
  return row;
}

/**
 * The logits of `tokens`, of the sampled token and of the `top` largest, and the normalizer. With
 * temperature 0 the sampled token is the largest; otherwise `top` >= 1 brings the largest.
 */
function fewLogits(tokens: number[], top: number, options: GenerateNext['options']): GenerateNext {
  return {
    token: true,
    logits: { filter: { tokens, includeSelected: true, includeTop: top } },
    totalLogitWeight: true,
    options,
  };
}

/**
 * log p(id) = logit(id) - max - log(sum(exp(logit - max))): llama.cpp sums the exponentials in
 * float32 over the vocabulary (ours summed the row in float64; see the test that compares them).
 */
function readFew(
  next: ControlledEvaluateOutput['next'] | undefined,
  topK: number,
): { logprobOf: (id: number) => number; top?: TokenLogprob[] } {
  const { logits, weight } = fewOf(next);
  // Best first, ties by id as ../local/sampling/sample.ts orders them.
  const sorted = [...logits].sort((a, b) => b[1] - a[1] || a[0] - b[0]);
  const max = sorted[0]![1];
  const logWeight = Math.log(weight);
  const logprobOf = (id: number): number => {
    const logit = logits.get(id);
    if (logit === undefined) throw new Error(`llama.cpp returned no logit for token ${id}`);
    return logit - max - logWeight;
  };
  if (topK <= 0) return { logprobOf };
  return { logprobOf, top: sorted.slice(0, topK).map(([id, logit]) => ({ id, logprob: logit - max - logWeight })) };
}

function fewOf(next: ControlledEvaluateOutput['next'] | undefined): { logits: Map<number, number>; weight: number } {
  const logits = next?.logits;
  const weight = next?.totalLogitWeight;
  // The largest logit's own term is exp(0) = 1.
  if (!logits || logits.size === 0 || weight === undefined || !(weight >= 1))
    throw new Error('llama.cpp returned no logits for a position that asked for them');
  return { logits, weight };
}

/**
 * One generation's steps on its sequence. After a window that could not decide, the next steps take
 * the whole row straight away (1, then 2, 4, ... up to MAX_ROW_STEPS while the windows keep failing),
 * so a flat distribution does not pay for both on every step.
 */
export class GenerationSteps {
  private readonly kind: StepKind;
  private rowSteps = 0;
  private backoff = 1;

  constructor(
    private readonly seq: LlamaContextSequence,
    private readonly s: SampleSettings,
    private readonly rng: Rng,
    private readonly vocabSize: number,
  ) {
    this.kind = stepKind(s, vocabSize);
  }

  /** Evaluates `ids` (the prompt, then each sampled token); the token after them. */
  async next(ids: readonly number[]): Promise<SampleResult> {
    let kind = this.kind;
    if (kind === 'window' && this.rowSteps > 0) {
      this.rowSteps--;
      kind = 'row';
    }
    const last = ids.length - 1;
    const out = await this.seq.controlledEvaluate(
      ids.map(
        (t, i): ControlledEvaluateInput =>
          i === last ? [t, { generateNext: nextTokenRequest(kind, this.s, this.rng) }] : t,
      ),
    );
    const r = nextToken(kind, out[last]?.next, this.s, this.rng, this.vocabSize);
    if (r) {
      if (kind === 'window') this.backoff = 1;
      return r;
    }
    this.rowSteps = this.backoff;
    this.backoff = Math.min(2 * this.backoff, MAX_ROW_STEPS);
    // The window could not decide: the last token again, for the whole row.
    const end = this.seq.nextTokenIndex;
    await this.seq.eraseContextTokenRanges([{ start: end - 1, end }]);
    const again = await this.seq.controlledEvaluate([[ids[last]!, { generateNext: { logits: true } }]]);
    return sampleToken(logitsRow(again[0]?.next.logits, this.vocabSize), this.s, this.rng);
  }
}
