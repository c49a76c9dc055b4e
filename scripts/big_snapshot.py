#!/usr/bin/env python3
"""Writes a large synthetic PyTorch memory snapshot, in the shape torch.cuda.memory._snapshot()
returns (segments with blocks, one device trace of alloc/free events, each with its own Python
stack of 18 frames), and times reading it: Python's pickle.load against `oomlab snapshot show`,
in the same run. No torch needed. Not for CI (a benchmark):
    python3 scripts/big_snapshot.py --events 444000 --out /tmp/big.pickle [--oomlab target/release/oomlab] [--reuse]
pickle.load is timed in a fresh Python process (not this one, whose heap already holds the
snapshot it wrote and whose garbage collector would scan it), then oomlab, one after the other.
"""
import argparse
import os
import pickle
import random
import resource
import subprocess
import sys
import time


NAMES = ["forward", "_call_impl", "_wrapped_call_impl", "linear", "main", "train_step"]


def file_names():
    files = [f"/opt/conda/lib/python3.11/site-packages/torch/nn/modules/{m}.py" for m in
             ("linear", "module", "activation", "normalization", "container", "sparse")]
    return files, ["/home/me/train.py", "/home/me/model.py"]


# With --shared-strings, one set of file name objects for the whole snapshot (pickle memoizes
# each once: a smaller file, and the same number of frame dicts); without, fresh ones per event.
SHARED = None


def frames(rng, depth):
    files, user = SHARED or file_names()
    out = []
    for i in range(depth):
        name = rng.choice(files if i < depth - 3 else user)
        # A fresh dict per frame (the function names are shared objects: pickle memoizes them).
        out.append({"filename": name, "line": rng.randrange(1, 2000), "name": rng.choice(NAMES)})
    return out


def snapshot(events, depth, seed=0):
    rng = random.Random(seed)
    trace, live, addr = [], [], 0x7f0000000000
    for _ in range(events):
        if live and rng.random() < 0.48:
            a, size = live.pop(rng.randrange(len(live)))
            trace.append({"action": "free_completed", "addr": a, "size": size, "stream": 0,
                          "frames": frames(rng, depth)})
        else:
            size = rng.choice([512, 4096, 1 << 20, 6 << 20]) * rng.randrange(1, 8)
            trace.append({"action": "alloc", "addr": addr, "size": size, "stream": 0, "frames": frames(rng, depth)})
            live.append((addr, size))
            addr += size
    total = sum(s for _, s in live) or 512
    # Blocks tile the segment: the live allocations, and the freed space between them.
    blocks, at = [], 0x7f0000000000
    for a, s in sorted(live):
        if a > at:
            blocks.append({"address": at, "size": a - at, "requested_size": 0, "state": "inactive", "frames": []})
        blocks.append({"address": a, "size": s, "requested_size": s, "state": "active_allocated",
                       "frames": frames(rng, depth)})
        at = a + s
    if addr > at:
        blocks.append({"address": at, "size": addr - at, "requested_size": 0, "state": "inactive", "frames": []})
    # The segment was made before the first allocation (the trace starts from nothing).
    trace.insert(0, {"action": "segment_alloc", "addr": 0x7f0000000000, "size": addr - 0x7f0000000000 or total,
                     "stream": 0, "frames": []})
    segments = [{"device": 0, "address": 0x7f0000000000, "total_size": addr - 0x7f0000000000 or total,
                 "allocated_size": total, "active_size": total, "requested_size": total, "stream": 0,
                 "segment_type": "large", "blocks": blocks}]
    return {"segments": segments, "device_traces": [trace]}


def peak_rss_mb(children=False):
    who = resource.RUSAGE_CHILDREN if children else resource.RUSAGE_SELF
    return resource.getrusage(who).ru_maxrss / 1024


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--events", type=int, default=100_000)
    p.add_argument("--depth", type=int, default=18)
    p.add_argument("--out", default="/tmp/big.pickle")
    p.add_argument("--oomlab", default=None)
    p.add_argument("--no-time", action="store_true", help="only write the file (the browser test's)")
    p.add_argument("--reuse", action="store_true", help="time the file at --out if it is there")
    p.add_argument("--shared-strings", action="store_true", help="one file name object per file")
    a = p.parse_args()
    if a.shared_strings:
        global SHARED
        SHARED = file_names()
    if not (a.reuse and os.path.exists(a.out)):
        with open(a.out, "wb") as f:
            pickle.dump(snapshot(a.events, a.depth), f, protocol=4)
    size = os.path.getsize(a.out)
    print(f"{a.out}: {size / 1e6:.1f} MB", file=sys.stderr)
    if a.no_time:
        return
    load = ("import pickle, resource, sys, time\n"
            "t = time.perf_counter()\n"
            "with open(sys.argv[1], 'rb') as f: pickle.load(f)\n"
            "print(time.perf_counter() - t, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)")
    done = subprocess.run([sys.executable, "-c", load, a.out], check=True, stdout=subprocess.PIPE, text=True)
    py, py_rss = (float(x) for x in done.stdout.split())
    print(f"pickle.load: {py:.2f} s, peak RSS {py_rss / 1024:.0f} MB", file=sys.stderr)
    if a.oomlab:
        # Peak RSS from /usr/bin/time (GNU time): a child forked from this large Python process
        # would report the parent's RSS through getrusage.
        timer = ["/usr/bin/time", "-f", "%M"] if os.path.exists("/usr/bin/time") else []

        def run(*args):
            t = time.perf_counter()
            done = subprocess.run(timer + [a.oomlab, "snapshot", *args], check=True,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            took = time.perf_counter() - t
            rss = int(done.stderr.strip().splitlines()[-1]) / 1024 if timer else peak_rss_mb(True)
            return took, rss

        ours, rss = run("show", a.out)
        print(f"oomlab snapshot show: {ours:.2f} s ({ours / py:.2f}× pickle.load), "
              f"peak RSS {rss:.0f} MB ({rss * 1e6 / size:.2f}× the file)", file=sys.stderr)
        # replay (the trace through oomlab's allocator) and diff (two files' peaks by place and
        # kind) against show on the same file: issue 55 asks for 2× show at most.
        for name, args in [("replay", ("replay", a.out)), ("diff", ("diff", a.out, a.out))]:
            took, rss = run(*args)
            print(f"oomlab snapshot {name}: {took:.2f} s ({took / ours:.2f}× show), peak RSS {rss:.0f} MB "
                  f"({rss * 1e6 / size:.2f}× the file)", file=sys.stderr)

if __name__ == "__main__":
    main()
