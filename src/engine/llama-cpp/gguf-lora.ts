// A LoRA adapter as llama.cpp's GGUF adapter file: general.type "adapter", adapter.type "lora",
// adapter.lora.alpha, the base model's architecture, and per adapted weight W (GGUF name, e.g.
// blk.0.attn_q.weight) the pair W.lora_a [rank, in] and W.lora_b [out, rank] (PEFT's shapes;
// llama.cpp checks a's inner size against W's input and b's outer size against W's output) in F32.
// llama.cpp scales the product by alpha / rank, as PEFT does. For a Llama model the rows of the q
// and k B matrices are permuted like the base weights (./gguf.ts), so W + B A stays consistent.

import type { ModelConfig } from '../local/model/config.js';
import { PEFT_MODULE, type Lora } from '../local/train/lora.js';
import { type GgufTensorSource, writeGgufFile } from './gguf-format.js';
import { ggufArchitecture, ggufTensorName, ropeLayoutOf } from './gguf.js';

/** Writes `lora` (over a base model of `cfg`) as a GGUF adapter at `out` (atomically); returns its size. */
export function writeLoraGguf(cfg: ModelConfig, lora: Lora, out: string, name = 'openclaw-rl adapter'): number {
  const tensors: GgufTensorSource[] = lora.tensors.map((t) => {
    const hf = `model.layers.${t.layer}.${PEFT_MODULE[t.target]}.weight`;
    const layout = t.part === 'B' ? ropeLayoutOf(cfg, hf, t.shape[1]) : null;
    return {
      name: `${ggufTensorName(hf)}.lora_${t.part === 'A' ? 'a' : 'b'}`,
      shape: t.shape,
      type: 'F32',
      values: () => {
        const x = lora.view(t).slice();
        return layout ? layout(x) : x;
      },
    };
  });
  return writeGgufFile(
    out,
    [
      ['general.architecture', { t: 'str', v: ggufArchitecture(cfg) }],
      ['general.type', { t: 'str', v: 'adapter' }],
      ['general.name', { t: 'str', v: name }],
      ['adapter.type', { t: 'str', v: 'lora' }],
      ['adapter.lora.alpha', { t: 'f32', v: lora.spec.alpha }],
    ],
    tensors,
  );
}
