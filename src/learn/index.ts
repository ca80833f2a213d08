// The learning loop: judged turns become samples per method, samples become batches, batches
// become published policy versions. Main path: LearningLoop (loop.ts).

export { DEFAULT_LEARN, judgeNeeds, METHODS, resolveLearnConfig, type LearnConfig, type Method } from './config.js';
export { combineAdvantages, usesScore, usesTeacher, type AdvantageInput, type Advantages } from './methods.js';
export { sampleFor, type NoSampleReason, type SampleInput } from './samples.js';
export { DEFAULT_PPO, trainBatch, type BatchSample, type PpoConfig, type PpoLearner } from './ppo.js';
export {
  HINT_HEADER,
  hintedMessages,
  teacherLogprobs,
  type TeacherModel,
  type TeacherResult,
} from './teacher.js';
export { JudgingFeed, type FeedCounter, type JudgingFeedOptions } from './judging.js';
export { Trainer, trainingSampleOf, type BatchReport, type PolicyBackend, type TrainerState } from './trainer.js';
export { LearningLoop, type LearningLoopOptions } from './loop.js';
export { learningStatus, progressLine, type LearningStatus } from './status.js';
