// The gateway's configuration: one typed record with named defaults, read from an optional JSON
// file, then environment variables for secrets, then command-line flags. Printed at startup
// without secrets. The server refuses to listen off loopback without API keys.

import { readFileSync } from 'node:fs';
import type { Durability } from '../store/sqlite.js';
import type { TurnKind } from '../types.js';
import { isObject } from './validate.js';

export interface GatewayConfig {
  host: string;
  port: number;
  /** Folder of the SQLite store. */
  dataDir: string;
  /** The model id listed first by GET /v1/models (default: the model folder's name). */
  modelId: string | undefined;
  /** Bearer keys for /v1/chat/completions; empty = no auth (loopback only). */
  apiKeys: string[];
  /** Bearer keys for /admin routes; empty = admin routes disabled. */
  adminKeys: string[];
  /** Bearer keys for GET /metrics only (an admin key also works); with neither, /metrics is disabled. */
  metricsKeys: string[];
  /** Model ids answered as side turns (OpenClaw's `side-model` routing). */
  sideModels: string[];
  /** Model ids answered as main turns. */
  mainModels: string[];
  /** Kind of a request that no header, model id or OpenClaw signature identifies. */
  defaultTurnKind: TurnKind;
  /** A session idle this long closes its last turn with `no_next_state`. */
  sessionIdleSeconds: number;
  /** Sessions tracked in memory at most (least recently active are closed and released). */
  maxSessions: number;
  maxBodyBytes: number;
  /**
   * Milliseconds a client has to send a request's headers, and again its body (408 after that):
   * a stalled client holds a connection this long at most, and never a request slot.
   */
  bodyTimeoutMs: number;
  /** Open connections at most; more are closed at once (stalled clients cannot exhaust memory or descriptors). */
  maxConnections: number;
  /**
   * Bytes of request bodies buffered at once, over all connections: a new chunk past this gets a
   * 503 (retry). Without it, maxConnections clients each sending maxBodyBytes could hold 16 GiB.
   */
  maxBufferedBodyBytes: number;
  /** Chat requests served at once (counted once their body has arrived); more get 503 with retry-after. */
  maxConcurrentRequests: number;
  /**
   * A stream's SSE events are written at most once per this many ms (0: each as it is produced).
   * Tokens that come faster than that leave together, still one event each: fewer writes and
   * reads per token when many streams run on a small machine. The first and last always go at once.
   */
  streamIntervalMs: number;
  /** Put conversation text in the logs (off by default). */
  logContent: boolean;
  /** Show conversation text (messages, hints, votes) on the dashboard and its admin routes (off by default). */
  dashboardContent: boolean;
  durability: Durability;
  /** Turns completed more than this many days ago are purged (hourly); null keeps everything (default). */
  retentionDays: number | null;
}

export const DEFAULT_CONFIG: GatewayConfig = {
  host: '127.0.0.1',
  port: 30000,
  dataDir: 'openclaw-rl-data',
  modelId: undefined,
  apiKeys: [],
  adminKeys: [],
  metricsKeys: [],
  sideModels: [],
  mainModels: [],
  defaultTurnKind: 'side',
  sessionIdleSeconds: 3600,
  maxSessions: 10_000,
  maxBodyBytes: 16 * 1024 * 1024,
  bodyTimeoutMs: 10_000,
  maxConnections: 1024,
  maxBufferedBodyBytes: 256 * 1024 * 1024,
  maxConcurrentRequests: 256,
  streamIntervalMs: 16,
  logContent: false,
  dashboardContent: false,
  durability: 'normal',
  retentionDays: null,
};

export class ConfigError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ConfigError';
  }
}

type Field = {
  [K in keyof GatewayConfig]: { key: K; check: (v: unknown) => boolean; want: string };
}[keyof GatewayConfig];

const strings = (v: unknown) => Array.isArray(v) && v.every((s) => typeof s === 'string' && s.length > 0);
const positiveInt = (v: unknown) => Number.isSafeInteger(v) && (v as number) > 0;
const FIELDS: Field[] = [
  { key: 'host', check: (v) => typeof v === 'string' && v.length > 0, want: 'a host name or address' },
  {
    key: 'port',
    check: (v) => Number.isInteger(v) && (v as number) >= 0 && (v as number) < 65536,
    want: 'a port number 0-65535',
  },
  { key: 'dataDir', check: (v) => typeof v === 'string' && v.length > 0, want: 'a folder path' },
  { key: 'modelId', check: (v) => v === undefined || (typeof v === 'string' && v.length > 0), want: 'a model id' },
  { key: 'apiKeys', check: strings, want: 'an array of non-empty strings' },
  { key: 'adminKeys', check: strings, want: 'an array of non-empty strings' },
  { key: 'metricsKeys', check: strings, want: 'an array of non-empty strings' },
  { key: 'sideModels', check: strings, want: 'an array of model ids' },
  { key: 'mainModels', check: strings, want: 'an array of model ids' },
  { key: 'defaultTurnKind', check: (v) => v === 'main' || v === 'side', want: '"main" or "side"' },
  { key: 'sessionIdleSeconds', check: positiveInt, want: 'a positive integer' },
  { key: 'maxSessions', check: positiveInt, want: 'a positive integer' },
  { key: 'maxBodyBytes', check: positiveInt, want: 'a positive integer' },
  { key: 'bodyTimeoutMs', check: positiveInt, want: 'a positive integer (milliseconds)' },
  { key: 'maxConnections', check: positiveInt, want: 'a positive integer' },
  { key: 'maxBufferedBodyBytes', check: positiveInt, want: 'a positive integer' },
  { key: 'maxConcurrentRequests', check: positiveInt, want: 'a positive integer' },
  {
    key: 'streamIntervalMs',
    check: (v) => typeof v === 'number' && v >= 0 && v <= 1000,
    want: 'a number of ms from 0 to 1000',
  },
  { key: 'logContent', check: (v) => typeof v === 'boolean', want: 'true or false' },
  { key: 'dashboardContent', check: (v) => typeof v === 'boolean', want: 'true or false' },
  { key: 'durability', check: (v) => v === 'normal' || v === 'full', want: '"normal" or "full"' },
  {
    key: 'retentionDays',
    check: (v) => v === null || (typeof v === 'number' && Number.isFinite(v) && v > 0),
    want: 'a positive number of days, or null (keep everything)',
  },
];

/** Checks a partial config (from a file or flags); unknown keys are errors, so typos surface. */
export function checkPartialConfig(value: unknown, source: string): Partial<GatewayConfig> {
  if (!isObject(value)) throw new ConfigError(`${source}: the config must be a JSON object`);
  for (const key of Object.keys(value)) {
    if (!FIELDS.some((f) => f.key === key))
      throw new ConfigError(`${source}: unknown setting "${key}" (known: ${FIELDS.map((f) => f.key).join(', ')})`);
  }
  for (const f of FIELDS) {
    if (f.key in value && !f.check(value[f.key]))
      throw new ConfigError(`${source}: ${f.key} must be ${f.want}, got ${JSON.stringify(value[f.key])}`);
  }
  return value as Partial<GatewayConfig>;
}

export function readConfigFile(path: string): Partial<GatewayConfig> {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (e) {
    throw new ConfigError(`cannot read config file ${path}: ${(e as Error).message}`);
  }
  try {
    return checkPartialConfig(JSON.parse(text), path);
  } catch (e) {
    if (e instanceof ConfigError) throw e;
    throw new ConfigError(`${path} is not valid JSON: ${(e as Error).message}`);
  }
}

/** Secrets from the environment: OPENCLAW_RL_API_KEYS, OPENCLAW_RL_ADMIN_KEYS, OPENCLAW_RL_METRICS_KEYS (comma-separated). */
export function configFromEnv(env: NodeJS.ProcessEnv): Partial<GatewayConfig> {
  const list = (v: string | undefined) =>
    (v ?? '')
      .split(',')
      .map((s) => s.trim())
      .filter(Boolean);
  const out: Partial<GatewayConfig> = {};
  if (env.OPENCLAW_RL_API_KEYS) out.apiKeys = list(env.OPENCLAW_RL_API_KEYS);
  if (env.OPENCLAW_RL_ADMIN_KEYS) out.adminKeys = list(env.OPENCLAW_RL_ADMIN_KEYS);
  if (env.OPENCLAW_RL_METRICS_KEYS) out.metricsKeys = list(env.OPENCLAW_RL_METRICS_KEYS);
  return out;
}

/** Later layers win: defaults < file < environment < flags. */
export function resolveConfig(...layers: Partial<GatewayConfig>[]): GatewayConfig {
  const merged = { ...DEFAULT_CONFIG };
  for (const layer of layers) {
    for (const [k, v] of Object.entries(layer)) if (v !== undefined) (merged as Record<string, unknown>)[k] = v;
  }
  checkPartialConfig(merged, 'config');
  checkBind(merged);
  return merged;
}

export function isLoopback(host: string): boolean {
  return host === 'localhost' || host === '::1' || /^127(\.\d{1,3}){3}$/.test(host) || host === '::ffff:127.0.0.1';
}

export function checkBind(config: GatewayConfig): void {
  if (!isLoopback(config.host) && config.apiKeys.length === 0) {
    throw new ConfigError(
      `refusing to listen on ${config.host} without API keys: anyone who can reach it could use the model and read nothing less than your agent's conversations. ` +
        'Set apiKeys in the config file or OPENCLAW_RL_API_KEYS, or bind to 127.0.0.1',
    );
  }
}

/** The config with secrets replaced by their count, for the startup log. */
export function redactedConfig(config: GatewayConfig): Record<string, unknown> {
  return {
    ...config,
    apiKeys: `${config.apiKeys.length} key(s)`,
    adminKeys: `${config.adminKeys.length} key(s)`,
    metricsKeys: `${config.metricsKeys.length} key(s)`,
  };
}
