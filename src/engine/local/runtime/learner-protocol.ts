// Messages between LocalLearner (main thread) and the learner worker.

import type { PolicyVersion } from '../../policy-version.js';
import type { ForwardBackwardResult, LossSpec, OptimStepResult, TrainingSample } from '../../types.js';
import type { LearnerConfig } from '../train/learner.js';

export interface LearnerWorkerOptions {
  modelDir: string;
  /** The sampler's base weights, shared instead of loaded again. */
  baseParams: SharedArrayBuffer;
  /** The sampler's bf16 copy of them (a bf16 engine), shared likewise; null: made here if needed. */
  baseBf16: SharedArrayBuffer | null;
  config: LearnerConfig;
  /** Where checkpoints go; the latest one there is resumed from. */
  checkpointDir: string | null;
  /** Where each publication is also written as a version folder (policy-versions.ts); null: memory only. */
  versionsDir: string | null;
  threads: number;
  /** The engine's activity count (LocalEngine.activity) to yield to; null: never yield. */
  activity: SharedArrayBuffer | null;
  /** Longest wait for serving to go idle at one yield point. */
  maxYieldMs: number;
  /** The next publication is max(this, the checkpoint's published version) + 1. */
  versionAfter: number;
  /** Version folders kept in versionsDir: the newest this many numbers (Infinity: all). */
  keepVersions: number;
}

export type LearnerRequest =
  | { op: 'logprobs'; samples: TrainingSample[] }
  | { op: 'forwardBackward'; samples: TrainingSample[]; loss: LossSpec; batchSize: number }
  | { op: 'optimStep' }
  | { op: 'publish' }
  /** Replace the weights with a version folder's (null: the start of training); resets AdamW's moments. */
  | { op: 'restore'; path: string | null }
  | { op: 'save'; consumedSampleIds: string[] };

export type LearnerReply = Float32Array[] | ForwardBackwardResult | OptimStepResult | PolicyVersion | null;

export interface LearnerStatus {
  steps: number;
  /** The version the next publication follows. */
  version: number;
  consumedSampleIds: string[];
  kernels: 'native' | 'portable';
  /** Bytes of the frozen weights' packed copies (LearnerConfig.packFrozenWeights); 0 without. */
  packedBytes: number;
}

export type FromLearner =
  | { type: 'ready'; status: LearnerStatus }
  | { type: 'fatal'; message: string }
  | { type: 'reply'; id: number; result: LearnerReply }
  | { type: 'failed'; id: number; message: string };
