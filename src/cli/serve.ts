// openclaw-rl serve --model DIR [--host 127.0.0.1] [--port 30000] [--data DIR] [options]
//
//   openclaw-rl serve --model models/tiny
//   openclaw-rl serve --model models/qwen3 --data data --side-model side-model --config gateway.json
//   OPENCLAW_RL_API_KEYS=k1 openclaw-rl serve --model models/qwen3 --host 0.0.0.0
//
// Starts the OpenAI-compatible gateway on a model folder and records every main-line turn in
// DIR/openclaw-rl.sqlite. Secrets come from the config file or the environment, never from flags.

import { basename, resolve } from 'node:path';
import { loadChatBackend } from '../gateway/backend.js';
import { configFromEnv, readConfigFile, redactedConfig, resolveConfig, type GatewayConfig } from '../gateway/config.js';
import { jsonLogger } from '../gateway/log.js';
import { Gateway } from '../gateway/server.js';
import { resolveModel } from '../engine/local/hub/index.js';
import { progressBar } from '../engine/local/hub/progress-bar.js';
import { openStore } from '../store/store.js';
import { CliError, numberFlag, parseFlags, stringFlag } from './args.js';

const USAGE = `usage: openclaw-rl serve --model DIR|OWNER/NAME[@REVISION] [options]

options:
  --host ADDR             default 127.0.0.1 (off loopback needs API keys)
  --port N                default 30000
  --data DIR              store folder, default openclaw-rl-data
  --config FILE           JSON config (apiKeys, adminKeys, sideModels, ...; see docs/gateway.md)
  --model-id ID           id listed by GET /v1/models, default the model folder's name
  --side-model ID         requests for this model id are side turns (repeatable)
  --main-model ID         requests for this model id are main turns (repeatable)
  --default-turn-kind K   main or side (default side) for requests nothing identifies
  --session-idle SECONDS  close a session's last turn after this idle time (default 3600)
  --durability MODE       normal (survives a crash, default) or full (also a power loss)
  --log-content           include conversation text in the logs
  --threads N             BLAS threads

--model takes a local model folder or a Hugging Face id (e.g. Qwen/Qwen3-0.6B), downloaded once
into the Hugging Face cache (HF_HUB_CACHE, HF_HOME; HF_TOKEN for gated models; HF_ENDPOINT for a
mirror; HF_HUB_OFFLINE=1 to use the cache only).

environment: OPENCLAW_RL_API_KEYS, OPENCLAW_RL_ADMIN_KEYS (comma-separated keys)`;

export async function runServe(argv: string[]): Promise<number> {
  const v = parseFlags(argv, {
    model: { type: 'string' }, host: { type: 'string' }, port: { type: 'string' }, data: { type: 'string' },
    config: { type: 'string' }, 'model-id': { type: 'string' }, 'side-model': { type: 'string', multiple: true },
    'main-model': { type: 'string', multiple: true }, 'default-turn-kind': { type: 'string' }, 'session-idle': { type: 'string' },
    durability: { type: 'string' }, 'log-content': { type: 'boolean' }, threads: { type: 'string' },
  }, USAGE);
  if (v.help) {
    console.log(USAGE);
    return 0;
  }
  const modelSpec = stringFlag(v, 'model', USAGE);
  const flags: Partial<GatewayConfig> = {
    host: v.host as string | undefined,
    port: numberFlag(v, 'port', { integer: true, min: 0, max: 65535 }),
    dataDir: v.data as string | undefined,
    modelId: v['model-id'] as string | undefined,
    sideModels: v['side-model'] as unknown as string[] | undefined,
    mainModels: v['main-model'] as unknown as string[] | undefined,
    defaultTurnKind: v['default-turn-kind'] as GatewayConfig['defaultTurnKind'] | undefined,
    sessionIdleSeconds: numberFlag(v, 'session-idle', { integer: true, min: 1 }),
    durability: v.durability as GatewayConfig['durability'] | undefined,
    logContent: v['log-content'] ? true : undefined,
  };
  let config: GatewayConfig;
  try {
    config = resolveConfig(v.config ? readConfigFile(v.config as string) : {}, configFromEnv(process.env), flags);
  } catch (e) {
    throw new CliError((e as Error).message);
  }
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
  const store = openStore({ dir: config.dataDir, durability: config.durability });
  const threads = numberFlag(v, 'threads', { integer: true, min: 1 });
  const backend = await loadChatBackend(modelDir, config.modelId ?? (fromHub ? modelSpec.split('@')[0]! : basename(modelDir)), threads === undefined ? {} : { threads });
  const gateway = new Gateway({ backend, store, config, logger });
  const address = await gateway.listen();
  logger.event('listening', { url: `http://${address.host.includes(':') ? `[${address.host}]` : address.host}:${address.port}/v1`, model: backend.modelId, store: store.path, config: redactedConfig(config) });

  await new Promise<void>((done) => {
    const stop = (signal: string) => {
      logger.event('stopping', { signal });
      process.off('SIGINT', stop).off('SIGTERM', stop);
      done();
    };
    process.on('SIGINT', stop).on('SIGTERM', stop);
  });
  await gateway.close();
  store.close();
  await backend.close();
  logger.event('stopped');
  return 0;
}
