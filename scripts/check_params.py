#!/usr/bin/env python3
"""The parameter count transformers builds from each config.json under tests/fixtures/hf/, on
the meta device (no memory, so the big ones cost nothing), written to
tests/fixtures/hf/params.json with the versions that counted them. tests/hf_config.rs checks
oomlab's count against it. Not for CI (it needs torch and transformers):
    python3 -m venv /tmp/tv && /tmp/tv/bin/pip install torch transformers
    /tmp/tv/bin/python scripts/check_params.py
"""
import json
import pathlib

import torch
import transformers
from transformers import AutoConfig, AutoModelForCausalLM

root = pathlib.Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "hf"
counts = {"_counted_by": f"transformers {transformers.__version__}, torch {torch.__version__}, meta device"}
for folder in sorted(p for p in root.iterdir() if (p / "config.json").exists()):
    config = AutoConfig.from_pretrained(folder)
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config)
    # parameters() yields a tied weight once, as the model holds it once.
    counts[folder.name] = sum(p.numel() for p in model.parameters())
    print(f"{folder.name}: {counts[folder.name]:,}")
(root / "params.json").write_text(json.dumps(counts, indent=2) + "\n")
