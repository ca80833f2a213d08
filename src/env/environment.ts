// The contract every agent environment implements, and the records the runner passes around.
// One Environment object is one episode: reset(task) gives the first messages, each step(message)
// takes the assistant's message (with its tool calls) and answers with the next state (the tool
// results as `tool` messages) or says the episode is over, outcome() scores it in [-1, 1], and
// close() frees what the episode held (a sandbox directory, a browser, a checkout).

import type { ChatMessage, ToolSpec } from '../chat/messages.js';

/** One task of an environment. `id` is stable across runs and seeds, so results can be resumed. */
export interface EnvTask {
  id: string;
  /** The task family, for per-family results (e.g. `gsm8k`, `count-lines`). */
  family: string;
}

export interface StepResult {
  /** The next state: one `tool` message per tool call, in call order. Empty when done. */
  observations: ChatMessage[];
  /** True when the episode is over: the assistant answered without calling a tool. */
  done: boolean;
}

export interface Outcome {
  /** In [-1, 1]: what the feedback route receives. */
  reward: number;
  /** The task was solved (the reward's meaning for success rates). */
  success: boolean;
  /** A short reason for people (never conversation text): "answer 42, expected 42", "checker: exit 1". */
  detail: string;
}

export interface Environment<T extends EnvTask = EnvTask> {
  /** The tools offered with every chat request of this environment. */
  readonly tools: ToolSpec[];
  /** Starts the episode; the messages the conversation opens with (system and user). */
  reset(task: T): Promise<ChatMessage[]>;
  step(assistant: ChatMessage): Promise<StepResult>;
  /** The episode's outcome; valid after the last step (or after the runner stopped it at its step limit). */
  outcome(): Promise<Outcome>;
  /** Frees the episode's resources; safe to call more than once and after a failed reset. */
  close(): Promise<void>;
}

/** An environment kind as the runner sees it: its tasks, and a fresh Environment per episode. */
export interface EnvironmentKind<T extends EnvTask = EnvTask> {
  readonly name: string;
  /** Which task set, where an environment has several (e.g. `arithmetic-train`); part of a run's definition. */
  readonly taskSource?: string;
  /** `count` tasks chosen by `seed`, in a stable order. */
  tasks(count: number, seed: number): T[];
  create(): Environment<T>;
}

/** A tool message answering one call. */
export function toolMessage(callId: string, name: string, content: string): ChatMessage {
  return { role: 'tool', tool_call_id: callId, name, content };
}
