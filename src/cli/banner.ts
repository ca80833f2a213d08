// What serve prints at startup for a person: where it listens, what it learns with, and a
// ready-to-paste OpenClaw provider config whose side tasks go to the side model id (so they are
// answered but never trained).

import type { NetworkInterfaceInfo } from 'node:os';

export interface BannerInput {
  url: string;
  /** The model's context (max_position_embeddings): OpenClaw compacts before a prompt outgrows it. */
  contextLength: number;
  mainModel: string;
  /** The first side model id, or null when none is configured. */
  sideModel: string | null;
  apiKeyRequired: boolean;
  learning: string;
  store: string;
  /** The memory plan in one line: prefix cache, longest trained sample. */
  memory: string;
}

export function startupBanner(b: BannerInput): string {
  const side = b.sideModel ?? 'side-model';
  const lines = [
    `openclaw-rl is serving ${b.mainModel} at ${b.url}`,
    `  learning: ${b.learning}`,
    `  store:    ${b.store}`,
    `  memory:   ${b.memory}`,
    '',
    'Point OpenClaw at it (openclaw.json, under "models.providers", and the agent defaults):',
    '',
    ...openclawProviderSnippet({
      url: b.url,
      contextLength: b.contextLength,
      mainModel: b.mainModel,
      sideModel: side,
      apiKey: b.apiKeyRequired ? '<one of your OPENCLAW_RL_API_KEYS>' : 'local',
    })
      .split('\n')
      .map((l) => `  ${l}`),
  ];
  if (b.sideModel === null)
    lines.push(
      '',
      `  (start serve with --side-model ${side} so OpenClaw's side tasks are recorded as side turns and not trained)`,
    );
  return `${lines.join('\n')}\n`;
}

/**
 * The base URL a client uses: the bound address, except that a wildcard bind (0.0.0.0, ::) is
 * reached through one of the machine's external addresses (loopback when it has none).
 */
export function advertisedUrl(
  host: string,
  port: number,
  interfaces: Record<string, NetworkInterfaceInfo[] | undefined>,
): string {
  let address = host;
  if (host === '0.0.0.0' || host === '::') {
    const external = Object.values(interfaces)
      .flat()
      .find((i) => i !== undefined && !i.internal && i.family === 'IPv4');
    address = external?.address ?? '127.0.0.1';
  }
  return `http://${address.includes(':') ? `[${address}]` : address}:${port}/v1`;
}

export function openclawProviderSnippet(o: {
  url: string;
  contextLength: number;
  mainModel: string;
  sideModel: string;
  apiKey: string;
}): string {
  const model = (id: string, name: string) => ({
    id,
    name,
    reasoning: false,
    input: ['text'],
    contextWindow: o.contextLength,
    maxTokens: Math.min(1024, Math.floor(o.contextLength / 4)),
    compat: { sendSessionAffinityHeaders: true, supportsPromptCacheKey: true },
  });
  const config = {
    models: {
      mode: 'merge',
      providers: {
        'openclaw-rl': {
          baseUrl: o.url,
          apiKey: o.apiKey,
          api: 'openai-completions',
          models: [model(o.mainModel, 'Policy (learning)'), model(o.sideModel, 'Side tasks')],
        },
      },
    },
    agents: {
      defaults: {
        model: { primary: `openclaw-rl/${o.mainModel}` },
        heartbeat: { model: `openclaw-rl/${o.sideModel}` },
        compaction: { model: `openclaw-rl/${o.sideModel}`, memoryFlush: { model: `openclaw-rl/${o.sideModel}` } },
        utilityModel: `openclaw-rl/${o.sideModel}`,
      },
    },
  };
  return JSON.stringify(config, null, 2);
}
