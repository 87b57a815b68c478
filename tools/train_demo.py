#!/usr/bin/env python3
"""Trains dsinfer's demo model: a small DeepSeek-V3-architecture model (transformers'
DeepseekV3ForCausalLM: MLA with q-LoRA, YaRN RoPE, DeepSeekMoE with noaux_tc sigmoid routing, grouped
top-k, a shared expert, one dense layer) on the King James Bible, with its own byte-level BPE tokenizer
(DeepSeek-V3 pre-tokenizer, special tokens and chat template).

Two steps:
  1. here (no torch needed):  bash tools/fetch_demo_corpus.sh
        -> .corpus/kjv-train.txt (training + validation text), tests/data/demo-heldout.txt (held out)
     (it runs `python3 tools/train_demo.py prepare .corpus/kjv-raw.txt`)
  2. on the GPU machine:      python3 tools/train_demo.py train --out OUTDIR
     (the defaults are the settings that made models/demo; see models/demo/TRAINING.md)
        -> OUTDIR/demo (BF16 folder), OUTDIR/demo-fp8 (via tools/make_fp8.py), OUTDIR/init (the same
           architecture untrained), OUTDIR/train_log.json, OUTDIR/samples.txt, OUTDIR/demo-golden.json
"""
import argparse, hashlib, json, math, os, re, shutil, sys, time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)

BOS, EOS = 0, 1
# Added tokens: ids and flags as in the fixtures' small tokenizer (tests/fixtures/tiny-v3/tokenizer.json).
SPECIALS = ["<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>", "<｜▁pad▁｜>", "<｜User｜>", "<｜Assistant｜>",
            "<think>", "</think>", "<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>", "<｜tool▁call▁begin｜>",
            "<｜tool▁call▁end｜>", "<｜tool▁outputs▁begin｜>", "<｜tool▁outputs▁end｜>",
            "<｜tool▁output▁begin｜>", "<｜tool▁output▁end｜>", "<｜tool▁sep｜>"]
# DeepSeek-V3 pre-tokenizer (spec 14.1): three Isolated Splits, then ByteLevel without its own regex.
R1 = "\\p{N}{1,3}"
R2 = "[\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff]+"
R3 = ("[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+|"
      " ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+")
PRE_TOKENIZER = {"type": "Sequence", "pretokenizers": [
    {"type": "Split", "pattern": {"Regex": R1}, "behavior": "Isolated", "invert": False},
    {"type": "Split", "pattern": {"Regex": R2}, "behavior": "Isolated", "invert": False},
    {"type": "Split", "pattern": {"Regex": R3}, "behavior": "Isolated", "invert": False},
    {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False}]}
NORMALIZER = {"type": "Sequence", "normalizers": []}
POST_PROCESSOR = {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False, "use_regex": True}
DECODER = {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True}
TEMPLATE_CONFIG = os.path.join(ROOT, "tests", "fixtures", "tiny-v3", "tokenizer_config.json")

CORPUS_NOTE = ("King James Version of the Bible (1611 translation, public domain), from Debian's "
               "bible-kjv-text 4.38 package, printed one verse per line by its `bible -f` program; verse "
               "references dropped, chapters separated by a blank line.")


def model_config(vocab):
    """The demo architecture (DeepSeek-V3 field names; values are the ones saved to config.json)."""
    return dict(
        vocab_size=vocab, hidden_size=256, intermediate_size=512, moe_intermediate_size=64,
        num_hidden_layers=6, first_k_dense_replace=1, moe_layer_freq=1,
        num_attention_heads=4, num_key_value_heads=4,
        q_lora_rank=128, kv_lora_rank=128, qk_nope_head_dim=32, qk_rope_head_dim=16, v_head_dim=32,
        n_routed_experts=16, n_shared_experts=1, num_experts_per_tok=4, n_group=4, topk_group=2,
        scoring_func="sigmoid", topk_method="noaux_tc", norm_topk_prob=True, routed_scaling_factor=2.5,
        max_position_embeddings=512, rope_theta=10000.0,
        rope_scaling={"type": "yarn", "factor": 4.0, "original_max_position_embeddings": 128,
                      "beta_fast": 32, "beta_slow": 1, "mscale": 1.0, "mscale_all_dim": 1.0},
        rms_norm_eps=1e-6, hidden_act="silu", attention_bias=False, attention_dropout=0.0,
        tie_word_embeddings=False, initializer_range=0.02, bos_token_id=BOS, eos_token_id=EOS,
        num_nextn_predict_layers=0, use_cache=True)


# --------------------------------------------------------------------------------------------------
# step 1: corpus (runs anywhere with python3)

def prepare(raw, train_out, heldout_out, heldout_bytes):
    chapters = []
    pat = re.compile(r"^([1-3]?[A-Za-z]+)(\d+):(\d+) (.*)$")
    with open(raw, encoding="utf-8") as f:
        for line in f:
            m = pat.match(line.rstrip("\n"))
            if not m:
                raise SystemExit("unexpected line in %s: %r" % (raw, line[:80]))
            key = (m.group(1), int(m.group(2)))
            if not chapters or chapters[-1][0] != key:
                chapters.append((key, []))
            chapters[-1][1].append(" ".join(m.group(4).split()))
    texts = ["\n".join(v) + "\n" for _, v in chapters]
    k, n = len(texts), 0
    while n < heldout_bytes:            # the smallest tail of whole chapters of >= heldout_bytes
        k -= 1
        n += len(texts[k]) + 1
    train, held = "\n".join(texts[:k]), "\n".join(texts[k:])
    os.makedirs(os.path.dirname(os.path.abspath(train_out)), exist_ok=True)
    os.makedirs(os.path.dirname(os.path.abspath(heldout_out)), exist_ok=True)
    with open(train_out, "w", encoding="utf-8") as f:
        f.write(train)
    with open(heldout_out, "w", encoding="utf-8") as f:
        f.write(held)
    (b0, c0), (b1, c1) = chapters[k][0], chapters[-1][0]
    print("%d chapters, %d verses; training text %d bytes (%d chapters), held out %d bytes: %s %d .. %s %d"
          % (len(chapters), sum(len(v) for _, v in chapters), len(train), k, len(held), b0, c0, b1, c1))


# --------------------------------------------------------------------------------------------------
# step 2: training (GPU machine)

def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        h.update(f.read())
    return h.hexdigest()


def split_train_val(text, every):
    """Chapters (blank-line separated); every `every`-th chapter (index % every == every // 2) -> validation."""
    chaps = text.split("\n\n")
    tr = [c for i, c in enumerate(chaps) if i % every != every // 2]
    va = [c for i, c in enumerate(chaps) if i % every == every // 2]
    return "\n\n".join(tr) + "\n", "\n\n".join(va) + "\n"


def train_tokenizer(text, vocab, out_dir):
    from tokenizers import Tokenizer, trainers, pre_tokenizers
    skel = {"version": "1.0", "truncation": None, "padding": None, "added_tokens": [],
            "normalizer": NORMALIZER, "pre_tokenizer": PRE_TOKENIZER, "post_processor": POST_PROCESSOR,
            "decoder": DECODER,
            "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                      "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False,
                      "ignore_merges": False, "vocab": {}, "merges": []}}
    tok = Tokenizer.from_str(json.dumps(skel))
    trainer = trainers.BpeTrainer(vocab_size=vocab, special_tokens=SPECIALS, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), min_frequency=2)
    tok.train_from_iterator([text], trainer)
    j = json.loads(tok.to_str())
    # flags as in the released V3/R1 tokenizer: bos/eos/pad special; chat markers non-special added tokens
    for a in j["added_tokens"]:
        a["special"] = a["id"] < 3
        a["normalized"] = a["id"] >= 3
    assert [a["content"] for a in j["added_tokens"]] == SPECIALS
    assert [a["id"] for a in j["added_tokens"]] == list(range(len(SPECIALS)))
    assert j["pre_tokenizer"] == PRE_TOKENIZER, j["pre_tokenizer"]
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(j, f, ensure_ascii=False, indent=1)
    with open(TEMPLATE_CONFIG, encoding="utf-8") as f:
        c = json.load(f)
    c = {k: v for k, v in c.items() if k != "added_tokens_decoder"}
    c["model_max_length"] = 512
    with open(os.path.join(out_dir, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump(c, f, ensure_ascii=False, indent=1)
    t2 = Tokenizer.from_file(os.path.join(out_dir, "tokenizer.json"))
    assert t2.get_vocab_size() == vocab, t2.get_vocab_size()
    return t2


def export_bf16(model, cfgd, tok_dir, out_dir):
    """Save in the released layout: one tensor per expert, BF16 weights, F32 e_score_correction_bias."""
    import torch
    from safetensors.torch import save_file
    os.makedirs(out_dir, exist_ok=True)
    store = {}
    for k, v in model.state_dict().items():
        if "rotary_emb" in k:
            continue
        v = v.detach().float().cpu()
        if k.endswith("mlp.experts.gate_up_proj"):          # transformers 5 fuses experts: [E, 2*mI, D]
            pre = k[: -len("gate_up_proj")]
            mI = v.shape[1] // 2
            for e in range(v.shape[0]):
                store["%s%d.gate_proj.weight" % (pre, e)] = v[e, :mI].to(torch.bfloat16).contiguous()
                store["%s%d.up_proj.weight" % (pre, e)] = v[e, mI:].to(torch.bfloat16).contiguous()
        elif k.endswith("mlp.experts.down_proj"):           # [E, D, mI]
            pre = k[: -len("down_proj")]
            for e in range(v.shape[0]):
                store["%s%d.down_proj.weight" % (pre, e)] = v[e].to(torch.bfloat16).contiguous()
        elif k.endswith("e_score_correction_bias"):
            store[k] = v.contiguous()
        else:
            store[k] = v.to(torch.bfloat16).contiguous()
    save_file(store, os.path.join(out_dir, "model.safetensors"), metadata={"format": "pt"})
    cj = dict(cfgd)
    cj["architectures"] = ["DeepseekV3ForCausalLM"]
    cj["model_type"] = "deepseek_v3"
    cj["torch_dtype"] = "bfloat16"
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        json.dump(cj, f, indent=2, sort_keys=True)
        f.write("\n")
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copyfile(os.path.join(tok_dir, name), os.path.join(out_dir, name))
    return store


def render_chat(tok_dir, messages):
    import jinja2
    from jinja2.sandbox import ImmutableSandboxedEnvironment
    c = json.load(open(os.path.join(tok_dir, "tokenizer_config.json"), encoding="utf-8"))
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    return env.from_string(c["chat_template"]).render(messages=messages, bos_token=SPECIALS[0],
                                                      eos_token=SPECIALS[1], add_generation_prompt=True)


def train(a):
    import torch
    import torch.nn.functional as F
    import transformers
    from transformers import DeepseekV3Config, DeepseekV3ForCausalLM
    import ppl_ref, make_fp8

    t_start = time.time()
    dev = "cuda"
    torch.manual_seed(a.seed)
    torch.cuda.manual_seed_all(a.seed)
    torch.backends.cuda.matmul.allow_tf32 = True
    out = os.path.abspath(a.out)
    os.makedirs(out, exist_ok=True)
    log = {"transformers": transformers.__version__, "torch": torch.__version__,
           "device": torch.cuda.get_device_name(0), "args": vars(a)}
    print("transformers", transformers.__version__, "torch", torch.__version__, log["device"], flush=True)

    # ---- corpus, tokenizer
    text = open(a.corpus, encoding="utf-8").read()
    tr_text, va_text = split_train_val(text, a.val_every)
    tok_dir = os.path.join(out, "tok")
    tok = train_tokenizer(tr_text, a.vocab, tok_dir)
    tr_ids = tok.encode(tr_text, add_special_tokens=False).ids
    va_ids = tok.encode(va_text, add_special_tokens=False).ids
    held_ids = ppl_ref.text_ids(tok, a.heldout)
    log["corpus"] = {"description": CORPUS_NOTE, "file": os.path.relpath(a.corpus, ROOT),
                     "sha256": sha256(a.corpus), "bytes": len(text.encode()),
                     "train_bytes": len(tr_text.encode()), "val_bytes": len(va_text.encode()),
                     "val_rule": "chapter index %% %d == %d" % (a.val_every, a.val_every // 2),
                     "train_tokens": len(tr_ids), "val_tokens": len(va_ids),
                     "heldout_file": os.path.relpath(a.heldout, ROOT), "heldout_sha256": sha256(a.heldout),
                     "heldout_tokens": len(held_ids)}
    print("tokens: train %d, val %d, held-out %d (%.2f bytes/token on train)"
          % (len(tr_ids), len(va_ids), len(held_ids), len(tr_text.encode()) / len(tr_ids)), flush=True)

    # ---- model
    cfgd = model_config(a.vocab)
    log["config"] = cfgd
    tcfg = dict(cfgd)
    tcfg["rope_scaling"] = dict(cfgd["rope_scaling"], rope_type="yarn")
    tcfg["attention_dropout"] = a.dropout
    cfg = DeepseekV3Config(**tcfg)
    torch.manual_seed(a.seed)
    model = DeepseekV3ForCausalLM(cfg)           # initialized on the CPU: reproducible from the seed
    init_dir = os.path.join(out, "init")
    export_bf16(model, cfgd, tok_dir, init_dir)
    nparams = sum(p.numel() for p in model.parameters())
    nemb = model.model.embed_tokens.weight.numel() + model.lm_head.weight.numel()
    log["parameters"] = {"total": nparams, "embedding_and_head": nemb}
    print("parameters: %d (%d in embedding + lm_head)" % (nparams, nemb), flush=True)
    model.to(dev)

    # residual dropout (training only; not part of the architecture)
    def drop_out(m, i, o):
        if not m.training or a.dropout == 0:
            return o
        if isinstance(o, tuple):
            return (F.dropout(o[0], a.dropout, True),) + tuple(o[1:])
        return F.dropout(o, a.dropout, True)
    for layer in model.model.layers:
        layer.self_attn.register_forward_hook(drop_out)
        layer.mlp.register_forward_hook(drop_out)

    # aux-loss-free load balancing (DeepSeek-V3 paper): count routed tokens per expert, then move
    # e_score_correction_bias by gamma * sign(mean load - load) after each step.
    moe = [l.mlp for l in model.model.layers if hasattr(l.mlp, "gate")]
    E = cfgd["n_routed_experts"]
    loads = [torch.zeros(E, device=dev) for _ in moe]
    seen = [False]

    def make_hook(i):
        def hook(m, args, kwargs):
            if not torch.is_grad_enabled():
                return None
            for v in list(args) + list(kwargs.values()):
                if torch.is_tensor(v) and not v.is_floating_point():
                    loads[i] += torch.bincount(v.reshape(-1), minlength=E).float()
                    seen[0] = True
                    break
            return None
        return hook
    for i, m in enumerate(moe):
        m.experts.register_forward_pre_hook(make_hook(i), with_kwargs=True)

    # ---- data
    tr = torch.tensor(tr_ids, dtype=torch.long, device=dev)
    T, B = a.seq, a.batch
    gen = torch.Generator(device="cpu").manual_seed(a.seed + 1)
    ar = torch.arange(T - 1, device=dev)

    def batch():
        offs = torch.randint(0, len(tr_ids) - (T - 1), (B,), generator=gen).to(dev)
        x = torch.cat([torch.full((B, 1), BOS, device=dev, dtype=torch.long), tr[offs[:, None] + ar]], 1)
        return x

    def windows(ids):
        S = T - 1
        return [[BOS] + ids[i:i + S] for i in range(0, len(ids) - S + 1, S)]
    va_w = torch.tensor(windows(va_ids), dtype=torch.long, device=dev)

    def loss_of(x):
        with torch.autocast("cuda", dtype=torch.bfloat16):
            logits = model(input_ids=x, use_cache=False).logits
        return F.cross_entropy(logits[:, :-1].float().reshape(-1, logits.shape[-1]), x[:, 1:].reshape(-1))

    @torch.no_grad()
    def val_loss():
        model.eval()
        tot, n = 0.0, 0
        for i in range(0, len(va_w), 32):
            x = va_w[i:i + 32]
            tot += float(loss_of(x)) * x.shape[0]
            n += x.shape[0]
        model.train()
        return tot / n

    # experts implementation: grouped_mm if it runs and agrees with eager, else eager
    impl = "eager"
    if a.experts_impl != "eager":
        try:
            model.eval()
            x = batch()[:8]
            with torch.no_grad():
                ppl_ref.set_impl(model, attn=None, experts="eager")
                l0 = float(loss_of(x))
                ppl_ref.set_impl(model, attn=None, experts=a.experts_impl)
                l1 = float(loss_of(x))
            model.train()
            loss_of(batch()[:8]).backward()
            model.zero_grad(set_to_none=True)
            assert abs(l0 - l1) < 2e-2 * max(1.0, abs(l0)), (l0, l1)
            impl = a.experts_impl
        except Exception as e:
            print("experts implementation %s not used: %r" % (a.experts_impl, e), flush=True)
    ppl_ref.set_impl(model, attn=None, experts=impl)
    for l in loads:
        l.zero_()
    gen.manual_seed(a.seed + 1)
    log["experts_implementation"] = impl
    print("experts implementation:", impl, flush=True)

    # ---- optimizer
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": a.wd}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=a.lr, betas=(0.9, 0.95), eps=1e-8)

    def lr_at(s):
        if s < a.warmup:
            return a.lr * (s + 1) / a.warmup
        p = (s - a.warmup) / max(1, a.steps - a.warmup)
        return a.lr * (a.min_lr_frac + (1 - a.min_lr_frac) * 0.5 * (1 + math.cos(math.pi * p)))

    init_val = val_loss()
    print("step 0 val %.4f" % init_val, flush=True)
    hist = [{"step": 0, "val": init_val}]
    best = (init_val, 0, None)
    model.train()
    t0 = time.time()
    run_loss, run_n, step = 0.0, 0, 0
    stopped = None
    train_tail = []
    for step in range(1, a.steps + 1):
        for g in opt.param_groups:
            g["lr"] = lr_at(step - 1)
        loss = loss_of(batch())
        opt.zero_grad(set_to_none=True)
        loss.backward()
        gn = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        with torch.no_grad():
            for m, l in zip(moe, loads):
                b = m.gate.e_score_correction_bias
                b += a.bias_gamma * torch.sign(l.mean() - l).to(b.dtype)
                l.zero_()
        lv = float(loss.detach())
        run_loss += lv
        run_n += 1
        train_tail.append(lv)
        train_tail = train_tail[-50:]
        if step == 1 and not seen[0]:
            print("WARNING: routed expert ids not seen; load balancing inactive", flush=True)
        if step % a.eval_every == 0 or step == a.steps:
            vl = val_loss()
            el = time.time() - t0
            loadfrac = []
            hist.append({"step": step, "train": run_loss / run_n, "val": vl, "lr": lr_at(step - 1),
                         "grad_norm": float(gn), "seconds": el})
            print("step %5d  train %.4f  val %.4f  lr %.2e  |g| %.2f  %.1fs (%.3f s/step)"
                  % (step, run_loss / run_n, vl, lr_at(step - 1), float(gn), el, el / step), flush=True)
            run_loss, run_n = 0.0, 0
            if vl < best[0]:
                best = (vl, step, {k: v.detach().clone() for k, v in model.state_dict().items()})
        if time.time() - t0 > a.max_train_seconds:
            stopped = "time limit reached after step %d" % step
            print(stopped, flush=True)
            if step % a.eval_every:
                vl = val_loss()
                hist.append({"step": step, "val": vl})
                if vl < best[0]:
                    best = (vl, step, {k: v.detach().clone() for k, v in model.state_dict().items()})
            break
    train_seconds = time.time() - t0
    if best[2] is not None:
        model.load_state_dict(best[2])
    with torch.no_grad():
        biases = [m.gate.e_score_correction_bias.float().cpu() for m in moe]
    log["training"] = {"steps_run": step, "steps_planned": a.steps, "stopped_early": stopped,
                       "best_val_step": best[1], "best_val_loss": best[0], "init_val_loss": init_val,
                       "final_train_loss_last50_mean": sum(train_tail) / len(train_tail),
                       "train_seconds": train_seconds, "tokens_per_step": B * (T - 1),
                       "history": hist,
                       "e_score_correction_bias_range": [[float(b.min()), float(b.max())] for b in biases]}
    print("best val %.4f at step %d; trained %.1fs" % (best[0], best[1], train_seconds), flush=True)

    # ---- export
    demo = os.path.join(out, "demo")
    export_bf16(model, cfgd, tok_dir, demo)
    del model, opt, best
    torch.cuda.empty_cache()
    fp8 = os.path.join(out, "demo-fp8")
    make_fp8.convert(demo, fp8)
    for d in (demo, fp8, init_dir):
        log.setdefault("sizes", {})[os.path.basename(d)] = {
            f: os.path.getsize(os.path.join(d, f)) for f in sorted(os.listdir(d))}

    # ---- reference numbers, float32
    ppl_ref._fp32_only()
    res = {}
    models = {}
    for name, d in (("demo", demo), ("demo-fp8", fp8), ("init", init_dir)):
        m = ppl_ref.load_model(d, dev)
        r = ppl_ref.perplexity(m, held_ids, window=a.seq, device=dev)
        vr = ppl_ref.perplexity(m, va_ids, window=a.seq, device=dev)
        res[name] = {"heldout": {k: v for k, v in r.items() if k != "per_window_nll"},
                     "val": {k: v for k, v in vr.items() if k != "per_window_nll"}}
        if name == "demo":
            res[name]["heldout_per_window_nll"] = r["per_window_nll"]
            # train-set loss in eval mode on the first 64 training windows (BOS + 511 tokens each)
            trr = ppl_ref.perplexity(m, tr_ids[: 64 * (a.seq - 1)], window=a.seq, device=dev)
            res[name]["train_first64_windows"] = {k: v for k, v in trr.items() if k != "per_window_nll"}
        print("%-8s held-out: %d tokens, mean NLL %.6f, ppl %.4f | val ppl %.4f"
              % (name, r["tokens"], r["mean_nll"], r["ppl"], vr["ppl"]), flush=True)
        if name != "init":
            models[name] = m
        else:
            del m
    log["perplexity_fp32"] = res

    # cross-check: transformers' own from_pretrained of the released-format folder
    try:
        m2 = DeepseekV3ForCausalLM.from_pretrained(demo, dtype=torch.float32).to(dev).eval()
        ppl_ref.set_impl(m2)
        x = torch.tensor([[BOS] + held_ids[:200]], device=dev)
        with torch.no_grad():
            d = float((m2(x, use_cache=False).logits - models["demo"](x, use_cache=False).logits).abs().max())
        log["from_pretrained_max_abs_logit_diff"] = d
        print("from_pretrained vs manual load: max |logit diff| %.3g" % d, flush=True)
        del m2
    except Exception as e:
        log["from_pretrained_error"] = repr(e)
        print("from_pretrained check failed:", repr(e), flush=True)
    try:
        from transformers import AutoTokenizer
        at = AutoTokenizer.from_pretrained(demo)
        sample = open(a.heldout, encoding="utf-8").read()[:3000]
        ids_hf = at(sample)["input_ids"]
        ids_tk = [BOS] + tok.encode(sample, add_special_tokens=False).ids
        log["autotokenizer_matches_tokenizers"] = ids_hf == ids_tk
        if ids_hf != ids_tk:
            log["autotokenizer_first_ids"] = {"AutoTokenizer": ids_hf[:24], "tokenizers_with_bos": ids_tk[:24],
                                              "class": type(at).__name__}
        print("AutoTokenizer (add BOS) == [0] + tokenizers ids:", log["autotokenizer_matches_tokenizers"], flush=True)
    except Exception as e:
        log["autotokenizer_error"] = repr(e)

    # ---- samples and golden greedy continuations
    prompts = ["In the beginning", "And Jesus said unto them,", "The LORD is my shepherd;",
               "And it came to pass, when the king", "Blessed are the"]
    golden = {"model": "models/demo", "reference": "transformers DeepseekV3ForCausalLM, float32, stored weights",
              "perplexity": {"file": "tests/data/demo-heldout.txt", "window": a.seq,
                             "demo": res["demo"]["heldout"], "demo-fp8": res["demo-fp8"]["heldout"],
                             "init": res["init"]["heldout"],
                             "demo_per_window_nll": res["demo"]["heldout_per_window_nll"]},
              "greedy": []}
    lines = []
    g = torch.Generator(device=dev).manual_seed(a.seed + 2)

    @torch.no_grad()
    def complete(m, ids, n, temperature=0.0, top_p=1.0):
        ids = list(ids)
        out_ids, margins = [], []
        for _ in range(n):
            logits = m(torch.tensor([ids], device=dev), use_cache=False).logits[0, -1].float()
            if temperature == 0:
                t2 = torch.topk(logits, 2).values
                margins.append(float(t2[0] - t2[1]))
                nxt = int(logits.argmax())
            else:
                p = torch.softmax(logits / temperature, -1)
                sp, si = torch.sort(p, descending=True)
                keep = (sp.cumsum(0) - sp) < top_p
                sp = sp * keep
                nxt = int(si[torch.multinomial(sp / sp.sum(), 1, generator=g)])
            out_ids.append(nxt)
            ids.append(nxt)
            if nxt == EOS or len(ids) >= a.seq:
                break
        return out_ids, margins
    for name in ("demo", "demo-fp8"):
        m = models[name]
        lines.append("=== %s: greedy (64 tokens)" % name)
        for pr in prompts:
            pids = [BOS] + tok.encode(pr, add_special_tokens=False).ids
            o, mg = complete(m, pids, 64)
            lines.append(pr + tok.decode(o, skip_special_tokens=False))
            lines.append("")
            golden["greedy"].append({"model": name, "prompt": pr, "prompt_ids": pids, "greedy_ids": o,
                                     "min_margin": min(mg) if mg else None})
        lines.append("=== %s: sampled, temperature 0.8, top_p 0.95 (100 tokens, torch seed %d)" % (name, a.seed + 2))
        for pr in prompts[:3]:
            pids = [BOS] + tok.encode(pr, add_special_tokens=False).ids
            o, _ = complete(m, pids, 100, 0.8, 0.95)
            lines.append(pr + tok.decode(o, skip_special_tokens=False))
            lines.append("")
    chat = render_chat(tok_dir, [{"role": "user", "content": "Who made the heaven and the earth?"}])
    cids = tok.encode(chat, add_special_tokens=False).ids
    o, _ = complete(models["demo"], cids, 48)
    lines.append("=== demo: chat template prompt %r -> ids %s" % (chat, cids))
    lines.append(tok.decode(o, skip_special_tokens=False))
    golden["chat"] = {"prompt_text": chat, "prompt_ids": cids, "greedy_ids": o}
    samples = "\n".join(lines) + "\n"
    print(samples, flush=True)
    with open(os.path.join(out, "samples.txt"), "w", encoding="utf-8") as f:
        f.write(samples)
    with open(os.path.join(out, "demo-golden.json"), "w", encoding="utf-8") as f:
        json.dump(golden, f, ensure_ascii=False, indent=1)
    log["total_seconds"] = time.time() - t_start
    with open(os.path.join(out, "train_log.json"), "w", encoding="utf-8") as f:
        json.dump(log, f, ensure_ascii=False, indent=1)
    print("done in %.1fs" % log["total_seconds"], flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("prepare", help="split the `bible -f` dump into training text and held-out text")
    p.add_argument("raw")
    p.add_argument("--train-out", default=os.path.join(ROOT, ".corpus", "kjv-train.txt"))
    p.add_argument("--heldout-out", default=os.path.join(ROOT, "tests", "data", "demo-heldout.txt"))
    p.add_argument("--heldout-bytes", type=int, default=160_000)
    t = sub.add_parser("train", help="train, export, quantize, evaluate (GPU)")
    t.add_argument("--out", required=True)
    t.add_argument("--corpus", default=os.path.join(ROOT, ".corpus", "kjv-train.txt"))
    t.add_argument("--heldout", default=os.path.join(ROOT, "tests", "data", "demo-heldout.txt"))
    t.add_argument("--vocab", type=int, default=4096)
    t.add_argument("--seq", type=int, default=512)
    t.add_argument("--batch", type=int, default=64)
    t.add_argument("--steps", type=int, default=1000)
    t.add_argument("--lr", type=float, default=2e-3)
    t.add_argument("--min-lr-frac", type=float, default=0.05)
    t.add_argument("--warmup", type=int, default=100)
    t.add_argument("--wd", type=float, default=0.1)
    t.add_argument("--dropout", type=float, default=0.2)
    t.add_argument("--bias-gamma", type=float, default=1e-3)
    t.add_argument("--eval-every", type=int, default=100)
    t.add_argument("--val-every", type=int, default=50)
    t.add_argument("--seed", type=int, default=1234)
    t.add_argument("--experts-impl", default="grouped_mm")
    t.add_argument("--max-train-seconds", type=float, default=150)
    a = ap.parse_args()
    if a.cmd == "prepare":
        prepare(a.raw, a.train_out, a.heldout_out, a.heldout_bytes)
    else:
        train(a)


if __name__ == "__main__":
    main()
