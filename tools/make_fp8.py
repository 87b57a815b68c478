#!/usr/bin/env python3
"""Make an FP8 block-scaled copy of a BF16 DeepSeek-V3 model folder, in the format of the DeepSeek-V3
release: every linear projection weight (q_a_proj, q_b_proj, kv_a_proj_with_mqa, kv_b_proj, o_proj,
dense/expert/shared gate_proj, up_proj, down_proj) becomes F8_E4M3 with an F32 `weight_scale_inv`
[ceil(out/128), ceil(in/128)] such that W ~= fp8 * weight_scale_inv per 128x128 block
(scale = amax(|block|) / 448, partial blocks at the edges). Embedding, lm_head, RMSNorm weights and the
router stay BF16; e_score_correction_bias stays F32. config.json gains the release's quantization_config.

    python3 tools/make_fp8.py models/demo models/demo-fp8
"""
import json, math, os, re, shutil, sys

import torch
from safetensors.torch import load_file, save_file

BLOCK = 128
QUANT_CONFIG = {"activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8",
                "weight_block_size": [BLOCK, BLOCK]}
FP8_NAME = re.compile(r"\.(q_a_proj|q_b_proj|q_proj|kv_a_proj_with_mqa|kv_b_proj|o_proj|gate_proj|up_proj|down_proj)\.weight$")


def quantize(w, block=BLOCK):
    """float weight [out, in] -> (float8_e4m3fn [out, in], float32 scale_inv [ceil(out/b), ceil(in/b)])."""
    w = w.float()
    rows, cols = w.shape
    nbr, nbc = math.ceil(rows / block), math.ceil(cols / block)
    pad = torch.zeros(nbr * block, nbc * block, dtype=torch.float32)
    pad[:rows, :cols] = w
    blocks = pad.view(nbr, block, nbc, block)
    amax = blocks.abs().amax(dim=(1, 3)).clamp(min=1e-12)        # zero padding does not change amax
    scale = amax / 448.0
    q = (blocks / scale[:, None, :, None]).to(torch.float8_e4m3fn)
    q = q.view(nbr * block, nbc * block)[:rows, :cols].contiguous()
    assert not torch.isnan(q.float()).any()
    return q, scale.contiguous()


def convert(src, dst):
    os.makedirs(dst, exist_ok=True)
    sd = load_file(os.path.join(src, "model.safetensors"))
    out = {}
    nq = 0
    for k in sorted(sd):
        v = sd[k]
        if v.dim() == 2 and FP8_NAME.search(k):
            q, s = quantize(v)
            out[k] = q
            out[k + "_scale_inv"] = s
            nq += 1
        else:
            out[k] = v.contiguous()
    save_file(out, os.path.join(dst, "model.safetensors"), metadata={"format": "pt"})
    with open(os.path.join(src, "config.json")) as f:
        cfg = json.load(f)
    cfg["quantization_config"] = QUANT_CONFIG
    with open(os.path.join(dst, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2, sort_keys=True)
        f.write("\n")
    for name in ("tokenizer.json", "tokenizer_config.json", "generation_config.json"):
        if os.path.exists(os.path.join(src, name)):
            shutil.copyfile(os.path.join(src, name), os.path.join(dst, name))
    return nq


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    n = convert(sys.argv[1], sys.argv[2])
    print("quantized %d weights -> %s" % (n, sys.argv[2]))
