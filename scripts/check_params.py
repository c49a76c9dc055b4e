#!/usr/bin/env python3
"""The parameter count transformers builds from each config.json under tests/fixtures/hf/ and
each catalog model under data/models/ (as "catalog/<key>"), on the meta device (no memory, so
the big ones cost nothing), written to tests/fixtures/hf/params.json with the versions that
counted them. tests/hf_config.rs checks
oomlab's count against it. Not for CI (it needs torch and transformers):
    python3 -m venv /tmp/tv && /tmp/tv/bin/pip install torch transformers
    /tmp/tv/bin/python scripts/check_params.py
"""
import json
import pathlib

import torch
import transformers
from transformers import AutoConfig, AutoModelForCausalLM

repo = pathlib.Path(__file__).resolve().parent.parent
root = repo / "tests" / "fixtures" / "hf"
counts = {"_counted_by": f"transformers {transformers.__version__}, torch {torch.__version__}, meta device"}
files = [(p.name, p / "config.json") for p in sorted(root.iterdir()) if (p / "config.json").exists()]
files += [(f"catalog/{p.stem}", p) for p in sorted((repo / "data" / "models").glob("*.json"))]
for name, path in files:
    config = AutoConfig.for_model(**json.loads(path.read_text()))
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config)
    # parameters() yields a tied weight once, as the model holds it once.
    counts[name] = sum(p.numel() for p in model.parameters())
    print(f"{name}: {counts[name]:,}")
(root / "params.json").write_text(json.dumps(counts, indent=2) + "\n")
