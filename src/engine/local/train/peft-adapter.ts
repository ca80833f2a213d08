// LoRA adapters in the PEFT folder format (what vLLM, SGLang and PEFT itself load), and a LoRA
// merged into the base weights (`export --merge`).

import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { makePrivateDir } from '../../../private-files.js';
import type { Kernels } from '../kernels/kernels.js';
import type { ModelConfig } from '../model/config.js';
import { readSafetensorsHeader, readTensorInto, type TensorEntry, writeSafetensors } from '../model/safetensors.js';
import { allocateParams, type ParamStore } from '../model/weights.js';
import { CheckpointError, writeFileAtomic } from './durable-files.js';
import { linearDims, Lora, LORA_TARGETS, type LoraSpec, PEFT_MODULE } from './lora.js';
import type { LinearName } from './model-params.js';

export const ADAPTER_CONFIG = 'adapter_config.json';
export const ADAPTER_WEIGHTS = 'adapter_model.safetensors';

// PEFT names target modules by their last path component (q_proj, ..., down_proj).
const TARGET_BY_HF_NAME = new Map(LORA_TARGETS.map((t) => [PEFT_MODULE[t].split('.').pop()!, t]));

/**
 * Writes `adapter_config.json` and `adapter_model.safetensors` into dir (created if needed),
 * each file atomically. For a folder that appears all at once, write into a fresh folder and
 * rename it, as saveCheckpoint does.
 */
export function writePeftAdapter(dir: string, lora: Lora, opts: { baseModel: string }): void {
  makePrivateDir(dir);
  writeSafetensors(
    join(dir, ADAPTER_WEIGHTS),
    lora.tensors.map((t) => ({ name: t.name, shape: t.shape, data: lora.view(t) })),
  );
  const config = {
    peft_type: 'LORA',
    task_type: 'CAUSAL_LM',
    base_model_name_or_path: opts.baseModel,
    r: lora.spec.rank,
    lora_alpha: lora.spec.alpha,
    lora_dropout: 0,
    target_modules: LORA_TARGETS.filter((t) => lora.spec.targets.includes(t)).map(
      (t) => PEFT_MODULE[t].split('.').pop()!,
    ),
    bias: 'none',
    fan_in_fan_out: false,
    inference_mode: true,
    use_rslora: false,
    use_dora: false,
    modules_to_save: null,
  };
  writeFileAtomic(join(dir, ADAPTER_CONFIG), `${JSON.stringify(config, null, 2)}\n`);
}

/** Reads a PEFT LoRA adapter folder for this model, checking the config and every tensor. */
export function readPeftAdapter(dir: string, cfg: ModelConfig): Lora {
  const configPath = join(dir, ADAPTER_CONFIG),
    weightsPath = join(dir, ADAPTER_WEIGHTS);
  const spec = parseAdapterConfig(configPath);
  if (!existsSync(weightsPath)) {
    const hint = existsSync(join(dir, 'adapter_model.bin'))
      ? ' (adapter_model.bin, a PyTorch pickle, is not read: save with safe_serialization=True)'
      : '';
    throw new CheckpointError(weightsPath, `missing${hint}`);
  }
  const lora = new Lora(cfg, spec);
  const found = new Map<string, TensorEntry>();
  for (const [name, entry] of readSafetensorsHeader(weightsPath).tensors) {
    const canonical = canonicalLoraName(name);
    if (!canonical)
      throw new CheckpointError(
        weightsPath,
        `tensor "${name}" is not a LoRA A/B weight of a decoder layer (modules_to_save and embedding adapters are not supported)`,
      );
    if (found.has(canonical))
      throw new CheckpointError(
        weightsPath,
        `tensor "${name}" duplicates "${found.get(canonical)!.name}" (several adapters in one file?)`,
      );
    found.set(canonical, entry);
  }
  for (const t of lora.tensors) {
    const entry = found.get(t.name);
    if (!entry)
      throw new CheckpointError(
        weightsPath,
        `missing tensor "${t.name}" [${t.shape.join(', ')}] (${ADAPTER_CONFIG} targets ${spec.targets.length} modules in each of ${cfg.numLayers} layers)`,
      );
    if (entry.shape.length !== 2 || entry.shape[0] !== t.shape[0] || entry.shape[1] !== t.shape[1]) {
      throw new CheckpointError(
        weightsPath,
        `tensor "${entry.name}" has shape [${entry.shape.join(', ')}], r=${spec.rank} and this model need [${t.shape.join(', ')}]`,
      );
    }
  }
  const expected = new Set(lora.tensors.map((t) => t.name));
  const extra = [...found.entries()].filter(([canonical]) => !expected.has(canonical)).map(([, e]) => `"${e.name}"`);
  if (extra.length > 0) {
    const list = extra.slice(0, 3).join(', ') + (extra.length > 3 ? ` and ${extra.length - 3} more` : '');
    throw new CheckpointError(
      weightsPath,
      `tensors ${list} match no layer or target module of ${ADAPTER_CONFIG} for this model`,
    );
  }
  for (const t of lora.tensors) readTensorInto(weightsPath, found.get(t.name)!, lora.view(t));
  return lora;
}

/**
 * The name lora.ts uses for a PEFT tensor name, or null when it is no LoRA weight. Other tools
 * drop the `base_model.model.` prefix or keep the adapter name (`lora_A.default.weight`).
 */
function canonicalLoraName(name: string): string | null {
  const m =
    /^(?:base_model\.model\.)?(model\.layers\.\d+\.(?:self_attn|mlp)\.[a-z_]+)\.lora_([AB])(?:\.[\w-]+)?\.weight$/.exec(
      name,
    );
  return m ? `base_model.model.${m[1]}.lora_${m[2]}.weight` : null;
}

function parseAdapterConfig(path: string): LoraSpec {
  const fail = (m: string): never => {
    throw new CheckpointError(path, m);
  };
  if (!existsSync(path)) fail('missing (not a PEFT adapter folder?)');
  let c: Record<string, unknown> = {};
  try {
    c = JSON.parse(readFileSync(path, 'utf8')) as Record<string, unknown>;
  } catch (e) {
    fail(`not valid JSON: ${(e as Error).message}`);
  }
  if (typeof c !== 'object' || c === null || Array.isArray(c)) fail('expected a JSON object');
  if (c.peft_type !== 'LORA') fail(`peft_type is ${JSON.stringify(c.peft_type)}; only "LORA" adapters load`);
  if (c.task_type !== undefined && c.task_type !== 'CAUSAL_LM')
    fail(`task_type is ${JSON.stringify(c.task_type)}; expected "CAUSAL_LM"`);
  const rank = c.r,
    alpha = c.lora_alpha ?? c.r;
  if (!(typeof rank === 'number' && Number.isInteger(rank) && rank > 0))
    fail(`"r" must be a positive integer, got ${JSON.stringify(c.r)}`);
  if (!(typeof alpha === 'number' && alpha > 0))
    fail(`"lora_alpha" must be a positive number, got ${JSON.stringify(c.lora_alpha)}`);
  // Settings that change the math or the tensors; reading past them would load a different model.
  const unsupported: [boolean, string][] = [
    [c.bias !== undefined && c.bias !== 'none', `bias ${JSON.stringify(c.bias)} (only "none")`],
    [c.fan_in_fan_out === true, 'fan_in_fan_out true'],
    [c.use_rslora === true, 'use_rslora true (scale alpha/sqrt(r))'],
    [c.use_dora === true, 'use_dora true'],
    [Array.isArray(c.modules_to_save) && c.modules_to_save.length > 0, 'modules_to_save'],
    [c.layers_to_transform !== undefined && c.layers_to_transform !== null, 'layers_to_transform'],
    [isNonEmptyObject(c.rank_pattern) || isNonEmptyObject(c.alpha_pattern), 'rank_pattern / alpha_pattern'],
  ];
  for (const [bad, what] of unsupported) if (bad) fail(`unsupported setting: ${what}`);
  return { rank: rank as number, alpha: alpha as number, targets: parseTargets(c.target_modules, fail) };
}

function parseTargets(raw: unknown, fail: (m: string) => never): LinearName[] {
  if (raw === 'all-linear') return [...LORA_TARGETS];
  if (!Array.isArray(raw) || raw.length === 0 || !raw.every((x) => typeof x === 'string')) {
    return fail(
      `"target_modules" must be a list of module names or "all-linear", got ${JSON.stringify(raw)} (regular expressions are not supported)`,
    );
  }
  const targets = new Set<LinearName>();
  for (const name of raw as string[]) {
    const target = TARGET_BY_HF_NAME.get(name.split('.').pop()!);
    if (!target) fail(`target module "${name}" is not one of ${[...TARGET_BY_HF_NAME.keys()].join(', ')}`);
    targets.add(target!);
  }
  return LORA_TARGETS.filter((t) => targets.has(t));
}

function isNonEmptyObject(x: unknown): boolean {
  return typeof x === 'object' && x !== null && Object.keys(x).length > 0;
}

/** A new ParamStore with every adapted projection W [out, in] += scale * B [out, r] A [r, in]. */
export function mergeLora(params: ParamStore, lora: Lora, k: Kernels): ParamStore {
  const merged = allocateParams(params.specs);
  merged.data.set(params.data);
  for (let l = 0; l < lora.cfg.numLayers; l++) {
    for (const target of lora.spec.targets) {
      const pair = lora.weights(l, target)!;
      const [inDim, outDim] = linearDims(lora.cfg, target);
      const name = `model.layers.${l}.${PEFT_MODULE[target]}.weight`;
      const W = merged.get(name);
      if (W.length !== inDim * outDim)
        throw new RangeError(
          `mergeLora: ${name} holds ${W.length} values, the adapter's model needs [${outDim}, ${inDim}]`,
        );
      k.sgemm(false, false, outDim, inDim, pair.rank, pair.scale, pair.B, pair.rank, pair.A, inDim, 1, W, inDim);
    }
  }
  return merged;
}
