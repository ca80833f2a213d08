// What serve prints at startup for a person: where it listens, what it learns with, and a
// ready-to-paste OpenClaw provider config whose side tasks go to the side model id (so they are
// answered but never trained).

export interface BannerInput {
  url: string;
  mainModel: string;
  /** The first side model id, or null when none is configured. */
  sideModel: string | null;
  apiKeyRequired: boolean;
  learning: string;
  store: string;
}

export function startupBanner(b: BannerInput): string {
  const side = b.sideModel ?? 'side-model';
  const lines = [
    `openclaw-rl is serving ${b.mainModel} at ${b.url}`,
    `  learning: ${b.learning}`,
    `  store:    ${b.store}`,
    '',
    'Point OpenClaw at it (openclaw.json, under "models.providers", and the agent defaults):',
    '',
    ...openclawProviderSnippet({ url: b.url, mainModel: b.mainModel, sideModel: side, apiKey: b.apiKeyRequired ? '<one of your OPENCLAW_RL_API_KEYS>' : 'local' }).split('\n').map((l) => `  ${l}`),
  ];
  if (b.sideModel === null) lines.push('', `  (start serve with --side-model ${side} so OpenClaw's side tasks are recorded as side turns and not trained)`);
  return lines.join('\n') + '\n';
}

export function openclawProviderSnippet(o: { url: string; mainModel: string; sideModel: string; apiKey: string }): string {
  const model = (id: string, name: string) => ({
    id, name, reasoning: false, input: ['text'], contextWindow: 32768, maxTokens: 1024,
    compat: { sendSessionAffinityHeaders: true, supportsPromptCacheKey: true },
  });
  const config = {
    models: { mode: 'merge', providers: { 'openclaw-rl': { baseUrl: o.url, apiKey: o.apiKey, api: 'openai-completions', models: [model(o.mainModel, 'Policy (learning)'), model(o.sideModel, 'Side tasks')] } } },
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
