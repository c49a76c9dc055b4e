"""PyTorch CUDA eager peer for `oomlab bench --torch-device cuda` (issue 17's real-GPU run).

The shared CPU peer (torch_bench.py, kept unchanged) on a CUDA device: the same Hugging Face
GPT-2 (eager attention, tanh GELU, no dropout), forward + backward + AdamW per step, fp32 (TF32
left at PyTorch's default for matmuls: off), each step timed between torch.cuda.synchronize()
calls. Prints the same JSON as the CPU peer, plus the device's name and the first step's time.

usage: torch_cuda_bench.py [--d 64 --layers 2 --heads 4 --seq 64 --batch 16 --vocab 65 --steps 20]
"""
import argparse, json, time, statistics, torch
from transformers import GPT2Config, GPT2LMHeadModel

ap = argparse.ArgumentParser()
for k, v in dict(d=64, layers=2, heads=4, seq=64, batch=16, vocab=65, steps=20, threads=0).items():
    ap.add_argument(f"--{k}", type=int, default=v)
a = ap.parse_args()
if not torch.cuda.is_available():
    raise SystemExit("torch sees no CUDA device")
dev = torch.device("cuda")
torch.manual_seed(0)
cfg = GPT2Config(vocab_size=a.vocab, n_positions=a.seq, n_embd=a.d, n_layer=a.layers, n_head=a.heads,
                 activation_function="gelu_pytorch_tanh", resid_pdrop=0, embd_pdrop=0, attn_pdrop=0)
cfg._attn_implementation = "eager"
m = GPT2LMHeadModel(cfg).to(dev)
m.eval()  # no dropout ops; gradients still flow
opt = torch.optim.AdamW(m.parameters(), lr=1e-3)
x = torch.randint(0, a.vocab, (a.batch, a.seq), device=dev)
y = torch.randint(0, a.vocab, (a.batch, a.seq), device=dev)

def step():
    logits = m(input_ids=x).logits
    loss = torch.nn.functional.cross_entropy(logits.reshape(-1, a.vocab), y.reshape(-1))
    opt.zero_grad(set_to_none=True); loss.backward(); opt.step()

def timed():
    torch.cuda.synchronize(); t = time.perf_counter(); step(); torch.cuda.synchronize()
    return time.perf_counter() - t

first = timed()
for _ in range(2): timed()
times = [timed() for _ in range(a.steps)]
med = statistics.median(times)
print(json.dumps({"config": vars(a), "median_step_secs": med, "steps_per_sec": 1 / med, "first_step_secs": first,
                  "peak_allocated_bytes": torch.cuda.max_memory_allocated(), "device": torch.cuda.get_device_name(0),
                  "torch": torch.__version__}))
