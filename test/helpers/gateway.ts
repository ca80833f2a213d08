// Test harness for the gateway: a generated model folder's tokenizer and chat template with either
// the real embedded engine or a ScriptedSampler, a store in a scratch folder, and a server on a
// loopback port chosen by the OS.

import { mkdtempSync } from 'node:fs';
import { join } from 'node:path';
import { loadChatBackend } from '../../src/cli/chat-model.js';
import type { ChatBackend } from '../../src/gateway/backend.js';
import { DEFAULT_CONFIG, type GatewayConfig } from '../../src/gateway/config.js';
import { memoryLogger } from '../../src/gateway/log.js';
import type { GatewayMetrics } from '../../src/gateway/metrics-route.js';
import { Gateway } from '../../src/gateway/server.js';
import { PromptEncoder } from '../../src/chat/prompt-encoder.js';
import { PromptRenderer } from '../../src/chat/prompt-renderer.js';
import { TokenizerThread } from '../../src/chat/tokenizer-thread.js';
import type { LocalEngineOptions } from '../../src/engine/local/engine.js';
import { readModelFolder } from '../../src/engine/local/model/folder.js';
import { ChatTemplate } from '../../src/chat/tokenizer/chat-template.js';
import { TextTokenizer } from '../../src/chat/tokenizer/tokenizer.js';
import { openStore, type Store } from '../../src/store/store.js';
import { makeTinyModel, scratchDir } from './models.js';
import { ScriptedSampler } from './scripted-sampler.js';

let sharedModel: string | undefined;
let scratchRoot: string | undefined;

/** A fresh folder under one scratch root per process (removed at exit). */
export function freshDir(prefix: string): string {
  scratchRoot ??= scratchDir('ocrl-gw-');
  return mkdtempSync(join(scratchRoot, prefix));
}

/** One tiny Qwen3-family model folder per test process (context 4096 so captured prompts fit). */
export function tinyModel(): string {
  sharedModel ??= makeTinyModel({ family: 'qwen3', seed: 7, shape: { maxPositionEmbeddings: 4096 } });
  return sharedModel;
}

/**
 * A backend over the model folder's tokenizer and template, sampling from a ScriptedSampler. With
 * `thread`, long prompts are tokenized on a TokenizerThread, as serve does (close() ends it).
 */
export async function scriptedBackend(
  modelDir = tinyModel(),
  opts: {
    thread?: boolean;
    fallback?: NonNullable<ConstructorParameters<typeof ScriptedSampler>[0]>['fallback'];
    routesBySession?: boolean;
  } = {},
): Promise<{ backend: ChatBackend; sampler: ScriptedSampler }> {
  const folder = readModelFolder(modelDir);
  const tokenizer = await TextTokenizer.fromModelDir(modelDir);
  const template = await ChatTemplate.fromModelDir(modelDir);
  const sampler = new ScriptedSampler({
    stopIds: folder.eosTokenIds,
    ...(opts.fallback ? { fallback: opts.fallback } : {}),
    ...(opts.routesBySession ? { routesBySession: true } : {}),
  });
  const thread = opts.thread ? TokenizerThread.start(modelDir) : null;
  const encoder = PromptEncoder.forModelDir(
    modelDir,
    tokenizer,
    thread ? { check: thread.check, encodeAway: thread.encode } : {},
  );
  const backend: ChatBackend = {
    sampler,
    tokenizer,
    template,
    renderer: new PromptRenderer(template),
    encoder,
    contextLength: folder.config.maxPositionEmbeddings,
    generationDefaults: folder.generationDefaults,
    modelId: 'tiny',
    close: async () => {
      await thread?.close();
    },
  };
  return { backend, sampler };
}

export async function engineBackend(modelDir = tinyModel(), opts: LocalEngineOptions = {}): Promise<ChatBackend> {
  return loadChatBackend(modelDir, 'tiny', { threads: 1, ...opts });
}

export interface TestGateway {
  url: string;
  gateway: Gateway;
  store: Store;
  backend: ChatBackend;
  logs: ReturnType<typeof memoryLogger>;
  dataDir: string;
  close(): Promise<void>;
}

export async function startGateway(
  backend: ChatBackend,
  config: Partial<GatewayConfig> = {},
  extra: {
    now?: () => number;
    newToolCallId?: () => string;
    dataDir?: string;
    logContent?: boolean;
    metrics?: GatewayMetrics;
  } = {},
): Promise<TestGateway> {
  const dataDir = extra.dataDir ?? freshDir('data-');
  const store = openStore({ dir: dataDir });
  const full: GatewayConfig = { ...DEFAULT_CONFIG, port: 0, dataDir, ...config };
  const logs = memoryLogger(extra.logContent ?? full.logContent);
  const gateway = new Gateway({
    backend,
    store,
    config: full,
    logger: logs,
    ...(extra.now ? { now: extra.now } : {}),
    ...(extra.newToolCallId ? { newToolCallId: extra.newToolCallId } : {}),
    ...(extra.metrics ? { metrics: extra.metrics } : {}),
  });
  const { port } = await gateway.listen();
  return {
    url: `http://127.0.0.1:${port}`,
    gateway,
    store,
    backend,
    logs,
    dataDir,
    async close() {
      await gateway.close(1000);
      store.close();
    },
  };
}

/** POST JSON; returns status, headers and the parsed body (or the raw text for SSE). */
export async function post(
  url: string,
  body: unknown,
  headers: Record<string, string> = {},
): Promise<{ status: number; headers: Headers; json: any; text: string }> {
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
  const text = await res.text();
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status: res.status, headers: res.headers, json, text };
}

/** The `data:` payloads of an SSE body, parsed ("[DONE]" kept as the string). */
export function sseEvents(text: string): any[] {
  return text
    .split('\n\n')
    .filter((b) => b.startsWith('data: '))
    .map((b) => {
      const data = b.slice(6);
      return data === '[DONE]' ? data : JSON.parse(data);
    });
}
