// openclaw-rl serve --model DIR|OWNER/NAME [options]
//
//   openclaw-rl serve --model models/tiny
//   openclaw-rl serve --model Qwen/Qwen3-0.6B --side-model side-model --method combine --batch-size 16
//   openclaw-rl serve --model models/qwen3 --judge-url http://127.0.0.1:8000/v1 --judge-model judge
//
// The whole product in one command: the OpenAI-compatible gateway records every main-line turn
// in DATA/openclaw-rl.sqlite, the judge scores each closed turn (the model's own frozen base by
// default), samples are built per method, and a background trainer publishes new versions while
// serving goes on. Checkpoints go to DATA/checkpoints and are resumed on the next start.

import { basename, join, resolve } from 'node:path';
import { networkInterfaces, totalmem } from 'node:os';
import { redactedConfig } from '../gateway/config.js';
import { jsonLogger } from '../gateway/log.js';
import { Gateway } from '../gateway/server.js';
import { ServeMetrics } from '../metrics/serve-metrics.js';
import { chatBackendOf, loadChatModel } from './chat-model.js';
import type { PrefixCacheStats } from '../engine/local/engine.js';
import {
  describeMemoryPlan,
  memoryPlan,
  type MemoryPlan,
  packableOn,
  trainableValuesOf,
} from '../engine/local/memory-plan.js';
import type { KernelInfo } from '../engine/local/kernels/kernels.js';
import type { Precision } from '../engine/local/precision.js';
import type { ModelConfig } from '../engine/local/model/config.js';
import { readModelFolder } from '../engine/local/model/folder.js';
import { resolveModel } from '../hub/index.js';
import { progressBar } from '../hub/progress-bar.js';
import { openStore } from '../store/store.js';
import { startRetention } from './serve-retention.js';
import { CliError, kvCacheDtypeFlag, precisionFlag, numberFlag, parseFlags, stringFlag } from './args.js';
import { advertisedUrl, startupBanner } from './banner.js';
import { startLearning, type RunningLearning } from './serve-learning.js';
import { torchLaunchOf } from './serve-torch.js';
import { openRemoteSampler, remoteSamplerChoice } from './sampler-choice.js';
import { llamaCppChoiceOf, openLlamaCppServing, type ServingSampler } from './serve-llama-cpp.js';
import type { ServeLearning } from './serve-config.js';
import { SERVE_FLAGS, SERVE_USAGE, serveSettings } from './serve-options.js';

export async function runServe(argv: string[]): Promise<number> {
  const v = parseFlags(argv, SERVE_FLAGS, SERVE_USAGE);
  if (v.help) {
    console.log(SERVE_USAGE);
    return 0;
  }
  const modelSpec = stringFlag(v, 'model', SERVE_USAGE);
  const { gateway: config, learning } = serveSettings(v);
  const torchLaunch = torchLaunchOf(v);
  const remote = remoteSamplerChoice(v);
  const llamaCpp = llamaCppChoiceOf(v);

  // A local folder, or a Hugging Face id (owner/name[@revision]) downloaded once into the cache.
  const bar = progressBar();
  let modelDir: string;
  try {
    modelDir = resolve(await resolveModel(modelSpec, { onProgress: (p) => bar.update(p) }));
  } finally {
    bar.done();
  }
  const fromHub = modelDir !== resolve(modelSpec);
  const logger = jsonLogger((line) => process.stdout.write(line), config.logContent);
  const store = openStore({
    dir: config.dataDir,
    durability: config.durability,
    checkpoints: 'background',
    onCheckpointFailure: (message) =>
      logger.event('error', {
        message: `background WAL checkpoints failed, checkpointing inline from now on: ${message}`,
      }),
  });
  const retention = startRetention(store, config.retentionDays, logger);
  const threads = numberFlag(v, 'threads', { integer: true, min: 1 });
  const kvCacheMb = numberFlag(v, 'kv-cache-mb', { min: 0 });
  const precision = precisionFlag(v);
  const kvCacheDtype = kvCacheDtypeFlag(v);
  const cfg = readModelFolder(modelDir).config;
  const model = await loadChatModel(modelDir, {
    ...(kvCacheMb === undefined ? {} : { kvCacheBytes: Math.floor(kvCacheMb * 2 ** 20) }),
    precision,
    kvCacheDtype,
    ...(threads === undefined ? {} : { threads }),
  });
  const engineInfo = {
    precision: model.engine.info.precision,
    kvDtype: model.engine.info.kvDtype,
    kernels: model.engine.info.kernelInfo,
  };
  let plan: MemoryPlan;
  try {
    plan = planMemory(
      cfg,
      model.engine.info.parameters,
      model.engine.info.kvCacheBytes,
      learning,
      engineInfo.precision,
      packableOn(engineInfo.kernels) && !torchLaunch,
    );
  } catch (e) {
    await model.engine.close();
    store.close();
    throw e;
  }
  logger.event('memory_plan', { ...plan, engine: engineInfo });
  // A fast path (prompt-piece cache, direct template rendering) that disagreed with the exact path
  // turns itself off; say so, with positions and lengths only, never text.
  const local = chatBackendOf(model, config.modelId ?? (fromHub ? modelSpec.split('@')[0]! : basename(modelDir)), {
    onMismatch: (detail) => logger.event('prompt_fast_path_off', { detail }),
  });
  const router = remote && openRemoteSampler(remote, { name: modelSpec, contextLength: local.contextLength });
  let backend = router ? { ...local, sampler: router } : local;
  let running: RunningLearning | null = null;
  let serving: ServingSampler | null = null;
  const metrics = new ServeMetrics({
    learning: learning.enabled ? () => running?.loop.status() ?? null : undefined,
    prefixCache: () => model.engine.prefixCacheStats(),
    servingVersion: () => model.engine.version,
  });
  try {
    if (llamaCpp) {
      const log = (e: string, f: Record<string, unknown>) => logger.event(e, f);
      ({ backend, serving } = await openLlamaCppServing({
        choice: llamaCpp,
        modelDir,
        dataDir: config.dataDir,
        backend,
        threads,
        log,
      }));
    }
    if (learning.enabled) {
      running = await startLearning({
        model,
        backend,
        store,
        settings: learning,
        checkpointDir: join(config.dataDir, 'checkpoints'),
        dataDir: config.dataDir,
        log: (e, f) => {
          logger.event(e, f);
          metrics.learningEvent(e, f);
        },
        activationBudgetBytes: plan.activationBudgetBytes,
        packFrozenWeights: plan.packedWeightsBytes > 0,
        torch: torchLaunch && { launch: torchLaunch, dir: join(config.dataDir, 'torch-learner') },
        remote: router && { sampler: router, versionsDir: join(config.dataDir, 'versions') },
        serving,
      });
    }
  } catch (e) {
    store.close();
    await backend.close();
    throw e;
  }
  const status = () => ({
    ...(running ? running.loop.status() : { version: model.engine.version, steps: 0, learning: 'disabled' }),
    prefixCache: model.engine.prefixCacheStats(),
    ...(router ? { samplers: router.health() } : {}),
    memory: plan,
    engine: engineInfo,
  });
  const versions = running && {
    list: () => running!.loop.versions(),
    rollback: (target: number) => running!.loop.rollback(target, 'admin'),
  };
  const gateway = new Gateway({ backend, store, config, logger, status, metrics, ...(versions ? { versions } : {}) });
  let address: { host: string; port: number };
  try {
    address = await gateway.listen();
  } catch (e) {
    // Release the engine and learner workers too, or the process would stay alive without a port.
    await running?.close();
    store.close();
    await backend.close();
    const err = e as NodeJS.ErrnoException;
    const hint =
      err.code === 'EADDRINUSE'
        ? ': the port is in use (another serve?); stop it or choose another --port'
        : err.code === 'EADDRNOTAVAIL'
          ? ': this machine has no such address; check --host'
          : '';
    throw new CliError(`cannot listen on ${config.host}:${config.port}${hint} (${err.message})`);
  }
  const url = advertisedUrl(address.host, address.port, networkInterfaces());
  logger.event('listening', {
    url,
    model: backend.modelId,
    store: store.path,
    config: redactedConfig(config),
    learning: running ? running.summary : 'disabled',
  });
  process.stderr.write(
    startupBanner({
      url,
      contextLength: backend.contextLength,
      mainModel: backend.modelId,
      sideModel: config.sideModels[0] ?? null,
      apiKeyRequired: config.apiKeys.length > 0,
      learning: running ? running.summary : 'off (--no-learning): turns are recorded, nothing is trained',
      store: store.path,
      memory: `${describeMemoryPlan(plan)}; GEMMs ${engineInfo.precision} (${describeKernels(engineInfo.kernels)}), keys and values ${engineInfo.kvDtype}`,
    }),
  );
  const progress =
    running && learning.progressSeconds > 0
      ? setInterval(
          () => process.stderr.write(`${running!.progressLine()}${cacheLine(model.engine.prefixCacheStats())}\n`),
          learning.progressSeconds * 1000,
        ).unref()
      : null;

  await new Promise<void>((done) => {
    const stop = (signal: string) => {
      logger.event('stopping', { signal });
      process.off('SIGINT', stop).off('SIGTERM', stop);
      done();
    };
    process.on('SIGINT', stop).on('SIGTERM', stop);
  });
  if (progress) clearInterval(progress);
  await running?.stopJudging();
  await gateway.close();
  await running?.close();
  await retention?.stop();
  store.close();
  await backend.close();
  logger.event('stopped');
  return 0;
}

/**
 * The memory plan for this model and these settings; with learning on, it also fills in
 * learn.maxTrainTokens when neither the config nor a flag set it. Refuses to start learning when
 * not even a short sample fits.
 */
function planMemory(
  cfg: ModelConfig,
  parameters: number,
  kvCacheBytes: number,
  learning: ServeLearning,
  precision: Precision,
  packable: boolean,
): MemoryPlan {
  const rank = learning.enabled ? learning.training.loraRank : 0;
  const trainableValues = learning.enabled ? trainableValuesOf(cfg, parameters, rank) : 0;
  const given = learning.learn.maxTrainTokens ?? undefined;
  const plan = memoryPlan({
    cfg,
    totalBytes: totalmem(),
    parameters,
    loraRank: rank,
    trainableValues,
    kvCacheBytes,
    precision,
    packable,
    ...(given ? { maxTrainTokens: given } : {}),
  });
  if (learning.enabled) {
    if (plan.maxTrainTokens < 2) {
      throw new CliError(
        `not enough memory to train any sample (${describeMemoryPlan(plan)}): lower --kv-cache-mb, use LoRA (--lora-rank), or --no-learning`,
      );
    }
    learning.learn.maxTrainTokens = plan.maxTrainTokens;
  }
  return plan;
}

function describeKernels(k: KernelInfo): string {
  return `${k.gemm}, ${k.isa}, ${k.bf16Instructions ? 'bf16 instructions' : 'no bf16 instructions'}`;
}

/** The prefix cache's part of the progress line: the share of prompt tokens it served. */
function cacheLine(s: PrefixCacheStats): string {
  const total = s.hitTokens + s.missTokens;
  if (s.budgetBytes === 0 || total === 0) return '';
  return ` · prefix cache ${Math.round((100 * s.hitTokens) / total)}% of ${total} prompt tokens (${Math.round(s.bytes / 2 ** 20)} MB)`;
}
