// config.json of a Hugging Face model folder -> the one normalized record the engine uses.
// Unsupported or inconsistent configs fail here, with the file and the field named, instead of
// deep inside the forward pass.

export type ModelFamily = 'qwen3' | 'qwen2' | 'llama';

export interface Llama3RopeScaling {
  factor: number;
  lowFreqFactor: number;
  highFreqFactor: number;
  originalMaxPositionEmbeddings: number;
}

export interface ModelConfig {
  family: ModelFamily;
  vocabSize: number;
  hiddenSize: number;
  intermediateSize: number;
  numLayers: number;
  numHeads: number;
  numKvHeads: number;
  headDim: number;
  rmsNormEps: number;
  ropeTheta: number;
  ropeScaling: Llama3RopeScaling | null;
  maxPositionEmbeddings: number;
  tieWordEmbeddings: boolean;
  /** Bias on the q, k and v projections (always on for Qwen2, `attention_bias` elsewhere). */
  qkvBias: boolean;
  /** Bias on the output projection (`attention_bias` for Llama). */
  oBias: boolean;
  /** Per-head RMSNorm of q and k before RoPE (Qwen3). */
  qkNorm: boolean;
  bosTokenId: number | null;
  eosTokenIds: number[];
}

const FAMILY_BY_MODEL_TYPE: Record<string, ModelFamily> = { qwen3: 'qwen3', qwen2: 'qwen2', llama: 'llama' };
const ARCHITECTURE_BY_FAMILY: Record<ModelFamily, string> = {
  qwen3: 'Qwen3ForCausalLM',
  qwen2: 'Qwen2ForCausalLM',
  llama: 'LlamaForCausalLM',
};

export class ModelConfigError extends Error {
  constructor(source: string, message: string) {
    super(`${source}: ${message}`);
    this.name = 'ModelConfigError';
  }
}

export function parseModelConfig(json: unknown, source = 'config.json'): ModelConfig {
  const fail = (message: string): never => {
    throw new ModelConfigError(source, message);
  };
  if (typeof json !== 'object' || json === null || Array.isArray(json)) fail('expected a JSON object');
  const c = json as Record<string, unknown>;

  const modelType = c.model_type;
  if (typeof modelType !== 'string') fail('missing "model_type"');
  const family = FAMILY_BY_MODEL_TYPE[modelType as string];
  if (!family) {
    fail(
      `unsupported architecture: model_type "${String(modelType)}" (supported: ${Object.keys(FAMILY_BY_MODEL_TYPE).join(', ')})`,
    );
  }
  const fam = family as ModelFamily;
  if (
    Array.isArray(c.architectures) &&
    c.architectures.length > 0 &&
    !c.architectures.includes(ARCHITECTURE_BY_FAMILY[fam])
  ) {
    fail(
      `architectures ${JSON.stringify(c.architectures)} do not include ${ARCHITECTURE_BY_FAMILY[fam]} for model_type "${fam}"`,
    );
  }

  const int = (key: string, fallback?: number): number => {
    const v = c[key] ?? fallback;
    if (typeof v !== 'number' || !Number.isInteger(v) || v <= 0)
      fail(`"${key}" must be a positive integer, got ${JSON.stringify(c[key])}`);
    return v as number;
  };
  const num = (key: string, fallback: number): number => {
    const v = c[key] ?? fallback;
    if (typeof v !== 'number' || !Number.isFinite(v) || v <= 0)
      fail(`"${key}" must be a positive number, got ${JSON.stringify(c[key])}`);
    return v as number;
  };
  const bool = (key: string, fallback: boolean): boolean => {
    const v = c[key] ?? fallback;
    if (typeof v !== 'boolean') fail(`"${key}" must be true or false, got ${JSON.stringify(c[key])}`);
    return v as boolean;
  };

  const hiddenSize = int('hidden_size');
  const numHeads = int('num_attention_heads');
  const numKvHeads = int('num_key_value_heads', numHeads);
  if (numHeads % numKvHeads !== 0)
    fail(`num_attention_heads ${numHeads} is not a multiple of num_key_value_heads ${numKvHeads}`);
  const headDim = c.head_dim == null ? hiddenSize / numHeads : int('head_dim');
  if (!Number.isInteger(headDim))
    fail(`hidden_size ${hiddenSize} is not divisible by num_attention_heads ${numHeads} and no head_dim is given`);
  if (headDim % 2 !== 0) fail(`head_dim ${headDim} must be even for rotary embeddings`);
  if (c.hidden_act != null && c.hidden_act !== 'silu')
    fail(`hidden_act "${String(c.hidden_act)}" is not supported (only silu)`);
  if (c.mlp_bias === true) fail('mlp_bias true is not supported');

  const attentionBias = bool('attention_bias', false);
  const eos = c.eos_token_id;
  const eosTokenIds = eos == null ? [] : Array.isArray(eos) ? eos : [eos];
  if (!eosTokenIds.every((e) => Number.isInteger(e) && (e as number) >= 0))
    fail(`"eos_token_id" must be an id or a list of ids, got ${JSON.stringify(eos)}`);
  const bos = c.bos_token_id;
  if (bos != null && !(Number.isInteger(bos) && (bos as number) >= 0))
    fail(`"bos_token_id" must be an id, got ${JSON.stringify(bos)}`);

  return {
    family: fam,
    vocabSize: int('vocab_size'),
    hiddenSize,
    intermediateSize: int('intermediate_size'),
    numLayers: int('num_hidden_layers'),
    numHeads,
    numKvHeads,
    headDim,
    rmsNormEps: num('rms_norm_eps', 1e-6),
    ropeTheta: num('rope_theta', 10000),
    ropeScaling: parseRopeScaling(c.rope_scaling, fail),
    maxPositionEmbeddings: int('max_position_embeddings', 4096),
    tieWordEmbeddings: bool('tie_word_embeddings', false),
    qkvBias: fam === 'qwen2' ? true : attentionBias,
    oBias: fam === 'llama' ? attentionBias : false,
    qkNorm: fam === 'qwen3',
    bosTokenId: (bos as number | null | undefined) ?? null,
    eosTokenIds: eosTokenIds as number[],
  };
}

function parseRopeScaling(raw: unknown, fail: (m: string) => never): Llama3RopeScaling | null {
  if (raw == null) return null;
  if (typeof raw !== 'object') return fail(`"rope_scaling" must be an object or null, got ${JSON.stringify(raw)}`);
  const r = raw as Record<string, unknown>;
  const type = r.rope_type ?? r.type;
  if (type === 'default') return null;
  if (type !== 'llama3') return fail(`rope_scaling type ${JSON.stringify(type)} is not supported (supported: llama3)`);
  const pos = (key: string): number => {
    const v = r[key];
    if (typeof v !== 'number' || !(v > 0))
      fail(`rope_scaling.${key} must be a positive number, got ${JSON.stringify(v)}`);
    return v as number;
  };
  const scaling = {
    factor: pos('factor'),
    lowFreqFactor: pos('low_freq_factor'),
    highFreqFactor: pos('high_freq_factor'),
    originalMaxPositionEmbeddings: pos('original_max_position_embeddings'),
  };
  if (scaling.highFreqFactor <= scaling.lowFreqFactor)
    fail('rope_scaling.high_freq_factor must be larger than low_freq_factor');
  return scaling;
}

/** The config.json a model of this shape is written with (the inverse of parseModelConfig). */
export function configJson(cfg: ModelConfig): Record<string, unknown> {
  const base: Record<string, unknown> = {
    architectures: [ARCHITECTURE_BY_FAMILY[cfg.family]],
    model_type: cfg.family,
    vocab_size: cfg.vocabSize,
    hidden_size: cfg.hiddenSize,
    intermediate_size: cfg.intermediateSize,
    num_hidden_layers: cfg.numLayers,
    num_attention_heads: cfg.numHeads,
    num_key_value_heads: cfg.numKvHeads,
    head_dim: cfg.headDim,
    hidden_act: 'silu',
    rms_norm_eps: cfg.rmsNormEps,
    rope_theta: cfg.ropeTheta,
    rope_scaling: cfg.ropeScaling && {
      rope_type: 'llama3',
      factor: cfg.ropeScaling.factor,
      low_freq_factor: cfg.ropeScaling.lowFreqFactor,
      high_freq_factor: cfg.ropeScaling.highFreqFactor,
      original_max_position_embeddings: cfg.ropeScaling.originalMaxPositionEmbeddings,
    },
    max_position_embeddings: cfg.maxPositionEmbeddings,
    tie_word_embeddings: cfg.tieWordEmbeddings,
    bos_token_id: cfg.bosTokenId,
    eos_token_id: cfg.eosTokenIds.length === 1 ? cfg.eosTokenIds[0] : cfg.eosTokenIds,
    torch_dtype: 'float32',
  };
  if (cfg.family !== 'qwen2') base.attention_bias = cfg.family === 'llama' ? cfg.oBias : cfg.qkvBias;
  return base;
}

/** Inverse frequencies of the rotary embedding, with Llama 3's frequency-dependent scaling. */
export function ropeInvFreq(cfg: ModelConfig): Float32Array {
  const half = cfg.headDim / 2;
  const out = new Float32Array(half);
  for (let i = 0; i < half; i++) {
    let f = 1 / cfg.ropeTheta ** ((2 * i) / cfg.headDim);
    const s = cfg.ropeScaling;
    if (s) {
      const wavelen = (2 * Math.PI) / f;
      const lowFreqWavelen = s.originalMaxPositionEmbeddings / s.lowFreqFactor;
      const highFreqWavelen = s.originalMaxPositionEmbeddings / s.highFreqFactor;
      if (wavelen > lowFreqWavelen) f = f / s.factor;
      else if (wavelen >= highFreqWavelen) {
        const smooth =
          (s.originalMaxPositionEmbeddings / wavelen - s.lowFreqFactor) / (s.highFreqFactor - s.lowFreqFactor);
        f = (1 - smooth) * (f / s.factor) + smooth * f;
      }
    }
    out[i] = f;
  }
  return out;
}
