// serve's command line: its usage text, its flags, and how the flags, the environment and a
// config file combine into the gateway's and the learning loop's settings.

import { readFileSync } from 'node:fs';
import {
  checkPartialConfig,
  ConfigError,
  configFromEnv,
  resolveConfig,
  type GatewayConfig,
} from '../gateway/config.js';
import { CliError, numberFlag } from './args.js';
import { LLAMA_CPP_FLAGS, LLAMA_CPP_USAGE } from './serve-llama-cpp.js';
import { SAMPLER_FLAGS, SAMPLER_USAGE } from './sampler-choice.js';
import { TORCH_FLAGS, TORCH_USAGE } from './serve-torch.js';
import {
  learningFromEnv,
  resolveServeLearning,
  splitConfigFile,
  type LearningLayer,
  type ServeLearning,
} from './serve-config.js';

export const SERVE_USAGE = `usage: openclaw-rl serve --model DIR|OWNER/NAME[@REVISION] [options]

serving:
  --host ADDR             default 127.0.0.1 (off loopback needs API keys)
  --port N                default 30000
  --data DIR              store and checkpoints, default openclaw-rl-data
  --config FILE           JSON config: gateway settings plus "learning", "judge" and "training"
                          sections (see docs/learning.md)
  --model-id ID           id listed by GET /v1/models, default the model folder's name
  --side-model ID         requests for this model id are side turns (repeatable)
  --main-model ID         requests for this model id are main turns (repeatable)
  --default-turn-kind K   main or side (default side) for requests nothing identifies
  --session-idle SECONDS  close a session's last turn after this idle time (default 3600)
  --durability MODE       normal (survives a crash, default) or full (also a power loss)
  --retention-days D      purge turns completed more than D days ago, with their judgments and samples,
                          at start and hourly (default: keep everything; see docs/gateway.md)
  --admin-key KEY         enables /admin routes (GET /admin/status); prefer OPENCLAW_RL_ADMIN_KEYS
  --metrics-key KEY       reads GET /metrics only (Prometheus; see docs/metrics.md); prefer
                          OPENCLAW_RL_METRICS_KEYS
  --log-content           include conversation text in the logs
  --dashboard-content     show conversation text on the dashboard (/dashboard, see docs/dashboard.md)
  --threads N             BLAS threads
  --precision P           fp32, bf16 (GEMMs from bf16-rounded inputs, decode from bf16 weights), int8 (as
                          bf16, but decode from int8 weights) or auto (default: int8 where the native
                          kernels have bf16 instructions and AVX512-VNNI, else bf16 where they have
                          bf16 instructions, else fp32)
  --kv-cache-dtype D      the sequences' keys and values: bf16, int8 (1.125 bytes a value, about half of
                          bf16's: faster decode at long contexts, more prompts in the prefix cache, for a
                          larger rounding error), f32, or auto (default: f32 at fp32, else bf16)
  --kv-cache-mb N         prefix cache for keys and values, in MB (default: 4 full contexts, at most a
                          quarter of the memory; 0 = off): a prompt that repeats an earlier one's start
                          (the same session's previous turn, the judge's votes) computes only the rest

learning:
  --method M              rl, opd, combine or steps (default combine); steps: general agents with outcomes
                          (POST /v1/feedback), rewards per step grouped by task and step index
  --reward R              steps only: integrated (outcome + mean PRM vote, default) or outcome
  --batch-size N          samples per training batch and published version (default 16)
  --rl-weight X           weight of the judge's score in the advantage (default 1)
  --opd-weight X          weight of the teacher-minus-policy log-prob term (default 1)
  --judge self            the served model's frozen base judges (default)
  --judge-url URL         an OpenAI-compatible judge endpoint instead, e.g. http://127.0.0.1:8000/v1
  --judge-model NAME      the judge endpoint's model id (required with --judge-url)
  --judge-key KEY         the judge endpoint's key; prefer OPENCLAW_RL_JUDGE_KEY
  --judge-votes M         votes per turn, majority wins (default 3)
  --lora-rank R           LoRA rank (default 16); 0 = full fine-tuning
  --lr X                  learning rate (default 1e-4 LoRA, 1e-5 full)
  --max-stale N           drop samples more than N versions old (default 4)
  --checkpoint-every N    batches between checkpoints (default 1)
  --keep-versions K       version folders kept for rollback (default: all with LoRA, 3 with full)
  --rollback-guard        roll a version back when the judge scores it worse (off; docs/learning.md)
  --guard-window W        judged turns compared per version (default 32)
  --guard-margin M        mean score drop (-1..1 scale) beyond noise that rolls back (default 0.1)
  --guard-alpha A         the guard's one-sided significance level (default 0.05)
  --max-train-tokens N    longest sample trained (prompt + completion); longer turns are judged but
                          not trained (too_long). Default: what one training step can hold in the
                          memory left after weights, learner state, prefix cache and runtime (printed)
  --progress-seconds S    progress line on stderr every S seconds (default 30; 0 = off)
  --no-learning           record and serve only${TORCH_USAGE}${SAMPLER_USAGE}${LLAMA_CPP_USAGE}

--model takes a local model folder or a Hugging Face id (e.g. Qwen/Qwen3-0.6B), downloaded once
into the Hugging Face cache (HF_HUB_CACHE, HF_HOME; HF_TOKEN for gated models; HF_ENDPOINT for a
mirror; HF_HUB_OFFLINE=1 to use the cache only).

environment: OPENCLAW_RL_API_KEYS, OPENCLAW_RL_ADMIN_KEYS, OPENCLAW_RL_METRICS_KEYS (comma-separated),
OPENCLAW_RL_JUDGE_KEY, OPENCLAW_RL_SAMPLER_API_KEY`;

export const SERVE_FLAGS = {
  model: { type: 'string' },
  host: { type: 'string' },
  port: { type: 'string' },
  data: { type: 'string' },
  config: { type: 'string' },
  'model-id': { type: 'string' },
  'side-model': { type: 'string', multiple: true },
  'main-model': { type: 'string', multiple: true },
  'default-turn-kind': { type: 'string' },
  'session-idle': { type: 'string' },
  durability: { type: 'string' },
  'retention-days': { type: 'string' },
  'log-content': { type: 'boolean' },
  'dashboard-content': { type: 'boolean' },
  threads: { type: 'string' },
  'admin-key': { type: 'string' },
  'metrics-key': { type: 'string' },
  precision: { type: 'string' },
  method: { type: 'string' },
  reward: { type: 'string' },
  'batch-size': { type: 'string' },
  judge: { type: 'string' },
  'judge-url': { type: 'string' },
  'judge-model': { type: 'string' },
  'judge-key': { type: 'string' },
  'judge-votes': { type: 'string' },
  'lora-rank': { type: 'string' },
  lr: { type: 'string' },
  'max-stale': { type: 'string' },
  'checkpoint-every': { type: 'string' },
  'keep-versions': { type: 'string' },
  'rollback-guard': { type: 'boolean' },
  'guard-window': { type: 'string' },
  'guard-margin': { type: 'string' },
  'guard-alpha': { type: 'string' },
  'progress-seconds': { type: 'string' },
  'no-learning': { type: 'boolean' },
  'rl-weight': { type: 'string' },
  'opd-weight': { type: 'string' },
  'kv-cache-mb': { type: 'string' },
  'kv-cache-dtype': { type: 'string' },
  'max-train-tokens': { type: 'string' },
  ...TORCH_FLAGS,
  ...SAMPLER_FLAGS,
  ...LLAMA_CPP_FLAGS,
} as const;

/** Defaults < config file < environment < flags, for the gateway and the learning loop alike. */
export function serveSettings(v: Record<string, string | boolean | undefined>): {
  gateway: GatewayConfig;
  learning: ServeLearning;
} {
  const num = (name: string, o: { integer?: boolean; min?: number; max?: number } = {}) => numberFlag(v, name, o);
  const flags: Partial<GatewayConfig> = {
    host: v.host as string | undefined,
    port: num('port', { integer: true, min: 0, max: 65535 }),
    dataDir: v.data as string | undefined,
    modelId: v['model-id'] as string | undefined,
    sideModels: v['side-model'] as unknown as string[] | undefined,
    mainModels: v['main-model'] as unknown as string[] | undefined,
    defaultTurnKind: v['default-turn-kind'] as GatewayConfig['defaultTurnKind'] | undefined,
    sessionIdleSeconds: num('session-idle', { integer: true, min: 1 }),
    durability: v.durability as GatewayConfig['durability'] | undefined,
    logContent: v['log-content'] ? true : undefined,
    dashboardContent: v['dashboard-content'] ? true : undefined,
    retentionDays: num('retention-days', { min: 0 }),
  };
  if (v.judge !== undefined && v.judge !== 'self')
    throw new CliError(
      `--judge takes only "self" (the served model's frozen base); for another model use --judge-url URL --judge-model NAME`,
    );
  if (v.judge === 'self' && v['judge-url'] !== undefined)
    throw new CliError('--judge self and --judge-url contradict each other: choose one judge');
  const learningFlags: LearningLayer = {
    learning: {
      enabled: v['no-learning'] ? false : undefined,
      method: v.method,
      stepReward: v.reward,
      batchSize: num('batch-size', { integer: true, min: 1 }),
      wRl: num('rl-weight', { min: 0 }),
      wOpd: num('opd-weight', { min: 0 }),
      maxStaleVersions: num('max-stale', { integer: true, min: 0 }),
      checkpointEvery: num('checkpoint-every', { integer: true, min: 1 }),
      progressSeconds: num('progress-seconds', { min: 0 }),
      maxTrainTokens: num('max-train-tokens', { integer: true, min: 2 }),
      keepVersions: num('keep-versions', { integer: true, min: 2 }),
      rollbackGuard: v['rollback-guard'] ? true : undefined,
      guardWindow: num('guard-window', { integer: true, min: 2 }),
      guardMargin: num('guard-margin', { min: 0 }),
      guardAlpha: num('guard-alpha', { min: 0, max: 1 }),
    },
    // --judge self overrides a judge endpoint from the config file.
    judge: {
      url: v.judge === 'self' ? null : v['judge-url'],
      model: v.judge === 'self' ? null : v['judge-model'],
      key: v['judge-key'],
      votes: num('judge-votes', { integer: true, min: 1 }),
    },
    training: { loraRank: num('lora-rank', { integer: true, min: 0 }), lr: num('lr', { min: 0 }) },
  };
  try {
    const file = v.config ? readConfig(v.config as string) : { gateway: {}, learning: {} };
    const env = configFromEnv(process.env);
    // A key flag adds to the keys of the environment (else the config file).
    const keyFlag = (flag: string, key: 'adminKeys' | 'metricsKeys'): Partial<GatewayConfig> =>
      v[flag] ? { [key]: [...(env[key] ?? (file.gateway[key] as string[] | undefined) ?? []), v[flag] as string] } : {};
    const gateway = resolveConfig(
      checkPartialConfig(file.gateway, v.config as string),
      env,
      flags,
      keyFlag('admin-key', 'adminKeys'),
      keyFlag('metrics-key', 'metricsKeys'),
    );
    const learning = resolveServeLearning(file.learning, learningFromEnv(process.env), learningFlags);
    return { gateway, learning };
  } catch (e) {
    if (e instanceof ConfigError) throw new CliError(e.message);
    throw e;
  }
}

function readConfig(path: string): ReturnType<typeof splitConfigFile> {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (e) {
    throw new ConfigError(`cannot read config file ${path}: ${(e as Error).message}`);
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (e) {
    throw new ConfigError(`${path} is not valid JSON: ${(e as Error).message}`);
  }
  return splitConfigFile(value, path);
}
