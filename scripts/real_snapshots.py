#!/usr/bin/env python3
"""Checks real PyTorch memory snapshots against tests/fixtures/real_snapshots.json, or writes
the `expect` figures of that manifest from the files themselves, independently of oomlab: Python's
own `pickle.load` and a plain walk of the trace, as PyTorch's memory_viz walks it (the state
before the trace is the final `segments` less what the trace did).

    python3 scripts/real_snapshots.py DIR            # print each file's figures
    python3 scripts/real_snapshots.py DIR --write    # write them into the manifest's `expect`

DIR holds the files under the manifest's names (tests/snapshot_real.rs reads the same DIR,
from OOMLAB_REAL_SNAPSHOTS or ../shared/snapshots). The files themselves are other people's
runs and are not part of this repository: the manifest says where each comes from.
"""
import hashlib
import json
import os
import pickle
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
MANIFEST = os.path.join(HERE, "..", "tests", "fixtures", "real_snapshots.json")


def figures(path):
    raw = open(path, "rb").read()
    snap = pickle.loads(raw)
    trace = snap["device_traces"][0]
    allocated = sum(b.get("requested_size", b["size"]) for s in snap["segments"] if s["device"] == 0
                    for b in s["blocks"] if b["state"].startswith("active"))
    reserved = sum(s["total_size"] for s in snap["segments"] if s["device"] == 0)
    da = dr = 0
    for e in trace:
        a = e["action"]
        if a == "alloc":
            da += e["size"]
        elif a == "free_completed":
            da -= e["size"]
        elif a in ("segment_alloc", "segment_map"):
            dr += e["size"]
        elif a in ("segment_free", "segment_unmap"):
            dr -= e["size"]
    now_a, now_r = allocated - da, reserved - dr
    peak_a, peak_i, peak_r = now_a, None, now_r
    for i, e in enumerate(trace):
        a = e["action"]
        if a == "alloc":
            now_a += e["size"]
        elif a == "free_completed":
            now_a -= e["size"]
        elif a in ("segment_alloc", "segment_map"):
            now_r += e["size"]
        elif a in ("segment_free", "segment_unmap"):
            now_r -= e["size"]
        if now_a > peak_a:
            peak_a, peak_i = now_a, i
        peak_r = max(peak_r, now_r)
    return {
        "sha256": hashlib.sha256(raw).hexdigest(),
        "bytes": len(raw),
        "events": len(trace),
        "peak_allocated_bytes": peak_a,
        "peak_event": peak_i,
        "peak_reserved_bytes": peak_r,
        "segment_allocs": sum(1 for e in trace if e["action"] == "segment_alloc"),
    }


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    folder = sys.argv[1]
    manifest = json.load(open(MANIFEST))
    for f in manifest["files"]:
        path = os.path.join(folder, f["name"])
        if not os.path.exists(path):
            print(f"{f['name']}: not in {folder}")
            continue
        got = figures(path)
        print(f["name"], json.dumps(got))
        if "--write" in sys.argv:
            f["sha256"], f["bytes"] = got.pop("sha256"), got.pop("bytes")
            f["expect"] = {**f.get("expect", {}), **got}
    if "--write" in sys.argv:
        with open(MANIFEST, "w") as out:
            json.dump(manifest, out, indent=1, ensure_ascii=False)
            out.write("\n")


if __name__ == "__main__":
    main()
