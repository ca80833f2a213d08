// The PolicyVersion contract: what Learner.publish() returns and Sampler.use() loads. Types only;
// engine/local/policy-versions.ts reads and writes the folders.

import type { PolicyUpdate } from './learner.js';

/**
 * One published policy. The folder is the portable form: a sampler in another process or on
 * another machine needs only `version`, `kind` and `path` (plain JSON). `update` is the local
 * engine's fast path when learner and sampler share a process: the same weights, in memory.
 */
export type PolicyVersion = {
  /** Increasing per learner run; what a generation's finish event reports. */
  version: number;
  /**
   * lora: a PEFT adapter over the sampler's base model (adapter_config.json +
   * adapter_model.safetensors). full: a complete Hugging Face model folder (config.json,
   * model.safetensors, tokenizer files).
   */
  kind: 'lora' | 'full';
} & (
  | {
      /** The folder, complete when published (written aside and renamed into place). */
      path: string;
      update?: PolicyUpdate;
    }
  | {
      /** null: published in memory only (a learner opened without a versions folder). */
      path: null;
      update: PolicyUpdate;
    }
);
