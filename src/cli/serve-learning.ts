// serve's learning half, wired from its parts: the learner on the served engine (resumed from the
// last checkpoint, which the store is reconciled against and which is published at once), the
// judge client, the teacher, and the loop that drives them. Every version is also written to
// DATA/versions/v-N/ (kept per --keep-versions) so a rollback can restore it, and DATA/learning.pid
// tells `versions rollback` that a serve is running on DATA and will apply its request.

import { join } from 'node:path';
import type { ChatModel } from './chat-model.js';
import { LocalLearner, type Publication } from '../engine/local/learner.js';
import type { TorchLaunch } from '../engine/torch/launcher.js';
import type { SupervisedTorchLearner } from '../engine/torch/supervised.js';
import type { LearnerConfig } from '../engine/local/train/learner.js';
import { DEFAULT_LEARNER } from '../engine/local/train/learner.js';
import { renderIdsOf } from '../chat/prompt-codec.js';
import type { ChatBackend } from '../gateway/backend.js';
import {
  DEFAULT_HINT_CHOICE,
  LocalJudgeClient,
  OpenAIJudgeClient,
  type JudgeClient,
  type JudgeLog,
} from '../judge/index.js';
import { LearningLoop } from '../learn/loop.js';
import { DEFAULT_PPO, trainBatch, type BatchSample, type PpoConfig } from '../learn/ppo.js';
import { progressLine } from '../learn/status.js';
import type { Sampler, StepMetrics } from '../engine/types.js';
import type { Store } from '../store/store.js';
import type { ServeLearning } from './serve-config.js';
import type { LocalEngine } from '../engine/local/engine.js';
import { openTorchLearner, unavailablePolicy } from './serve-torch.js';
import { publishToServing, type ServingSampler } from './serve-llama-cpp.js';
import { removeRunningMarker, writeRunningMarker } from './versions-marker.js';

export interface RunningLearning {
  loop: LearningLoop;
  /** null: --learner torch could not start (logged; serving and judging go on). */
  learner: LocalLearner | SupervisedTorchLearner | null;
  /** One line for the banner and the startup log: method, judge, batch, training mode. */
  summary: string;
  progressLine(): string;
  /** Stops taking turns to the judge (before the gateway drains). */
  stopJudging(): Promise<void>;
  close(): Promise<void>;
}

export async function startLearning(a: {
  model: ChatModel;
  backend: ChatBackend;
  store: Store;
  settings: ServeLearning;
  checkpointDir: string;
  /** Where the version folders (DATA/versions) and the running marker (DATA/learning.pid) go. */
  dataDir: string;
  log: JudgeLog;
  /** What one training step's buffers may take (the memory plan's share). */
  activationBudgetBytes: number;
  /** The memory plan left room for the frozen weights' packed copies (LearnerConfig.packFrozenWeights). */
  packFrozenWeights?: boolean;
  /** --learner torch: the PyTorch learner, under torch.dir, trains instead. */
  torch?: { launch: TorchLaunch; dir: string } | null;
  /** --sampler vllm|sglang: versions are written to versionsDir and loaded by `sampler` too. */
  remote?: { sampler: Sampler; versionsDir: string } | null;
  /** --sampler llama-cpp: it serves, judges and scores; versions go to it through a folder. */
  serving?: ServingSampler | null;
}): Promise<RunningLearning> {
  const { model, backend, store, settings } = a;
  const engine = model.engine;
  // Never reuse a version number a turn or step already carries, even one the checkpoint lacks.
  const versionAfter = Math.max(engine.version, store.learning.maxVersion());
  let learner: LocalLearner | SupervisedTorchLearner | null = null;
  let unavailable: string | null = null;
  const ppo = ppoConfig(settings);
  const versionsDir = join(a.dataDir, 'versions');
  // LoRA adapters are small: all are kept unless told otherwise; full weights are a model each.
  const keepVersions = settings.learn.keepVersions ?? (settings.training.loraRank === 0 ? 3 : Number.POSITIVE_INFINITY);
  if (a.torch) {
    try {
      learner = await openTorchLearner({
        engine,
        launch: a.torch.launch,
        config: learnerConfig(settings),
        keepReference: ppo.loss.kind === 'policy' && ppo.loss.klCoef > 0,
        dir: a.torch.dir,
        keepVersions,
        log: a.log,
        versionAfter: () => Math.max(engine.version, store.learning.maxVersion()),
        reconcile: (steps) => store.learning.reconcileWithCheckpoint(steps),
      });
    } catch (e) {
      // Serving and judging go on (samples stay queued for a restart); training reports this.
      unavailable = (e as Error).message;
      a.log('learner_unavailable', { message: unavailable });
    }
  } else {
    learner = await LocalLearner.open(engine, {
      config: {
        ...learnerConfig(settings),
        activationBudgetBytes: a.activationBudgetBytes,
        packFrozenWeights: a.packFrozenWeights ?? false,
      },
      checkpointDir: a.checkpointDir,
      versionsDir: a.remote?.versionsDir ?? a.serving?.versionsDir ?? versionsDir,
      keepVersions,
      maxYieldMs: settings.training.maxYieldMs,
      versionAfter,
    });
  }
  const serving = a.serving ?? null;
  const publish = (l: LocalLearner | SupervisedTorchLearner) => {
    if (a.remote) return publishToBoth(l, engine, a.remote.sampler);
    return serving ? publishToServing(l, serving) : l.publishTo(engine);
  };
  const servingVersion = serving ? serving.version : () => engine.version;
  if (learner) {
    try {
      const requeued = store.learning.reconcileWithCheckpoint(learner.resumed.steps);
      // Serve the checkpoint's weights from the first request on.
      const p = learner.resumed.steps > 0 ? await publish(learner) : null;
      if (p)
        store.versions.record({
          version: p.version,
          publishedAt: Date.now(),
          step: learner.resumed.steps,
          source: 'restart',
          rolledBackFrom: null,
          restores: null,
          requestedBy: null,
          weightsPath: p.weightsPath,
        });
      a.log('resumed', {
        steps: learner.resumed.steps,
        version: servingVersion(),
        requeuedSamples: requeued,
        ...(p ? { snapshotMs: p.snapshotMs, swapMs: p.swapMs } : {}),
      });
    } catch (e) {
      await learner.close();
      throw e;
    }
  }
  const judgeClient: JudgeClient =
    settings.judge.kind === 'self'
      ? new LocalJudgeClient(serving ? { ...model, engine: serving.sampler } : model)
      : new OpenAIJudgeClient({
          baseUrl: settings.judge.url!,
          model: settings.judge.model!,
          ...(settings.judge.key ? { apiKey: settings.judge.key } : {}),
        });
  const j = settings.judge;
  const loop = new LearningLoop({
    store,
    config: settings.learn,
    judgeClient,
    judge: {
      votes: j.votes,
      temperature: j.temperature,
      maxTokens: j.maxTokens,
      timeoutMs: j.timeoutMs,
      retries: j.retries,
      hintChoice: { ...DEFAULT_HINT_CHOICE, quorum: j.hintQuorum },
    },
    teacher: {
      render: renderIdsOf(backend),
      scorer: serving?.sampler ?? engine,
      contextLength: backend.contextLength,
    },
    policy: learner
      ? {
          trainBatch: (samples) => trainOn(learner, samples, ppo),
          publish: () => publish(learner),
          checkpoint: () => learner.save([]),
          servingVersion,
          stopTraining: () => learner.close(),
          restore: (path: string | null) => learner.restore(path),
        }
      : unavailablePolicy(unavailable!, servingVersion),
    log: a.log,
  });
  loop.start();
  const marker = writeRunningMarker(a.dataDir);
  const t = settings.training;
  const mode = t.loraRank === 0 ? 'full fine-tuning' : `LoRA rank ${t.loraRank}`;
  return {
    loop,
    learner,
    summary:
      `${settings.learn.method}, judge ${judgeClient.name} (${j.votes} votes), batch ${settings.learn.batchSize}, ${mode}, ` +
      (learner ? `resumed at step ${learner.resumed.steps}` : `learner unavailable: ${unavailable}`),
    progressLine: () => progressLine(loop.status()),
    stopJudging: () => loop.feed.close(),
    async close() {
      await loop.close();
      await learner?.close();
      removeRunningMarker(marker);
    },
  };
}

export function learnerConfig(s: ServeLearning): Partial<LearnerConfig> {
  const t = s.training;
  const mode: LearnerConfig['mode'] =
    t.loraRank === 0
      ? { kind: 'full' }
      : {
          kind: 'lora',
          spec: {
            rank: t.loraRank,
            alpha: t.loraAlpha ?? 2 * t.loraRank,
            targets: ['q', 'k', 'v', 'o', 'gate', 'up', 'down'],
          },
        };
  return {
    mode,
    optimizer: { ...DEFAULT_LEARNER.optimizer, lr: t.lr ?? (t.loraRank === 0 ? 1e-5 : 1e-4) },
  };
}

/** The training algorithm's settings: mini-batches of the batch (by default the whole of it) and epochs. */
export function ppoConfig(s: ServeLearning): PpoConfig {
  return { ...DEFAULT_PPO, miniBatchSize: s.training.miniBatchSize ?? s.learn.batchSize, epochs: s.training.epochs };
}

/** One batch of learn/ppo.ts on either learner; the PyTorch one is relaunched if it died. */
function trainOn(
  learner: LocalLearner | SupervisedTorchLearner,
  samples: BatchSample[],
  ppo: PpoConfig,
): Promise<StepMetrics[]> {
  if (learner instanceof LocalLearner) return trainBatch(learner, samples, ppo);
  return learner.train((torch) => trainBatch(torch, samples, ppo));
}

/**
 * Publishes the learner's weights to the embedded engine (the teacher's and judge's, whose
 * version the loop reads) and to the remote servers, which load the version's folder.
 */
async function publishToBoth(
  learner: LocalLearner | SupervisedTorchLearner,
  engine: LocalEngine,
  sampler: Sampler,
): Promise<Publication> {
  const started = performance.now();
  const version = await learner.publish();
  const snapshotMs = performance.now() - started;
  const [, remoteMs] = await Promise.all([engine.use(version), sampler.use(version)]);
  return { version: version.version, snapshotMs, swapMs: remoteMs, weightsPath: version.path };
}
