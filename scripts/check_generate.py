#!/usr/bin/env python3
"""Greedy generation with a KV cache: oomlab against Hugging Face transformers' `generate`.

Usage:
  python3 scripts/check_generate.py DIR           check an `oomlab serving --dump DIR`
  python3 scripts/check_generate.py --make DIR    write the fixture tests/generate.rs reads

Check: loads config.json and model.safetensors into GPT2LMHeadModel and, for each entry of
generations.json, asks `generate` (greedy, its DynamicCache) for as many tokens as oomlab
generated after the prompt; exits 1 if any token differs.

Make: a GPT-2 of the toy's shape with transformers' own random initialisation (torch seed 0,
initializer_range 0.4 so that attention, not only the current token, decides the next one),
prompts cut from data/corpus.txt with oomlab's character tokenizer, and transformers' greedy
tokens for them: config.json, model.safetensors and generations.json in DIR, with the versions.
Needs torch, transformers and safetensors (CI does not: the fixture is committed).
"""
import json
import sys

import torch
from safetensors.torch import load_file, save_file
from transformers import GPT2Config, GPT2LMHeadModel


def load(d):
    config = GPT2Config.from_pretrained(d)
    model = GPT2LMHeadModel(config).float().eval()
    model.load_state_dict(load_file(f"{d}/model.safetensors"), strict=False)
    model.tie_weights()
    # oomlab's vocabulary has no end of text (id 0 is a newline): generate never stops early, and
    # no id is suppressed (`min_new_tokens` would mask the configured eos id).
    model.generation_config.eos_token_id = None
    model.generation_config.bos_token_id = None
    return model


def generate(model, prompt, n):
    ids = torch.tensor([prompt])
    with torch.no_grad():
        out = model.generate(
            ids, attention_mask=torch.ones_like(ids), max_new_tokens=n,
            do_sample=False, use_cache=True, pad_token_id=0,
        )
    return out[0, len(prompt):].tolist()


def check(d):
    model = load(d)
    gens = json.load(open(f"{d}/generations.json"))
    bad = 0
    for i, g in enumerate(gens):
        theirs = generate(model, g["prompt"], len(g["tokens"]))
        if theirs != g["tokens"]:
            bad += 1
            first = next(j for j, (a, b) in enumerate(zip(theirs, g["tokens"])) if a != b)
            print(f"request {i}: differs from token {first}: transformers {theirs[first:first + 8]}, oomlab {g['tokens'][first:first + 8]}")
    print(f"{len(gens) - bad} of {len(gens)} requests generate the same tokens as transformers' generate")
    return 1 if bad else 0


def make(d):
    import os
    import transformers
    text = open(os.path.join(os.path.dirname(__file__), "..", "data", "corpus.txt")).read()
    chars = sorted(set(text))
    ids = [chars.index(c) for c in text]
    torch.manual_seed(0)
    config = GPT2Config(
        vocab_size=len(chars), n_positions=96, n_embd=32, n_layer=2, n_head=4, n_inner=None,
        activation_function="gelu_new", resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
        layer_norm_epsilon=1e-5, initializer_range=0.4, tie_word_embeddings=True, bos_token_id=0, eos_token_id=0,
    )
    model = GPT2LMHeadModel(config).float().eval()
    os.makedirs(d, exist_ok=True)
    config.save_pretrained(d)
    model.generation_config.eos_token_id = None
    model.generation_config.bos_token_id = None
    state = {k: v.contiguous() for k, v in model.state_dict().items() if k != "lm_head.weight" and not k.endswith(".attn.bias")}
    save_file(state, f"{d}/model.safetensors", metadata={"format": "pt"})
    # Prompts of 1 to 40 tokens at spread offsets; outputs up to the context.
    gens = []
    for i, (p, n) in enumerate([(1, 40), (5, 60), (12, 30), (17, 70), (23, 16), (31, 50), (40, 56), (8, 88)]):
        start = (i * 2731) % (len(ids) - p)
        prompt = ids[start:start + p]
        gens.append({"prompt": prompt, "tokens": generate(model, prompt, n)})
    json.dump(gens, open(f"{d}/generations.json", "w"))
    json.dump({"torch": torch.__version__, "transformers": transformers.__version__,
               "made_by": "scripts/check_generate.py --make"}, open(f"{d}/versions.json", "w"))
    distinct = [len(set(g["tokens"])) for g in gens]
    print(f"wrote {d}: {len(gens)} generations, distinct tokens per generation {distinct}")
    return 0


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--make":
        sys.exit(make(sys.argv[2]))
    if len(sys.argv) == 2:
        sys.exit(check(sys.argv[1]))
    print(__doc__)
    sys.exit(2)
