//! Model states per GPU (ZeRO's partitioning, offload, LoRA/QLoRA) and the fixed costs.

use super::{Framework, Optimizer, Parallel, Role, Setup, StatePrecision};

/// The CUDA context, per GPU process ([`source::CONTEXT`]).
pub const CUDA_CONTEXT_BYTES: u64 = 500 << 20;
/// The fragmentation margin in percent of the allocated bytes ([`source::FRAGMENTATION`]).
pub const FRAGMENTATION_PERCENT: u64 = 5;
/// DeepSpeed's default bucket sizes, in elements ([`source::ZERO_BUCKETS`]).
pub const ZERO_BUCKET_ELEMS: u64 = 500_000_000;

/// cuBLAS's workspace on a GPU of compute capability `major` ([`source::WORKSPACE`]).
pub fn cublas_workspace_bytes(major: u32) -> u64 {
    if major >= 9 { 4096 * 8 * 1024 } else { (4096 * 2 + 16 * 8) * 1024 }
}

/// `n` values of `bytes_per` bytes each, stored in whole 4-byte words as the toy does (a no-op
/// for real sizes, exact for the toy's 16-bit tensors of odd length).
pub(super) fn words(n: u128, bytes_per: u128) -> u128 {
    (n * bytes_per).div_ceil(4) * 4
}

/// The model states on one GPU: (parameters, gradients, optimizer state, master weights), and
/// host bytes and PCIe traffic for offload.
pub(super) struct States {
    pub(super) parameters: u128,
    pub(super) gradients: u128,
    pub(super) optimizer: u128,
    pub(super) master: u128,
    pub(super) host: u128,
    pub(super) pcie: u128,
    /// Trained elements (padded) and all elements (padded), before sharding.
    pub(super) trainable: u128,
    /// The largest bucket-able gradient count (for communication buffers).
    pub(super) layer_params: u128,
    /// PyTorch AMP's cached 16-bit copies of the linear weights (and the lm_head's), alive from
    /// the forward pass to their backward.
    pub(super) autocast: u128,
}

/// Bytes per trained parameter of (weight, gradient, master weight, one optimizer state) under
/// `framework`'s profile.
pub(crate) fn state_bytes(framework: Framework, p: StatePrecision) -> [u64; 4] {
    let mixed = p.master_bytes() > 0;
    match framework {
        Framework::Zero | Framework::Deepspeed => [p.value_bytes(), p.value_bytes(), p.master_bytes(), p.state_bytes()],
        Framework::Megatron => [p.value_bytes(), 4, p.master_bytes(), p.state_bytes()],
        Framework::PytorchAmp | Framework::Fsdp2 if mixed => [4, 4, 0, 4],
        Framework::PytorchAmp | Framework::Fsdp2 => [p.value_bytes(), p.value_bytes(), 0, p.state_bytes()],
    }
}

pub(super) fn model_states(s: &Setup) -> States {
    let a = &s.arch;
    let pad = s.runtime().param_align();
    let align = |n: u64| n.div_ceil(pad) as u128 * pad as u128;
    let bytes = state_bytes(s.framework, s.precision);
    let (w, g) = (bytes[0] as u128, bytes[1] as u128);
    let tensors = a.parameter_tensors();
    // Tensor parallelism splits the blocks' linear layers (and vocab-parallel embeddings) over t
    // GPUs; norms and biases of row-parallel layers are replicated — small, so the estimator
    // divides everything but the norms by t.
    let t = s.parallel.tensor as u128;
    // Expert parallelism divides a mixture's experts over its GPUs (and tensor parallelism
    // each expert's matrices, as Megatron-Core's expert tensor parallelism does by default).
    let ep = s.parallel.expert.max(1) as u128;
    let split = |role: Role, n: u128| match role {
        Role::Norm => n,
        Role::Experts => n.div_ceil(t * ep),
        _ => n.div_ceil(t),
    };
    let base: u128 = tensors.iter().map(|&(r, n)| split(r, align(n))).sum();
    let experts: u128 = tensors.iter().filter(|(r, _)| *r == Role::Experts).map(|&(r, n)| split(r, align(n))).sum();
    let (stored, trainable) = match s.lora {
        None => (words(base, w), base),
        Some(l) => {
            // Adapters A (in × r) and B (r × out) on each targeted linear of each block.
            let adapters: u128 = a
                .all_block_linears()
                .into_iter()
                .filter(|&(target, _, _)| l.targets(target))
                .map(|(_, k, n)| align(k * l.rank) + align(l.rank * n))
                .map(|n| n.div_ceil(t))
                .sum();
            let base_bytes = if l.quantized {
                // QLoRA: NF4 (4 bits) for the blocks' linear weights (experts too), with
                // double-quantized constants: 0.127 bits per parameter (Dettmers et al. 2023,
                // §3) ≈ 8-bit absmax per 64 weights plus an fp32 constant per 256 blocks.
                // Embeddings, norms and biases stay 16-bit.
                let quantized: u128 = tensors
                    .iter()
                    .filter(|(r, _)| matches!(r, Role::Linear(..) | Role::Experts))
                    .map(|&(r, n)| split(r, align(n)))
                    .sum();
                let rest = base - quantized;
                quantized.div_ceil(2) + quantized.div_ceil(64) + (quantized.div_ceil(64 * 256)) * 4 + words(rest, w)
            } else {
                words(base, w)
            };
            (base_bytes + words(adapters, w), adapters)
        }
    };
    // The experts' states are partitioned over the GPUs that hold the same experts
    // (N_d·C / EP); the rest over all N_d·C (data- and context-parallel: `Parallel::replicas`).
    let trained_experts = if s.lora.is_none() { experts } else { 0 };
    let mut states =
        partition(stored - words(trained_experts, w), trainable - trained_experts, bytes, s.optimizer, s.parallel);
    let experts_over = (s.parallel.replicas() / s.parallel.expert.max(1)).max(1);
    let expert_group = Parallel { data: experts_over, context: 1, ..s.parallel };
    let e = partition(words(trained_experts, w), trained_experts, bytes, s.optimizer, expert_group);
    states.parameters += e.parameters;
    states.gradients += e.gradients;
    states.optimizer += e.optimizer;
    states.master += e.master;
    states.trainable += e.trainable;
    if s.offload.optimizer {
        // The fp32 state moves to the host with an fp32 copy of the gradients; each step the
        // 16-bit gradients go down and the updated 16-bit weights come back: 4Ψ over PCIe with
        // 16-bit values (Ren et al. 2021, §4.1), each GPU its shard.
        let on = s.parallel.zero >= 1;
        let shard = |bytes: u128| if on { bytes.div_ceil(s.parallel.replicas() as u128) } else { bytes };
        // The CPU updates an fp32 copy of the weights: the master weights under mixed precision;
        // in fp32 a copy of the parameters that exists on the host only (DeepSpeed's CPU optimizer
        // always keeps `single_partition_of_fp32_groups` there).
        let master = if states.master > 0 { states.master } else { shard(words(trainable, 4)) };
        states.host += master + states.optimizer + shard(words(trainable, 4));
        states.pcie += shard(words(trainable, g)) + shard(words(trainable, w));
        states.master = 0;
        states.optimizer = 0;
        if s.offload.gradients {
            states.gradients = 0;
        }
    }
    if s.offload.parameters {
        // Each GPU's parameter shard is fetched for the forward and again for the backward pass.
        states.host += states.parameters;
        states.pcie += 2 * states.parameters;
        states.parameters = 0;
    }
    if s.runtime() == super::Runtime::Oomlab && s.parallel.replicas() > 1 && s.lora.is_none() {
        oomlab_shards(&mut states, trainable, bytes, s);
    }
    states.layer_params = a.layer_parameters(s.parallel.expert).div_ceil(s.parallel.tensor) as u128;
    if s.framework == Framework::PytorchAmp {
        // torch.autocast casts a linear's fp32 weight to 16 bits when the op runs, caches the copy
        // for the rest of the forward (`cache_enabled=True`) and the matmul saves it for the
        // backward pass; the lm_head's weight (tied or not) is a linear's too.
        let linear: u128 = tensors
            .iter()
            .filter(|(r, _)| matches!(r, Role::Linear(..) | Role::Experts))
            .map(|&(r, n)| split(r, align(n)))
            .sum();
        let lm_head = (a.vocab as u128 * a.hidden as u128).div_ceil(t);
        states.autocast = words(linear + lm_head, s.precision.value_bytes() as u128);
    }
    states
}

/// Model states over N_d data-parallel GPUs (times the context-parallel ones) by ZeRO stage (Rajbhandari et al. 2020, §5):
/// stage 1 partitions the optimizer state (and the fp32 master weights), stage 2 the gradients
/// too, stage 3 the parameters too. `stored`: bytes of the stored weights; `trainable`: elements
/// that train (and have gradients, master weights and optimizer state).
pub(super) fn partition(
    stored: u128,
    trainable: u128,
    bytes: [u64; 4],
    optimizer: Optimizer,
    parallel: Parallel,
) -> States {
    let n_d = parallel.replicas() as u128;
    let zero = parallel.zero;
    let shard = |bytes: u128, on: bool| if on { bytes.div_ceil(n_d) } else { bytes };
    let [_, grad, master, state] = bytes.map(u128::from);
    States {
        parameters: shard(stored, zero >= 3),
        gradients: shard(words(trainable, grad), zero >= 2),
        optimizer: shard(optimizer.states() as u128 * words(trainable, state), zero >= 1),
        master: shard(words(trainable, master), zero >= 1),
        host: 0,
        pcie: 0,
        trainable,
        layer_params: 0,
        autocast: 0,
    }
}

/// The toy's own sharding (`plan::parallel`): each shard a whole number of alignment units
/// (`ceil(Ψ / (N_d·128))·128` elements) and the unsharded flat tensors padded to N_d shards, so
/// that every shard starts where a GPU can bind it. What the toy's plan holds, to the byte.
fn oomlab_shards(states: &mut States, trainable: u128, bytes: [u64; 4], s: &Setup) {
    let n = s.parallel.replicas() as u128;
    let align = crate::model::params::PARAM_ALIGN_ELEMS as u128;
    let shard = trainable.div_ceil(n * align) * align;
    let len = |sharded: bool| if sharded { shard } else { shard * n };
    let zero = s.parallel.zero;
    let [w, g, master, state] = bytes.map(u128::from);
    states.parameters = words(len(zero >= 3), w);
    states.gradients = words(len(zero >= 2), g);
    states.master = if master == 0 { 0 } else { words(len(zero >= 1), master) };
    states.optimizer = s.optimizer.states() as u128 * words(len(zero >= 1), state);
}

/// The toy's communication buffers (`plan::parallel`): DDP's buckets, a copy of every gradient;
/// ZeRO's two reduce buckets. ZeRO-3's gathered parameters are made and freed layer by layer
/// (at most one unit's at a time, counted where they are alive, not here).
pub(super) fn oomlab_communication(s: &Setup, trainable: u128) -> u128 {
    if s.parallel.replicas() <= 1 {
        return 0;
    }
    let g = state_bytes(s.framework, s.precision)[1] as u128;
    match s.parallel.zero {
        0 => words(trainable, g),
        _ => 2 * words(trainable.min(s.bucket_elems.unwrap_or(ZERO_BUCKET_ELEMS) as u128), g),
    }
}

/// Model states of `parameters` trained parameters per GPU, without padding, LoRA or offload:
/// (parameters, gradients, optimizer state, master weights). ZeRO's example: 7.5 B parameters,
/// mixed-precision Adam, N_d = 64 → 120, 31.4, 16.6 and 1.9 GB for stages 0–3.
pub fn zero_model_states(
    parameters: u64,
    precision: StatePrecision,
    optimizer: Optimizer,
    parallel: Parallel,
) -> [u64; 4] {
    let n = parameters as u128;
    let bytes = state_bytes(Framework::Zero, precision);
    let s = partition(words(n, precision.value_bytes() as u128), n, bytes, optimizer, parallel);
    [sat(s.parameters), sat(s.gradients), sat(s.optimizer), sat(s.master)]
}

fn sat(v: u128) -> u64 {
    u64::try_from(v).unwrap_or(u64::MAX)
}
