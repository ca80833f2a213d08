// Main-line or side turn, first match wins:
//   X-Turn-Type: main|side (or body turn_type)  -> `header`
//   model id listed in config                   -> `model:side` / `model:main`
//   OpenClaw side-task signatures               -> `openclaw:<task>` (side)
//   OpenClaw's agent turn signature             -> `openclaw:agent_turn` (main)
//   otherwise                                   -> `default` (configurable; side unless set)

import type { ChatMessage, ToolSpec } from '../chat/messages.js';
import type { TurnKind } from '../types.js';
import { isOpenClawAgentTurn, openClawSideTask } from './openclaw.js';

export interface KindConfig {
  /** Model ids whose requests are side turns (e.g. OpenClaw's `side-model` routing). */
  sideModels: readonly string[];
  /** Model ids whose requests are main turns. */
  mainModels: readonly string[];
  /** The kind of a request nothing identifies. */
  defaultKind: TurnKind;
}

export interface KindInput {
  /** X-Turn-Type header or body turn_type, already checked to be main or side. */
  turnType?: TurnKind;
  model: string;
  messages: readonly ChatMessage[];
  tools: readonly ToolSpec[] | undefined;
  /** The raw session key (for `openclaw-cron-...`). */
  sessionKey?: string;
}

export interface KindDecision {
  kind: TurnKind;
  reason: string;
}

/** Parses an X-Turn-Type / turn_type value; undefined when absent, null when invalid. */
export function parseTurnType(value: string | undefined): TurnKind | undefined | null {
  if (value === undefined) return undefined;
  const v = value.trim().toLowerCase();
  return v === 'main' || v === 'side' ? v : null;
}

export function classifyTurn(input: KindInput, config: KindConfig): KindDecision {
  if (input.turnType) return { kind: input.turnType, reason: 'header' };
  if (config.sideModels.includes(input.model)) return { kind: 'side', reason: 'model:side' };
  if (config.mainModels.includes(input.model)) return { kind: 'main', reason: 'model:main' };
  const task = openClawSideTask(input.messages, input.tools, input.sessionKey);
  if (task) return { kind: 'side', reason: `openclaw:${task}` };
  if (isOpenClawAgentTurn(input.messages, input.tools)) return { kind: 'main', reason: 'openclaw:agent_turn' };
  return { kind: config.defaultKind, reason: 'default' };
}
