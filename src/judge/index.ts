// The judge: prompts, parsing, voting, hint choice, clients and the queue the learning loop feeds.
// Main path: JudgeQueue.offer(closed) -> judgeTurn(client, closed) -> onJudged(JudgedTurn).

export type {
  CompleteOptions,
  HintRejection,
  HintRejectionReason,
  HintVote,
  JudgeClient,
  JudgedTurn,
  JudgeVote,
  Score,
  VoteFailure,
} from './types.js';
export { HINT_REJECTION_REASONS, VOTE_FAILURES } from './types.js';
export { answerPart, evalVoteFrom, HINT_END, HINT_START, hintVoteFrom, parseBoxed, parseHint } from './parse.js';
export {
  agreement,
  chooseHint,
  copiesText,
  DEFAULT_HINT_CHOICE,
  majority,
  majorityVote,
  overlap,
  type HintChoice,
  type HintChoiceOptions,
} from './vote.js';
export {
  buildEvalPrompt,
  buildHintPrompt,
  clip,
  DEFAULT_PROMPT_LIMITS,
  EVAL_SYSTEM,
  HINT_SYSTEM,
  nextStateText,
  type PromptLimits,
} from './prompts.js';
export { JudgeClientError, transientStatus, type ClientFailure } from './errors.js';
export { OpenAIJudgeClient, type OpenAIJudgeOptions } from './openai-client.js';
export { BASE_VERSION, LocalJudgeClient, type SelfJudgeModel } from './local-client.js';
export { DEFAULT_JUDGE_OPTIONS, judgeTurn, resolveJudgeOptions, type JudgeTurnOptions } from './judge-turn.js';
export { JudgeMetrics, type QueueEvent } from './metrics.js';
export { judgeHealth, type JudgeHealth, type VoteOutcome } from './health.js';
export { JudgeQueue, summary, type JudgeLog, type JudgeQueueOptions } from './queue.js';
