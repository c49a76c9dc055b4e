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
controls-compare = Compare with
compare-checkpoint = checkpoint every block
compare-fused = fused attention
compare-accumulation = accumulation ×4
controls-seed = seed
controls-projector = projector mode
run-one-step = One step
run-train = Train
run-stop = Stop
run-engine = engine: { $backend }
