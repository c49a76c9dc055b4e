//! Pipeline parallelism against Megatron-LM's own theoretical memory report
//! (NVIDIA/Megatron-LM, `megatron/training/theoretical_memory_usage.py`, commit 00caa53), ported
//! below with the lines it is ported from quoted; and the estimator's stages, schedules, flags
//! and JSON.

#[path = "support/cli.rs"]
mod support_cli;

use oomlab::estimate::pipeline::{Schedule, in_flight, layers_of};
use oomlab::estimate::{self, Architecture, Framework, Mlp, Norm, Parallel, Runtime, Setup, presets};
use oomlab::plan::Checkpoint;

/// `compute_activation_memory(args, num_microbatches)` (the sequence-parallel, selective-
/// recomputation branch `report_theoretical_memory` takes), for the first pipeline stage:
/// ```python
/// activation_memory = (args.seq_length * args.micro_batch_size * args.hidden_size) * (
///     18 + (4 * (args.ffn_hidden_size / args.hidden_size)))
/// activation_memory *= args.num_layers
/// activation_memory += (8 * args.seq_length * args.micro_batch_size * args.pipeline_model_parallel_size)
/// activation_memory += (args.seq_length * args.micro_batch_size * args.hidden_size
///     * args.pipeline_model_parallel_size)
/// if args.virtual_pipeline_model_parallel_size is not None:
///     interleaved_schedule_memory_penalty = 1 + ((args.pipeline_model_parallel_size - 1)
///         / (args.pipeline_model_parallel_size * args.virtual_pipeline_model_parallel_size))
///     activation_memory *= interleaved_schedule_memory_penalty
/// if args.virtual_pipeline_model_parallel_size is None and args.pipeline_model_parallel_size > 1:
///     if num_microbatches is not None:
///         activation_memory *= min(1, num_microbatches / args.pipeline_model_parallel_size)
/// if args.pipeline_model_parallel_size == 1:
///     activation_memory += (args.seq_length * args.micro_batch_size * args.hidden_size * 4
///         * (1 + (args.padded_vocab_size / args.hidden_size)))
/// return activation_memory / args.tensor_model_parallel_size
/// ```
/// Returned in two parts: the token ids' term (`8·s·b·p`, which oomlab counts as its input
/// line), and the rest.
fn megatron_activations(s: &Setup) -> (f64, f64) {
    let (seq, b, h) = (s.seq as f64, s.micro_batch as f64, s.arch.hidden as f64);
    let (p, t, m) = (s.parallel.pipeline as f64, s.parallel.tensor as f64, s.accum as f64);
    let mut layers = seq * b * h * (18.0 + 4.0 * (s.arch.ffn as f64 / h)) * s.arch.layers as f64;
    let mut ids = 8.0 * seq * b * p;
    layers += seq * b * h * p;
    let factor = match s.parallel.schedule {
        Schedule::Interleaved(v) => 1.0 + (p - 1.0) / (p * v as f64),
        Schedule::OneFOneB if p > 1.0 => (m / p).min(1.0),
        Schedule::OneFOneB => 1.0,
    };
    layers *= factor;
    ids *= factor;
    if p == 1.0 {
        layers += seq * b * h * 4.0 * (1.0 + s.arch.vocab as f64 / h);
    }
    (ids / t, layers / t)
}

/// `compute_weight_and_optimizer_memory`'s most loaded shard under pipelining (the first stage):
/// ```python
/// num_parameters_on_most_loaded_model_shard = (
///     (num_parameters_in_transformer_block / args.pipeline_model_parallel_size)
///     + num_parameters_in_mtp_block + embedding_size) / args.tensor_model_parallel_size
/// num_bytes_per_parameter = 18 if not args.use_distributed_optimizer else 6 + (12 / args.data_parallel_size)
/// ```
/// for a LLaMA-shaped model (RMSNorm, SwiGLU, no biases): `num_parameters_in_transformer_block`
/// is L·(2h(1.5f + 1) + 2h²(1 + kv/q)·q/h) + h.
fn megatron_weights(a: &Architecture, p: u64) -> f64 {
    let (h, l, v, f) = (a.hidden as f64, a.layers as f64, a.vocab as f64, a.ffn as f64);
    let ratio = a.q_hidden() as f64 / h;
    let groups = a.kv_heads as f64 / a.heads as f64;
    let layer = 2.0 * h * (f * 1.5 + 1.0) + 2.0 * h * h * (1.0 + groups) * ratio;
    let block = layer * l + h;
    (block / p as f64 + h * v) * 18.0
}

/// A GPT-3-shaped model as Korthikanti et al. and Megatron's formula count it: LayerNorm, GELU
/// (f = 4h), dropout on, trained with sequence parallelism and selective recomputation.
fn gpt(p: u64, schedule: Schedule, micro_batches: u64) -> Setup {
    let arch = Architecture {
        hidden: 4096,
        layers: 32,
        heads: 32,
        kv_heads: 32,
        ffn: 4 * 4096,
        vocab: 51200,
        positions: 2048,
        norm: Norm::LayerNorm,
        mlp: Mlp::Gelu,
        dropout: 0.1,
        ..presets::model("gpt2").expect("gpt2")
    };
    let mut s = Setup::new(arch, presets::gpu("h100-80").expect("h100"), 1, 2048);
    s.framework = Framework::Megatron;
    s.runtime = Some(Runtime::Fused);
    s.checkpoint = Checkpoint::Selective;
    s.accum = micro_batches;
    s.parallel = Parallel { tensor: 2, sequence: true, pipeline: p, schedule, ..Parallel::default() };
    s
}

/// The first stage's activations, oomlab's (its own micro-batch's and those in flight) against
/// Megatron's formula: within 0.1 % (oomlab counts the LayerNorms' fp32 statistics, which
/// Korthikanti et al. and the formula leave out: 16·s·b bytes a layer).
#[test]
fn the_first_stage_holds_what_megatrons_formula_says() {
    let cases = [
        (4, Schedule::OneFOneB, 8),
        (4, Schedule::OneFOneB, 2),
        (8, Schedule::OneFOneB, 16),
        (4, Schedule::Interleaved(2), 8),
        (4, Schedule::Interleaved(4), 8),
        (2, Schedule::Interleaved(8), 4),
    ];
    for (p, schedule, m) in cases {
        let s = gpt(p, schedule, m);
        let e = estimate::estimate(&s).expect("estimate");
        let first = &e.stages[0];
        assert_eq!(first.peak_bytes, e.peak_bytes, "the first stage is the most loaded");
        let ours = e.activations_end_of_forward as f64 * first.micro_batches_in_flight;
        let (_, theirs) = megatron_activations(&s);
        let off = (ours - theirs) / theirs;
        assert!(off.abs() < 1e-3, "p {p} {schedule:?} m {m}: oomlab {ours} against Megatron's {theirs} ({off:+e})");
        // The same count once more from the lines: the step's own activations and those in
        // flight.
        assert_eq!(e.stages.len() as u64, p);
        assert_eq!(e.stages.iter().map(|st| st.layers).sum::<u64>(), s.arch.layers);
    }
    // Without pipelining the formula adds the output layer's input (4·s·b·h: the final norm's
    // input and output, which oomlab counts with the activations) and the fp32 logits (4·s·b·V,
    // a line of their own in oomlab).
    let s = gpt(1, Schedule::OneFOneB, 1);
    let e = estimate::estimate(&s).expect("estimate");
    assert!(e.stages.is_empty());
    let (_, theirs) = megatron_activations(&s);
    let output_layer = 2048.0 * 51200.0 * 4.0 / 2.0;
    let ours = e.activations_end_of_forward as f64;
    assert!(((ours - (theirs - output_layer)) / theirs).abs() < 1e-3, "{ours} against {theirs}");
}

/// The first stage's weights and optimizer state against the formula's most loaded shard
/// (LLaMA-2 7B, untied, Megatron's 18 bytes a parameter): off only by the final norm's h/p
/// share, which the formula spreads over the stages and oomlab keeps on the last.
#[test]
fn the_first_stage_holds_the_formulas_most_loaded_shard() {
    for p in [2, 4, 8] {
        let mut s =
            Setup::new(presets::model("llama2-7b").expect("llama"), presets::gpu("h100-80").expect("h100"), 1, 4096);
        s.framework = Framework::Megatron;
        s.accum = 8;
        s.parallel = Parallel { pipeline: p, ..Parallel::default() };
        let e = estimate::estimate(&s).expect("estimate");
        let states: u64 =
            ["parameters", "gradients", "optimizer_state", "master_weights"].iter().map(|c| e.get(c)).sum();
        let theirs = megatron_weights(&s.arch, p);
        assert!((states as f64 - theirs).abs() <= 18.0 * 4096.0 / p as f64 + 1.0, "p {p}: {states} against {theirs}");
        // Every stage's parameters add up to the model's.
        assert_eq!(e.stages.iter().map(|st| st.parameters).sum::<u64>(), s.arch.parameters());
        assert_eq!(e.parameters, s.arch.parameters());
    }
}

/// 1F1B keeps min(p − r, m) micro-batches on stage r; the interleaved schedule Megatron's
/// warm-up plus one, in chunks; the layers split evenly, the remainder to the last stages.
#[test]
fn stages_and_their_micro_batches_in_flight() {
    assert_eq!((0..4).map(|r| in_flight(4, r, Schedule::OneFOneB, 8).0).collect::<Vec<_>>(), [4, 3, 2, 1]);
    assert_eq!((0..4).map(|r| in_flight(4, r, Schedule::OneFOneB, 2).0).collect::<Vec<_>>(), [2, 2, 2, 1]);
    // Interleaved, v = 2: 2(p − r − 1) + (v − 1)p + 1 chunks; on the first stage 11 chunks, 5.5
    // micro-batches' worth: (1 + (p − 1)/(p·v))·p.
    let chunks: Vec<u64> = (0..4).map(|r| in_flight(4, r, Schedule::Interleaved(2), 8).0).collect();
    assert_eq!(chunks, [11, 9, 7, 5]);
    assert_eq!(11.0 / 2.0, (1.0 + 3.0 / 8.0) * 4.0, "Megatron's interleaved penalty on the first stage");
    // Capped by the step's m·v chunks.
    assert_eq!(in_flight(4, 0, Schedule::Interleaved(2), 2).0, 4);
    assert_eq!((0..4).map(|r| layers_of(30, 4, r)).collect::<Vec<_>>(), [(0, 7), (7, 7), (14, 8), (22, 8)]);
    // The most loaded stage is the estimate; the stages before the last hold fewer micro-batches
    // each (the last holds the head and the logits).
    let e = estimate::estimate(&gpt(4, Schedule::OneFOneB, 8)).expect("estimate");
    assert!(e.stages[..3].windows(2).all(|w| w[0].peak_bytes > w[1].peak_bytes), "{:?}", e.stages);
    assert_eq!(e.peak_bytes, e.stages.iter().map(|st| st.peak_bytes).max().expect("stages"));
    assert!(e.stages[0].embedding && !e.stages[0].head && e.stages[3].head);
    // Pipelining lets a model fit that does not on one GPU.
    let mut s = Setup::new(presets::model("llama2-70b").expect("70b"), presets::gpu("h100-80").expect("h100"), 1, 4096);
    s.parallel = Parallel { tensor: 8, sequence: true, ..Parallel::default() };
    s.checkpoint = Checkpoint::Selective;
    s.accum = 8;
    assert!(!estimate::estimate(&s).expect("estimate").fits());
    s.parallel.pipeline = 4;
    assert!(estimate::estimate(&s).expect("estimate").fits());
    // Refused: more stages than layers, an interleaving that does not divide the layers.
    s.parallel.pipeline = 81;
    assert!(estimate::estimate(&s).unwrap_err().to_string().contains("pipeline stages"));
    s.parallel.pipeline = 3;
    s.parallel.schedule = Schedule::Interleaved(2);
    assert!(estimate::estimate(&s).unwrap_err().to_string().contains("divide"));
}

/// The flags and the JSON: `--pp`, `--pp-schedule`, `--accum`; `per_gpu_bytes` is the most
/// loaded stage's, `stages` every stage.
#[test]
fn the_cli_takes_the_pipeline_and_lists_its_stages() {
    let args = [
        "estimate",
        "--model",
        "llama2-70b",
        "--gpu",
        "h100-80",
        "--batch",
        "1",
        "--seq-len",
        "4096",
        "--tp",
        "8",
        "--sp",
        "--pp",
        "4",
        "--pp-schedule",
        "interleaved:5",
        "--accum",
        "8",
        "--checkpoint",
        "selective",
    ];
    let out = support_cli::oomlab(&[&args[..], &["--json"]].concat());
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let stages = v["stages"].as_array().expect("stages");
    assert_eq!(stages.len(), 4);
    assert_eq!(v["parallel"]["pipeline"], 4);
    assert_eq!(v["parallel"]["schedule"]["interleaved"], 5);
    let peak = stages.iter().map(|st| st["peak_bytes"].as_u64().expect("peak")).max().expect("a stage");
    assert_eq!(v["peak_bytes"], peak, "per GPU: the most loaded stage");
    assert_eq!(stages[0]["micro_batches_in_flight"], 4.6);
    // Each communication buffer is a line of its own and cites its own source: sequence
    // parallelism's gathered input and the stage boundary's send and receive buffers.
    let sources = v["sources"]["communication"].as_str().expect("a source");
    assert!(sources.contains("sequence parallelism") && sources.contains("pipeline parallelism's send"), "{sources}");
    let (h, p) = (8192u64, 2u64);
    let (sp, p2p) = (4096 * h * p, 2 * 4096 * h * p);
    assert_eq!(v["per_gpu_bytes"]["communication"], sp + p2p);
    let text = support_cli::oomlab(&args);
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(text.contains("pipeline: 4 stages, interleaved:5"), "{text}");
    let bad = support_cli::oomlab(&["estimate", "--pp-schedule", "zigzag"]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("--pp-schedule"));
}

/// Interleaved, a stage holds v chunks spread over the model (Megatron-LM's model chunk j·p + r
/// is stage r's j-th, each of L/(p·v) layers), not L/p contiguous layers: where the layers
/// differ — here a mixture in every second layer (Llama 4 Maverick's `interleave_moe_layer_step`
/// 2) — the stage's kinds of layer are counted from the chunks it holds.
#[test]
fn interleaved_stages_hold_their_chunks_layers() {
    let mut arch = estimate::catalog::find("llama-4-scout").expect("Llama 4 Scout in the catalog").model.arch.clone();
    let mut moe = arch.block.moe.expect("a mixture");
    (moe.every, moe.dense_ffn) = (2, 16384);
    arch.block.moe = Some(moe);
    let (p, v) = (4, 4);
    let mut s = Setup::new(arch.clone(), presets::gpu("h100-80").expect("h100"), 1, 4096);
    s.accum = 8;
    s.parallel = Parallel { pipeline: p, schedule: Schedule::Interleaved(v), ..Parallel::default() };
    let e = estimate::estimate(&s).expect("an interleaved pipeline");
    // Megatron's assignment, computed here: the mixture layers each stage holds.
    let chunk = arch.layers / (p * v);
    let moe_layers = |r: u64| {
        (0..v)
            .flat_map(|j| (j * p + r) * chunk..(j * p + r + 1) * chunk)
            .filter(|&i| arch.layer_kind(i).experts)
            .count()
    };
    assert_eq!((0..p).map(moe_layers).collect::<Vec<_>>(), [4, 8, 4, 8], "chunks of 3 layers: 1 or 2 mixtures each");
    // Stages 1 and 2 hold neither the embedding nor the head: their parameters differ by the
    // four mixture layers that stage 1 holds in place of dense ones.
    let mut all_mixtures = arch.clone();
    all_mixtures.block.moe = Some(estimate::Moe { every: 1, ..moe });
    let dense = arch.of_kind(estimate::LayerKind { experts: false, rope: true });
    let per_layer = (all_mixtures.parameters() - dense.parameters()) / arch.layers;
    let by_stage: Vec<u64> = e.stages.iter().map(|st| st.parameters).collect();
    assert_eq!(by_stage[1] - by_stage[2], 4 * per_layer, "{by_stage:?}");
    // Every layer is in one stage: the stages' layers add up to the model's, their parameters
    // to the model's (the head untied).
    assert_eq!(e.stages.iter().map(|st| st.layers).sum::<u64>(), arch.layers);
    assert_eq!(by_stage.iter().sum::<u64>(), arch.parameters());
    // Contiguous under 1F1B: stage 0 holds layers 0–11, 6 of them mixtures.
    s.parallel.schedule = Schedule::OneFOneB;
    let e = estimate::estimate(&s).expect("1F1B");
    assert_eq!(e.stages[1].parameters - e.stages[2].parameters, 0, "12 contiguous layers each: 6 mixtures");
}
