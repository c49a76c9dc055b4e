//! The worker protocol, both ends, without a browser.

use super::*;
use crate::backend::cpu::CpuExecutor;
use crate::model::{ModelConfig, StepShape};
use crate::plan::{OptimizerConfig, Plan, Techniques};
use std::collections::VecDeque;

/// A worker in the same process: requests are handled as they are sent, their replies
/// queued as JSON (as they would cross).
struct InProcess {
    handler: Handler,
    replies: VecDeque<String>,
}

impl Transport for InProcess {
    fn send(&mut self, request: &Request) -> Result<(), WorkerLost> {
        let json = serde_json::to_string(request)?;
        let request: Request = serde_json::from_str(&json)?;
        let replies = &mut self.replies;
        let mut n = 0.0;
        let clock = move || {
            n += 1.0; // every look at the clock is a second later: progress on every op
            n
        };
        let clock = std::cell::RefCell::new(clock);
        self.handler.handle(request, &|| (clock.borrow_mut())(), &mut |r| {
            replies.push_back(serde_json::to_string(&r).unwrap_or_default());
        });
        Ok(())
    }
    fn try_recv(&mut self) -> Result<Option<Reply>, WorkerLost> {
        Ok(self.replies.pop_front().map(|j| serde_json::from_str(&j)).transpose()?)
    }
}

fn worker() -> CpuWorker {
    let mut replies = VecDeque::new();
    replies.push_back(serde_json::to_string(&Reply::Alive).unwrap_or_default());
    CpuWorker::new(Box::new(InProcess { handler: Handler::default(), replies }))
}

fn plan(batch: usize) -> Plan {
    let model = ModelConfig::toy(Dataset::builtin().tokenizer.vocab_size());
    Plan::build_with(&model, StepShape { batch, seq: 32 }, &OptimizerConfig::default(), &Techniques::default())
        .expect("plan")
}

#[test]
fn a_step_in_the_worker_is_the_same_step_as_on_the_page() {
    let (plan, seed, budget) = (plan(4), 3, 1 << 30);
    let mut w = worker();
    while !w.ensure(&plan.request(), seed, Budget::from(budget), 0.0).expect("ready") {}
    let mut direct = CpuExecutor::<f32>::with_budget(plan.clone(), seed, budget).expect("executor");
    let dataset = Dataset::builtin();
    for index in 0..2 {
        w.step(seed, index).expect("sent");
        assert!(w.step_in_flight());
        let Polled::Finished(result) = w.poll().expect("poll") else { panic!("the step came back") };
        let (loss, memory, _) = result.expect("a step");
        let batch = dataset.batch(plan.batch_shape(), seed, index).expect("batch");
        direct.upload_batch(&batch).expect("upload");
        direct.start_phases(&[Phase::Forward, Phase::Backward, Phase::Optimizer]);
        let want = loop {
            if let Some(r) = direct.resume(1000) {
                break r.expect("direct step");
            }
        };
        assert_eq!(loss.to_bits(), want.to_bits(), "step {index}: the same loss, bit for bit");
        let (memory, want) = (*memory.expect("memory"), direct.memory().expect("memory"));
        assert_eq!(memory.stats, want.stats);
        assert_eq!(memory.timeline, want.timeline);
        assert_eq!(memory.placements, want.placements);
        assert_eq!(memory.events, want.events, "the allocator view's events cross too");
        // And the segments the step began with: the allocator map draws them too.
        assert!(!memory.segments_before.is_empty(), "the model state's segments were reserved before the step");
        assert_eq!(memory.segments_before, want.segments_before);
        assert!(!w.step_in_flight());
    }
}

#[test]
fn the_worker_reports_progress_before_the_result() {
    let small = plan(2);
    let mut h = Handler::default();
    let mut replies = Vec::new();
    let start =
        Request::Start { generation: 1, request: Box::new(small.request()), seed: 0, budget: Budget::Bytes(1 << 30) };
    h.handle(start, &|| 0.0, &mut |r| replies.push(r));
    assert!(matches!(replies.as_slice(), [Reply::Ready { generation: 1 }]));
    replies.clear();
    let ticks = std::cell::Cell::new(0.0);
    let clock = || {
        ticks.set(ticks.get() + 1.0);
        ticks.get()
    };
    h.handle(Request::Step { generation: 1, seed: 0, index: 0 }, &clock, &mut |r| replies.push(r));
    let (last, progress) = replies.split_last().expect("replies");
    assert!(matches!(last, Reply::Done { generation: 1, .. }));
    let done: Vec<usize> = progress
        .iter()
        .map(|r| match r {
            Reply::Progress { generation: 1, done, total } if *total == small.ops.len() => *done,
            other => panic!("{other:?}"),
        })
        .collect();
    assert!(!done.is_empty() && done.windows(2).all(|w| w[0] < w[1]), "{done:?}");
    // A step for an executor it has not got (settings changed since): refused, not run.
    replies.clear();
    h.handle(Request::Step { generation: 2, seed: 0, index: 0 }, &clock, &mut |r| replies.push(r));
    let [Reply::Failed { generation: 2, error: WireError::Failed(w) }] = replies.as_slice() else {
        panic!("a failure: {} replies", replies.len())
    };
    assert_eq!(w.key, "backend-err-no-executor", "it crosses as its catalog message");
}

/// Replies handed out one poll at a time (None: nothing has arrived yet).
struct Scripted(VecDeque<Option<Reply>>);

impl Transport for Scripted {
    fn send(&mut self, _: &Request) -> Result<(), WorkerLost> {
        Ok(())
    }
    fn try_recv(&mut self) -> Result<Option<Reply>, WorkerLost> {
        Ok(self.0.pop_front().flatten())
    }
}

#[test]
fn the_page_shows_progress_drops_stale_replies_and_reports_failures() {
    let small = plan(2);
    let script = [
        Some(Reply::Alive),
        Some(Reply::Ready { generation: 1 }),
        None,
        Some(Reply::Progress { generation: 1, done: 7, total: 20 }),
        None,
        Some(Reply::Done {
            generation: 1,
            loss: 4.0,
            memory: None,
            events: Default::default(),
            compute_secs: 0.25,
            ranks: Vec::new(),
        }),
        None,
        // After a reset (generation 2), generation 1's replies are dropped.
        Some(Reply::Done {
            generation: 1,
            loss: 9.0,
            memory: None,
            events: Default::default(),
            compute_secs: 0.5,
            ranks: Vec::new(),
        }),
        None,
    ];
    let mut w = CpuWorker::new(Box::new(Scripted(script.into_iter().collect())));
    assert!(
        w.ensure(&small.request(), 0, Budget::Bytes(1 << 30), 0.0).expect("ready"),
        "alive and ready in the same poll"
    );
    w.step(0, 0).expect("sent");
    assert!(matches!(w.poll().expect("poll"), Polled::Nothing));
    assert_eq!(w.progress(), Some((7, 20)));
    match w.poll().expect("poll") {
        Polled::Finished(Ok((loss, None, _))) => assert_eq!(loss, 4.0),
        _ => panic!("the step's result"),
    }
    assert_eq!(w.progress(), None);
    assert_eq!(w.last_compute_secs(), Some(0.25));
    w.step(0, 1).expect("sent");
    w.reset();
    assert!(matches!(w.poll().expect("poll"), Polled::Nothing));
    assert!(!w.step_in_flight());
    // An executor that cannot be made: the next `ensure` says why (out of memory at setup).
    let mut w = worker();
    let err = loop {
        match w.ensure(&plan(64).request(), 0, Budget::Bytes(1 << 16), 0.0) {
            Ok(false) => continue,
            Ok(true) => panic!("64 KiB cannot hold the parameters"),
            Err(e) => break e,
        }
    };
    assert!(matches!(err, BackendError::OutOfMemory(_)), "{err}");
    assert!(err.to_string().contains("out of memory"), "{err}");
    // A worker that never says it is alive (its wasm did not load) is lost after a while.
    let mut silent = CpuWorker::new(Box::new(Scripted(VecDeque::new())));
    assert!(!silent.ensure(&small.request(), 0, Budget::Bytes(1 << 30), 100.0).expect("waiting"));
    assert!(
        !silent
            .ensure(&small.request(), 0, Budget::Bytes(1 << 30), 100.0 + ALIVE_WITHIN_SECS - 1.0)
            .expect("still waiting")
    );
    let err = silent.ensure(&small.request(), 0, Budget::Bytes(1 << 30), 101.0 + ALIVE_WITHIN_SECS).expect_err("lost");
    assert!(matches!(err, BackendError::WorkerLost(WorkerLost::Silent(60))), "{err}");
    assert!(err.to_string().starts_with("the CPU worker stopped"), "{err}");
}

/// Two simulated GPUs in the worker: the same step as the cluster on the page, each GPU's
/// account crossing with its events.
#[test]
fn zero_on_two_simulated_gpus_runs_in_the_worker() {
    use crate::backend::cluster::CpuCluster;
    let model = ModelConfig::toy(Dataset::builtin().tokenizer.vocab_size());
    let parallel = crate::plan::Parallel { gpus: 2, zero: 2, ..crate::plan::Parallel::default() };
    let t = Techniques { parallel, ..Techniques::default() };
    let plan =
        Plan::build_with(&model, StepShape { batch: 2, seq: 32 }, &OptimizerConfig::default(), &t).expect("plan");
    let (seed, budget) = (3, Budget::from(1u64 << 30));
    let mut w = worker();
    while !w.ensure(&plan.request(), seed, budget, 0.0).expect("ready") {}
    w.step(seed, 0).expect("sent");
    let Polled::Finished(result) = w.poll().expect("poll") else { panic!("the step came back") };
    let (loss, memory, ranks) = result.expect("a step");
    let valid = plan.request().validate().expect("valid");
    let mut direct = CpuCluster::<f32>::new(&valid, seed, budget).expect("cluster");
    let batch = Dataset::builtin().batch(plan.global_batch_shape(), seed, 0).expect("batch");
    let want = direct.train_step(&batch).expect("direct step");
    assert_eq!(loss.to_bits(), want.to_bits());
    assert_eq!(ranks.len(), 1, "GPU 1's account beside GPU 0's");
    let memories = direct.memories();
    assert_eq!(memory.expect("GPU 0").timeline, memories[0].expect("GPU 0").timeline);
    assert_eq!(ranks[0].events, memories[1].expect("GPU 1").events, "GPU 1's events cross too");
    assert!(ranks[0].peak_allocated.get(crate::plan::Category::Communication) > 0, "its buckets");
}
