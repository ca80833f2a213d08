// `sim pretrain`: the sim base policy, made here from nothing. A model folder is initialised with
// a tokenizer trained on the synthetic corpus, then every weight is trained on the corpus
// (supervised: advantage 1 on every reply token, so the policy-loss gradient is that of -log p).
// Deterministic in the options; the result is cached under a key of everything it depends on.

import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import type { ChatMessage, ToolSpec } from '../chat/messages.js';
import { CALCULATOR_TOOL } from '../env/tool-call.js';
import type { TrainingSample } from '../engine/types.js';
import { loadKernels } from '../engine/local/kernels/index.js';
import { writeModelFolder, type ModelShape } from '../engine/local/model/init.js';
import { saveModelFolder } from '../engine/local/model/save.js';
import { loadWeights } from '../engine/local/model/weights.js';
import { readModelFolder } from '../engine/local/model/folder.js';
import { ChatTemplate } from '../chat/tokenizer/chat-template.js';
import { TextTokenizer } from '../chat/tokenizer/tokenizer.js';
import { DEFAULT_LEARNER, LearnerCore } from '../engine/local/train/learner.js';
import { buildCorpus, DEFAULT_CORPUS, type CorpusOptions } from './corpus.js';
import { loadProblems } from './problems.js';
import { rng } from './random.js';
import { RUBRIC_VERSION } from './rubrics.js';
import { conversationSample } from './samples.js';
import { buildToolCorpus, DEFAULT_TOOL_CORPUS, type ToolCorpusOptions } from './tool-corpus.js';
import { DEFAULT_PPO } from '../learn/ppo.js';

export interface PretrainOptions {
  shape: ModelShape;
  tokenizerVocab: number;
  corpus: CorpusOptions;
  /** Pre-train on tool-call traces (tool-corpus.ts) instead of the personalization conversations. */
  toolCorpus?: ToolCorpusOptions;
  epochs: number;
  batchSize: number;
  lr: number;
  warmupSteps: number;
  seed: number;
  /** Sampling defaults written to generation_config.json: what `serve` uses when a request sets none. */
  generation: { temperature: number; top_p: number };
}

/**
 * About 0.5M parameters and a vocabulary trained on the corpus: pre-training (three passes over
 * some 1.4M tokens) takes about ten minutes on two cores, and a training step of 16 samples about
 * a second, so the benchmark (nine runs) fits in well under an hour.
 */
const SIM_SHAPE: ModelShape = {
  family: 'qwen3',
  vocabSize: 1024,
  hiddenSize: 128,
  intermediateSize: 384,
  numLayers: 2,
  numHeads: 4,
  numKvHeads: 2,
  headDim: 32,
  maxPositionEmbeddings: 1024,
  tieWordEmbeddings: true,
};

export const PRETRAIN_PRESETS: Record<string, PretrainOptions> = {
  sim: {
    shape: SIM_SHAPE,
    tokenizerVocab: 1024,
    corpus: DEFAULT_CORPUS,
    epochs: 3,
    batchSize: 32,
    lr: 3e-3,
    warmupSteps: 20,
    seed: 1,
    generation: { temperature: 1, top_p: 1 },
  },
  /** For CI: a fraction of the corpus, one pass; learns the style mix and feedback, writes rougher text. */
  smoke: {
    shape: SIM_SHAPE,
    tokenizerVocab: 1024,
    corpus: { ...DEFAULT_CORPUS, conversations: 2000 },
    epochs: 1,
    batchSize: 12,
    lr: 3e-3,
    warmupSteps: 10,
    seed: 1,
    generation: { temperature: 1, top_p: 1 },
  },
  /** The agents benchmark's base (bench/agents.ts): calls the calculator on arithmetic word problems. */
  agents: {
    shape: SIM_SHAPE,
    tokenizerVocab: 1024,
    corpus: DEFAULT_CORPUS,
    toolCorpus: DEFAULT_TOOL_CORPUS,
    epochs: 4,
    batchSize: 16,
    lr: 3e-3,
    warmupSteps: 10,
    seed: 1,
    generation: { temperature: 1, top_p: 1 },
  },
  /** For CI (test/bench-agents-smoke.test.ts): a sixth of the traces, one pass; calls the tool, copies less well. */
  'agents-smoke': {
    shape: SIM_SHAPE,
    tokenizerVocab: 1024,
    corpus: DEFAULT_CORPUS,
    toolCorpus: { ...DEFAULT_TOOL_CORPUS, traces: 1000 },
    epochs: 1,
    batchSize: 8,
    lr: 3e-3,
    warmupSteps: 10,
    seed: 1,
    generation: { temperature: 1, top_p: 1 },
  },
};

/** The conversations a preset pre-trains on, and the tools they are rendered with. */
function corpusOf(o: PretrainOptions): { conversations: ChatMessage[][]; tools?: ToolSpec[] } {
  if (o.toolCorpus) return { conversations: buildToolCorpus(o.toolCorpus), tools: [CALCULATOR_TOOL] };
  return { conversations: buildCorpus(loadProblems().train, o.corpus) };
}

export interface PretrainProgress {
  step: number;
  steps: number;
  /** Mean -log p per reply token on held-out conversations, when measured (every few steps). */
  heldOutNll?: number;
  tokensPerSecond: number;
}

/** The cache key: every option and the corpus itself (any change to the writers, users, hints or traces counts). */
export function pretrainKey(o: PretrainOptions): string {
  const h = createHash('sha256').update(JSON.stringify(o));
  for (const conversation of corpusOf(o).conversations) h.update(JSON.stringify(conversation));
  return h.digest('hex').slice(0, 12);
}

/** What pretrain.json in a sim model folder records. */
export interface PretrainRecord {
  options: PretrainOptions;
  key: string;
  rubricVersion: number;
  steps: number;
  heldOutNll: number;
  seconds: number;
}

/** The cached base model of `preset` (pre-trained first when missing): its folder and record. */
export function simBaseModel(
  preset: string,
  cacheDir: string,
  onProgress?: (p: PretrainProgress) => void,
): { dir: string; cached: boolean; record: PretrainRecord } {
  const o = PRETRAIN_PRESETS[preset];
  if (!o) throw new Error(`unknown sim preset "${preset}"; choose one of ${Object.keys(PRETRAIN_PRESETS).join(', ')}`);
  const dir = resolve(cacheDir, `${preset}-${pretrainKey(o)}`);
  const cached = existsSync(join(dir, 'pretrain.json'));
  if (!cached) pretrain(dir, o, onProgress);
  return { dir, cached, record: JSON.parse(readFileSync(join(dir, 'pretrain.json'), 'utf8')) as PretrainRecord };
}

/** Writes the pre-trained base model folder to `out` (atomically); returns the held-out NLL at the end. */
export function pretrain(
  out: string,
  o: PretrainOptions,
  onProgress: (p: PretrainProgress) => void = () => {},
): { heldOutNll: number } {
  const started = performance.now();
  const { conversations, tools } = corpusOf(o);
  const tmp = `${out}.tmp-${process.pid}`;
  rmSync(tmp, { recursive: true, force: true });
  mkdirSync(dirname(out), { recursive: true });
  try {
    const init = join(tmp, 'init');
    initialFolder(init, conversations, o, tools);
    const { params, steps, heldOutNll } = trainOnCorpus(init, conversations, o, onProgress, tools);
    saveModelFolder(join(tmp, 'model'), init, params);
    const record: PretrainRecord = {
      options: o,
      key: pretrainKey(o),
      rubricVersion: RUBRIC_VERSION,
      steps,
      heldOutNll,
      seconds: (performance.now() - started) / 1000,
    };
    writeFileSync(join(tmp, 'model', 'pretrain.json'), `${JSON.stringify(record, null, 2)}\n`);
    if (existsSync(out)) rmSync(out, { recursive: true });
    renameSync(join(tmp, 'model'), out);
    return { heldOutNll };
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
}

/** A randomly initialised folder whose tokenizer is trained on the corpus, with the sim's sampling defaults. */
function initialFolder(
  dir: string,
  conversations: readonly ChatMessage[][],
  o: PretrainOptions,
  tools?: readonly ToolSpec[],
): void {
  // A slice of the corpus is enough for the tokenizer's merges, and quick. With tools, the tool
  // calls' JSON and the tool listing are text the model reads and writes too.
  const texts = conversations
    .slice(0, 1000)
    .map((c) =>
      [
        ...(tools ? [JSON.stringify(tools)] : []),
        ...c.map((m) => `${m.content}${(m.tool_calls ?? []).map((t) => JSON.stringify(t.function)).join('')}`),
      ].join('\n'),
    );
  writeModelFolder({
    out: dir,
    shape: o.shape,
    seed: o.seed,
    dtype: 'F32',
    shards: 1,
    tokenizerVocab: o.tokenizerVocab,
    corpus: texts,
    initStd: 0.02,
  });
  const generation = join(dir, 'generation_config.json');
  writeFileSync(
    generation,
    `${JSON.stringify({ ...JSON.parse(readFileSync(generation, 'utf8')), ...o.generation }, null, 2)}\n`,
  );
}

/** Supervised training of every weight of the folder's model on the conversations (64 held out to measure). */
function trainOnCorpus(
  dir: string,
  conversations: readonly ChatMessage[][],
  o: PretrainOptions,
  onProgress: (p: PretrainProgress) => void,
  tools?: readonly ToolSpec[],
) {
  const folder = readModelFolder(dir);
  const tokenizerConfig = JSON.parse(readFileSync(join(dir, 'tokenizer_config.json'), 'utf8')) as object;
  const codec = {
    tokenizer: TextTokenizer.fromJson(
      JSON.parse(readFileSync(join(dir, 'tokenizer.json'), 'utf8')) as object,
      tokenizerConfig,
    ),
    template: ChatTemplate.fromTokenizerConfig(tokenizerConfig, join(dir, 'tokenizer_config.json')),
  };
  const samples = conversations.map((c) => conversationSample(c, codec, tools));
  const heldOut = samples.splice(0, 64);
  // The learner reads the learning rate from this record at every step: it decays linearly to a
  // tenth after the warm-up (checked against what each step reports).
  const optimizer = { ...DEFAULT_LEARNER.optimizer, lr: o.lr, warmupSteps: o.warmupSteps, weightDecay: 0.01 };
  const core = new LearnerCore(
    folder.config,
    loadWeights(dir, folder.config),
    {
      ...DEFAULT_LEARNER,
      mode: { kind: 'full' },
      optimizer,
      // Each batch is one forward/backward, as before micro-batching moved into forwardBackward.
      microBatchTokens: Infinity,
      seed: o.seed,
    },
    loadKernels(),
  );
  const nll = () => {
    let sum = 0,
      n = 0;
    core.logprobs(heldOut).forEach((lp, i) =>
      lp.forEach((x, t) => {
        if (heldOut[i]!.mask![t]) {
          sum -= x;
          n++;
        }
      }),
    );
    return sum / n;
  };

  const order = samples.map((_, i) => i);
  const shuffle = rng(o.seed ^ 0x5eed);
  const steps = o.epochs * Math.floor(samples.length / o.batchSize);
  let step = 0;
  for (let epoch = 0; epoch < o.epochs; epoch++) {
    for (let i = order.length - 1; i > 0; i--) {
      const j = Math.floor(shuffle.next() * (i + 1));
      [order[i], order[j]] = [order[j]!, order[i]!];
    }
    for (let b = 0; b + o.batchSize <= order.length; b += o.batchSize) {
      const batch: TrainingSample[] = order.slice(b, b + o.batchSize).map((k) => samples[k]!);
      const t0 = performance.now();
      optimizer.lr = o.lr * (1 - (0.9 * Math.max(0, step - o.warmupSteps)) / Math.max(1, steps - o.warmupSteps));
      core.forwardBackward(batch, DEFAULT_PPO.loss);
      const applied = core.optimStep();
      if (step >= o.warmupSteps && applied.lr !== optimizer.lr)
        throw new Error(`pretraining: the optimizer used lr ${applied.lr}, not the scheduled ${optimizer.lr}`);
      const tokens = batch.reduce((a, s) => a + s.promptIds.length + s.completionIds.length, 0);
      step++;
      const measure = step % 25 === 0 || step === steps;
      onProgress({
        step,
        steps,
        tokensPerSecond: tokens / ((performance.now() - t0) / 1000),
        ...(measure ? { heldOutNll: nll() } : {}),
      });
    }
  }
  return { params: core.params, steps, heldOutNll: nll() };
}
