//! Fragmentation from batches of varying lengths (issue 42 §4): a batch that fits an empty GPU
//! runs out of memory after a batch of another length, with enough free in total, because the
//! caching allocator keeps the first batch's freed memory in segments cut to its tensors and the
//! second batch's tensors take pieces of them. PyTorch's remedies, each run the same way: some
//! prevent it, some do not. The plan's run prediction, the CPU executor and the GPU executor
//! agree on every figure.

#[path = "support/cli.rs"]
mod support_cli;
#[path = "support/lengths.rs"]
mod support_lengths;
#[path = "support/xdg.rs"]
mod support_xdg;
use support_lengths::run_batches;

use oomlab::app::settings::Settings;
use oomlab::app::teaching::chapters;
use oomlab::memory::run::{RunPredictor, simulate_run};
use oomlab::memory::{Budget, simulate};
use oomlab::plan::{AllocatorConfig, Plan};

const VOCAB: usize = 58;

/// The lengths chapter's setup: bucketed speeches, batch 1 of 221 characters, batch 2 of 256.
fn lengths() -> Settings {
    let mut s = Settings::default();
    let chapter = chapters().into_iter().find(|c| c.id == "lengths").expect("the lengths chapter");
    (chapter.setup)(&mut s);
    s
}

fn plans(s: &Settings) -> Vec<Plan> {
    (0..2).map(|k| s.plan_at(VOCAB, k).expect("a plan")).collect()
}

fn with(conf: &str) -> Settings {
    let mut s = lengths();
    s.device.allocator = AllocatorConfig::parse(conf).expect("valid options");
    s
}

#[test]
fn a_batch_that_fits_alone_runs_out_after_another_length() {
    let s = lengths();
    let budget = Budget::Bytes(s.device.budget_bytes);
    let plans = plans(&s);
    assert_eq!((plans[0].shape.seq, plans[1].shape.seq), (221, 256), "two lengths");
    // Each batch fits an empty GPU of this budget.
    for p in &plans {
        simulate(p, budget).expect("alone, each batch fits");
    }
    let run = simulate_run(&plans, budget, false).expect("one run");
    let oom = run.oom.as_ref().expect("batch 2 runs out of memory after batch 1");
    assert_eq!(oom.step, 1);
    assert!(run.history_caused_oom(), "alone it fits: {:?}", oom.alone_reserved_bytes);
    let e = &oom.error.error;
    // Enough free in total (the budget less what is allocated), and even in the cached segments
    // alone; but no free block holds the request, and no whole segment can be released.
    assert!(e.capacity_bytes - e.allocated_bytes >= e.requested_bytes, "{}", oom.error.message);
    assert!(e.is_fragmented() && e.cached_free_bytes >= e.requested_bytes, "{}", oom.error.message);
    assert!(e.largest_free_block < e.requested_bytes, "{}", oom.error.message);
    assert!(oom.error.message.contains("fragmented"), "PyTorch's advice: {}", oom.error.message);
    // Reserved grows faster than allocated: batch 1 leaves its segments cached.
    let first = run.steps[0].stats;
    assert!(first.reserved_bytes >= first.peak_allocated_bytes + (16 << 20), "{first:?}");
    assert_eq!(first.reserved_bytes, run.steps[0].alone_reserved_bytes.expect("fits"), "nothing released after it");
}

#[test]
fn expandable_segments_and_emptying_the_cache_prevent_it_the_others_do_not() {
    let budget = Budget::Bytes(lengths().device.budget_bytes);
    let fits = |s: &Settings, empty: bool| simulate_run(&plans(s), budget, empty).expect("a run").oom.is_none();
    assert!(!fits(&lengths(), false), "PyTorch's defaults: out of memory");
    // Expandable segments: one segment per pool that grows in pages, so freed memory joins up.
    assert!(fits(&with("expandable_segments:True"), false));
    // torch.cuda.empty_cache() after every batch: batch 2 starts from an empty GPU.
    let emptied = simulate_run(&plans(&lengths()), budget, true).expect("a run");
    assert!(emptied.oom.is_none());
    let alone = simulate(&plans(&lengths())[1], budget).expect("fits").peak_reserved_bytes();
    assert_eq!(emptied.steps[1].stats.peak_reserved_bytes, alone, "emptied, batch 2 is as alone");
    // The garbage collector and max_split_size_mb act on wholly free or oversize cached
    // segments; the trouble is the partly used ones.
    assert!(!fits(&with("garbage_collection_threshold:0.6"), false));
    assert!(!fits(&with("max_split_size_mb:21"), false));
}

/// The prediction is what the executors do: the CPU executor going on through both batches runs
/// out of memory at batch 2 with the same figures; with expandable segments it runs both, with
/// the same account as the prediction. So does the GPU executor on its real buffers.
#[test]
fn the_executors_run_out_where_the_run_prediction_says() {
    let s = lengths();
    let budget = Budget::Bytes(s.device.budget_bytes);
    let predicted = simulate_run(&plans(&s), budget, false).expect("a run");
    let (records, oom) = run_batches(&s, VOCAB, 1);
    let cpu_oom = oom.expect("the CPU executor runs out of memory");
    assert_eq!(records.len(), 1, "at batch 2");
    let want = predicted.oom.expect("predicted");
    assert_eq!(cpu_oom.error, want.error.error, "the CPU's figures are the prediction's");
    assert_eq!(cpu_oom.tensor_name, want.error.tensor_name);
    assert_eq!(records[0].timeline, predicted.records[0].timeline, "batch 1's account");
    let expandable = with("expandable_segments:True");
    let (records, oom) = run_batches(&expandable, VOCAB, 1);
    assert!(oom.is_none(), "expandable segments: both batches run");
    let mut run = RunPredictor::new(budget, false);
    for (k, p) in plans(&expandable).into_iter().enumerate() {
        let m = run.step(std::sync::Arc::new(p)).expect("one run").expect("fits");
        assert_eq!(m.timeline, records[k].timeline, "batch {k}: predicted = allocator");
        assert_eq!(m.stats, records[k].stats, "batch {k}");
    }
    // The GPU executor: batch 2 on its real buffers, after batch 1.
    support_xdg::xdg();
    let ctx = oomlab::backend::gpu::GpuContext::new_headless_blocking().expect("a GPU adapter (lavapipe)");
    let kernels = pollster::block_on(oomlab::backend::gpu::executor::build_kernels(&ctx)).expect("kernels");
    let dataset = oomlab::data::Dataset::builtin();
    let first = s.plan_at(VOCAB, 0).expect("plan");
    let mut gpu =
        pollster::block_on(oomlab::backend::gpu::GpuExecutor::with_budget(&ctx, &kernels, first, s.seed, budget))
            .expect("gpu");
    for k in 0..2u64 {
        let plan = s.plan_at(VOCAB, k).expect("plan");
        let (b, shape, cap) = (plan.techniques.batching, plan.global_batch_shape(), plan.model.seq_len);
        let batch = oomlab::documents::batch_for(&dataset, b, shape, cap, s.seed, k).expect("batch");
        if k > 0 {
            gpu.reshape(plan).expect("reshaped");
        }
        let stepped = oomlab::backend::Trainer::train_step(&mut gpu, &batch);
        match (k, stepped) {
            (0, r) => {
                r.expect("batch 1 fits");
                assert_eq!(gpu.reserved_buffer_bytes(), predicted.steps[0].stats.reserved_bytes, "its buffers");
            }
            (_, Err(oomlab::backend::BackendError::OutOfMemory(o))) => {
                assert_eq!(o.error, cpu_oom.error, "the GPU runs out where the CPU does");
            }
            (_, other) => panic!("batch 2 on the GPU: {:?}", other.map(|_| ())),
        }
    }
}

/// `train` goes on at each bucketed batch's length through one allocator: batch 2 runs out of
/// memory on both backends, and the message says that an empty GPU of this budget would hold it;
/// with expandable segments the same run trains.
#[test]
fn train_says_when_the_batches_before_fragmented_the_memory() {
    let args = |backend: &'static str, conf: &'static str| {
        let mut a = vec!["train", "--steps", "2", "--seq-len", "256", "--batch", "16", "--batching", "bucketed"];
        a.extend(["--seed", "5", "--budget", "100MiB", "--backend", backend, "--alloc-conf", conf]);
        a
    };
    for backend in ["cpu", "gpu"] {
        let out = support_cli::oomlab(&args(backend, ""));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(3), "{backend}: out of memory: {stderr}");
        assert!(stderr.contains("the memory is fragmented"), "{backend}: {stderr}");
        assert!(stderr.contains("This is step 2 (length 256): on an empty GPU of this budget it fits"), "{stderr}");
        let out = support_cli::oomlab(&args(backend, "expandable_segments:True"));
        assert!(out.status.success(), "{backend}: {}", String::from_utf8_lossy(&out.stderr));
    }
    // With room to spare, `train --json` gives each step's length, peak and reserved: the peaks
    // follow the lengths, reserved only climbs.
    let mut a = args("cpu", "");
    a.extend(["--json"]);
    a[2] = "5";
    let budget = a.iter().position(|&x| x == "100MiB").expect("the budget");
    a[budget] = "1GiB";
    let out = support_cli::oomlab(&a);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let lines: Vec<serde_json::Value> =
        String::from_utf8_lossy(&out.stdout).lines().map(|l| serde_json::from_str(l).expect("JSON")).collect();
    assert_eq!(lines.len(), 5);
    let field = |k: &str| lines.iter().map(|l| l[k].as_u64().expect(k)).collect::<Vec<_>>();
    let (seq, peak, reserved) = (field("seq"), field("peak_allocated_bytes"), field("reserved_bytes"));
    assert_eq!(&seq[..2], &[221, 256], "the batches' own lengths");
    assert!(reserved.windows(2).all(|w| w[1] >= w[0]), "reserved climbs: {reserved:?}");
    assert!(peak.windows(2).any(|w| w[1] < w[0]), "peaks follow the lengths: {peak:?}");
}
