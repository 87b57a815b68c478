#!/usr/bin/env python3
"""Make an NVFP4 test fixture the reference way (issue 9), on the GPU machine (torch + transformers):

  python3 tools/make_nvfp4_fixture.py tests/fixtures/tiny-v3 OUT_DIR

1. Every linear projection weight of the BF16 fixture (the names tools/make_fp8.py quantizes) is
   quantized to NVIDIA ModelOpt NVFP4 (spec section 13), written in the nvidia/DeepSeek-R1-FP4 layout:
   X.weight U8 [N, K/2] (two E2M1 codes a byte, even element in the low nibble), X.weight_scale
   F8_E4M3 [N, K/16], X.weight_scale_2 F32 scalar = amax(W) / (6 * 448). Block scale =
   e4m3(amax(block) / 6 / weight_scale_2); codes by the reference rounding (spec 13.4).
2. The quantized weights are dequantized (code * block scale * weight_scale_2, fp32), saved as an fp32
   checkpoint in the released layout and loaded with transformers' from_pretrained (fp32 compute); the
   fixture's own prompts (its golden.safetensors input_ids) give the golden logits and greedy
   continuations, in the format of ../shared/fixtures (pN.input_ids, pN.logits, pN.greedy_ids,
   pN.greedy_logits) with golden.json holding each prompt's smallest top-2 margin.
"""
import json, os, re, shutil, sys, tempfile
import torch
from safetensors.torch import load_file, save_file
from transformers import DeepseekV3ForCausalLM

LINEAR = re.compile(r"\.(q_a_proj|q_b_proj|q_proj|kv_a_proj_with_mqa|kv_b_proj|o_proj|gate_proj|up_proj|down_proj)\.weight$")
E2M1 = torch.tensor([0, 0.5, 1, 1.5, 2, 3, 4, 6], dtype=torch.float32)


def e2m1_codes(v):
    """Nearest E2M1 code of v (float32 tensor), ties as in spec 13.4, sign in bit 3."""
    a = v.abs()
    mag = torch.full_like(a, 7, dtype=torch.int32)
    for code, test in reversed(list(enumerate([a <= 0.25, a < 0.75, a <= 1.25, a < 1.75, a <= 2.5, a < 3.5, a <= 5.0]))):
        mag = torch.where(test, torch.tensor(code, dtype=torch.int32), mag)
    return mag | torch.where(v < 0, 8, 0).to(torch.int32)


def nvfp4_quant(w):
    w = w.float()
    n, k = w.shape
    assert k % 16 == 0
    amax = w.abs().max()
    g = amax / (6 * 448) if amax > 0 else torch.tensor(1.0)
    g = g.float()
    blocks = w.view(n, k // 16, 16)
    bmax = blocks.abs().amax(-1)
    s8 = (bmax / 6 / g).clamp(max=448.0).to(torch.float8_e4m3fn)
    s = s8.float() * g
    codes = torch.where(s[..., None] > 0, e2m1_codes(blocks / torch.where(s > 0, s, 1.0)[..., None]), 0).view(n, k)
    packed = (codes[:, 0::2] | (codes[:, 1::2] << 4)).to(torch.uint8).contiguous()
    deq = (E2M1[(codes & 7).long()] * torch.where((codes & 8) > 0, -1.0, 1.0)).view(n, k // 16, 16) * s[..., None]
    return packed, s8.contiguous(), g.reshape(()), deq.view(n, k)


def main(src, out):
    os.makedirs(out, exist_ok=True)
    sd = load_file(os.path.join(src, "model.safetensors"))
    store, deq = {}, {}
    for k in sorted(sd):
        v = sd[k]
        if v.dim() == 2 and LINEAR.search(k):
            q, s8, g, d = nvfp4_quant(v)
            store[k], store[k + "_scale"], store[k + "_scale_2"] = q, s8, g
            deq[k] = d
        else:
            store[k] = v.contiguous()
            deq[k] = v.float()
    save_file(store, os.path.join(out, "model.safetensors"), metadata={"format": "pt"})
    cfg = json.load(open(os.path.join(src, "config.json")))
    with tempfile.TemporaryDirectory() as tmp:
        c32 = dict(cfg, torch_dtype="float32")
        json.dump(c32, open(os.path.join(tmp, "config.json"), "w"))
        save_file({k: v.contiguous() for k, v in deq.items()}, os.path.join(tmp, "model.safetensors"), metadata={"format": "pt"})
        model = DeepseekV3ForCausalLM.from_pretrained(tmp, torch_dtype=torch.float32).eval().cuda()
    cfg["quantization_config"] = {"quant_method": "modelopt", "quant_algo": "NVFP4", "group_size": 16}
    json.dump(cfg, open(os.path.join(out, "config.json"), "w"), indent=2, sort_keys=True)
    json.dump({"producer": {"name": "dsinfer tools/make_nvfp4_fixture.py"},
               "quantization": {"quant_algo": "NVFP4", "group_size": 16, "kv_cache_quant_algo": None,
                                "exclude_modules": ["lm_head"]}},
              open(os.path.join(out, "hf_quant_config.json"), "w"), indent=2)
    src_golden = load_file(os.path.join(src, "golden.safetensors"))
    g, meta = {}, {"name": os.path.basename(out.rstrip("/")), "source": src, "format": "NVFP4", "prompts": []}
    torch.backends.cuda.matmul.allow_tf32 = False
    with torch.no_grad():
        for pi in range(8):
            if f"p{pi}.input_ids" not in src_golden:
                break
            ids = src_golden[f"p{pi}.input_ids"].long()[None].cuda()
            logits = model(ids, use_cache=False).logits[0].float().cpu()
            g[f"p{pi}.input_ids"] = ids[0].cpu().to(torch.int32)
            g[f"p{pi}.logits"] = logits.contiguous()
            o = model(ids, use_cache=True)
            past, steps, toks = o.past_key_values, [o.logits[0, -1].float().cpu()], []
            nxt = o.logits[:, -1].argmax(-1)
            for _ in range(24):
                toks.append(int(nxt))
                o = model(nxt.view(1, 1), past_key_values=past, use_cache=True)
                past = o.past_key_values
                steps.append(o.logits[0, -1].float().cpu())
                nxt = o.logits[:, -1].argmax(-1)
            margins = [float(torch.topk(s, 2).values[0] - torch.topk(s, 2).values[1]) for s in steps[:24]]
            g[f"p{pi}.greedy_ids"] = torch.tensor(toks, dtype=torch.int32)
            g[f"p{pi}.greedy_logits"] = torch.stack(steps[:24]).contiguous()
            meta["prompts"].append({"len": int(ids.shape[1]), "gen_len": 24, "min_margin": min(margins)})
    save_file(g, os.path.join(out, "golden.safetensors"))
    json.dump(meta, open(os.path.join(out, "golden.json"), "w"), indent=2)
    print("wrote", out, meta)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])
