// serve's --sampler: who generates. `embedded` (default): the local engine. `vllm` / `sglang`:
// the servers at --sampler-url (one or several, comma-separated), through the session-affine
// router; the embedded engine stays loaded for training, the teacher and the self-judge, and each
// published version is written as a folder under DATA/versions for the servers to load (the
// servers must read that folder: run them on this machine, or share it at the same path).

import type { Sampler } from '../engine/types.js';
import type { HttpSampler } from '../engine/remote/http-sampler.js';
import { SamplerRouter } from '../engine/remote/router.js';
import { SglangSampler } from '../engine/remote/sglang.js';
import { VllmSampler } from '../engine/remote/vllm.js';
import { CliError } from './args.js';

export const SAMPLER_FLAGS = {
  sampler: { type: 'string' },
  'sampler-url': { type: 'string' },
  'sampler-model': { type: 'string' },
} as const;

export const SAMPLER_USAGE = `

sampling:
  --sampler S             embedded (default, the TypeScript engine), llama-cpp (below), or vllm or
                          sglang: vLLM or SGLang servers generate
  --sampler-url URL,...   the servers' base URLs (e.g. http://10.0.0.5:8000); several: one session
                          stays on one server (prefix cache), a server that is down is skipped
  --sampler-model NAME    the base model's name on vLLM (--served-model-name; default: --model)
                          key: OPENCLAW_RL_SAMPLER_API_KEY. Versions go to DATA/versions, which
                          the servers must read at the same path`;

export interface RemoteSamplerChoice {
  kind: 'vllm' | 'sglang';
  urls: string[];
  model: string | null;
}

/** The --sampler flags, checked; null for the embedded engine. */
export function remoteSamplerChoice(v: Record<string, unknown>): RemoteSamplerChoice | null {
  const kind = (v.sampler as string | undefined) ?? 'embedded';
  const url = v['sampler-url'] as string | undefined;
  if (kind === 'embedded' || kind === 'llama-cpp') {
    if (url !== undefined || v['sampler-model'] !== undefined)
      throw new CliError('--sampler-url and --sampler-model need --sampler vllm or --sampler sglang');
    return null;
  }
  if (kind !== 'vllm' && kind !== 'sglang')
    throw new CliError(`--sampler takes embedded, llama-cpp, vllm or sglang, got ${JSON.stringify(kind)}`);
  if (!url) throw new CliError(`--sampler ${kind} needs --sampler-url URL[,URL...]`);
  const urls = url.split(',').map((u) => u.trim());
  for (const u of urls) {
    let parsed: URL;
    try {
      parsed = new URL(u);
    } catch {
      throw new CliError(`--sampler-url: ${JSON.stringify(u)} is not a URL such as http://127.0.0.1:8000`);
    }
    if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:')
      throw new CliError(`--sampler-url: ${u} is not an http(s) URL`);
  }
  return { kind, urls, model: (v['sampler-model'] as string | undefined) ?? null };
}

/** The router over the chosen servers. */
export function openRemoteSampler(
  choice: RemoteSamplerChoice,
  model: { name: string; contextLength: number },
): Sampler & SamplerRouter {
  const samplers: HttpSampler[] = choice.urls.map((url) => {
    const opts = { url, model: choice.model ?? model.name, contextLength: model.contextLength };
    return choice.kind === 'vllm' ? new VllmSampler(opts) : new SglangSampler(opts);
  });
  return new SamplerRouter(samplers);
}
