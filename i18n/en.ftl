# oomlab's English catalog. Every message here has a twin in zh.ftl with the same variables
# (tests/i18n.rs). Terms: i18n/GLOSSARY.md.

## The top bar and the tabs

app-title = oomlab — why does a large batch run out of GPU memory?
language = Language
tab-timeline = Step timeline
tab-sweep = Memory vs batch
tab-allocator = Allocator map
tab-training = Training
tab-real-models = Real models

## Memory categories

category-parameters = parameters
category-gradients = gradients
category-optimizer-state = optimizer state
category-master-weights = fp32 master weights
category-activations = activations
category-temporaries = temporaries
category-workspace = workspace
category-communication = communication
category-kv-cache = KV cache

## Where a number comes from

source-predicted = predicted (plan)
source-allocator = allocator (live)
source-device = device (driver report)

## The OOM panel

oom-heading = Out of memory at { $op }
oom-plain = The step needs { $needed } but only { $free } of the { $budget } budget is free.
steps-taken = { $count ->
    [one] { $count } step
   *[other] { $count } steps
}

## The controls

controls-setup = Setup
controls-model = Model
controls-parameters = { $count } parameters
controls-batch = batch
controls-sequence = sequence
controls-budget = Budget
controls-allocator = Allocator options
controls-alloc-expandable = Expandable segments
controls-alloc-expandable-hint = One segment per pool that grows in pages, so that memory freed on both sides of a segment's edge joins up (expandable_segments:True).
controls-alloc-max-split = Max split size
controls-alloc-max-split-hint = Cached blocks this large or larger are never split, and smaller requests never take them (max_split_size_mb).
controls-alloc-gc = Garbage collection threshold
controls-alloc-gc-hint = Past this share of the budget, cached segments nothing uses are released, the oldest first (garbage_collection_threshold).
controls-alloc-max-split-value = MiB and larger
controls-alloc-gc-value = of the budget
controls-gpus = Simulated GPUs (data parallelism)
controls-gpus-count = GPUs
controls-gpus-hint = Each simulated GPU has the budget above, its own allocator and its own batch of the size above: the global batch is this many times larger.
controls-zero = ZeRO stage
controls-zero-hint = DDP: every GPU keeps everything. ZeRO-1 shards the optimizer state across the GPUs, ZeRO-2 the gradients too, ZeRO-3 the parameters too.
controls-zero-0 = DDP (no sharding)
controls-bucket = communication bucket (elements)
controls-gpus-simulated = Simulated: the GPUs take turns on this one device, and there is no network.
controls-techniques = Techniques
controls-checkpointing = checkpointing
checkpoint-off = off
checkpoint-every-block = every block
checkpoint-every-k = every { $k } blocks (√L)
checkpoint-selective = selective (attention)
controls-precision = precision
controls-attention = attention
attention-standard = standard
attention-fused = fused (flash)
controls-optimizer = optimizer
controls-accumulation = accumulation steps
controls-lora-rank = LoRA rank (0 = off)
controls-offload = Offload to host memory
controls-offload-hint = ZeRO-Offload: the optimizer's states (and the gradients too, if chosen) are kept in the computer's own memory, and the optimizer step runs on the CPU. The GPU keeps less; every step copies over the bus.
controls-batching = Batches from the text
controls-batching-hint = Windows cut the corpus anywhere, every position a real character. Its speeches as documents: one to a row, padded to the longest of the batch; speeches of similar lengths together (less padding); or packed one after another into full rows, attention stopping at each speech's start.
controls-sequence-documents = The speeches set each batch's length: the longest of the batch, up to the model's positions.
batching-windows = windows
batching-padded = speeches, padded
batching-bucketed = speeches by length
batching-packed = speeches, packed
ways-heading = The play's speeches as batches of { $batch }
ways-way = batches
ways-padding = padding
ways-per-token = memory per useful character
ways-largest = largest batch that fits
ways-none = none fits
ways-line = { $way }: padding { $padding }, { $per } per useful character, largest batch that fits { $largest }
ways-source = Predicted (plan), each way at its first batch: the peak over the characters that have something to predict.
offload-none = none
offload-optimizer = optimizer states
offload-optimizer-gradients = optimizer states and gradients
controls-compare = Compare with
compare-checkpoint = checkpoint every block
compare-fused = fused attention
compare-accumulation = accumulation ×4
controls-seed = seed
controls-projector = projector mode
controls-display = Display:
controls-high-contrast = high contrast
controls-reduced-motion = reduced motion
controls-text-size = text size
run-one-step = One step
run-train = Train
run-stop = Stop
run-engine = engine: { $backend }
run-progress = step running: op { $done } of { $total }

## More categories (the plan's names stay in code: parameters, optimizer_state, …)

category-input = input
category-logits = logits

## Device figures that are not there

device-none-yet = no step has run yet
device-none-browser = the browser reports none: WebGPU exposes no memory figures, so every byte here is accounted by oomlab's allocator as the step executes
device-none-backend = not reported by this backend (its driver layer keeps no allocator report)
device-none-cpu = the CPU backend has no device: its segments are host buffers, as the allocator accounts them

## The breakdown at the peak

bd-at-peak = at the peak
bd-total = total
bd-reserved = reserved (segments)
bd-no-step = No real step yet: the allocator and device columns fill in once one runs.
bd-device = Device, after the step: { $segments } segment buffer(s) hold { $segment_bytes } — the allocator's { $reserved } reserved plus { $rounding } bytes of the driver's own rounding — in { $blocks } driver memory block(s) of { $block_bytes } in all. { $others } other allocation(s) ({ $other_bytes }) lie outside oomlab's allocator (wgpu's own buffers, oomlab's uniforms and readback{ $ui_textures }).
bd-ui-textures = , the UI's textures
bd-counters = wgpu's own counters: { $buffers } live buffers holding { $bytes }, { $allocations } memory allocations.
bd-disagrees = The driver's report disagrees with the allocator: segments it does not list { $missing }, buffers left over { $leftover }.
bd-device-reason = Device: { $reason }.
bd-group-activations = activations (saved for backward + temporaries)
bd-group-states = gradients + optimizer state + master weights
bd-group-buffers = buffers (input, logits, workspace)
bd-group-line = { $name }: { $bytes } ({ $percent }%)
ms-heading = model state
ms-bytes = bytes
ms-times = × trainable weights
ms-summary = { $optimizer } keeps { $count } optimizer state tensor(s){ $master }: { $copies }× the trainable weights' bytes on top of weights and gradients.
ms-master = {" "}plus fp32 master weights
ms-on-host = { $name } (in host memory)

## The OOM panel

oom-title = Out of memory
oom-explain = In plain words: the step needed { $requested } more for '{ $tensor }' ({ $category }), asked for by { $op }. No cached block was large enough, so the allocator tried to reserve a new { $tried } segment, but only { $free } of the { $capacity } budget was unreserved ({ $cached_free } sat free inside existing segments, in pieces too small or in the wrong pool).
oom-try = Try:
suggest-checkpointing = Checkpoint every block
suggest-fused = Use fused attention
suggest-accumulation = Accumulate: half the micro-batch, twice the steps
suggest-mixed = Mixed precision (bf16)
suggest-smaller = Halve the batch
suggest-expandable = Expandable segments (the memory is fragmented)

## Training

train-status = Step { $step }: loss { $loss } (computed by the step). Last step { $ms } ms; { $rate } steps/s over the last { $window }.
train-none = No training step yet: press One step or Train.
train-axis-step = step
train-axis-loss = loss

## The step timeline

tl-none = No step recorded yet.
tl-summary = Allocated memory over one step, { $source }: { $ops } ops. Peak { $peak } at { $op }.
tl-axis-op = op of the step
tl-reserved = reserved
tl-peak = peak
tl-scrubber = scrubber
tl-op = op
tl-at = At { $op }: { $allocated } allocated, { $reserved } reserved.
tl-alive = { $count } tensors alive here
tl-start = the start of the step
tl-collectives = collectives (every GPU at once)
tl-collective = A collective: { $kind } of { $what }, every GPU at once; { $bytes } passed through { $buffer }.
tl-transfers = copies between the GPU and host memory (offload)
tl-transfer = A copy over the bus: { $kind } of { $what }, { $bytes }; host memory is not GPU memory.
host-heading = In host memory (not GPU memory)
host-column = Host memory
host-saved = The GPU keeps { $saved } less: these bytes are kept in host memory instead.
host-bus = Every step { $bytes } cross the bus ({ $down } to the host, { $up } back): at { $rate } (PCIe 4.0 ×16) about { $ms } ms (predicted).
host-time = Measured on { $engine }: { $with } ms per step with offload, { $without } ms without it ({ $ratio }× the time).
host-time-alone = Measured on { $engine }: { $with } ms per step with offload. Set offload to none and run a step to measure the step without it.
host-time-none = Run a step to measure what offload costs in time.

## Memory vs batch

sw-none = No sweep.
sw-axis-batch = batch size (log₂)
sw-axis-peak = peak { $unit }
sw-this-batch = this batch
sw-budget = budget
sw-oom-from = { $name }: OOM from batch { $batch }
sw-summary = { $name }: largest batch that fits { $fits }; out of memory from batch { $oom }
sw-summary-all-fit = { $name }: largest batch that fits { $fits }; out of memory from — (every batch fits)
sw-fits-none = none
pg-heading = Memory per GPU against the number of GPUs, { $source }
pg-axis-gpus = simulated GPUs
pg-this = these settings' GPUs
pg-fits = { $name }: fits the budget with { $gpus } or more GPUs
pg-fits-none = { $name }: does not fit the budget on up to 8 GPUs
pg-fits-hidden = { $name }: fits from … GPUs (hidden until the reveal)
pg-description = Peak memory per GPU at a batch of { $batch } per GPU, for 1 to 8 simulated GPUs, by ZeRO stage; the budget is { $budget }.
rank-picker = Show the step of:
rank-gpu = GPU { $k }
rank-same = Predicted: every simulated GPU's plan is the same but for the shard it holds, so each shows GPU 0's figures until a real step runs.

## The allocator map

al-summary = At { $op }: { $segments } segments, { $reserved } reserved, { $allocated } allocated, { $free } free inside segments (largest free block { $largest }).
al-block = { $tensor } — { $bytes } block
al-free = free — { $bytes }
al-driver = Under them, { $source }: { $blocks } memory block(s) of { $bytes } hold the segment buffers ({ $requested } requested, { $reported } reported).
al-unnamed = (unnamed)

## The main area

main-export = Export:
main-baseline = { $name } · batch { $batch } ({ $micro } × { $accum } micro-batches) × sequence { $seq } · budget { $budget }
main-cannot-build = This setup cannot be built: { $error }
main-oom-predicted = (predicted by the plan; a real step would fail the same way)
alloc-at-oom = The allocator at the moment '{ $tensor }' did not fit ({ $op }), as the plan predicts it:
main-at-peak = At the peak
main-model-state = Model state, tensor by tensor
main-why = Why?
main-real-heading = Real models on real GPUs
main-claims = Claims, checked against the estimator

explain-breakdown = Parameters, gradients and optimizer state depend on the model only: AdamW keeps two more copies of every weight (m and v), and mixed precision adds fp32 master weights. Activations — the tensors the forward pass saves for the backward pass — grow with batch × sequence (and the attention probabilities with the square of the sequence), which is why a large batch runs out of memory while the model itself fits.
explain-timeline = Memory rises through the forward pass as each layer saves its activations, peaks around the start of the backward pass, and falls as the backward pass frees what it no longer needs. Model state is the flat floor underneath. Checkpointing lowers the ridge by recomputing activations during the backward pass.
explain-sweep = Each bar is the peak of one step at that batch size. Model state is the same at every batch; activations grow linearly with it, so the bars cross the budget line at some batch: the first out-of-memory. Techniques move that point: checkpointing and fused attention shrink activations, accumulation keeps the micro-batch small, mixed precision halves activations but adds master weights.
explain-allocator = The caching allocator (PyTorch's rules) reserves segments from the device and carves blocks out of them. Freed blocks stay cached for reuse rather than returning to the device, so reserved memory exceeds allocated memory; free gaps that are too small for the next request are fragmentation.

## Notices

notice-webgl = This browser offers no WebGPU (WebGL only): steps run on the CPU backend, same plan, same numbers.
notice-no-gpu = GPU compute is unavailable ({ $error }); steps run on the CPU backend instead.
notice-font-failed = The Chinese font could not be loaded ({ $error }); staying in English.
font-loading = Loading the Chinese font…

size-bytes = { $n } bytes

## A configuration in words (series names, the heading of the main area)

tech-baseline = baseline
tech-this-setup = this setup
tech-mixed = { $precision } mixed precision
tech-checkpoint-blocks = checkpoint blocks
tech-checkpoint-every = checkpoint every:{ $k }
tech-checkpoint-selective = checkpoint selective
tech-fused = fused attention
tech-accum = accumulation ×{ $k }
tech-gpus-ddp = { $gpus } GPUs, data parallel
tech-gpus-zero = { $gpus } GPUs, ZeRO-{ $stage }
tech-offload-optimizer = optimizer states in host memory
tech-offload-gradients = optimizer states and gradients in host memory
tech-batching-padded = speeches padded to the longest
tech-batching-bucketed = speeches batched by length
tech-batching-packed = speeches packed into full rows
tech-lora = LoRA r={ $rank } α={ $alpha } on { $targets }

## Exports

export-sweep-csv = sweep CSV
export-step-json = timeline + allocator JSON
export-snapshot = PyTorch snapshot
export-estimate-json = estimate JSON
export-png = window PNG

## Real models: the controls

real-model = model
real-gpu = GPU
real-custom-size = custom size
real-custom = custom ({ $name })
real-architecture = architecture: h { $h }, L { $l }, heads { $heads } (kv { $kv }), f { $f }, V { $v }
real-hidden = hidden
real-layers = layers
real-heads = heads
real-kv-heads = kv heads
real-mlp-width = MLP width
real-vocab = vocab
real-gelu = GELU MLP
real-swiglu = SwiGLU MLP
real-layernorm = LayerNorm
real-rmsnorm = RMSNorm
real-dropout = dropout
real-tied = tied embeddings
real-micro-batch = micro-batch
real-sequence = sequence
real-accumulation = accumulation
real-precision = precision
real-optimizer = optimizer
real-recomputation = recomputation
real-ckpt-off = off
real-ckpt-selective = selective
real-ckpt-full = every block (full)
real-fused = fused attention
real-data-parallel = data-parallel GPUs
real-zero = ZeRO stage
real-pipeline = pipeline stages
real-schedule = schedule
real-schedule-1f1b = 1F1B
real-schedule-interleaved = interleaved
real-chunks = chunks per stage
real-context-parallel = context-parallel
real-context-ring = ring attention
real-context-ulysses = Ulysses
real-stages = Pipeline of { $count } stages ({ $schedule }): the breakdown above is stage { $worst }'s, the most loaded.
real-stage = Stage { $stage }: { $layers } layers{ $holds ->
        [embedding] {" "}and the embedding
        [head] {" "}and the head
        [both] {" "}with the embedding and the head
       *[none] {""}
    }, { $flight } micro-batches in flight, peak { $peak }
real-mtp = count the multi-token-prediction module (not in transformers' model)
real-tensor-parallel = tensor-parallel
real-sequence-parallel = sequence parallel
real-offload-optimizer = offload optimizer
real-offload-gradients = offload gradients
real-offload-parameters = offload parameters
real-lora = LoRA rank (0 = off)
real-qlora = QLoRA (4-bit base)
real-fixed-costs = fixed costs
real-framework = framework
real-expert-parallel = expert-parallel
real-moe = A mixture of experts: { $experts } experts, { $k } per token. Its weights, gradients and optimizer state are those of all { $all } parameters; its activations are those of the { $active } a token passes through.
real-own-model = Your own model (a Hugging Face config.json)
real-own-how = Paste a model's config.json, open it, or drop it on the window: the estimate uses the architecture it describes, and a shared link carries that architecture.
real-own-paste = paste a config.json here
real-own-read-button = Use this config
real-own-path = path to config.json or its folder
real-own-drop = or drop a config.json on the window
real-own-read = Read { $name }: { $parameters } parameters.
real-own-cannot = This config cannot be estimated: { $error }
real-own-not-text = { $name } is not a text file (a config.json is UTF-8 text).
real-own-too-large = { $path }: { $bytes } bytes, more than the { $max } read
real-catalog = Published configs (Hugging Face)

## Real models: the estimate

real-cannot = This configuration cannot be estimated: { $error }
real-predicted-note = Predicted by the closed-form estimator (not measured): the toy's categories, for a real model.
real-fits = fits: { $peak } of { $capacity } per GPU ({ $percent }%)
real-oom = out of memory: needs { $peak } per GPU, the { $gpu } has { $capacity }
real-summary = { $model }: { $params }; largest micro-batch that fits: { $max }; tokens per optimizer step: { $tokens } (micro-batch { $micro } × sequence { $seq } × accumulation { $accum } × { $gpus } GPUs)
real-params = { $all } parameters
real-params-trained = { $all } parameters, { $trained } trained
real-offload = offload: { $host } of host memory per GPU; { $pcie } over PCIe per step
real-per-gpu = per GPU
real-predicted = predicted
real-source = source
real-peak = peak
real-sum = the sum: what must fit on each GPU
real-mem-vs-micro = Memory vs micro-batch
real-capacity = GPU capacity
real-max = largest micro-batch that fits: { $max }; out of memory from micro-batch { $oom }
est-communication = communication
est-cuda-context = cuda_context
est-fragmentation = fragmentation
explain-real = The same accounting as the toy, in closed form for a real model: parameters, gradients, optimizer state and master weights depend on the model and on how they are stored and sharded (ZeRO partitions them over the data-parallel GPUs); activations grow with micro-batch × sequence (Korthikanti et al.'s sbh(34 + 5as/h) per layer for GPT, derived tensor by tensor for LLaMA's SwiGLU, RMSNorm and grouped-query attention); the logits grow with the vocabulary. On the toy's own configuration the estimator gives the plan's bytes exactly, category by category.

## Real models: where each line's formula comes from

src-params = exact count from the architecture: { $formula }
src-zero = Rajbhandari et al. 2020 (ZeRO), §3: 2Ψ + 2Ψ + KΨ, partitioned over N_d by stage
src-zero-context = Rajbhandari et al. 2020 (ZeRO), §3: 2Ψ + 2Ψ + KΨ, partitioned by stage over N_d × C, the data- and context-parallel GPUs (they hold the same weights)
src-activations = Korthikanti et al. 2022, §4: sbh(34 + 5as/h) per layer, tensor by tensor (GQA, SwiGLU, RMSNorm derived)
src-logits = the lm_head output, the softmax kept for backward (fp32: Korthikanti's 4sbv) and the losses
src-logits-grad = the gradient of the logits, alive with the softmax at the start of backward
src-input = the micro-batch's token ids and labels (int64 in PyTorch)
src-mlp-working-set = the gradients alive in the last layer's MLP backward: the residual stream's and the MLP's
src-working-set = one layer's backward working set: the gradients of its residual stream, attention and MLP
src-context = CUDA context and loaded kernels: ~500 MiB per process (an assumed typical value; measure it with nvidia-smi, type it in)
src-workspace = cuBLAS workspace, PyTorch's default CUBLAS_WORKSPACE_CONFIG :4096:2:16:8 (8.125 MiB), 32 MiB on Hopper (aten/src/ATen/cuda/CublasHandlePool.cpp)
src-ddp = PyTorch DDP gradient buckets: a copy of the gradients unless gradient_as_bucket_view=True (torch.nn.parallel.DistributedDataParallel docs)
src-zero-buckets = DeepSpeed ZeRO reduce_bucket_size and allgather_bucket_size, 5e8 elements each by default; stage 3 gathers a layer's parameters (and prefetches the next)
src-sp = sequence parallelism all-gathers a layer's input to the full sequence before the column-parallel linear (Korthikanti et al. 2022, §4.2.2)
src-fragmentation = allocator fragmentation margin: an assumed 5 % of the allocated bytes (reserved minus allocated; type in your measurement to replace it)
src-offload = Ren et al. 2021 (ZeRO-Offload): fp32 state and gradients on the host, 16-bit weights and gradients cross PCIe each step
src-found-inf = the loss scaler's overflow flag (found_inf), one u32
src-freed = freed by the peak, a layer's backward pass (at the loss they take { $bytes }); { src-logits }
src-activations-hf = Hugging Face transformers' eager code path, tensor by tensor (modeling_gpt2.py, modeling_llama.py, as on CUDA): the saved tensors of one layer are listed by name
src-context-measured = CUDA context and loaded kernels: measured on your GPU ({ $bytes })
src-fragmentation-measured = allocator fragmentation: measured on your GPU ({ $percent } % of the allocated bytes)

## The claims lesson

claim-holds = holds
claim-breaks = breaks
claim-verdict = Verdict: { $test }.

## The controls: more

controls-heads = heads
preset-tiny = tiny
preset-small = small
preset-medium = medium

## The claims, with the estimator's numbers as arguments (also `oomlab claims`)

claim-doubling = Doubling the batch size raises memory 1.8–2.5×.
claim-doubling-source = the seed document (../shared/seed)
claim-doubling-test = every ratio peak(2b)/peak(b), b = 1, 2, 4, 8, inside [1.8, 2.5]
claim-doubling-finding = LLaMA-2 7B, bf16 mixed precision, Adam, seq 4096: doubling b from 1, 2, 4, 8 multiplies the peak by { $ratios } — { $below ->
        [yes] below 2× every time
       *[no] reaching 2× or more
    } ({ $inside } of { $count } inside 1.8–2.5), because model states and fixed costs do not grow with the batch; the ratio nears 2 only when activations dwarf everything else.

claim-seed-figures = LLaMA-2-7B with BF16 uses 38.2 GB at batch 64 and 89.7 GB at batch 128 (2.35×).
claim-seed-figures-source = the seed document (../shared/seed)
claim-seed-figures-test = the whole peak at batch 64 and 128 (seq 512, the smaller of bf16 mixed and pure bf16) within ±{ $tolerance } % of the figures, and their ratio within ±{ $tolerance } % of 2.35
claim-seed-figures-finding = Full training of its { $parameters } parameters with Adam, seq 512: the peak is { $at64 } GB at batch 64 and { $at128 } GB at batch 128 (×{ $ratio }). Model states alone take { $mixed } GB in bf16 mixed precision (16 bytes per parameter) and { $pure } GB in pure bf16.

claim-zero-stages = ZeRO stages 0–3 cut model states of a 7.5 B model on 64 GPUs from 120 GB to 31.4, 16.6 and 1.9 GB.
claim-zero-stages-source = Rajbhandari et al. 2020 (ZeRO), Figure 1
claim-zero-stages-test = each stage's model states per GPU, scaled to 7.5 B parameters, within 0.05 GB of the figure (its rounding)
claim-zero-stages-finding = Scaled to 7.5 B parameters: { $stages } GB per GPU for stages 0–3 (2Ψ + 2Ψ + 12Ψ, partitioned).

claim-zero3-batch = ZeRO-3 on 8×A100 raises a 7B model's per-GPU batch from 2 to 16.
claim-zero3-batch-source = the seed document (../shared/seed)
claim-zero3-batch-test = the largest micro-batch that fits, without ZeRO and with ZeRO-3 over 8 GPUs, equal to 2 and 16
claim-zero3-batch-finding = LLaMA-2 7B, bf16 mixed, Adam, seq 2048 on A100 80 GB: without ZeRO { $fits_without ->
        [no] not even micro-batch 1 fits
       *[yes] the largest micro-batch is { $without }
    }; with ZeRO-3 over 8 GPUs the largest micro-batch is { $with }, and { $with_checkpointing } with checkpointing every block. The gain is real, but it comes from sharding the { $states } GB of model states, and the batch it allows depends on sequence length and checkpointing.

claim-qlora = LoRA/QLoRA lets a 7B model train at batch 64 on one A100 80G in about 12 GB.
claim-qlora-source = the seed document (../shared/seed)
claim-qlora-test = the peak at batch 64, seq 512, with or without checkpointing (the smaller), at most 12 GB + { $tolerance } %
claim-qlora-finding = QLoRA (4-bit base, rank-16 adapters on every projection), seq 512: { $at1 } GB at batch 1, { $at64 } GB at batch 64 ({ $at64_checkpointed } GB with checkpointing every block). The frozen 4-bit base is small ({ $base } GB), but activations still grow with the batch.

claim-korthikanti = A GPT layer keeps sbh(34 + 5as/h) bytes of activations in 16-bit training.
claim-korthikanti-source = Korthikanti et al. 2022, §4.1
claim-korthikanti-test = one layer's activations (2 layers minus 1) equal to the paper's formula plus the LayerNorm statistics, to the byte
claim-korthikanti-finding = GPT-2 XL, b 4, s 1024: the estimator's layer holds { $layer } — the paper's { $paper } plus { $statistics } of LayerNorm statistics the paper leaves out. The 5as/h term ({ $attention } here) is the attention matrix: fused attention removes it.

claim-offload = ZeRO-Offload moves the optimizer to the CPU and needs a fast PCIe link (at least 32 GB/s).
claim-offload-source = the seed document (../shared/seed); Ren et al. 2021
claim-offload-test = GPU memory falls, and at 32 GB/s a step's PCIe traffic takes no longer than its compute at the A100's 312 TFLOP/s (bf16 dense), at micro-batch 1
claim-offload-finding = LLaMA-2 7B on one A100 80 GB, seq 2048, micro-batch 1: { $before } GB on the GPU before, { $after } GB after, { $host } GB in host memory. Each step moves { $pcie } GB over PCIe: { $pcie_secs } s at 32 GB/s, against { $compute_secs } s of compute at the GPU's peak — hiding it would take { $needed } GB/s, or micro-batch { $hides_from } and up at 32 GB/s.

## A shared link that cannot be used as it is

link-unusable = The link's settings could not be used ({ $why }); showing the defaults.
link-real-unusable = The link's real-model settings could not be used ({ $why }); showing that view's defaults.
link-adjusted = Some settings in the link were out of range and were adjusted.
link-too-long = the link is too long
link-no-settings = no s= field
link-not-base64 = not base64: { $error }
link-not-settings = not valid settings: { $error }

## Export and step status

export-saved = saved { $path }
export-downloaded = downloaded { $name }
export-cannot-write = cannot write { $path }: { $error }
export-download-failed = the download failed: { $error }
export-png-failed = the PNG could not be encoded: { $error }
error-config = This setup cannot run: { $error }
error-gpu = The GPU step failed: { $error }
error-host = Host memory cannot hold this step: { $error }
host-err-step = the CPU backend holds the step in host memory: it needs { $needed } ({ $reserved } of device memory reserved, { $per_byte } host byte(s) per byte, and the batch) but the host has { $available } available. Use a smaller batch, or the GPU backend.
host-err-indices = the host could not allocate the indices of tensor '{ $tensor }' ({ $bytes })
host-err-memory = the host could not allocate tensor '{ $tensor }' ({ $bytes })
error-step = The step failed: { $error }
error-internal = An internal error in oomlab stopped the step ({ $error }). The next step starts afresh; please report it.

backend-cpu = cpu (reference)
backend-cpu-worker = cpu (reference), in a background worker

real-custom-gpu = custom { $size }

## Room to see

tab-breakdown = Breakdown
main-peak-line = At the peak: { $allocated } allocated, { $reserved } reserved ({ $source }); budget { $budget }.
drawer-open = Settings »
drawer-close = « Back to the views
real-architecture-short = architecture
real-sources = Where each line comes from
real-source-line = { $category }: { $source }

## Keyboard shortcuts

keys-title = Keyboard shortcuts
keys-help = ? — show or hide this list
keys-focus = Tab and Shift+Tab — move between the controls; Enter or Space presses the focused one, the arrow keys move a focused slider
keys-step = Space — run one step
keys-batch-up = B — double the batch
keys-batch-down = Shift+B — halve the batch
keys-fit = F — fit the charts to their data
keys-present = P — present mode (large type, high contrast, colour-blind-safe colours)
keys-display = Display, under the controls: high contrast, reduced motion, text size up to 200 % (kept with the settings; a link can switch them on)
keys-reader = Screen readers find every control, text and chart description (in the browser the page mirrors them for the reader); a finished step, an out-of-memory error and a revealed answer are announced
keys-close = Close

## Lessons

lessons = Lessons
lessons-close = Close the lessons
lesson-chapter = Chapter { $n } of { $count }
lesson-prev = ‹ Previous
lesson-next = Next ›
lesson-reveal = Reveal
lesson-show-control = Show it in the settings
lesson-your-guess = Your guess
lesson-times = ×
lesson-number-verdict = The answer is × { $answer }; your guess × { $guess } is off by { $off } %. { $close ->
        [yes] Close enough!
       *[no] Not quite: look again at what grows and what stays.
    }
lesson-choice-right = Right.
lesson-choice-wrong = Not this one: the answer is “{ $answer }”.
lesson-from-step = The real step: { $step } ({ $source }); the plan predicted { $plan }.
lesson-step-differs = The real step and the plan disagree: the answer above is the step's. oomlab's plan should predict its own allocator exactly, so this is worth reporting.
lesson-step-note = A real step now runs with these settings; the allocator column fills in beside the plan's prediction.

lesson-fill-title = What fills memory in a training step
lesson-fill-body = At batch { $batch } and sequence { $seq } the step's peak is { $peak }. Two kinds of bytes share it: the model states — parameters, gradients and AdamW's two moments — and the activations saved for backward, with the temporaries.
lesson-fill-question = At the peak, how many times the model states' memory do the activations and temporaries take?
lesson-fill-answer = The model states take { $states } and the activations and temporaries { $activations }; { $largest } is the largest category: { $bytes } of the { $peak } peak.

lesson-batch-title = Batch size: what grows and what does not
lesson-batch-body = Model states do not depend on the batch. Activations grow with it.
lesson-batch-question = From batch { $batch } to { $double }: how many times more memory does the peak need?
lesson-batch-answer = The peak goes from { $before } to { $after }: the model states stay at { $states }, the activations and temporaries grow from { $activations } to { $activations_after }. The seed says that doubling the batch costs 1.8–2.5× the memory.

lesson-sequence-title = Sequence length and attention's T² term
lesson-sequence-body = Most activations grow with batch × sequence, but attention's probabilities grow with the square of the sequence.
lesson-sequence-question = From sequence { $seq } to { $double } at the same batch: how many times more memory do the activations saved for backward need at their peak?
lesson-sequence-answer = The saved activations go from { $before } to { $after }; the attention probabilities alone from { $attention_before } to { $attention_after }.

lesson-peak-title = Where the peak happens
lesson-peak-body = The timeline shows the allocated memory after each of the step's { $ops } ops. Drag the op slider along it and watch which tensors are alive.
lesson-peak-question = In which part of the step is memory highest?
lesson-peak-forward = during the forward pass
lesson-peak-backward = during the backward pass
lesson-peak-optimizer = during the optimizer step
lesson-peak-answer = The peak, { $peak }, is at { $op }: every saved activation is still alive and the first gradients are being made.
keys-chapters = Left and right arrow keys — the previous and next lesson chapter
keys-reveal = R — reveal the lesson chapter's answer (runs the real step)

lesson-allocator-title = The allocator: reserved and allocated
lesson-allocator-body = The caching allocator reserves segments from the device and carves blocks out of them. A freed block stays cached in its segment for the next tensor instead of going back to the device, so the allocator holds more than the tensors need. PyTorch's OOM message reports both numbers: what is allocated, and what is reserved but unallocated.
lesson-allocator-question = At this step's peak, how many times the allocated memory does the allocator hold reserved?
lesson-allocator-answer = At the peak { $allocated } is allocated and { $reserved } reserved: { $cached } sits cached in free blocks. Gaps too small for the next request are fragmentation.

lesson-fixes-title = The fixes, one at a time
lesson-fixes-body = This step needs { $peak } but the budget is { $budget }. Each technique pays in its own coin: checkpointing recomputes each block's forward pass during the backward pass; fused attention never stores the attention probabilities; mixed precision halves activations but adds fp32 master weights; accumulation runs smaller micro-batches more often.
lesson-fixes-question = Which single technique lowers this step's peak the most?
lesson-fixes-answer = { $best } does: the peak falls from { $before } to { $after }, for { $flops } % more FLOPs per step (checkpointing every block would cost { $checkpoint_flops } %).

lesson-real-title = From the toy to LLaMA-2 7B, and ZeRO
lesson-real-body = The same accounting in closed form for a real model: LLaMA-2 7B has { $parameters } parameters, and full training with Adam in bf16 mixed precision keeps 16 bytes of model states for each: on one GPU, more than an A100's 80 GB before a single activation. ZeRO shards those states over the data-parallel GPUs.
lesson-real-question = ZeRO-3 over 8 GPUs: how many times smaller are the model states on each GPU?
lesson-real-answer = The model states per GPU go from { $before } to { $after }.

lesson-diagnose-title = Diagnosing an out-of-memory error
lesson-diagnose-body = This step needs more than its { $budget } budget. The OOM panel shows PyTorch's message word for word, then says in plain words which op asked for how much, and offers fixes. The seed's workflow: read the message, find the category that grew, apply one fix at a time and check again.
lesson-diagnose-question = The message names the tensor that did not fit. Which category is it?
lesson-diagnose-answer = '{ $tensor }', asked for by { $op }, is { $category }.

lesson-context-title = A long context: split the sequence
lesson-context-body = { $model } was trained for a context of { $seq } tokens. Here one sequence of that length trains on H100s with fused attention, every block checkpointed and ZeRO-3 over { $gpus } data-parallel GPUs. Context parallelism splits the sequence over several GPUs: each holds its share of every activation, and ring attention passes the keys and values around.
lesson-context-question = How many GPUs must split the sequence for the step to fit?
lesson-context-one = none: it fits on one
lesson-context-two = 2
lesson-context-four = 4
lesson-context-eight = 8
lesson-context-more = more than 8
lesson-context-answer = { $fits } GPUs. The peak per GPU is { $one } on one, { $two } split over 2, { $four } over 4 and { $eight } over 8: each GPU keeps 1/c of everything made per token — the activations, the attention's own saved tensors, and the logits, at this length the largest share (every token's scores over the whole vocabulary) — and ZeRO-3 now shares the model states over the data- and context-parallel GPUs together ({ $gpus } × c), as Megatron-LM and DeepSpeed-Ulysses do: the context-parallel GPUs hold the same weights and reduce their gradients together. At that split the communication buffers, ZeRO's and the ring's key and value blocks in flight, come to { $communication }.
lesson-moe-title = A mixture of experts: Mixtral 8x7B
lesson-moe-body = Mixtral has { $experts } expert MLPs in each layer, and its router sends each token to { $k } of them: { $parameters } parameters in all.
lesson-moe-question = How many times more memory do Mixtral's model states take than those of the same model with only the { $k } experts a token uses?
lesson-moe-answer = Mixtral's states take { $states } per GPU, with only the routed experts { $routed_states }: every expert has its weights, gradients and optimizer state, used or not. The activations barely differ, { $activations } against { $routed_activations }: a token's activations are kept only for the experts it visits. The memory of 47 B parameters for the states, the activations of a 13 B model.

lesson-fragment-title = Will the next batch fit?
lesson-fragment-body = Batch { $batch } at sequence { $seq } needs { $peak } at its peak, and the budget is { $budget }. But the caching allocator does not hand out loose bytes: it carves blocks out of segments — tensors up to 1 MiB out of 2 MiB small segments, larger ones out of large segments — and a freed block stays cached in its own segment, in its own pool.
lesson-fragment-question = Does this step fit in { $budget }?
lesson-fragment-fits = Yes: it needs less than the budget
lesson-fragment-fragmented = No, although enough is free in total: in the wrong pieces
lesson-fragment-full = No: the memory really is full
lesson-fragment-answer = The real step says: { $outcome }
lesson-fragment-outcome-fits = It fits: the allocator reserves { $peak } at the peak, within the budget.
lesson-fragment-outcome-fragmented = Out of memory. The step asked for { $requested } more while { $cached } sat free in cached segments — but the largest free block was { $largest }, or in the other pool, and a new segment does not fit beside the { $reserved } reserved. That is fragmentation. { $expandable }
lesson-fragment-outcome-full = Out of memory: only { $cached } sat free in cached segments, less than the { $requested } asked for, with { $reserved } reserved. The memory really is full. { $expandable }
lesson-fragment-expandable-fits = With Expandable segments, under Allocator options (PyTorch's expandable_segments:True), segments grow in pages and freed memory joins up: the same step fits, { $reserved } reserved at its peak.
lesson-fragment-expandable-oom = Expandable segments would not save this step: it needs a smaller batch or a technique.
lesson-buckets-title = Where did the memory go?
lesson-buckets-body = { $gpus } simulated GPUs train the toy with PyTorch's DDP (data parallelism without sharding), each on a batch of { $batch }: each GPU runs exactly the step one GPU alone would run on { $batch } sequences, which needs { $alone } at its peak. Then the GPUs add up their gradients, so that every GPU takes the same optimizer step.
lesson-buckets-question = How many times one GPU's peak alone ({ $alone }) does each of the { $gpus } GPUs hold at its peak?
lesson-buckets-answer = { $peak } at each GPU's peak. Nearly all of the difference is DDP's communication buffers: { $communication }, beside { $gradients } of gradients. PyTorch's DDP copies every gradient into a bucket before it adds the buckets up across the GPUs, and it allocates every bucket once, for the whole run: a second copy of the gradients that a count of parameters, gradients and optimizer state misses. ZeRO-1 and ZeRO-2 pass the gradients through two buckets of { $bucket } elements instead: { $zero }.
lesson-zero2-title = What does ZeRO-2 save on 4 GPUs?
lesson-zero2-body = { $gpus } simulated GPUs train the toy with data parallelism. With DDP every GPU keeps all the model states: the parameters, the gradients and AdamW's two states, { $ddp } on each GPU. ZeRO-2 cuts the gradients and the optimizer states into { $gpus } shards, one per GPU; every GPU still runs the whole model.
lesson-zero2-question = How many times less memory do the model states take on each GPU with ZeRO-2 than with DDP?
lesson-zero2-answer = { $zero2 } on each GPU: the gradients and the optimizer states are 1/{ $gpus } each, but every GPU still holds all the parameters ({ $parameters }), which its forward and backward passes read. So ZeRO-2 saves less than { $gpus }×. ZeRO-3 shards the parameters too, which brings each GPU's states down to { $zero3 }, DDP's ÷ { $gpus }, at the price of gathering each layer's parameters before every use (the timeline marks each gather).
lesson-zero3-title = What does ZeRO-3 cost?
lesson-zero3-body = { $gpus } simulated GPUs train the toy under ZeRO-3: each GPU keeps only its shard of the parameters, so before a layer runs, the GPUs gather that layer's parameters from one another into a buffer, and free it after. The whole model's parameters are { $parameters }.
lesson-zero3-question = In one training step, how many times the whole model's parameters does each GPU gather?
lesson-zero3-answer = { $gathered } in { $gathers } gathers: every layer's parameters once for the forward pass and again for the backward pass (the embeddings, which the output layer shares, three times), against { $parameters } for the whole model. That is ZeRO-3's price for holding 1/{ $gpus } of the parameters: on a real cluster every gather crosses the network, each step. The Step timeline marks each gather.
lesson-padding-title = Why does a batch of long and short speeches waste memory?
lesson-padding-body = The batch holds { $batch } speeches of the play, each in a row of its own, padded with blanks to the longest one: { $longest } characters. Together they have { $useful } characters to predict. Packing would put the speeches one after another into full rows of { $longest } characters instead, attention stopping at each speech's start.
lesson-padding-question = How many times the activation memory of the same speeches packed into full rows does this padded batch take?
lesson-padding-answer = Padded, the step keeps { $padded } of activations: { $share } % of its positions are padding, each computed and kept like a real character. Packed into { $rows } full rows of the same length, the same speeches need { $packed }. A batch of long and short speeches pays for the room the short ones leave empty; batching speeches of similar lengths together, or packing them, spends the memory on text.
lesson-lengths-title = Will the next batch fit, after a batch of another length?
lesson-lengths-body = Bucketed batches of { $batch } speeches each have their own length: batch 1 is { $first } characters long, batch 2 { $next }. On an empty GPU, batch 2 needs { $alone } reserved at its peak, and this GPU has { $budget }. But batch 2 runs after batch 1, and the caching allocator keeps batch 1's freed memory in batch 1's segments, cut to batch 1's tensors: batch 2's tensors take pieces of them, and it only releases a segment that is wholly free.
lesson-lengths-question = Does batch 2 fit in { $budget } after batch 1?
lesson-lengths-fits = Yes: it fits on its own, so it fits after batch 1 too
lesson-lengths-fragmented = No, although enough is free in total: in batch 1's pieces
lesson-lengths-full = No: the memory really is full
lesson-lengths-answer = The real run says: { $outcome }
lesson-lengths-outcome-fits = Batch 2 fits: { $reserved } reserved at its peak.
lesson-lengths-outcome-fragmented = Out of memory at batch 2. It asked for { $requested } while { $free } was free in total — { $cached } of it in cached segments, the largest piece { $largest } — and alone it needs only { $alone }. Batch 1's segments are partly in use by batch 2's tensors, so they cannot be released, and a new segment does not fit beside them: fragmentation, made by the change of length.
lesson-lengths-outcome-full = Out of memory at batch 2: it asked for { $requested }, and only { $cached } sat free in cached segments. The memory really is full.
lesson-lengths-left = Batch 1 left { $reserved } reserved for a peak of { $allocated } allocated: reserved memory grows faster than allocated when lengths vary.
lesson-lengths-empty-cache = torch.cuda.empty_cache() after every batch
lesson-lengths-remedy-fits = With { $remedy }, the same two batches fit ({ $reserved } reserved at batch 2's peak, predicted).
lesson-lengths-remedy-oom = With { $remedy }, batch 2 still runs out of memory.

## Challenges

challenges = Challenges
challenges-close = Close the challenges
challenge-start = Start
challenge-done = done
challenge-active = Now: { $title }
challenge-run = Change the settings, then run a step: the check uses that executed step.
challenge-passed = Passed: { $why }
challenge-failed = Not yet: { $why }
challenge-best = Best so far, from executed steps: peak { $peak } ({ $source }), { $rate } tokens/s, { $flops } GFLOP per step (the plan's count).
challenge-share = Copy this link to share the challenge:

challenge-accum128-title = An effective batch of 128 in 32 MiB
challenge-accum128-goal = Train a step with an effective batch of 128 inside a 32 MiB budget without changing the model or the sequence length.
challenge-accum128-pass = batch 128 ran inside { $budget } with the same model and sequence length.
challenge-accum128-fail = the executed step must have batch 128, a budget of at most 32 MiB and the starting model and sequence length (now: batch { $batch }, budget { $budget }).

challenge-halve-title = Halve the peak for less than 25 % more compute
challenge-halve-goal = Keep batch { $batch } and sequence { $seq }; bring the peak from { $peak } to half or less, with less than 25 % extra FLOPs ({ $flops } GFLOP now).
challenge-halve-pass = the peak is { $peak } (≤ { $target }) for { $flops } GFLOP (≤ { $max_flops }).
challenge-halve-fail = the peak is { $peak } (target ≤ { $target }) for { $flops } GFLOP (limit { $max_flops }), batch { $batch }, sequence { $seq }.

challenge-largest-title = The largest batch that fits 64 MiB in fp16
challenge-largest-goal = With fp16 and a 64 MiB budget, the starting sequence length and optimizer and no other technique, run a step at the largest batch that fits — before the sweep tells you.
challenge-largest-pass = batch { $batch } ran and batch { $next } would not fit.
challenge-largest-fail = batch { $batch } { $ran ->
        [yes] ran, but batch { $next } fits too
       *[no] did not run in fp16 inside 64 MiB with the starting sequence length and optimizer and no other technique
    }.

## Teacher links

share-button = Share this setup
share-title = Share this setup
share-help = Tick what students may not change (lock) or should not see (hide), then copy the link. It also carries the settings, the language and the open lesson chapter or challenge.
share-lock = lock
share-hide = hide
share-link = The link:
share-link-fragment = The end of the link: put it after the address of the web app (for example https://your-school.example/oomlab/).
link-unknown-controls = The link names controls oomlab does not know ({ $names }); they are ignored.

lesson-source = Figures: { $source }.
veil-after-guess = shown after your guess, at the reveal
veil-fits = Does this step fit its budget? The answer comes with the reveal.
veil-chart = This chart appears after your guess.
veil-note = Figures marked ? appear when the chapter's answer is revealed: guess first.
real-veiled = { $model } on the { $gpu }: the estimate appears after your guess.

## Real models: runtime profiles and the saved tensors of one layer

real-runtime = runtime
real-runtime-either = either: fused kernels … HF eager
real-runtime-fused = fused kernels (Megatron-style)
real-runtime-hf = Hugging Face eager
real-measured-context = CUDA context measured on your GPU (MiB)
real-measured-fragmentation = fragmentation measured on your GPU (%)
real-range = With fused kernels: { $fused } ({ $fused-verdict }). With Hugging Face eager code: { $hf } ({ $hf-verdict }).
real-range-fits = fits
real-range-oom = does not fit
real-range-split = It fits with fused kernels, not with HF eager: choose the runtime you train with.
real-saved-heading = Saved for backward by one layer
real-saved-profile = The { $runtime } profile, per GPU:
real-saved-kind-experts = Each of the { $count } layers with the mixture of experts
real-saved-kind-experts-nope = Each of the { $count } layers with the mixture of experts, without RoPE
real-saved-kind-dense = Each of the { $count } dense layers
real-saved-kind-dense-nope = Each of the { $count } dense layers, without RoPE
real-saved-outside = Outside the layers

## The saved tensors, by name

saved-gelu-input = GELU input
saved-gelu-output-the-second-linears-input = GELU output (the second linear's input)
saved-latent-norms = latent attention's norms and up projections' inputs
saved-layernorm-input = LayerNorm input
saved-layernorm-mean-and-rstd-fp32-on-cuda = LayerNorm mean and rstd (fp32 on CUDA)
saved-mlp-dropout-mask = MLP dropout mask
saved-rmsnorms-fp32-copy-of-its-input = RMSNorm's fp32 copy of its input
saved-rmsnorms-normalised-input-cast-back-for-the-weights-gradient = RMSNorm's normalised input, cast back (for the weight's gradient)
saved-rmsnorms-normalised-input-fp32 = RMSNorm's normalised input (fp32: the weight multiplies it before the cast back)
saved-rmsnorms-rsqrt-fp32 = RMSNorm's rsqrt (fp32)
saved-attention-dropout-mask = attention dropout mask
saved-attention-output-the-output-projections-input = attention output (the output projection's input)
saved-attention-probabilities-softmax-output = attention probabilities (softmax output)
saved-dropped-probabilities = dropped probabilities
saved-dropped-probabilities-the-output-matmuls-input = dropped probabilities (the output matmul's input)
saved-embedding-dropout-mask = embedding dropout mask
saved-final-layernorm-input = final LayerNorm input
saved-final-layernorm-mean-and-rstd = final LayerNorm mean and rstd
saved-final-rmsnorms-fp32-copy-of-its-input = final RMSNorm's fp32 copy of its input
saved-final-rmsnorms-normalised-input-cast-back = final RMSNorm's normalised input, cast back
saved-final-rmsnorms-normalised-input-fp32 = final RMSNorm's normalised input (fp32)
saved-final-rmsnorms-rsqrt = final RMSNorm's rsqrt
saved-final-norm-input-the-last-blocks-output = final norm input (the last block's output)
saved-final-norm-output-lm-heads-input = final norm output (lm_head's input)
saved-final-norm-statistics-fp32 = final norm statistics (fp32)
saved-gate-and-up-outputs-silu-gate = gate and up outputs, silu(gate)
saved-gate-projection-output-silus-input = gate projection output (silu's input)
saved-gelu-news-0-5-x = gelu_new's 0.5·x
saved-gelu-news-1-tanh = gelu_new's 1 + tanh(…)
saved-gelu-news-tanh = gelu_new's tanh(…)
saved-gelu-news-x-the-first-linears-output = gelu_new's x (the first linear's output)
saved-key-repeated-to-every-head-as-the-score-matmul-keeps-it = key, repeated to every head (as the score matmul keeps it)
saved-block-input-the-q-k-v-projections-input = block input (the q/k/v projections' input)
saved-residual-sum-the-mlps-input = residual sum (the MLP's input)
saved-multi-token-prediction = multi-token-prediction modules: their norms, projection, block, final norm and head input
saved-norm-input-the-blocks-input = norm input (the block's input)
saved-norm-output-the-mlps-input = norm output (the MLP's input)
saved-norm-output-the-next-linears-input = norm output (the next linear's input)
saved-norm-output-the-q-k-v-projections-input = norm output (the q/k/v projection's input)
saved-norm-statistics-fp32 = norm statistics (fp32)
saved-position-ids-the-position-embeddings-indices-int64 = position ids (the position embedding's indices, int64)
saved-probabilities-cast-back-the-output-matmuls-input = probabilities cast back (the output matmul's input)
saved-query-as-the-score-matmul-keeps-it = query (as the score matmul keeps it)
saved-query-key-value = query, key, value
saved-query-key-value-full-heads = query, key, value (full heads)
saved-query-a-view-keeping-c-attns-whole-output-micro-batch-1 = query: a view keeping c_attn's whole output (micro-batch 1)
saved-residual-dropout-mask = residual dropout mask
saved-rotary-cos-and-sin-tables = rotary cos and sin tables
saved-row-logsumexp-fp32 = row logsumexp (fp32)
saved-second-norms-input-the-residual-sum = second norm's input (the residual sum)
saved-silu-gate = silu(gate)
saved-silu-gate-up-the-down-projections-input = silu(gate) · up (the down projection's input)
saved-up-projection-output = up projection output
saved-value-repeated-to-every-head-as-the-output-matmul-keeps-it = value, repeated to every head (as the output matmul keeps it)
saved-gemma-rmsnorms-normalised-input-fp32 = Gemma RMSNorm's normalised input (fp32)
saved-gemma-rmsnorms-scale-one-plus-weight-fp32 = Gemma RMSNorm's scale, 1 + weight (fp32)
saved-query-and-key-norms-fp32 = query and key norms: fp32 copies and rsqrt
saved-query-and-key-norms-normalised = query and key norms: normalised query and key
saved-attention-scores-tanh-softcap = attention scores' tanh (soft-capping)
saved-sandwich-norms = norms on the attention's and the MLP's outputs (fp32)
saved-gate-projection-output-gelus-input = gate projection output (GELU's input)
saved-gelu-gate = gelu(gate)
saved-gelu-gate-up-the-down-projections-input = gelu(gate) · up (the down projection's input)
saved-gate-and-up-outputs-gelu-gate = gate and up outputs, gelu(gate)
saved-row-max-indices-int64 = each score row's max: its indices (int64)
saved-attention-probabilities-with-the-sink = attention probabilities with the sink column (softmax output)
saved-router-top-k-softmax = router's softmax over its top k
saved-routing-weights-in-the-activations-dtype = routing weights (in the activations' dtype)
saved-expert-clamped-swiglu = experts' clamped SwiGLU: clamped gate and up, σ(α·gate), gate·σ, up + 1
saved-tokens-weighted-for-every-expert = every token repeated for every expert, with its score (the experts' input)
saved-query-temperature-scales = query temperature scales (fp32, one per position)
saved-router-input-and-weight-in-fp32 = router's input and weight in fp32
saved-router-probabilities-fp32 = router probabilities (softmax, fp32)
saved-router-scores-sigmoid-fp32 = router scores (sigmoid, fp32)
saved-router-top-k-indices-int64 = router's top-k expert indices (int64)
saved-router-top-k-weights-fp32 = router's top-k weights and their sum (fp32)
saved-expert-sort-indices = tokens sorted by expert: indices and offsets
saved-tokens-gathered-for-their-experts = tokens copied to their k experts (the experts' input)
saved-expert-gate-and-up-outputs = experts' gate and up outputs
saved-expert-activation-gate = experts' activation of the gate
saved-expert-gate-up-the-down-projections-input = experts' act(gate) · up (the down projection's input)
saved-routing-weights = routing weights (fp32)
saved-expert-outputs-for-the-weighted-sum = experts' outputs (for the weighted sum)
saved-shared-expert-mlp = shared expert's MLP: gate, act(gate), up, product
saved-shared-expert-gate-and-output = shared expert's sigmoid gate and output
saved-final-norm-gemma = final Gemma RMSNorm: fp32 copy, rsqrt, normalised input, scale
src-pipeline = pipeline schedule { $schedule } (Narayanan et al. 2021): the activations of { $count } more micro-batches in flight on this stage
src-pipeline-p2p = pipeline parallelism's send and receive buffers: one micro-batch's s·b·h at the stage's boundary, each way
src-context-ring = context parallelism, RingAttention (Liu et al. 2023): the key and value blocks in flight around the ring, this GPU's sent and the next received (s/c rows each)
src-context-ulysses = context parallelism, DeepSpeed-Ulysses (Jacobs et al. 2023): the all-to-all's send and receive buffers of q, k and v
src-all-to-all = expert parallelism's all-to-all (GShard, Lepikhin et al. 2020): send and receive buffers of each GPU's s·b·k token copies
src-pytorch-amp = PyTorch AMP (torch.autocast + GradScaler): the model stays fp32, 4 + 4 + 8 bytes per parameter with Adam, no master copy
src-deepspeed = DeepSpeed's ZeRO optimizer (stage_1_and_2.py, stage3.py): 16-bit weights and gradients, an fp32 partition of the weights and Adam's state on it
src-megatron = Megatron-LM (theoretical_memory_usage.py): fp32 main gradients beside bf16 weights, 18 bytes per parameter; its distributed optimizer 6 + 12/DP
src-fsdp2 = PyTorch FSDP2 (fully_shard, MixedPrecisionPolicy bf16/fp32): fp32 parameter and gradient shards, Adam on them, 16 bytes per parameter over the GPUs
src-autocast = torch.autocast caches each linear weight's 16-bit copy for the forward pass and the matmul saves it for the backward: 2 bytes per linear weight

## The Snapshot tab: a PyTorch memory snapshot

tab-snapshot = Snapshot
source-pytorch = measured by PyTorch
source-oomlab-export = written by oomlab's allocator (an export, not a PyTorch measurement)
snap-heading = A PyTorch memory snapshot
snap-how = Record one with torch.cuda.memory._record_memory_history() and torch.cuda.memory._dump_snapshot("snap.pickle") in your training script, or write oomlab's own step with: oomlab snapshot export --out step.pickle
snap-path = path to snap.pickle
snap-open = Open
snap-choose = Choose a file…
snap-drop = or drop files on this window (more than one to compare them)
snap-reading = Reading { $name }…
snap-error = Could not open { $name }: { $error }
snap-error-foreign = it is not a PyTorch memory snapshot ({ $detail })
snap-error-corrupt = the snapshot is damaged ({ $detail })
snap-error-write = the snapshot could not be written ({ $detail })
snap-error-unreadable = the file cannot be read ({ $detail })
snap-error-empty-folder = the folder has no .pickle, .pkl or .json file
snap-device = GPU { $n }
snap-source = { $name }, device { $device }: { $source }
snap-truncated = The trace starts with { $allocated } allocated and { $reserved } reserved: recording began mid-run, or the ring buffer dropped the oldest events (the trace is truncated).
snap-oom-heading = Out of memory
snap-oom = At event { $index } PyTorch asked for { $size } with { $free } free on the device ({ $frame }).
snap-oom-fragmented = The cached free memory ({ $cached }) would hold it, but its largest free block is { $largest }: the memory is fragmented. PyTorch's remedy: PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True.
snap-oom-full = The segments held { $cached } free, the largest free block { $largest }: the memory really is full — a smaller batch, activation checkpointing or mixed precision is the fix.
snap-live = The { $count } largest allocations alive at the peak
snap-no-frame = (no stack recorded)
snap-col-snapshot = this snapshot
snap-col-toy = the toy's step
snap-col-toy-source = the toy's step ({ $source })
snap-peak-allocated = peak allocated
snap-peak-reserved = peak reserved
snap-largest-free = largest free block at the end
snap-free = free in segments at the end
snap-fragmentation = fragmentation at the end (free memory outside the largest free block)
snap-events = allocator events
snap-no-trace = This snapshot has no trace: only its segments at the time of the dump.
snap-allocated = allocated
snap-oom-line = out of memory
snap-axis-event = event
snap-map = The allocator's segments at the dump ({ $shown } of { $count }, largest first): allocated blocks filled, free space empty
snap-segment = segment { $address }: { $size }, { $allocated } allocated in { $blocks } blocks
snap-segment-private = In private pool { $pool } (a CUDA graph's or a MemPool's): only its own requests use it.
snap-segment-expandable = An expandable segment: it grows and shrinks in pages.
snap-scrub = Scrub to an event
snap-alive-at = After event { $index }: { $bytes } alive in { $count } allocations
snap-holding-peak = What filled the GPU at the peak (event { $index })
snap-holding-oom = What filled the GPU when the OOM struck (event { $index })
snap-holding-at = What is alive after event { $index }
snap-holding-how = Grouped by where the memory was asked for (the first Python frame outside torch and the standard library, with the operator its C++ frames name) and by what it holds: read from each allocation's life against the run's phases, else guessed from its stack (marked with ?).
snap-holding-known = oomlab's own export names each block's category: these are not guesses.
snap-holding-total = { $bytes } in { $count } allocations
snap-holding-row = { $bytes } in { $count }: { $guess } — { $site }
guess-parameters = parameters
guess-optimizer = optimizer state
guess-gradients = gradients
guess-activations = activations
guess-other = other
guess-temporaries = temporaries
guess-parameters-and-state = parameters and optimizer state
place-none = no stack recorded
place-no-python = no Python frame
place-no-python-op = no Python frame ({ $op })
place-frame-op = { $frame } ({ $op })
place-op-in-node = { $op } in { $node }
place-called-from = { $place }, called from { $caller }
evidence-oomlab = named by oomlab's export
evidence-before-recording = before the recording: alive before it began and never freed (the model's parameters, or inputs)
evidence-before-recording-with-state = before the recording: alive before it began and never freed; the optimizer step recorded made no state, so its state from earlier steps is here too
evidence-backward-into-step = made during the backward, alive into the optimizer step
evidence-backward-to-end = made during the backward, alive when the recording ended
evidence-step-and-after = made during the optimizer step, alive after it
evidence-forward-to-backward = made during the forward, freed during the backward
evidence-forward-to-end = made during the forward, alive when the recording ended
evidence-within-phase = made and freed within one phase
evidence-stack = guessed from its stack
fix-temporaries = Fixes that act on temporaries: fused kernels (torch.compile), in-place operations, a smaller micro-batch; each exists only within one phase, so the peak is where they pile up.
fix-parameters-and-state = Fixes that act on parameters and optimizer state: FSDP or ZeRO to shard them, an 8-bit optimizer, mixed precision, LoRA (a frozen base has no optimizer state). Record from the first step to tell the two apart.
phase-forward = forward
phase-backward = backward
phase-optimizer = optimizer step
phase-zero-grad = zero_grad
guess-mark = { $what }?
snap-advice-heading = The diagnostic workflow
advice-capacity = The peak ({ $peak }) is { $percent } % of the device's { $capacity } (reserved plus what the driver had free at the OOM).
advice-capacity-over = Above 90 %: profile by module (the table above), then act on what grew.
advice-fragmented = { $free } was free inside the cached segments, more than the { $request } asked for, but not in one piece: fragmentation, not size (try PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True).
advice-grew = What grew most since the trace began: { $what } (+{ $bytes }).
advice-where = Most of it was made at { $place } (+{ $bytes }).
fix-parameters = Fixes that act on parameters: mixed precision or bf16 weights, FSDP or ZeRO-3 sharding, LoRA or QLoRA (a frozen, smaller base).
fix-optimizer = Fixes that act on optimizer state: ZeRO-1/2 or FSDP to shard it, ZeRO-Offload to move it to the CPU, an 8-bit or factored optimizer.
fix-gradients = Fixes that act on gradients: ZeRO-2 or FSDP to shard them, gradients in bf16, accumulating into one buffer.
fix-activations = Fixes that act on activations: activation checkpointing on the blocks, a smaller micro-batch with gradient accumulation, fused (flash) attention, a shorter sequence.
fix-other = Look at the frames listed: inputs kept alive, a growing list of tensors, a cache.
snap-progress = Reading { $name }: { $done } of { $total }
snap-too-large = { $name } is { $size }: more than the { $limit } a browser tab can read. Summarise it on the desktop with: oomlab snapshot show { $name }
snap-add = Add beside
snap-add-file = Add files…
snap-recorded-with = Recorded with PYTORCH_CUDA_ALLOC_CONF={ $conf }
snap-conf-unset = (not set)
snap-no-settings = The file does not say which allocator settings the run had (an older PyTorch).
snap-recording-heading = What the file says of its recording
snap-unlimited = unlimited
snap-settings = What PyTorch made of them: expandable_segments { $expandable }, max_split_size { $split }, garbage_collection_threshold { $gc }
snap-settings-power2 = roundup_power2_divisions is set: PyTorch rounded requests up to powers of two, which oomlab's allocator does not do.
snap-annotations = { $count } record_function annotations ({ $names } names: { $first } …)
snap-metadata = Events with user metadata: { $count } (event { $index }: { $text })
snap-private-pools = Private pools (CUDA graphs, MemPools): { $segments } segments in { $pools } pools, { $reserved } reserved
snap-expandable = Expandable segments: { $segments } at the dump; { $maps } mappings and { $unmaps } unmappings in the trace
snap-unknown-none = Nothing in the file was unknown to oomlab.
snap-unknown-actions = Actions oomlab does not know (a newer PyTorch's), counted and passed over: { $list }
snap-unknown-keys = Keys oomlab does not know, counted and passed over: { $list }
snap-phases = The run's phases:
snap-phase-named = a record_function range
snap-phase = { $phase }: events { $first }–{ $last } ({ $source })
snap-phase-annotation = from the run's annotation
snap-phase-stacks = from the stacks
snap-phase-more = and { $count } more
snap-replayed-line = reserved, replayed by oomlab's allocator
chart-snapshot-phases = Phases: { $phases }.
chart-snapshot-replayed = Replayed through oomlab's allocator, reserved peaks at { $peak }.
snap-replay-heading = Replay this run through oomlab's allocator
snap-replay-how = The run's allocations and frees, in order, through oomlab's caching allocator (PyTorch's rules), from the segments alive when the recording began. With the run's own settings its segments come back; with others, you see what the run would have reserved.
snap-replay-own-hint = the run's own settings
snap-replay-conf = Allocator settings, as PYTORCH_CUDA_ALLOC_CONF:
snap-replay-memory = GPU memory (for garbage_collection_threshold):
snap-replay-run = Replay
snap-replay-error = Cannot replay: { $error }
snap-replay-defaults = PyTorch's defaults
snap-replay-with-own = Replayed with the run's own settings ({ $conf })
snap-replay-with = Replayed with PYTORCH_CUDA_ALLOC_CONF={ $conf }
snap-replay-real = the real run
snap-replay-replayed = the replay
snap-replay-segments = segments reserved during the trace
snap-replay-released = segments released during the trace
snap-replay-largest = largest free block at the peak allocated
snap-replay-agrees = The replay's peak reserved is { $percent } % off the run's: oomlab's allocator places this run's blocks as PyTorch did.
snap-replay-would = This run would have reserved { $replayed } at its peak instead of { $real }.
snap-replay-releases = The run released its cached segments { $count } times (torch.cuda.empty_cache(), or before retrying a failed cudaMalloc): the replay did too, at the same events.
snap-replay-ooms = Out of memory: { $real } times in the run, { $replayed } in the replay.
snap-replay-power2 = The run rounded requests with roundup_power2_divisions, which oomlab's allocator does not follow: expect differences.
snap-replay-bad-memory = { $value } is not a size (try 80GiB)
snap-replay-needs-memory = garbage_collection_threshold is a share of the GPU's memory, and this file does not say how much the GPU has: give it (80GiB).
snap-several-heading = { $count } snapshots side by side
snap-several-how = Each file's peak, measured by PyTorch. Files named rank0, rank1, … are taken as the ranks of one run. What is alive at a peak adds up to it exactly, so the differences below add up to the spread.
snap-several-rank = rank
snap-several-file = file
snap-several-line = rank { $rank }: { $file }, peak allocated { $allocated }, peak reserved { $reserved }
snap-several-worst = the worst
snap-several-show = Show in full
snap-several-close = Close the others
snap-several-spread = { $worst } peaks { $spread } above { $best }: { $percent } % above the mean of all.
snap-several-extra = Where the extra memory went, at the peaks (from { $best } to { $worst }):
snap-several-kind = { $kind }: { $a }, then { $b } ({ $change })
snap-several-place = { $change }: { $place } ({ $a }, then { $b })

## The class: the students' page (oomlab serve, /join)

student-title = oomlab class
student-intro = Your teacher runs oomlab on the projector. Guess with the class, then see what the real GPU memory says.
student-code = Class code
student-name = Your name (optional; only your teacher sees it)
student-join = Join the class
student-joined = You are in the class. Keep this page open.
student-waiting = Waiting for your teacher's question…
student-question = Question { $chapter }
student-number = Your guess (a number)
student-send = Send my guess
student-sent = Sent: { $answer }. You can change it until the answer is shown.
student-not-sent = Not sent yet.
student-answer = The answer: { $answer }
student-yours = Your guess: { $answer }
student-off-by = You were { $percent } % away from it.
student-round-two = Round 2: discuss the question with a neighbour, then vote again.
student-vote = Your vote in round { $round }: { $answer }
student-history = Your answers so far
student-history-number = Chapter { $chapter }: you said { $yours }, the answer was { $answer }: { $percent } % away.
student-history-choice = Chapter { $chapter }: you said “{ $yours }”, the answer was “{ $answer }”: { $verdict }
student-right = Right!
student-wrong = Not this time.
student-none = You did not answer this question.
student-closed = The class has ended. Thank you!
student-no-class = There is no class with this code. Check the code on the projector.
student-bad-code = A class code has 6 letters and digits.
student-too-fast = Too many guesses at once: wait a moment, then send again.
student-revealed-already = The answer is already shown: this question takes no more guesses.
student-offline = The connection to the class was lost; trying again…
student-refused = The class server refused this ({ $status }).
student-locked = The class is locked: your teacher lets no one else join now.
student-join-busy = Too many joins from this network at once: wait a minute, then try again.
student-name-invalid = This name cannot be used: letters, digits, emoji and single spaces only, at most 40 characters.
student-let-in = You are waiting to be let in: the class is full for now, and your teacher decides.
student-removed = Your teacher removed you from the class. You can join again if the class is open.

## The welcome: three ways in

welcome-title = Welcome to oomlab
welcome-intro = Why does a large batch run out of GPU memory? oomlab trains a small GPT on this computer's GPU and accounts for every byte of each training step.
welcome-lessons = Start the lessons
welcome-lessons-note = { $chapters } short chapters: guess first, then a real step answers.
welcome-explore = Explore freely
welcome-explore-note = Every control and view, from a sensible starting setup.
welcome-teach = Teach a class
welcome-teach-note = With oomlab serve: students guess on their phones, the projector shows the class's guesses, then the real step answers.

## Teaching a class (the teacher's side of oomlab serve)

# The top bar's toggle of the class panel (short: it sits beside Lessons and Challenges).
class-toggle = Class
class-title = Teach a class
class-hide = Hide
class-intro = Run oomlab serve on this computer, then start a class here. Students join on their phones; each lesson chapter you open becomes their question, and its reveal sends them the answer.
class-server = Class server
class-start = Start a class
class-starting = Starting the class…
class-code = Class code: { $code }
class-join-at = Students: open { $url } or scan the code
class-joined = { $students ->
        [one] 1 student joined
       *[other] { $students } students joined
    } · { $answered } answered this question
class-ended = The class has ended. Its answers stay on the server until the class expires.
class-question = Question { $chapter }: { $text }
class-no-question = Open a lesson chapter: its question goes to the class.
class-guesses = The class's guesses (no names)
class-second-round = Second round
class-second-round-note = Keep the first vote's spread on screen without the answer; every student votes again after talking with a neighbour.
class-split = The class is split: let neighbours who disagree convince each other, then start a second round.
class-round-two = Round 2: discuss with a neighbour, then vote again.
class-round = Round { $round }
class-no-guesses = No guesses yet.
class-axis-students = students
class-axis-guess = guess
class-axis-answer = answer
class-revealed = The answer, from the real step: { $answer }
class-planned = The plan predicted: { $answer }
class-setting = Setting: { $what }
class-setting-toy = toy GPT-2 ({ $model }), batch { $batch }, sequence { $seq }, budget { $budget }, { $techniques }
class-setting-real = { $model } on { $gpus }
class-projector = Projector view (full screen)
class-projector-note = The class for the back of the room: the question large, the answers over half the screen. Back returns to the app.
class-projector-back = ‹ Back to the app
class-loopback = Students cannot open this address: it names this computer to itself. Start oomlab serve with --public-url and this laptop's address on the class's network.
chart-projector = Round { $round }: { $answers } answers. { $slots }.
projector-median = median { $median }
projector-middle = middle half (yellow) { $low }–{ $high }
projector-answer = answer { $answer }
projector-within = { $within } of { $count } within ±{ $percent } %
class-csv = Download the answers (CSV)
class-end = End the class
class-unreachable = No class server answers at { $server }. Start one on this computer with: oomlab serve
class-unreadable = The server at { $server } answered, but not as an oomlab class server.
class-gone = This class no longer exists on the server: it expired, or the server lost its database. Start a new class.
class-not-yours = The class server does not accept this computer's teacher key for this class.
class-moved-on = The class server refused this: the class is on another question, or it has ended.
class-invalid = The class server found this question invalid.
class-busy = The class server is busy or stopping: try again in a moment.
class-not-saved = The class server can no longer save: its database file was removed or replaced while it ran. What it saved is gone with the file; restart the server to start a new one.
class-failed = The class server failed ({ $status }).
class-key = Teacher key
class-key-note = Only for a class server on another computer: the key it printed when it started. On the server's own computer, leave it empty.
class-expected = Expected class size
class-expected-note = 0: anyone may join. Past this size, students wait until you let them in.
class-key-needed = This class server lets only its own computer, or a teacher with its key, start a class: enter the key it printed when it started.
class-flood = Joins are arriving faster than a class can type: { $joins } in { $seconds } s. If you did not expect them, lock the class and check its students.
class-flood-expected = { $waiting } more than the { $expected } students you expected are waiting. If you did not expect them, remove everyone waiting and lock the class.
class-lock = Lock the class: no one else joins
class-waiting = { $waiting ->
        [one] 1 student waits
       *[other] { $waiting } students wait
    } to be let in.
class-admit-all = Let everyone in
class-remove-waiting = Remove everyone waiting
class-remove-waiting-lock = Remove everyone waiting and lock the class
class-students = Students, with their names (not for the projector)
class-no-students = No students yet.
class-student = { $number }. { $name }
class-no-name = (no name)
class-student-waiting = waits to be let in
class-student-answers = { $answers ->
        [one] 1 answer
       *[other] { $answers } answers
    }
class-admit = Let in
class-remove = Remove
class-remove-student = Remove { $student }
class-admit-student = Let { $student } in

## Charts' descriptions, for screen readers (computed from what each chart draws)
chart-batch = { $name }, peak memory against batch size: { $peak } at batch { $batch }, { $largest } { $share } % of it; the { $capacity_name } of { $capacity } is reached at batch { $oom }.
chart-batch-fits = { $name }, peak memory against batch size: { $peak } at batch { $batch }, { $largest } { $share } % of it; every batch shown fits the { $capacity_name } of { $capacity }.
chart-batch-oom = { $name }, peak memory against batch size: batch { $batch } does not fit the { $capacity_name } of { $capacity }; out of memory from batch { $oom }.
chart-batch-range = { $name }, peak memory against batch size: the { $capacity_name } of { $capacity } is reached at batch { $oom }.
chart-loss = Loss over { $steps ->
    [one] 1 step
   *[other] { $steps } steps
}: { $first } at the first, { $last } at the last.
chart-loss-none = Loss curve: no step yet.
train-memory-heading = Memory after each step (allocator, live)
train-memory-allocated = peak allocated
train-memory-reserved = reserved after the step
train-axis-mib = Memory (MiB)
chart-step-memory = Memory over { $steps ->
    [one] 1 step
   *[other] { $steps } steps
}: reserved { $first } after the first, { $last } after the last; the highest allocated peak { $allocated }.
chart-step-memory-none = Memory after each step: no step yet.
chart-snapshot = Memory over the { $events } events of the trace: allocated peaks at { $peak } at event { $at }, reserved at { $reserved }; { $ooms } out-of-memory events.
chart-snapshot-scrub = Marked: after event { $index }, { $bytes } allocated.
chart-class-number = The class's guesses: { $count } of them, from { $low } to { $high }, the middle one { $median }.
chart-class-choice = The class's guesses, students per option: { $counts }.
live-step = Step { $n } finished: { $peak } allocated at the peak ({ $source }).
legend-stacked = Stacked from the bottom:

## Why the estimator refuses a setup or a config.json (the app, the CLI's errors; `estimate::error`)

est-err-out-of-range = { $what } must be between 1 and { $max } (got { $value })
est-err-at-most = { $what } must be at most { $max } (got { $value })
est-err-unknown-precision = unknown precision { $got }: expected fp32, fp16, bf16 (mixed) or pure-bf16
est-err-unknown-optimizer = unknown optimizer { $got }: expected sgd, momentum or adam
est-err-sequence-beyond-positions = sequence length { $seq } is longer than { $model }'s position table ({ $positions })
est-err-tensor-parallel-divide = tensor parallelism { $t } must divide the heads ({ $heads }), the key/value heads ({ $kv }) and the MLP width ({ $ffn })
est-err-expert-parallel-mixture = expert parallelism { $ep } needs a mixture of experts
est-err-expert-parallel-divide = expert parallelism { $ep } must divide the experts ({ $experts }) and the data-parallel GPUs ({ $data }): its GPUs are data-parallel ones
est-err-lora-experts = LoRA on a mixture's experts is not modelled: adapt the attention (qkv, proj)
est-err-sequence-parallel-divide = sequence parallelism splits the sequence ({ $seq }) over { $t } GPUs: it must divide
est-err-measured-context = a measured CUDA context of { $bytes } bytes is more than any GPU holds
est-err-measured-fragmentation = measured fragmentation must be between 0 and 1000 % (got { $percent })
est-err-zero-stage = ZeRO has stages 0 to 3 (got { $stage })
est-err-gradient-offload = gradient offload needs optimizer offload (the optimizer step must run where the gradients are)
est-err-parameter-offload = parameter offload needs ZeRO stage 3 (it offloads the parameter shards)
est-err-checkpoint-every = checkpoint every:{ $k } needs 1 <= K <= the number of layers ({ $layers })
est-err-profile-full-training = the { $framework } profile models full training without offload (LoRA and offload: zero or deepspeed)
est-err-amp-precision = pytorch-amp is mixed precision: choose bf16 or fp16
est-err-amp-zero = pytorch-amp is plain data parallelism: ZeRO stages are deepspeed's or fsdp2's
est-err-megatron-zero = Megatron's distributed optimizer shards the optimizer state and master weights (--zero 1); for ZeRO-2 or 3 choose deepspeed or fsdp2
est-err-fsdp2-zero = fsdp2 shards parameters, gradients and optimizer state: ZeRO stage 3
est-err-lora-rank = LoRA rank must be between 1 and hidden - 1 (got { $rank })
est-err-lora-no-target = LoRA needs at least one target projection
est-err-dropout = dropout is a probability from 0 up to (not including) 1 (got { $value })
est-err-heads-divide = hidden ({ $h }) must be divisible by heads ({ $heads })
est-err-kv-heads-divide = heads ({ $heads }) must be a multiple of kv_heads ({ $kv }) for grouped-query attention
est-err-too-many-parameters = { $model } has more than 2^56 parameters: beyond what oomlab counts
est-err-top-k = top_k ({ $k }) cannot be more than the experts ({ $experts })
est-err-experts-not-gated = the estimator's experts are gated MLPs (SwiGLU or GeGLU)
est-err-no-mixture-layer = no layer of { $model } has the mixture of experts
est-err-dense-width = the dense layers among the mixture's need their MLP width
est-err-pipeline-stages = pipeline stages must be between 1 and the layers ({ $layers }) (got { $p })
est-err-interleaved-chunks = the interleaved schedule's chunks per stage must be between 2 and 64 (got { $v })
est-err-interleaved-divide = the interleaved schedule needs more than one stage and the layers ({ $layers }) to divide into stages × chunks ({ $p } × { $v })
est-err-context-divide = context parallelism splits the sequence ({ $seq }) over { $c } GPUs: it must divide
est-err-context-fused = context parallelism runs fused attention (ring attention and Ulysses are built on it): choose --attention fused
est-err-ulysses-heads = Ulysses splits the heads ({ $heads }) and key/value heads ({ $kv }) over the context-parallel GPUs ({ $c }, with tensor parallelism { $t }): they must divide
est-err-no-model-preset = no model preset { $name }
est-err-no-gpu-preset = no GPU preset { $name }
est-err-too-large = { $what } would be { $amount } bytes per GPU: more than oomlab counts ({ $limit } bytes at most)
est-err-config-too-long = config.json is { $bytes } bytes, more than the { $max } read
est-err-config-not-json = config.json is not JSON: { $detail }
est-err-config-not-object = config.json is not a JSON object
est-err-config-no-model-type = config.json has no model_type
est-err-config-unknown-family = model_type { $family } is not modelled yet: oomlab reads { $known } configs
est-err-config-unknown-key = { $family }: { $key } is a key oomlab does not know in this family, so it is not read past (it might change memory); remove it if it changes nothing
est-err-config-missing = { $family }: config.json has no { $key }
est-err-config-not-positive = { $family }: { $key } must be a positive whole number (got { $got })
est-err-config-not-whole = { $family }: { $key } must be a whole number (got { $got })
est-err-config-not-bool = { $family }: { $key } must be true or false
est-err-config-not-probability = { $family }: { $key } must be a probability below 1 (got { $got })
est-err-config-rotary-factor = { $family }: partial_rotary_factor must be above 0 and at most 1 (got { $got })
est-err-config-not-modelled = { $family }: { $key } = { $value } is not modelled: { $why }
# Why a config field's value is not modelled (the { $why } above).
est-why-default-only = only its default, { $default }, is
est-why-gpt2-activation = the estimator's GPT-2 MLP is GELU
est-why-gpt2-untied = GPT2LMHeadModel ties its lm_head whatever this says
est-why-gpt2-dropouts = dropouts that differ from resid_pdrop
est-why-neox-activation = the estimator's GPT-NeoX MLP is GELU
est-why-neox-attention-bias = biases on the MLP and not on the attention
est-why-neox-dropouts = GPT-NeoX's dropouts (the estimator's GPT-NeoX keeps none)
est-why-gated-activation = the estimator's gated MLPs are SwiGLU (silu) and Gemma's GeGLU
est-why-some-biases = biases on some linear layers and not others
est-why-dropout = dropout in this family (the estimator's keeps none)
est-why-scores-softcap = soft-capping the scores alone
est-why-logits-softcap = soft-capping the logits alone
est-why-latent-kv-heads = latent attention expands keys and values to every head
est-why-moe-layer-list = a list other than every interleave_moe_layer_step-th layer
est-why-no-rope-pattern = a pattern other than every no_rope_layer_interval-th layer
est-why-no-rotary-layer = a model with no rotary layer at all
est-why-no-rope-list = a list of 0 and 1 is read
est-why-no-rotary-tables = a model with no rotary layer at all (no cos/sin tables)
est-why-router-logits = the load-balancing loss's saved router logits
est-why-experts-per-token = a value other than num_experts_per_tok, which is read
est-why-router-jitter = jitter on the router's input
est-why-groups-divide = groups that do not divide the experts
est-why-dense-among-mixture = dense MLP layers among the mixture's
# The sizes a setup or an architecture bounds (the { $what } of est-err-out-of-range and -at-most).
est-size-micro-batch = micro-batch
est-size-sequence = sequence length
est-size-accumulation = accumulation steps
est-size-data-parallel = data-parallel GPUs
est-size-tensor-parallel = tensor-parallel GPUs
est-size-pipeline-stages = pipeline stages
est-size-context-parallel = context-parallel GPUs
est-size-vocab = vocab
est-size-hidden = hidden
est-size-layers = layers
est-size-heads = heads
est-size-kv-heads = kv_heads
est-size-ffn = ffn
est-size-experts = experts
est-size-top-k = top_k
est-size-positions = positions
est-size-head-dim = head_dim
est-size-rotary-dims = rotary_dims
est-size-shared-expert-width = shared expert width
est-size-dense-width = dense layers' MLP width
est-size-dense-first = dense first layers
est-size-mixture-step = mixture layer step
# What would pass the largest byte count oomlab reports (the { $what } of est-err-too-large).
est-amount-peak = the peak
est-amount-logits = the logits
est-amount-logits-grad = the logits' gradient
est-amount-parameters = parameters
est-amount-gradients = gradients
est-amount-optimizer-state = optimizer state
est-amount-master-weights = master weights
est-amount-activations = activations
est-amount-temporaries = temporaries
est-amount-input = input
est-amount-in-flight = activations in flight
est-amount-autocast = autocast's weight copies
est-amount-communication = communication
est-amount-fragmentation = fragmentation
est-amount-working-set = the backward working set
est-amount-host-memory = host memory
est-amount-pcie = PCIe traffic
est-amount-tokens = tokens per step
est-amount-saved-for-backward = saved for backward

## Why a toy configuration cannot be built (the app's main area, a link's notice, the CLI's errors; `model::error`)

cfg-err-zero = { $name } must be at least 1 (got { $value })
cfg-err-too-large = { $name } = { $value } is absurdly large (the limit is { $limit })
cfg-err-heads-divide = d_model ({ $d }) must be divisible by n_heads ({ $heads })
cfg-err-sequence-too-long = sequence length { $got } is longer than the model's maximum seq_len { $max }
cfg-err-token-out-of-range = token id { $id } at position { $position } is out of range for a vocabulary of { $vocab }
cfg-err-tensor-limit = one tensor of { $what } would be { $amount } elements: more than oomlab plans ({ $limit } elements at most)
cfg-err-step-limit = a step of { $layers } layers × { $micro } micro-batches would be { $amount } ops: more than oomlab plans ({ $limit } ops at most)
cfg-err-unknown-lora-target = unknown LoRA target { $got }: expected qkv, proj, mlp or all
cfg-err-unknown-backend = unknown backend { $got }: expected "gpu" or "cpu"
cfg-err-unknown-offload = unknown offload { $got }: expected none, optimizer or optimizer+gradients
cfg-err-unknown-batching = unknown batching { $got }: expected windows, padded, bucketed or packed
cfg-err-unknown-checkpointing = unknown checkpointing mode { $got }: expected off, blocks, every:K (K blocks per segment) or selective
cfg-err-unknown-attention = unknown attention { $got }: expected standard or fused
cfg-err-unknown-precision = unknown precision { $got }: expected fp32, fp16 or bf16
cfg-err-accum-divide = batch { $batch } cannot be split into { $accum } equal micro-batches: the batch must be a multiple of the accumulation steps
cfg-err-lora-rank = LoRA rank { $rank } is not low: it must be below d_model ({ $d })
cfg-err-lora-alpha = LoRA alpha must be positive (got { $alpha })
cfg-err-allocator-not-key-value = allocator option { $value }: expected key:value
cfg-err-allocator-unknown = unknown allocator option { $value } (oomlab simulates max_split_size_mb, garbage_collection_threshold and expandable_segments)
cfg-err-allocator-max-split = max_split_size_mb:{ $value }: must be a whole number of MiB greater than 20 (PyTorch's rule: a split block is at least kLargeBuffer, 20 MiB)
cfg-err-allocator-threshold = garbage_collection_threshold:{ $value }: must be a number between 0 and 1, exclusive
cfg-err-allocator-expandable = expandable_segments:{ $value }: must be True or False
cfg-err-gpus = data parallelism simulates 1 to { $max } GPUs (got { $gpus })
cfg-err-bucket = the communication bucket must be a multiple of { $min } elements, between { $min } and { $max } (got { $elems })
cfg-err-not-with-several-gpus = { $what } is not simulated over several GPUs: use one GPU for it
cfg-err-doc-starts = { $why }: a packed batch (--batching packed) has each position's document start, and only it has them
cfg-err-offload-with = offload to host memory does not run with { $what } in oomlab: turn one of them off
cfg-err-offload-with-fp16 = offload to host memory does not run with fp16's loss scaling (use bf16) in oomlab: turn one of them off
cfg-err-fused-with-selective = selective checkpointing recomputes the attention probabilities, but fused attention never stores them (it already recomputes the scores in its backward pass): use one or the other
cfg-err-fused-head = fused attention holds a head in registers and supports head sizes up to { $max }; this model's is { $head } (d_model { $d } / { $heads } heads)
cfg-err-optimizer = invalid optimizer setting: { $name } = { $value } (it must be { $range })
cfg-err-not-in-vocabulary = character { $char } is not in the vocabulary
cfg-err-corpus-too-short = the corpus has { $tokens } tokens, too few for sequences of { $seq }
cfg-err-batch-host = a batch of { $rows } tokens does not fit in this machine's host memory
cfg-err-batch-length = batch holds { $inputs } inputs and { $targets } targets, expected { $expected }
# The dimensions a configuration sets (the { $name } of cfg-err-zero and -too-large).
cfg-dim-vocab = vocab
cfg-dim-seq-len = seq_len
cfg-dim-d-model = d_model
cfg-dim-n-layers = n_layers
cfg-dim-n-heads = n_heads
cfg-dim-batch = batch
cfg-dim-sequence = sequence length
cfg-dim-checkpoint-every = checkpoint every:K
cfg-dim-accumulation = accumulation steps
cfg-dim-lora-rank = LoRA rank
cfg-dim-effective-batch = effective batch
cfg-dim-global-batch = global batch (every GPU's)
cfg-dim-block-size = block size (tokens)
cfg-dim-cache-slots = KV cache slots
cfg-dim-table-width = blocks in a block table
# The tensors that could pass what oomlab plans (the { $what } of cfg-err-tensor-limit).
cfg-planned-parameters = the parameters
cfg-planned-attention = the attention probabilities (batch × heads × sequence²)
cfg-planned-logits = the logits (batch × sequence × vocabulary)
cfg-planned-mlp = the MLP activations (batch × sequence × 4·d)
cfg-planned-lora = the LoRA adapters
cfg-planned-kv-cache = the KV cache (slots × 2 × d) or its block tables
# Techniques named in a refusal (the { $what } of cfg-err-not-with-several-gpus and -offload-with).
cfg-tech-offload = offload to host memory
cfg-tech-padded = padded and bucketed batches
cfg-tech-lora = LoRA
cfg-tech-fp16 = fp16's loss scaling
# Why a packed batch's document starts are refused (the { $why } of cfg-err-doc-starts).
cfg-starts-not-a-start = a document start that is none
cfg-starts-none = the batch has no document starts
cfg-starts-not-packed = the plan's rows are not packed
# The range an optimizer setting must be in (the { $range } of cfg-err-optimizer).
cfg-range-positive-number = a positive number
cfg-range-unit = in [0, 1)
cfg-range-positive = positive
cfg-range-non-negative = zero or positive

## Why a step did not run: the GPU's words, the backend's, the CPU worker's (`backend::error`, `backend::gpu`)
gpu-err-no-adapter = no GPU adapter was found ({ $detail }); use --backend cpu, or install a Vulkan driver (e.g. Mesa's lavapipe: apt install mesa-vulkan-drivers)
gpu-err-device = could not open the GPU device: { $detail }
gpu-err-no-compute = the { $detail } adapter has no compute shaders
gpu-err-limit = { $what } needs { $needed }, but this GPU adapter allows at most { $limit }; choose a smaller configuration
gpu-err-oom = the GPU ran out of memory: { $detail }
gpu-err-validation = the GPU rejected the work (validation error): { $detail }
gpu-err-readback = reading results back from the GPU failed: { $detail }
gpu-err-lost = the GPU device was lost: { $detail }
backend-err-shape = the batch is { $batch } but the plan was built for { $plan }
backend-err-internal = an internal error in oomlab stopped the step ({ $error }); please report it
backend-err-not-produced = op { $op } needs tensor '{ $tensor }', which this step has not produced (run the forward pass first)
backend-err-no-gpu = the GPU backend was asked for, but no GPU is open
backend-err-worker-lost = the CPU worker stopped: { $why }
backend-err-no-executor = the CPU worker has no executor for these settings
backend-err-cpu-only-uneven = a batch of another length over several simulated GPUs runs on the CPU backend only, so far: choose the CPU backend
backend-err-cpu-only-mixed = mixed precision over several simulated GPUs runs on the CPU backend only, so far: choose the CPU backend
backend-err-cancelled = building was cancelled
worker-lost-stopped = it stopped
worker-lost-silent = it did not start within { $secs } s
worker-lost-garbled = a message could not be written or read: { $detail }

## The toy CLI's own refusals (`oomlab train`, `measure`, `sweep`, `dump-step`; `cli::config`), in the system's language
cli-err-batch-syntax = cannot read --batch { $text }: use 16, 1..512, 1..512:8 or 1,2,4
cli-err-empty-range = --batch { $text }: the range is empty
cli-err-too-many-batches = --batch { $text } names { $count } batch sizes; at most 100000
cli-err-batch-disagrees = --batch { $batch } disagrees with --micro-batch { $micro } × --accum { $accum }: give one of --batch and --micro-batch
cli-err-several-batches = --batch / --micro-batch name several sizes; only `sweep` takes a range
cli-err-dump-lora = dump-step writes the whole model's gradients for Hugging Face; with --lora there are none (the base is frozen)
cli-err-variable-length = --batching { $batching }: its batches take their length from their documents, step by step, and this command times one sequence length; use windows or packed
cli-err-loss = the loss became { $loss } at step { $step }; try a smaller --lr
cli-err-fragmented = This is step { $step } (length { $length }): on an empty GPU of this budget it fits, { $reserved } reserved at its peak — the steps of other lengths before it left the cached memory in pieces. Remedies: --alloc-conf expandable_segments:True, or a fixed length (--batching windows or packed).
cli-err-no-device = the snapshot has no device
cli-err-no-trace = no device has a trace to replay
serve-err-layer-kind = layer_types names { $kind }: a kind of attention whose cache the estimator does not model
serve-err-layer-count = layer_types lists { $listed } layers, and the model has { $layers }
serve-err-layer-width = a sliding or chunked layer needs its width ({ $key }), and the config has none
tab-serving = Serving
tab-serving-later = Serving runs in the desktop app and from the command line (oomlab serving) for now: the browser's module has no room for it yet.
serving-heading = Serving a batch: the KV cache
serving-intro = A server keeps each request's keys and values — its KV cache — from one token to the next, so that a new token attends to the earlier ones without recomputing them. Many users at once means many caches. Serve a stream of requests with the toy, on the real kernels, and see how the cache's layout decides how many fit.
serving-layout = How the cache is laid out
serving-layout-contiguous = contiguous
serving-layout-growing = growing
serving-layout-paged = paged
serving-layout-contiguous-hint = each request reserves the whole context when it is admitted (StaticCache, FasterTransformer, Orca)
serving-layout-growing-hint = every step, torch.cat makes each layer's keys and values a tensor one token longer, through the caching allocator (transformers' DynamicCache)
serving-layout-paged-hint = one pool of blocks of { $block } tokens; a request takes a block when its last one is full (vLLM)
serving-requests = requests
serving-budget = budget (MiB)
serving-block-size = block size (tokens)
serving-run = Serve
serving-run-all = Serve with all three layouts
serving-running = Serving with the { $layout } cache: iteration { $iteration }, { $served } of { $requests } requests served, { $running } running.
serving-none = Nothing served yet: choose a layout and press Serve.
serving-summary = { $layout }: { $served } requests served on the { $backend }, at most { $peak } at once; { $preemptions } preempted and recomputed.
serving-setup = The budget of { $budget }: the weights { $weights }, the largest step's activations { $activations } (predicted), and { $cache } for the cache, { $tokens } tokens of { $token_bytes } bytes.
serving-peak = At its peak the cache reserved { $reserved }, and { $used } of it held tokens (allocator).
serving-waste = Of everything the cache reserved over the run, { $percent } % held no token.
serving-oom = Out of memory: { $message }
serving-chart-heading = Requests running, and the cache, iteration by iteration
serving-axis-iteration = iteration
serving-axis-mib = Memory (MiB)
serving-line-running = requests running
serving-line-reserved = reserved
serving-line-used = holding tokens
serving-chart-desc = Over { $iterations } iterations the requests running rose to { $peak }; the cache's reservation peaked at { $reserved }, { $used } of it holding tokens.
serving-parts-heading = Where the reserved bytes went at the peak
serving-part-used = holding tokens
serving-part-reservation = reservation: slots for tokens not generated yet
serving-part-internal = internal fragmentation: held by a request, never to be filled
serving-part-external = external fragmentation: the allocator's free cached blocks
serving-part-line = { $name }: { $bytes } ({ $percent } %)
serving-map-heading = The cache at its peak, block by block (a colour per request; blank: free)
serving-map-desc = { $blocks } blocks: { $held } held by { $requests } requests, { $free } free.
serving-map-growing = A growing cache has no blocks: its memory is the caching allocator's segments, the tensors inside them replaced every step.
serving-compare-heading = The layouts side by side
serving-col-layout = layout
serving-col-peak = at most at once
serving-col-reserved = reserved at the peak
serving-col-used = holding tokens then
serving-col-waste = wasted over the run
serving-col-preemptions = preempted
serving-err-option = { $flag } must be between { $min } and { $max } (got { $value })
serving-err-budget = a budget of { $budget } leaves no room for the KV cache: the weights and the largest step's activations take { $needed }
serving-err-cache = a KV cache of { $cache } holds no request: this layout needs at least { $needed } (a growing cache, the caching allocator's smallest segment; a contiguous one, a row of the whole context)
serving-err-vocab = the model's vocabulary ({ $model } tokens) is not the corpus's ({ $corpus })
serve-err-option = { $flag } cannot be { $value }
serve-err-no-room = the weights, the activations and the memory outside PyTorch ({ $needed }) leave nothing of the { $room } the runtime may use for the KV cache
serve-err-context = a context of { $context } tokens is longer than the model's ({ $model }): vLLM refuses a max_model_len past the config's
serve-err-tp-vllm = tensor parallelism is estimated for vLLM only (--runtime vllm)
serve-err-fp8-vllm = an fp8 cache is estimated for vLLM only: transformers' quantized cache keeps its most recent tokens unquantized
