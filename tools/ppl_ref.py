#!/usr/bin/env python3
"""Reference perplexity of a DeepSeek-V3 model folder on a text file, computed with PyTorch and
Hugging Face transformers (DeepseekV3ForCausalLM) in float32. `dsinfer perplexity` must match it.

    python3 tools/ppl_ref.py --model models/demo --file tests/data/demo-heldout.txt [--window 512]

Procedure (the definition the engine reproduces):
  1. Read the file as UTF-8, unchanged (no stripping; the final newline is part of the text).
  2. Tokenize the whole text at once with the folder's tokenizer.json (HF `tokenizers`),
     add_special_tokens=False. Call the ids t[0..n-1].
  3. Cut t into consecutive, non-overlapping chunks of S = window-1 tokens (the last chunk may be
     shorter). Each chunk c is scored on its own, from an empty cache: input = [BOS id 0] + c at
     positions 0..len(c), one forward pass.
  4. Logits at position j (which has seen BOS + c[0..j-1]) predict c[j]; its NLL is
     -log_softmax(logits[j])[c[j]]. Every text token is predicted exactly once; BOS is not predicted.
  5. mean NLL = (sum of all NLLs) / n;  perplexity = exp(mean NLL).
Weights: the stored tensors, upcast to float32 (FP8 weights dequantized: w = fp8 * weight_scale_inv
of its 128x128 block); all arithmetic float32 (TF32 off), eager attention, eager experts.
"""
import argparse, json, math, os, sys

import torch


def _fp32_only():
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    try:
        torch.set_float32_matmul_precision("highest")
    except Exception:
        pass


def dequant_fp8(q, s, block=128):
    """W[r, c] = float(q[r, c]) * s[r // block, c // block]."""
    w = q.float()
    rows, cols = w.shape
    sf = s.float().repeat_interleave(block, 0).repeat_interleave(block, 1)[:rows, :cols]
    return w * sf


def read_checkpoint(model_dir):
    """Released-format tensors of a folder, as float32 (FP8 dequantized), keyed by released names."""
    from safetensors.torch import load_file
    files = []
    idx = os.path.join(model_dir, "model.safetensors.index.json")
    if os.path.exists(idx):
        files = sorted(set(json.load(open(idx))["weight_map"].values()))
    else:
        files = ["model.safetensors"]
    raw = {}
    for f in files:
        raw.update(load_file(os.path.join(model_dir, f)))
    out = {}
    for k, v in raw.items():
        if k.endswith("_scale_inv"):
            continue
        if v.dtype == torch.float8_e4m3fn:
            v = dequant_fp8(v, raw[k + "_scale_inv"])
        out[k] = v.float()
    return out


def set_impl(model, attn="eager", experts="eager"):
    """Select transformers' attention and experts implementations (best effort across versions)."""
    for name, val in (("attn", attn), ("experts", experts)):
        if val is None:
            continue
        fn = getattr(model, "set_%s_implementation" % name, None)
        done = False
        if fn is not None:
            try:
                fn(val)
                done = True
            except Exception:
                done = False
        if not done:
            try:
                setattr(model.config, "_%s_implementation" % name, val)
            except Exception:
                pass


def to_model_layout(sd, model):
    """Released per-expert layout -> the layout of this transformers version (fused experts in v5)."""
    msd_keys = set(model.state_dict().keys())
    sd = dict(sd)
    for mk in sorted(msd_keys):
        if mk.endswith("mlp.experts.gate_up_proj"):
            pre = mk[: -len("gate_up_proj")]
            e, rows = 0, []
            while pre + "%d.gate_proj.weight" % e in sd:
                rows.append(torch.cat([sd.pop(pre + "%d.gate_proj.weight" % e),
                                       sd.pop(pre + "%d.up_proj.weight" % e)], 0))
                e += 1
            sd[mk] = torch.stack(rows)
        elif mk.endswith("mlp.experts.down_proj"):
            pre = mk[: -len("down_proj")]
            e, rows = 0, []
            while pre + "%d.down_proj.weight" % e in sd:
                rows.append(sd.pop(pre + "%d.down_proj.weight" % e))
                e += 1
            sd[mk] = torch.stack(rows)
    return sd


def load_model(model_dir, device="cpu"):
    """A float32 DeepseekV3ForCausalLM holding exactly the folder's stored weights."""
    from transformers import AutoConfig, DeepseekV3ForCausalLM
    cfg = AutoConfig.from_pretrained(model_dir)
    if hasattr(cfg, "quantization_config"):
        try:
            delattr(cfg, "quantization_config")  # we dequantize ourselves
        except Exception:
            cfg.quantization_config = None
    torch.manual_seed(0)
    model = DeepseekV3ForCausalLM(cfg).float()
    sd = to_model_layout(read_checkpoint(model_dir), model)
    missing, unexpected = model.load_state_dict(sd, strict=False)
    assert not unexpected, unexpected
    assert not [m for m in missing if "rotary" not in m], missing
    set_impl(model)
    return model.to(device).eval()


def load_tokenizer(model_dir):
    from tokenizers import Tokenizer
    return Tokenizer.from_file(os.path.join(model_dir, "tokenizer.json"))


def text_ids(tok, path):
    with open(path, "rb") as f:
        text = f.read().decode("utf-8")
    return tok.encode(text, add_special_tokens=False).ids


@torch.no_grad()
def perplexity(model, ids, window=512, bos=0, batch=8, device="cpu"):
    S = window - 1
    chunks = [ids[i:i + S] for i in range(0, len(ids), S)]
    per_window = []
    i = 0
    while i < len(chunks):
        group = [chunks[i]]
        while len(group) < batch and i + len(group) < len(chunks) and len(chunks[i + len(group)]) == len(group[0]):
            group.append(chunks[i + len(group)])
        x = torch.tensor([[bos] + c for c in group], dtype=torch.long, device=device)
        logits = model(input_ids=x, use_cache=False).logits.float()
        lp = torch.log_softmax(logits[:, :-1], dim=-1)
        tgt = x[:, 1:]
        nll = -lp.gather(2, tgt.unsqueeze(-1)).squeeze(-1).double().sum(dim=1)
        per_window.extend(float(v) for v in nll.cpu())
        i += len(group)
    total = math.fsum(per_window)
    n = len(ids)
    return {"tokens": n, "windows": len(chunks), "window": window, "nll_sum": total,
            "mean_nll": total / n, "ppl": math.exp(total / n), "per_window_nll": per_window}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True)
    ap.add_argument("--file", required=True)
    ap.add_argument("--window", type=int, default=512)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--json", help="write the result (with per-window NLL sums) here")
    a = ap.parse_args()
    _fp32_only()
    model = load_model(a.model, a.device)
    ids = text_ids(load_tokenizer(a.model), a.file)
    r = perplexity(model, ids, a.window, device=a.device)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(r, f, indent=1)
    print("tokens %d  windows %d (window %d)  mean NLL %.6f  perplexity %.4f"
          % (r["tokens"], r["windows"], r["window"], r["mean_nll"], r["ppl"]))


if __name__ == "__main__":
    main()
