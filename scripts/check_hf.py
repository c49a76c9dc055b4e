#!/usr/bin/env python3
"""Checks an `oomlab dump-step --out DIR` against Hugging Face transformers' GPT2LMHeadModel.

Usage: python3 scripts/check_hf.py DIR        (needs torch, transformers, safetensors)

Loads config.json and model.safetensors into GPT2LMHeadModel, runs the batch, computes the mean
cross-entropy against the (already shifted) labels, backpropagates, and compares the loss and
every gradient with loss.json and grads.safetensors. Exits 1 if any differs by more than the
tolerance (relative to the largest magnitude of that tensor).
"""
import json
import sys

import torch
from safetensors.torch import load_file
from transformers import GPT2Config, GPT2LMHeadModel

TOL = 1e-4


def main(d: str) -> int:
    torch.manual_seed(0)
    config = GPT2Config.from_pretrained(d)
    model = GPT2LMHeadModel(config).float().eval()
    missing, unexpected = model.load_state_dict(load_file(f"{d}/model.safetensors"), strict=False)
    missing = [m for m in missing if m != "lm_head.weight" and not m.endswith(".attn.bias") and not m.endswith(".attn.masked_bias")]
    if missing or unexpected:
        print(f"state dict mismatch: missing {missing}, unexpected {unexpected}")
        return 1
    model.tie_weights()
    batch = load_file(f"{d}/batch.safetensors")
    logits = model(batch["input_ids"]).logits
    loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1), batch["labels"].flatten())
    loss.backward()
    ours = json.load(open(f"{d}/loss.json"))["loss"]
    ok = abs(loss.item() - ours) <= TOL * abs(ours)
    print(f"loss: transformers {loss.item():.6f}  oomlab {ours:.6f}  {'ok' if ok else 'DIFFERS'}")
    grads = load_file(f"{d}/grads.safetensors")
    worst = 0.0
    for name, p in model.named_parameters():
        if name not in grads:
            continue
        ref = p.grad
        err = ((ref - grads[name]).abs().max() / ref.abs().max().clamp_min(1e-12)).item()
        worst = max(worst, err)
        if err > TOL:
            ok = False
            print(f"  {name}: relative error {err:.2e}")
    print(f"{len(grads)} gradients, worst relative error {worst:.2e}")
    return 0 if ok else 1


if __name__ == "__main__":
    if len(sys.argv) != 2:
        print(__doc__)
        sys.exit(2)
    sys.exit(main(sys.argv[1]))
