#!/usr/bin/env python3
"""Every key of each family's transformers config class, with its default, and the class's
attribute_map (the other spellings transformers reads: Mixtral's and Qwen3-MoE's num_experts is
saved as num_local_experts), written to tests/fixtures/hf/config_keys.json with the version that
listed them. The keys every PretrainedConfig has are listed once, under "_common". The estimator
classifies every key of a family it reads (read, no effect on memory, or refused unless at its
default); tests/hf_keys.rs checks the classification against this list, so a new transformers
version's new key is noticed, not ignored. Not for CI (it needs transformers; torch is not needed):
    python3 -m venv /tmp/hf && /tmp/hf/bin/pip install transformers
    /tmp/hf/bin/python scripts/config_keys.py
"""
import json
import pathlib
import re

import transformers
from transformers import AutoConfig, PretrainedConfig

repo = pathlib.Path(__file__).resolve().parent.parent
# The families the estimator reads: src/estimate/hf.rs's FAMILIES, read from the source so that
# the two lists cannot drift apart.
source = (repo / "src" / "estimate" / "hf.rs").read_text()
block = re.search(r"pub const FAMILIES: \[&str; \d+\] = \[(.*?)\];", source, re.S).group(1)
families = re.findall(r'"([a-z0-9_]+)"', block)


def plain(value):
    """A default as JSON holds it (a nested config or another object as its dict)."""
    try:
        json.dumps(value)
        return value
    except TypeError:
        return value.to_dict() if hasattr(value, "to_dict") else repr(value)


common = PretrainedConfig().to_dict()
out = {
    "_listed_by": f"transformers {transformers.__version__}",
    "_common": sorted(common),
    "families": {},
}
for family in families:
    config = AutoConfig.for_model(family)
    fields = config.to_dict()
    out["families"][family] = {
        "class": type(config).__name__,
        "keys": {k: plain(v) for k, v in sorted(fields.items()) if k not in common},
        "attribute_map": dict(sorted(type(config).attribute_map.items())),
    }
    print(f"{family}: {type(config).__name__}, {len(out['families'][family]['keys'])} keys")
(repo / "tests" / "fixtures" / "hf" / "config_keys.json").write_text(json.dumps(out, indent=2) + "\n")
