"""PyTorch CPU reference for oomlab's serving decode: tokens per second of a GPT-2 of the toy's
shape, eager, with transformers' KV cache (DynamicCache), greedy.

usage: torch_decode_bench.py [--d 64 --layers 2 --heads 4 --context 1024 --vocab 65
                              --prompt 64 --steps 64 --batches 1,16 --threads 2 --repeats 3]
For each batch B: a prefill of B prompts of --prompt tokens, then --steps decode steps of one
token per request through the model's forward with its cache; the decode steps are timed (the
best of --repeats). Prints JSON: {"rates": [{"batch", "decode_tokens_per_sec", "ms_per_step"}],
"torch", "transformers", "config"}.
"""
import argparse, json, time, torch
import transformers
from transformers import GPT2Config, GPT2LMHeadModel

ap = argparse.ArgumentParser()
for k, v in dict(d=64, layers=2, heads=4, context=1024, vocab=65, prompt=64, steps=64, threads=2, repeats=3).items():
    ap.add_argument(f"--{k}", type=int, default=v)
ap.add_argument("--batches", default="1,16")
a = ap.parse_args()
torch.set_num_threads(a.threads)
torch.manual_seed(0)
cfg = GPT2Config(vocab_size=a.vocab, n_positions=a.context, n_embd=a.d, n_layer=a.layers, n_head=a.heads,
                 activation_function="gelu_pytorch_tanh", resid_pdrop=0, embd_pdrop=0, attn_pdrop=0)
cfg._attn_implementation = "eager"
m = GPT2LMHeadModel(cfg).eval()
rates = []
with torch.inference_mode():
    for b in [int(x) for x in a.batches.split(",")]:
        best = None
        for _ in range(a.repeats):
            ids = torch.randint(0, a.vocab, (b, a.prompt))
            out = m(input_ids=ids, use_cache=True)
            past, nxt = out.past_key_values, out.logits[:, -1].argmax(-1, keepdim=True)
            t = time.perf_counter()
            for _ in range(a.steps):
                out = m(input_ids=nxt, past_key_values=past, use_cache=True)
                past, nxt = out.past_key_values, out.logits[:, -1].argmax(-1, keepdim=True)
            secs = time.perf_counter() - t
            best = secs if best is None else min(best, secs)
        rates.append({"batch": b, "decode_tokens_per_sec": b * a.steps / best, "ms_per_step": 1e3 * best / a.steps})
print(json.dumps({"rates": rates, "torch": torch.__version__, "transformers": transformers.__version__,
                  "config": vars(a)}))
