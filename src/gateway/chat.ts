// POST /v1/chat/completions. The main path, in order:
//   1. validate the body and the session headers        (400, nothing written)
//   2. render the prompt; check it fits the context      (400 "prompt is N tokens, the model's context is M")
//   3. sessions: identify, classify, attribute           (queues the previous main turn's closure; a
//                                                         sampler that does not route by session has
//                                                         started already, and prefills meanwhile)
//   4. sample token by token; stream deltas as they settle; a client that leaves cancels sampling
//   5. commit the turn to the store                      (durable before the finish chunk or the JSON reply;
//                                                         turns finishing together share one transaction)
//   6. send the end; check token-exactness in the background

import { randomInt, randomUUID } from 'node:crypto';
import type { RenderedPrompt } from '../chat/prompt.js';
import { renderRequestBounded } from '../chat/prompt-codec.js';
import { checkRetemplate } from '../chat/retemplate-check.js';
import type { GenerationEvent, SamplingParams } from '../engine/types.js';
import { RolloutConflictError, type IncomingRequest, type TurnPlan } from '../sessions/recorder-contract.js';
import type { TurnRecorder } from '../sessions/recorder.js';
import type { SamplingUsed, Turn } from '../types.js';
import { CompletionAssembler, type AnswerDelta } from './assembler.js';
import type { ChatBackend } from './backend.js';
import { GatewayError, invalid } from './errors.js';
import { sendJson, type Context, type Handler } from './http.js';
import type { Logger } from './log.js';
import {
  ChunkTemplate,
  chunkObject,
  completionObject,
  deltasOf,
  usageChunk,
  usageOf,
  type CompletionIds,
} from './openai-format.js';
import { parseChatRequest, type ChatRequest } from './params.js';
import { requestMeta, sessionHeaderValue } from './request-meta.js';
import { SseWriter } from './sse.js';

export interface ChatDeps {
  backend: ChatBackend;
  recorder: TurnRecorder;
  /** Queues the token-exactness check of a committed main turn (computed after the response). */
  checkLater: (turnId: string, compute: () => NonNullable<Turn['retemplate']>) => void;
  logger: Logger;
  now: () => number;
  /** See GatewayConfig.streamIntervalMs. */
  streamIntervalMs?: number;
  newToolCallId?: () => string;
}

type Finish = Extract<GenerationEvent, { type: 'finish' }>;

/**
 * `turn_` + 12 hex digits of the time + 12 random: ids sort by arrival, so store inserts append.
 * The random part is a UUID's last 12 digits (all random): randomUUID draws from a pool, where
 * randomBytes costs a system call per id.
 */
export function newTurnId(now: number): string {
  return `turn_${Math.floor(now).toString(16).padStart(12, '0').slice(-12)}${randomUUID().slice(-12)}`;
}

export function chatCompletions(deps: ChatDeps): Handler {
  return async function chatCompletionsHandler(ctx) {
    const req = parseChatRequest(ctx.json);
    const meta = requestMeta(ctx.req.headers, req);
    const tools = req.toolChoice === 'none' ? undefined : req.tools;
    const prompt = await render(deps.backend, req, tools);
    if (ctx.signal.aborted) return; // the client left while the prompt was encoded: nothing began
    const { params, used } = resolveSampling(deps.backend, req, prompt.ids.length);
    const receivedAt = deps.now();
    // However this request ends (answered, client gone, an error anywhere below), the generation
    // stops with it: the engine starts on generate(), before anyone iterates its events.
    const generation = new AbortController();
    const stop = () => generation.abort();
    ctx.signal.addEventListener('abort', stop, { once: true });
    const progress: Progress = { sampled: false, settled: false };
    try {
      // A sampler that does not route by session starts now, and prefills while the turn is recorded.
      let events = deps.backend.sampler.routesBySession ? null : sample(deps.backend, prompt, params, generation);
      const plan = beginTurn(deps.recorder, {
        turnId: newTurnId(receivedAt),
        receivedAt,
        identity: meta.identity,
        turnType: meta.turnType,
        optOut: meta.optOut,
        traceId: meta.traceId,
        model: req.model ?? deps.backend.modelId,
        messages: req.messages,
        tools: req.tools,
        ...(meta.rollout ? { rollout: meta.rollout } : {}),
      });
      Object.assign(ctx.log, {
        sessionId: plan.sessionId,
        sessionSource: plan.sessionSource,
        turnId: plan.turnId,
        kind: plan.kind,
        kindReason: plan.kindReason,
        attribution: plan.attribution.type,
        promptTokens: prompt.ids.length,
      });
      if (deps.logger.logContent) ctx.log.messages = req.messages.slice(-3);
      try {
        // The session id keeps a session on one server of a remote fleet (its prefix cache).
        events ??= sample(
          deps.backend,
          prompt,
          plan.sessionId === null ? params : { ...params, routingKey: plan.sessionId },
          generation,
        );
        await answer(deps, ctx, req, prompt, events, used, plan, receivedAt, progress);
      } finally {
        if (!progress.settled) deps.recorder.abandon(plan);
      }
    } finally {
      ctx.signal.removeEventListener('abort', stop);
      // A generation that ran to its finish has nothing to stop (an abort costs an exception's stack).
      if (!progress.sampled) stop();
    }
  };
}

interface Progress {
  /** The sampler's events ran to their finish. */
  sampled: boolean;
  /** commit() has run: it settles the session's in-flight count itself. */
  settled: boolean;
}

/** Starts the generation; parameters the sampler refuses are the client's 400. */
function sample(
  backend: ChatBackend,
  prompt: RenderedPrompt,
  params: SamplingParams,
  generation: AbortController,
): AsyncIterable<GenerationEvent> {
  try {
    return backend.sampler.generate(prompt.ids, params, generation.signal);
  } catch (e) {
    throw e instanceof RangeError ? invalid(null, e.message) : e;
  }
}

/** recorder.begin, with a session's conflicting rollout headers as the 400 they are. */
function beginTurn(recorder: TurnRecorder, request: IncomingRequest): TurnPlan {
  try {
    return recorder.begin(request);
  } catch (e) {
    if (e instanceof RolloutConflictError) throw invalid(e.field, e.message, 'rollout_conflict');
    throw e;
  }
}

async function render(backend: ChatBackend, req: ChatRequest, tools: ChatRequest['tools']): Promise<RenderedPrompt> {
  let rendered: Awaited<ReturnType<typeof renderRequestBounded>>;
  try {
    const input = { messages: req.messages, tools, enableThinking: req.enableThinking };
    rendered = await renderRequestBounded(backend, input, backend.contextLength);
  } catch (e) {
    throw invalid(
      'messages',
      `the model's chat template cannot render these messages: ${(e as Error).message}`,
      'template_error',
    );
  }
  if ('atLeast' in rendered) {
    throw invalid(
      'messages',
      `prompt is at least ${rendered.atLeast} tokens, the model's context is ${backend.contextLength} ` +
        '(context length exceeded): shorten or compact the conversation',
      'context_length_exceeded',
    );
  }
  return rendered.prompt;
}

/** Request values, else the model's generation_config.json, else OpenAI's defaults; all recorded. */
export function resolveSampling(
  backend: ChatBackend,
  req: ChatRequest,
  promptTokens: number,
): { params: SamplingParams; used: SamplingUsed } {
  const d = backend.generationDefaults;
  const room = backend.contextLength - promptTokens;
  const used: SamplingUsed = {
    temperature: req.temperature ?? d.temperature ?? 1,
    topP: req.topP ?? d.topP ?? 1,
    topK: req.topK ?? d.topK ?? 0,
    maxTokens: Math.min(req.maxTokens ?? room, room),
    stop: req.stop,
    seed: req.seed ?? randomInt(2 ** 32),
    topLogprobs: req.topLogprobs,
    defaultsFrom:
      req.temperature !== undefined && req.topP !== undefined
        ? 'request'
        : d.temperature !== undefined || d.topP !== undefined || d.topK !== undefined
          ? 'generation_config'
          : 'openai',
  };
  const params: SamplingParams = {
    temperature: used.temperature,
    topP: used.topP,
    topK: used.topK,
    maxTokens: used.maxTokens,
    stop: used.stop,
    seed: used.seed,
    topLogprobs: used.topLogprobs,
  };
  return { params, used };
}

/** Samples, streams or collects, commits, replies. */
async function answer(
  deps: ChatDeps,
  ctx: Context,
  req: ChatRequest,
  prompt: RenderedPrompt,
  events: AsyncIterable<GenerationEvent>,
  used: SamplingUsed,
  plan: TurnPlan,
  receivedAt: number,
  progress: Progress,
): Promise<void> {
  const ids: CompletionIds = {
    id: `chatcmpl-${plan.turnId.slice(5)}`,
    created: Math.floor(receivedAt / 1000),
    model: req.model ?? deps.backend.modelId,
  };
  const headers: Record<string, string> = { 'x-turn-id': plan.turnId, 'x-turn-type': plan.kind };
  if (plan.sessionId !== null) headers['x-session-id'] = sessionHeaderValue(plan.sessionId);
  if (req.ignored.length > 0) headers['x-openclaw-rl-ignored'] = req.ignored.join(',');
  const asm = new CompletionAssembler(deps.backend.tokenizer, {
    thinkingOpen: prompt.thinkingOpen,
    stop: req.stop,
    logprobs: req.logprobs,
    ...(deps.newToolCallId ? { newToolCallId: deps.newToolCallId } : {}),
  });
  // Token chunks come from the response's template; those with log-probs or the finish are built whole.
  const template = new ChunkTemplate(ids, req.includeUsage);
  const chunk = (delta: Record<string, unknown>, finishReason: string | null = null) =>
    req.logprobs || finishReason !== null
      ? JSON.stringify(
          chunkObject(ids, delta, {
            logprobs: req.logprobs ? asm.takeLogprobs() : null,
            finishReason,
            includeUsage: req.includeUsage,
          }),
        )
      : template.chunk(delta);
  /** Writes the pieces' chunks; false when the socket is full (then await sse.drained()). */
  const send = (out: SseWriter, pieces: readonly AnswerDelta[]): boolean => {
    let room = true;
    for (const d of deltasOf(pieces)) room = out.send(chunk(d)) && room;
    return room;
  };

  await stream(deps, ctx, req, prompt, used, plan, receivedAt, progress, events, { ids, headers, asm, chunk, send });
}

interface Output {
  ids: CompletionIds;
  headers: Record<string, string>;
  asm: CompletionAssembler;
  chunk: (delta: Record<string, unknown>, finishReason?: string | null) => string;
  send: (out: SseWriter, pieces: readonly AnswerDelta[]) => boolean;
}

/** Streams or collects the events, commits the turn, sends the end. */
async function stream(
  deps: ChatDeps,
  ctx: Context,
  req: ChatRequest,
  prompt: RenderedPrompt,
  used: SamplingUsed,
  plan: TurnPlan,
  receivedAt: number,
  progress: Progress,
  events: AsyncIterable<GenerationEvent>,
  { ids, headers, asm, chunk, send }: Output,
): Promise<void> {
  // The engine is prefilling: encode what the commit will store of the request now, not after the last token.
  deps.recorder.prepareInputs(plan, req.messages, req.tools ?? null, prompt.ids);
  const sse = req.stream ? new SseWriter(ctx.res, deps.streamIntervalMs ?? 0) : null;
  if (sse) {
    sse.start(headers);
    sse.send(chunk({ role: 'assistant', content: '' }));
  }
  let finish: Finish | undefined;
  let firstTokenAt: number | null = null;
  try {
    for await (const e of events) {
      if (e.type === 'finish') {
        finish = e;
        continue;
      }
      firstTokenAt ??= deps.now();
      const pieces = asm.token(e.token);
      if (sse && pieces.length > 0 && !send(sse, pieces)) await sse.drained();
    }
    if (!finish) throw new Error('the sampler ended without a finish event');
    progress.sampled = true;
  } catch (e) {
    return fail(deps, ctx, sse, `the model failed while generating: ${(e as Error).message}`, e);
  }
  const tail = asm.finish();
  if (sse && finish.reason !== 'cancelled' && !send(sse, tail)) await sse.drained();

  const turn: Turn = {
    id: plan.turnId,
    sessionId: plan.sessionId,
    sessionSource: plan.sessionSource,
    kind: plan.kind,
    kindReason: plan.kindReason,
    compaction: plan.compaction,
    traceId: plan.traceId,
    model: ids.model,
    messages: req.messages,
    tools: req.tools ?? null,
    sampling: used,
    promptIds: prompt.ids,
    completionIds: asm.ids,
    logprobs: asm.logprobs,
    sampledLogprobs: asm.sampledLogprobs,
    response: asm.message(),
    finishReason: finish.reason,
    policyVersion: finish.version,
    receivedAt,
    firstTokenAt,
    completedAt: deps.now(),
    toolCallErrors: asm.toolCallErrors,
    retemplate: null,
  };
  progress.settled = true;
  try {
    await deps.recorder.commit(plan, turn);
  } catch (e) {
    return fail(deps, ctx, sse, 'the turn could not be recorded, so it is not acknowledged: retry the request', e);
  }
  Object.assign(ctx.log, {
    completionTokens: asm.ids.length,
    cachedTokens: finish.cachedTokens ?? null,
    finish: finish.reason,
    policyVersion: finish.version,
    firstTokenMs: firstTokenAt === null ? null : firstTokenAt - receivedAt,
  });
  if (deps.logger.logContent) ctx.log.response = turn.response;
  if (finish.reason !== 'cancelled') {
    const usage = usageOf(prompt.ids.length, asm.ids.length, finish.cachedTokens);
    const finishReason = asm.finishReason(finish.reason);
    if (sse) {
      sse.send(chunk({}, finishReason));
      if (req.includeUsage) sse.send(JSON.stringify(usageChunk(ids, usage)));
      sse.done();
    } else {
      sendJson(
        ctx,
        200,
        completionObject(ids, turn.response, finishReason, usage, req.logprobs ? asm.allLogprobEntries : null),
        headers,
      );
    }
    if (plan.learning && plan.kind === 'main') {
      deps.checkLater(turn.id, () =>
        checkRetemplate(deps.backend, {
          messages: req.messages,
          tools: req.toolChoice === 'none' ? undefined : req.tools,
          enableThinking: req.enableThinking,
          response: turn.response,
          promptIds: turn.promptIds,
          completionIds: turn.completionIds,
        }),
      );
    }
  } else {
    ctx.log.clientGone = true;
  }
}

/** Reports a failure after the response may have started: an SSE error event, or a 500. */
function fail(deps: ChatDeps, ctx: Context, sse: SseWriter | null, message: string, cause: unknown): void {
  deps.logger.event('error', { requestId: ctx.requestId, message, cause: (cause as Error)?.stack ?? String(cause) });
  const error = new GatewayError(500, `${message} (request ${ctx.requestId})`, { code: 'server_error' });
  if (!sse) throw error;
  void sse.data(error.toBody()).then(() => sse.end());
  ctx.log.status = 500;
}
