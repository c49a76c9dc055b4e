#!/usr/bin/env python3
"""What PyTorch really keeps for backward, against `oomlab estimate --runtime hf-eager`.

For each case this builds the Hugging Face model from a config (random weights, nothing is
downloaded), runs one training forward with the loss (labels passed, as a training loop does), and
counts every storage autograd saves (torch.autograd.graph.saved_tensors_hooks), each storage once,
parameters excluded, plus the returned logits. That is what oomlab's `saved_for_backward_bytes`
predicts: activations at the loss + logits and the loss's saved softmax + token ids and labels.

Dropout is 0 in every config, where the CPU and CUDA agree (CUDA keeps a 1-byte mask per dropped
value, the CPU one in the tensor's dtype; at 0 PyTorch's dropout keeps nothing). The one CPU/CUDA
difference left: for bf16 input the CPU's LayerNorm keeps mean and rstd in bf16, CUDA's in fp32
(2·s·b·2 bytes per LayerNorm, well under 0.1 % here).

For each family the estimator reads from a config.json (mistral, qwen2, qwen2_moe, qwen3,
qwen3_moe, mixtral, gemma, gemma2, gemma3_text, phi3, gpt_neox, olmo2, smollm3, granite, glm4_moe, deepseek_v3, gpt_oss,
llama4_text), a tiny random instance
(tests/fixtures/hf/tiny-*/config.json) is counted the same way, fp32 and bf16, against
`oomlab estimate --model <that config> --runtime hf-eager`. The mixtures run their router's real
choices (dropless: each token reaches its k experts, so the count does not depend on which).

It also counts the toy's architecture and compares PyTorch's saved activations with the toy's plan
(`oomlab measure --backend cpu --json`, whose `model` gives the architecture: d 64, L 2, 4 heads,
T 64, the built-in corpus's vocabulary of 58 characters; B 16, fp32).

Not for CI (needs torch + transformers; run it in a throwaway venv):
    python3 -m venv /tmp/torchvenv && /tmp/torchvenv/bin/pip install torch transformers
    cargo build && /tmp/torchvenv/bin/python scripts/check_saved.py > tests/fixtures/hf_saved.json
CI's `tests/hf_saved.rs` checks the estimator against the committed numbers.
"""
import json
import subprocess
import sys
import weakref

import torch
import transformers
import pathlib

from transformers import AutoConfig, AutoModelForCausalLM, GPT2Config, LlamaConfig

OOMLAB = "target/debug/oomlab"
LLAMA = "llama2-7b"

# (name, kind, dims, dtype, batch, seq). dims: hidden, layers, heads, kv_heads, ffn, vocab.
CASES = [
    ("GPT-2 small", "gpt2", (768, 12, 12, 12, 3072, 50257), "fp32", 2, 256),
    ("GPT-2 small", "gpt2", (768, 12, 12, 12, 3072, 50257), "bf16", 4, 128),
    ("GPT-2 medium", "gpt2", (1024, 24, 16, 16, 4096, 50257), "fp32", 1, 512),
    ("GPT-2 d256 L4", "gpt2", (256, 4, 4, 4, 1024, 50257), "bf16", 8, 1024),
    ("LLaMA-style MHA", "llama", (512, 4, 8, 8, 1376, 32000), "fp32", 2, 256),
    ("LLaMA-style MHA", "llama", (512, 4, 8, 8, 1376, 32000), "bf16", 4, 512),
    ("LLaMA-style GQA", "llama", (512, 4, 8, 2, 1376, 32000), "fp32", 2, 512),
    ("LLaMA-style GQA", "llama", (1024, 2, 16, 4, 2816, 32000), "bf16", 1, 1024),
]


# The tiny instances: (fixture folder, dtype, batch, seq).
FAMILY_CASES = [(f"tiny-{t}", dtype, 2, 256) for t in
                ["mistral", "qwen2", "qwen2-moe", "qwen3", "qwen3-moe", "mixtral", "gemma", "gemma2",
                 "gemma3-text", "phi3", "gpt-neox", "olmo2", "smollm3", "granite",
                 "glm4-moe", "deepseek-v3", "gpt-oss", "llama4-text"] for dtype in ["fp32", "bf16"]]


def model(kind, dims, positions):
    if kind == "config":
        cfg = AutoConfig.for_model(**json.loads(dims.read_text()))
    elif kind == "gpt2":
        h, layers, heads, kv, ffn, vocab = dims
        cfg = GPT2Config(n_positions=positions, n_embd=h, n_layer=layers, n_head=heads, n_inner=ffn,
                         vocab_size=vocab, activation_function="gelu_new",
                         resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
    elif kind == "llama":
        h, layers, heads, kv, ffn, vocab = dims
        cfg = LlamaConfig(vocab_size=vocab, hidden_size=h, intermediate_size=ffn, num_hidden_layers=layers,
                          num_attention_heads=heads, num_key_value_heads=kv, max_position_embeddings=positions,
                          attention_dropout=0.0, tie_word_embeddings=False)
    cfg._attn_implementation = "eager"
    return AutoModelForCausalLM.from_config(cfg)


def count(kind, dims, dtype, batch, seq, positions):
    """Bytes saved for backward (each storage once, parameters excluded) plus the logits; and the
    part saved inside the layers and the final norm (the activations, without inputs and loss)."""
    torch.manual_seed(0)
    m = model(kind, dims, positions).to({"fp32": torch.float32, "bf16": torch.bfloat16}[dtype])
    m.train()
    stack = [""]
    for name, mod in m.named_modules():
        mod.register_forward_pre_hook(lambda mod, args, name=name: (stack.append(name), None)[1])
        mod.register_forward_hook(lambda mod, args, out: (stack.pop(), None)[1])
    params = {p.untyped_storage().data_ptr() for p in m.parameters()}
    # Every saved tensor is recorded with a weak reference, and counted if it is still alive when
    # the forward ends: grouped routing (DeepSeek-V3, GLM-4.5) saves tensors on a branch that never
    # reaches the loss, which PyTorch frees during the forward, and a later saved tensor can reuse
    # that address. Counting by address alone let the total drift from run to run; keeping every
    # tensor alive would count what PyTorch has freed. Alive at the loss, each storage once, is
    # what the step really holds.
    records = []

    def pack(t):
        s = t.untyped_storage()
        records.append((weakref.ref(t), s.data_ptr(), s.nbytes(), stack[-1]))
        return t

    vocab = m.config.vocab_size
    x = torch.randint(0, vocab, (batch, seq))
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = m(input_ids=x, labels=x.clone())
    saved, activations = {}, {}
    for alive, ptr, nbytes, where in records:
        if alive() is None or ptr in params or ptr in saved:
            continue
        saved[ptr] = nbytes
        if where and not where.endswith(("wte", "wpe", "embed_tokens")):
            activations[ptr] = nbytes
    logits = out.logits.untyped_storage()
    total = dict(saved)
    total[logits.data_ptr()] = logits.nbytes()
    return sum(total.values()), sum(activations.values())


def oomlab(args):
    out = subprocess.run([OOMLAB, *args], check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def main():
    rows = []
    for name, kind, dims, dtype, batch, seq in CASES:
        h, layers, heads, kv, ffn, vocab = dims
        args = ["estimate", "--model", "gpt2" if kind == "gpt2" else LLAMA, "--hidden", str(h),
                "--layers", str(layers), "--heads", str(heads), "--kv-heads", str(kv), "--ffn", str(ffn),
                "--vocab", str(vocab), "--batch", str(batch), "--seq-len", str(seq), "--dropout", "0",
                "--precision", "fp32" if dtype == "fp32" else "pure-bf16", "--runtime", "hf-eager", "--json"]
        pytorch, _ = count(kind, dims, dtype, batch, seq, 1024 if kind == "gpt2" else 4096)
        predicted = oomlab(args)["saved_for_backward_bytes"]
        fused = oomlab([a for a in args if a not in ("--runtime", "hf-eager")] + ["--runtime", "fused"])
        row = {"name": name, "dtype": dtype, "batch": batch, "seq": seq, "args": args[:-1],
               "pytorch_bytes": pytorch, "hf_eager_bytes": predicted,
               "fused_bytes": fused["saved_for_backward_bytes"],
               "hf_eager_error_percent": round(100 * (predicted - pytorch) / pytorch, 3)}
        print(f"{name} {dtype} b{batch} s{seq}: PyTorch {pytorch}, hf-eager {predicted} "
              f"({row['hf_eager_error_percent']:+.2f} %), fused {row['fused_bytes']}", file=sys.stderr)
        rows.append(row)
    for folder, dtype, batch, seq in FAMILY_CASES:
        path = pathlib.Path("tests/fixtures/hf") / folder / "config.json"
        args = ["estimate", "--model", str(path.parent), "--batch", str(batch), "--seq-len", str(seq),
                "--precision", "fp32" if dtype == "fp32" else "pure-bf16", "--runtime", "hf-eager", "--json"]
        pytorch, _ = count("config", path, dtype, batch, seq, None)
        predicted = oomlab(args)["saved_for_backward_bytes"]
        fused = oomlab([a for a in args if a not in ("--runtime", "hf-eager")] + ["--runtime", "fused"])
        family = json.loads(path.read_text())["model_type"]
        row = {"name": f"family {family}", "dtype": dtype, "batch": batch, "seq": seq, "args": args[:-1],
               "pytorch_bytes": pytorch, "hf_eager_bytes": predicted,
               "fused_bytes": fused["saved_for_backward_bytes"],
               "hf_eager_error_percent": round(100 * (predicted - pytorch) / pytorch, 3)}
        print(f"{folder} {dtype}: PyTorch {pytorch}, hf-eager {predicted} "
              f"({row['hf_eager_error_percent']:+.2f} %), fused {row['fused_bytes']}", file=sys.stderr)
        rows.append(row)
    # The toy: its plan's saved activations against PyTorch's for the same architecture.
    # The architecture from what oomlab ran, never assumed: an oomlab whose measure JSON has no
    # `model` (older than this script) stops here rather than count another model.
    toy = oomlab(["measure", "--backend", "cpu", "--json"])
    if "model" not in toy:
        sys.exit(f"{OOMLAB} measure --json gives no `model`: rebuild oomlab (cargo build)")
    if toy["techniques"]["precision"] != "fp32":
        sys.exit(f"the toy's default step is {toy['techniques']['precision']}: this comparison is fp32")
    cfg, batch, seq = toy["model"], toy["micro_batch"], toy["seq_len"]
    h, layers, heads, vocab = cfg["d_model"], cfg["n_layers"], cfg["n_heads"], cfg["vocab"]
    _, pytorch_acts = count("gpt2", (h, layers, heads, heads, 4 * h, vocab), "fp32", batch, seq, cfg["seq_len"])
    plan = toy["predicted_activation_formula_bytes"]
    toy_row = {"architecture": f"d {h}, L {layers}, {heads} heads, T {seq}, B {batch}, fp32, gelu_new, "
                               f"vocabulary {vocab}",
               "pytorch_activation_bytes": pytorch_acts, "plan_activation_bytes": plan,
               "plan_over_pytorch": round(plan / pytorch_acts, 4)}
    print(f"toy: plan {plan}, PyTorch {pytorch_acts} ({toy_row['plan_over_pytorch']})", file=sys.stderr)
    json.dump({"torch": torch.__version__, "transformers": transformers.__version__,
               "device": "cpu", "cases": rows, "toy": toy_row}, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()
