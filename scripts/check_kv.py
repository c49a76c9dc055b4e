#!/usr/bin/env python3
"""What transformers' own KV caches hold, against `oomlab estimate --serve --runtime transformers|static`.

For each family the estimator reads (the tiny random instances in tests/fixtures/hf/tiny-*, built
from their configs; nothing is downloaded), in bf16, with 2 requests:
- "prefill": one forward of N prompt tokens with a DynamicCache (what generate() builds);
- "decode": N − 1 prompt tokens, then one decode step of 1 token (N tokens in the cache, the last
  fed by a decode step, as every step of generation after the first);
- "static": a StaticCache of max_cache_len 256 after a prompt of N tokens.
It counts every storage the cache's layers hold (keys and values; each storage once): a sliding
layer's keys are a view of the tensor its last update concatenated, and the storage is what the
GPU holds. N is 40 (inside every tiny window) and 200 (past them all).

Not for CI (needs torch + transformers; run it in a throwaway venv):
    python3 -m venv /tmp/torchvenv && /tmp/torchvenv/bin/pip install torch transformers
    /tmp/torchvenv/bin/python scripts/check_kv.py > tests/fixtures/hf_kv.json
CI's `tests/serve.rs` checks the estimator against the committed numbers.
"""
import json
import pathlib
import sys

import torch
import transformers
from transformers import AutoConfig, AutoModelForCausalLM, DynamicCache, StaticCache

ROOT = pathlib.Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "hf"
BATCH = 2
STATIC_LEN = 256


def held(cache):
    """Bytes of every storage the cache's layers hold, each once."""
    seen = {}
    for layer in cache.layers:
        for t in (getattr(layer, "keys", None), getattr(layer, "values", None)):
            if isinstance(t, torch.Tensor):
                s = t.untyped_storage()
                seen[s.data_ptr()] = s.nbytes()
    return sum(seen.values())


def measure(folder):
    cfg = AutoConfig.from_pretrained(folder)
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(cfg, dtype=torch.bfloat16).eval()
    out = {}
    for n in (40, 200):
        ids = torch.randint(0, cfg.vocab_size, (BATCH, n))
        with torch.no_grad():
            prefill = model(ids, use_cache=True).past_key_values
            out[f"prefill_{n}"] = held(prefill)
            cache = model(ids[:, : n - 1], use_cache=True).past_key_values
            cache = model(ids[:, n - 1 :], past_key_values=cache, use_cache=True).past_key_values
            out[f"decode_{n}"] = held(cache)
            static = StaticCache(config=cfg, max_cache_len=STATIC_LEN)
            model(ids, past_key_values=static, use_cache=True, cache_position=torch.arange(n))
            out[f"static_{STATIC_LEN}_{n}"] = held(static)
    return out


def main():
    cases = {}
    for folder in sorted(ROOT.glob("tiny-*")):
        cases[folder.name] = measure(folder)
        print(folder.name, cases[folder.name], file=sys.stderr)
    json.dump(
        {
            "transformers": transformers.__version__,
            "torch": torch.__version__,
            "batch": BATCH,
            "dtype": "bf16",
            "cases": cases,
        },
        sys.stdout,
        indent=1,
        sort_keys=True,
    )
    print()


if __name__ == "__main__":
    main()
