// serve's learning settings: the config file's `learning`, `judge` and `training` sections, then
// the environment (secrets), then flags. Every value is checked before anything loads, and a
// wrong one names its source and what it should be.
//
//   { "port": 30000, "learning": { "method": "combine", "batchSize": 16 },
//     "judge": { "url": "http://127.0.0.1:8000/v1", "model": "judge", "votes": 3 },
//     "training": { "loraRank": 16, "lr": 0.0001 } }

import { isObject } from '../gateway/validate.js';
import { ConfigError } from '../gateway/config.js';
import { DEFAULT_LEARN, resolveLearnConfig, type LearnConfig } from '../learn/config.js';

export interface JudgeSetting {
  /** `self`: the served model's frozen base judges (embedded default); `openai`: any OpenAI-compatible endpoint. */
  kind: 'self' | 'openai';
  url: string | null;
  model: string | null;
  /** Bearer key for the judge endpoint (config file or OPENCLAW_RL_JUDGE_KEY; --judge-key works but shows in `ps`). */
  key: string | null;
  /** Evaluative votes per turn (and as many hint votes when the method uses hints). */
  votes: number;
  temperature: number;
  maxTokens: number;
  timeoutMs: number;
  retries: number;
  /**
   * `majority` (default): a hint needs most valid hint votes to be +1; `any`: one +1 vote with a
   * hint is enough (the original's rule; see docs/learning.md).
   */
  hintQuorum: 'majority' | 'any';
}

export interface TrainingSetting {
  /** LoRA rank; 0 trains every weight (full fine-tuning). */
  loraRank: number;
  /** LoRA alpha; default twice the rank. */
  loraAlpha: number | null;
  /** Learning rate; default 1e-4 with LoRA, 1e-5 for full fine-tuning. */
  lr: number | null;
  /** Passes over each batch (more than one lets PPO's clip act). */
  epochs: number;
  /** Samples per optimizer step; default the batch size (one step per batch). */
  miniBatchSize: number | null;
  /** Longest wait for serving at one yield point of a training step, in ms. */
  maxYieldMs: number;
}

export interface ServeLearning {
  /** false: record and serve only (--no-learning). */
  enabled: boolean;
  learn: LearnConfig;
  judge: JudgeSetting;
  training: TrainingSetting;
  /** Seconds between progress lines on stderr; 0 turns them off. */
  progressSeconds: number;
}

export const DEFAULT_JUDGE: JudgeSetting = {
  kind: 'self',
  url: null,
  model: null,
  key: null,
  votes: 3,
  temperature: 0.6,
  maxTokens: 512,
  timeoutMs: 60_000,
  retries: 2,
  hintQuorum: 'majority',
};
export const DEFAULT_TRAINING: TrainingSetting = {
  loraRank: 16,
  loraAlpha: null,
  lr: null,
  epochs: 1,
  miniBatchSize: null,
  maxYieldMs: 100,
};

type Section = Record<string, unknown>;
export interface LearningLayer {
  learning?: Section;
  judge?: Section;
  training?: Section;
}

const SECTION_KEYS: Record<keyof LearningLayer, string[]> = {
  learning: ['enabled', 'progressSeconds', ...Object.keys(DEFAULT_LEARN)],
  judge: Object.keys(DEFAULT_JUDGE).filter((k) => k !== 'kind'),
  training: Object.keys(DEFAULT_TRAINING),
};

/** Splits a parsed config file into the gateway's flat settings and the learning sections. */
export function splitConfigFile(
  value: unknown,
  source: string,
): { gateway: Record<string, unknown>; learning: LearningLayer } {
  if (!isObject(value)) throw new ConfigError(`${source}: the config must be a JSON object`);
  const gateway: Record<string, unknown> = {};
  const learning: LearningLayer = {};
  for (const [k, v] of Object.entries(value)) {
    if (k in SECTION_KEYS) {
      const name = k as keyof LearningLayer;
      if (!isObject(v)) throw new ConfigError(`${source}: "${name}" must be an object`);
      for (const key of Object.keys(v)) {
        if (!SECTION_KEYS[name].includes(key))
          throw new ConfigError(
            `${source}: unknown setting "${name}.${key}" (known: ${SECTION_KEYS[name].join(', ')})`,
          );
      }
      learning[name] = v;
    } else gateway[k] = v;
  }
  return { gateway, learning };
}

/** Later layers win. Throws ConfigError with the offending setting. */
export function resolveServeLearning(...layers: LearningLayer[]): ServeLearning {
  const merged: Required<LearningLayer> = { learning: {}, judge: {}, training: {} };
  for (const layer of layers) {
    for (const name of Object.keys(merged) as (keyof LearningLayer)[]) {
      for (const [k, v] of Object.entries(layer[name] ?? {})) if (v !== undefined) merged[name][k] = v;
    }
  }
  const { enabled = true, progressSeconds = 30, ...learnPart } = merged.learning;
  if (typeof enabled !== 'boolean')
    throw new ConfigError(`learning.enabled must be true or false, got ${JSON.stringify(enabled)}`);
  if (!(typeof progressSeconds === 'number' && Number.isFinite(progressSeconds) && progressSeconds >= 0))
    throw new ConfigError(`learning.progressSeconds must be a number >= 0, got ${JSON.stringify(progressSeconds)}`);
  let learn: LearnConfig;
  try {
    learn = resolveLearnConfig(learnPart as Partial<LearnConfig>);
  } catch (e) {
    throw new ConfigError((e as Error).message);
  }
  return {
    enabled,
    learn,
    judge: judgeSetting(merged.judge),
    training: trainingSetting(merged.training),
    progressSeconds,
  };
}

function judgeSetting(s: Section): JudgeSetting {
  const j = { ...DEFAULT_JUDGE, ...s } as JudgeSetting;
  const bad = (what: string, v: unknown) => new ConfigError(`judge.${what}, got ${JSON.stringify(v)}`);
  const optionalString = (k: 'url' | 'model' | 'key') => {
    if (j[k] !== null && (typeof j[k] !== 'string' || j[k] === '')) throw bad(`${k} must be a non-empty string`, j[k]);
  };
  optionalString('url');
  optionalString('model');
  optionalString('key');
  if (j.url !== null) {
    let url: URL;
    try {
      url = new URL(j.url);
    } catch {
      throw bad('url must be an http(s) URL such as http://127.0.0.1:8000/v1', j.url);
    }
    if (url.protocol !== 'http:' && url.protocol !== 'https:') throw bad('url must be an http(s) URL', j.url);
    if (j.model === null)
      throw new ConfigError(
        'judge.model is required with judge.url (--judge-model NAME): the model id the judge endpoint serves',
      );
    j.kind = 'openai';
  } else {
    if (j.model !== null)
      throw new ConfigError(
        'judge.model was set without judge.url: give the endpoint with --judge-url, or drop the model to use the self-judge',
      );
    j.kind = 'self';
  }
  if (!(Number.isInteger(j.votes) && j.votes >= 1 && j.votes <= 32))
    throw bad('votes must be an integer from 1 to 32', j.votes);
  if (!(typeof j.temperature === 'number' && j.temperature >= 0 && j.temperature <= 2))
    throw bad('temperature must be a number from 0 to 2', j.temperature);
  if (!(Number.isInteger(j.maxTokens) && j.maxTokens >= 1)) throw bad('maxTokens must be an integer >= 1', j.maxTokens);
  if (!(typeof j.timeoutMs === 'number' && j.timeoutMs > 0)) throw bad('timeoutMs must be a number > 0', j.timeoutMs);
  if (!(Number.isInteger(j.retries) && j.retries >= 0)) throw bad('retries must be an integer >= 0', j.retries);
  if (j.hintQuorum !== 'majority' && j.hintQuorum !== 'any')
    throw bad('hintQuorum must be "majority" or "any"', j.hintQuorum);
  return j;
}

function trainingSetting(s: Section): TrainingSetting {
  const t = { ...DEFAULT_TRAINING, ...s } as TrainingSetting;
  const bad = (what: string, v: unknown) => new ConfigError(`training.${what}, got ${JSON.stringify(v)}`);
  if (!(Number.isInteger(t.loraRank) && t.loraRank >= 0))
    throw bad('loraRank must be an integer >= 0 (0 = full fine-tuning)', t.loraRank);
  if (t.loraAlpha !== null && !(typeof t.loraAlpha === 'number' && t.loraAlpha > 0))
    throw bad('loraAlpha must be a number > 0', t.loraAlpha);
  if (t.lr !== null && !(typeof t.lr === 'number' && t.lr > 0 && t.lr < 1))
    throw bad('lr must be a number between 0 and 1', t.lr);
  if (!(Number.isInteger(t.epochs) && t.epochs >= 1)) throw bad('epochs must be an integer >= 1', t.epochs);
  if (t.miniBatchSize !== null && !(Number.isInteger(t.miniBatchSize) && t.miniBatchSize >= 1))
    throw bad('miniBatchSize must be an integer >= 1', t.miniBatchSize);
  if (!(typeof t.maxYieldMs === 'number' && t.maxYieldMs >= 0))
    throw bad('maxYieldMs must be a number >= 0', t.maxYieldMs);
  return t;
}

/** OPENCLAW_RL_JUDGE_KEY: the judge endpoint's key, kept out of the config file and flags. */
export function learningFromEnv(env: NodeJS.ProcessEnv): LearningLayer {
  return env.OPENCLAW_RL_JUDGE_KEY ? { judge: { key: env.OPENCLAW_RL_JUDGE_KEY } } : {};
}
