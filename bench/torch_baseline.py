#!/usr/bin/env python3
"""Side-by-side baseline for `dsinfer bench`: PyTorch + transformers (eager, BF16, DynamicCache) on the
same model shape with random weights, on the same GPU. Prints rows in the CSV columns of dsinfer bench
(label torch-transformers; roofline columns left empty: the ratio to dsinfer is what is read).

usage: python3 bench/torch_baseline.py [--config configs/deepseek-v2-lite.json] [--batch 1,64] [--ctx 1024]
                                       [--prompt 512,2048] [--steps 8] [--csv FILE]
"""
import argparse, json, sys, time

import torch
import transformers
from transformers import AutoConfig, AutoModelForCausalLM


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", default="configs/deepseek-v2-lite.json")
    ap.add_argument("--batch", default="1,64")
    ap.add_argument("--ctx", default="1024")
    ap.add_argument("--prompt", default="512,2048")
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--csv")
    a = ap.parse_args()
    raw = json.load(open(a.config))
    raw.pop("quantization_config", None)
    cfg = AutoConfig.for_model(raw.pop("model_type"), **{k: v for k, v in raw.items() if k != "architectures"})
    cfg._attn_implementation = "sdpa"
    torch.manual_seed(0)
    t0 = time.time()
    with torch.device("cuda"):
        model = AutoModelForCausalLM.from_config(cfg, torch_dtype=torch.bfloat16)
    model.eval()
    print(f"torch {torch.__version__} transformers {transformers.__version__}: {type(model).__name__} built in "
          f"{time.time() - t0:.1f} s, {sum(p.numel() for p in model.parameters()) / 1e9:.2f} B parameters", flush=True)
    V = cfg.vocab_size
    rows = []
    with torch.inference_mode():
        for L in [int(x) for x in a.ctx.split(",") if x]:
            for B in [int(x) for x in a.batch.split(",") if x]:
                ids = torch.randint(0, V, (B, L), device="cuda")
                out = model(ids, use_cache=True)
                pkv = out.past_key_values
                tok = torch.randint(0, V, (B, 1), device="cuda")
                for s in range(2 + a.steps):
                    if s == 2:
                        torch.cuda.synchronize()
                        t = time.time()
                    out = model(tok, past_key_values=pkv, use_cache=True)
                    pkv = out.past_key_values
                    logits = out.logits[:, -1].float().cpu()   # logits to the host, as dsinfer's API returns them
                dt = (time.time() - t) / a.steps
                rows.append(("decode", B, L, B / dt, dt * 1e3))
                print(f"torch decode batch {B:4d} ctx {L:6d} {B / dt:10.1f} tok/s {dt * 1e3:9.3f} ms", flush=True)
                del out, pkv
                torch.cuda.empty_cache()
        for i, P in enumerate([int(x) for x in a.prompt.split(",") if x]):
            ids = torch.randint(0, V, (1, P), device="cuda")
            if i == 0:
                model(ids[:, :64])
            torch.cuda.synchronize()
            t = time.time()
            out = model(ids, use_cache=True, logits_to_keep=1)
            out.logits.float().cpu()
            dt = time.time() - t
            rows.append(("prefill", 1, P, P / dt, dt * 1e3))
            print(f"torch prefill len {P:6d} {P / dt:10.1f} tok/s {dt * 1e3:9.3f} ms", flush=True)
    if a.csv:
        with open(a.csv, "a") as f:
            for kind, B, L, tps, ms in rows:
                f.write(f"torch-transformers,{kind},bf16,{B},{L},{tps:.2f},{ms:.4f},,,,,,,\n")


if __name__ == "__main__":
    sys.exit(main())
