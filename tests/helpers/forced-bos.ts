// A small model whose every next-token distribution has BOS (256) as its argmax by far: the layers'
// output projections are zero, so the residual stream is the token's embedding, every embedding row
// starts with +1, and BOS's row is 30 times the first axis (the head is tied). For tests that the
// engines never pick a special other than EOS, whatever the logits say.
import { FUZZ_LUT4_CONFIG } from "../../formats/fuzz-kit.ts";
import type { ModelConfig } from "../../model/config.ts";
import { initParams } from "../../model/init.ts";
import type { Tensor } from "../../model/tensor.ts";

/** The forced model's config: lut4-storable (hidden 32), tied head. */
export const FORCED_CONFIG: ModelConfig = { ...FUZZ_LUT4_CONFIG, max_position_embeddings: 64 };

/** The forced model's tensors (seeded: the same on every run). */
export function forcedBosTensors(): Tensor[] {
  const tensors = initParams(FORCED_CONFIG, 7, 0.05);
  const H = FORCED_CONFIG.hidden_size;
  for (const t of tensors) {
    if (t.name.endsWith("o_proj.weight") || t.name.endsWith("down_proj.weight")) t.data.fill(0);
    if (t.name === "model.embed_tokens.weight") {
      for (let id = 0; id < FORCED_CONFIG.vocab_size; id++) t.data[id * H] = 1;
      t.data.fill(0, 256 * H, 257 * H);
      t.data[256 * H] = 30;
    }
  }
  return tensors;
}
