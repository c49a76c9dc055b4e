//! Context parallelism in the estimator: the sequence split over c GPUs (RingAttention,
//! DeepSpeed-Ulysses), each holding s/c of every activation, the attention kernel's own saved
//! tensors included; the key/value blocks in flight or the all-to-all's buffers counted as
//! communication; where it lets a long sequence fit.

#[path = "support/cli.rs"]
mod support_cli;

use oomlab::estimate::{self, ContextKind, Parallel, Runtime, Setup, catalog, presets};
use oomlab::plan::{AttentionKind, Checkpoint};

fn llama(seq: u64, c: u64, kind: ContextKind) -> Setup {
    let arch = catalog::find("llama-3.1-8b").expect("in the catalog").model.arch.clone();
    let mut s = Setup::new(arch, presets::gpu("h100-80").expect("h100"), 1, seq);
    s.attention = AttentionKind::Fused;
    s.checkpoint = Checkpoint::Every(1);
    s.runtime = Some(Runtime::Fused);
    s.parallel = Parallel { data: 8, zero: 3, context: c, context_kind: kind, ..Parallel::default() };
    s
}

fn est(s: &Setup) -> estimate::Estimate {
    estimate::estimate(s).expect("valid setup")
}

/// Each GPU holds what a sequence of s/c would make it hold, and the context-parallel buffers:
/// the ring's four key/value blocks (sent and received) or Ulysses' all-to-all of q, k and v.
#[test]
fn each_gpu_holds_its_share_of_the_sequence() {
    let (seq, c) = (65536, 8);
    for kind in [ContextKind::Ring, ContextKind::Ulysses] {
        let split = est(&llama(seq, c, kind));
        // The same GPU's model states: ZeRO partitions them over the data- and context-parallel
        // GPUs together (8 × c, as Megatron's distributed optimizer and DeepSpeed-Ulysses do).
        let mut short = llama(seq / c, 1, kind);
        short.parallel.data = 8 * c;
        let short = est(&short);
        assert_eq!(split.activations_end_of_forward, short.activations_end_of_forward, "{kind:?}");
        assert_eq!(split.activations_peak, short.activations_peak);
        assert_eq!(split.get("logits"), short.get("logits"));
        for category in ["parameters", "gradients", "optimizer_state", "master_weights"] {
            assert_eq!(split.get(category), short.get(category), "{category}: sharded over 8 × {c}");
        }
        // The source cited says over which GPUs.
        let cited = |e: &estimate::Estimate| {
            e.lines.iter().find(|l| l.category == "optimizer_state").map(|l| l.source.english()).expect("a line")
        };
        assert!(cited(&split).contains("N_d × C, the data- and context-parallel GPUs"), "{}", cited(&split));
        assert!(cited(&short).ends_with("partitioned over N_d by stage"), "{}", cited(&short));
        let unsplit = est(&llama(seq, 1, kind));
        assert!(
            split.get("optimizer_state") * (c - 1) < unsplit.get("optimizer_state") * c / 2,
            "sharded c times finer"
        );
        let a = &llama(seq, c, kind).arch;
        let rows = seq / c;
        let buffers = match kind {
            ContextKind::Ring => 4 * rows * a.kv_hidden() * 2,
            ContextKind::Ulysses => 2 * rows * (a.q_hidden() + 2 * a.kv_hidden()) * 2,
        };
        assert_eq!(split.get("communication") - short.get("communication"), buffers, "{kind:?}");
        // Tokens per step are the whole sequence's.
        assert_eq!(split.tokens_per_step, 8 * seq);
    }
}

/// Llama 3.1 8B at its 128k context on H100s: one GPU's share of the sequence does not fit until
/// four GPUs split it.
#[test]
fn context_parallelism_lets_a_long_sequence_fit() {
    let fits: Vec<bool> = [1, 2, 4, 8].iter().map(|&c| est(&llama(131072, c, ContextKind::Ring)).fits()).collect();
    assert_eq!(fits, [false, false, true, true]);
    let peaks: Vec<u64> = [1, 2, 4, 8].iter().map(|&c| est(&llama(131072, c, ContextKind::Ring)).peak_bytes).collect();
    assert!(peaks.windows(2).all(|w| w[1] < w[0]), "{peaks:?}");
}

#[test]
fn what_context_parallelism_needs_is_asked_for() {
    let mut s = llama(131072, 8, ContextKind::Ring);
    s.attention = AttentionKind::Standard;
    assert!(estimate::estimate(&s).unwrap_err().to_string().contains("fused"));
    let s = llama(131071, 8, ContextKind::Ring);
    assert!(estimate::estimate(&s).unwrap_err().to_string().contains("must divide"));
    // Llama 3.1 8B has 8 key/value heads: Ulysses over 16 GPUs cannot split them.
    let s = llama(131072, 16, ContextKind::Ulysses);
    assert!(estimate::estimate(&s).unwrap_err().to_string().contains("Ulysses"));
    assert!(estimate::estimate(&llama(131072, 16, ContextKind::Ring)).is_ok());
}

#[test]
fn the_cli_takes_the_context_split() {
    let args = [
        "estimate",
        "--model",
        "llama-3.1-8b",
        "--gpu",
        "h100-80",
        "--seq-len",
        "131072",
        "--attention",
        "fused",
        "--checkpoint",
        "every:1",
        "--gpus",
        "8",
        "--zero",
        "3",
        "--cp",
        "4",
        "--cp-kind",
        "ulysses",
        "--json",
    ];
    let out = support_cli::oomlab(&args);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(v["parallel"]["context"], 4);
    assert_eq!(v["parallel"]["context_kind"], "ulysses");
    assert_eq!(v["fits"], true);
    assert!(v["sources"]["communication"].as_str().expect("a source").contains("Ulysses"));
    let bad = support_cli::oomlab(&["estimate", "--cp", "4"]);
    assert_eq!(bad.status.code(), Some(2), "standard attention is refused: exit 2");
}
