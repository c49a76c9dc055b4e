//! Continuous batching (Orca's iteration-level scheduling), as vLLM schedules: at every
//! iteration the running requests get room for their next token — the newest preempted
//! (its cache dropped, to be recomputed later, as vLLM v1 does) while there is none — then,
//! when nobody was preempted, waiting requests are admitted while their cache fits; the running
//! ones take one decode step together, and each admitted one its prefill.

use std::collections::VecDeque;

use super::cache::{KvBytes, KvSpace};
use super::requests::Request;
use super::runner::{Runner, StepInputs, greedy};
use crate::backend::BackendError;

/// A request as the server holds it.
#[derive(Clone, Debug)]
struct Live {
    req: Request,
    generated: Vec<u32>,
    preempted: u32,
}

impl Live {
    /// The tokens a prefill feeds: the prompt, and what it generated before a preemption.
    fn prefix(&self) -> Vec<u32> {
        self.req.prompt.iter().chain(&self.generated).copied().collect()
    }

    /// The tokens its cache holds when it finishes (its last token is never fed back).
    fn final_tokens(&self) -> usize {
        self.req.prompt.len() + self.req.output_len - 1
    }

    fn done(&self) -> bool {
        self.generated.len() >= self.req.output_len
    }
}

/// What became of one request.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Served {
    pub id: u64,
    pub prompt_len: usize,
    pub output_len: usize,
    /// The tokens it generated (greedy), all `output_len` of them unless the run stopped.
    pub tokens: Vec<u32>,
    /// Times it was preempted (its cache dropped and recomputed).
    pub preempted: u32,
    /// Why it was never served: it cannot fit the cache even alone.
    pub refused: bool,
}

/// One iteration's memory and batch, after admission.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct Iteration {
    pub running: usize,
    pub waiting: usize,
    pub kv: KvBytes,
}

/// The run's outcome, before the report adds the setup's figures.
pub struct Outcome {
    pub served: Vec<Served>,
    pub iterations: Vec<Iteration>,
    pub preemptions: u64,
    /// Forward passes run (prefills and decode steps).
    pub forward_passes: u64,
    /// The executor's error that stopped the run (an out-of-memory in the step's activations).
    pub stopped: Option<BackendError>,
    /// The largest step's allocator peak (bytes allocated, every category).
    pub step_peak_allocated: u64,
}

/// Serves `requests`, all arriving at once, at most `max_num_seqs` at a time.
pub async fn serve(runner: &mut Runner, space: &mut KvSpace, requests: Vec<Request>, max_num_seqs: usize) -> Outcome {
    let vocab = runner.vocab();
    let width = space.shape().table_width;
    let mut waiting: VecDeque<Live> =
        requests.into_iter().map(|req| Live { req, generated: Vec::new(), preempted: 0 }).collect();
    let mut running: Vec<Live> = Vec::new();
    let mut out = Outcome {
        served: Vec::new(),
        iterations: Vec::new(),
        preemptions: 0,
        forward_passes: 0,
        stopped: None,
        step_peak_allocated: 0,
    };
    let finish = |live: Live, refused: bool| Served {
        id: live.req.id,
        prompt_len: live.req.prompt.len(),
        output_len: live.req.output_len,
        tokens: live.generated,
        preempted: live.preempted,
        refused,
    };
    while !(waiting.is_empty() && running.is_empty()) {
        // 1. Room for every running request's next token, oldest first.
        let mut preempted_now = false;
        let mut i = 0;
        while i < running.len() {
            if space.grow(running[i].req.id) {
                i += 1;
                continue;
            }
            let Some(mut victim) = running.pop() else { break };
            space.release(victim.req.id);
            victim.preempted += 1;
            out.preemptions += 1;
            preempted_now = true;
            waiting.push_front(victim);
        }
        // 2. Admission, when nobody had to make room.
        let mut admitted: Vec<Live> = Vec::new();
        while !preempted_now && running.len() + admitted.len() < max_num_seqs.max(1) {
            let Some(front) = waiting.front() else { break };
            let (id, tokens, last) = (front.req.id, front.prompt_len_now(), front.final_tokens());
            if space.admit(id, tokens, last) {
                admitted.extend(waiting.pop_front());
                continue;
            }
            if running.is_empty() && admitted.is_empty() {
                // It cannot fit even alone, in an empty cache: refused, as a server refuses a
                // prompt too long for it.
                out.served.extend(waiting.pop_front().map(|l| finish(l, true)));
                continue;
            }
            break;
        }
        out.iterations.push(Iteration {
            running: running.len() + admitted.len(),
            waiting: waiting.len(),
            kv: space.bytes(),
        });
        // 3. One decode step for the running requests.
        if !running.is_empty() {
            let mut inputs = StepInputs { requests: running.len(), new_tokens: 1, ..StepInputs::default() };
            for live in &running {
                let id = live.req.id;
                let n = space.tokens(id);
                let pos = n.saturating_sub(1);
                inputs.tokens.push(live.generated.last().copied().unwrap_or(0));
                inputs.positions.push(pos as u32);
                inputs.slots.push(space.slot(id, pos));
                inputs.tables.extend(space.table(id, width));
                inputs.lens.push(n as u32);
            }
            match run(runner, &inputs, vocab, &mut out).await {
                Ok(next) => {
                    for (live, t) in running.iter_mut().zip(next) {
                        live.generated.push(t);
                    }
                }
                Err(e) => {
                    out.stopped = Some(e);
                    break;
                }
            }
            let (done, still): (Vec<Live>, Vec<Live>) = running.drain(..).partition(Live::done);
            running = still;
            for live in done {
                space.release(live.req.id);
                out.served.push(finish(live, false));
            }
        }
        // 4. Each admitted request's prefill.
        for mut live in admitted {
            let id = live.req.id;
            let prefix = live.prefix();
            let n = prefix.len();
            let inputs = StepInputs {
                requests: 1,
                new_tokens: n,
                positions: (0..n as u32).collect(),
                slots: (0..n).map(|p| space.slot(id, p)).collect(),
                tables: space.table(id, width),
                lens: vec![n as u32],
                tokens: prefix,
            };
            match run(runner, &inputs, vocab, &mut out).await {
                Ok(next) => live.generated.extend(next),
                Err(e) => {
                    out.stopped = Some(e);
                    running.push(live);
                    break;
                }
            }
            if live.done() {
                space.release(id);
                out.served.push(finish(live, false));
            } else {
                running.push(live);
            }
        }
        if out.stopped.is_some() {
            break;
        }
    }
    // A stopped run: what each request had generated.
    for live in running.into_iter().chain(waiting) {
        out.served.push(finish(live, false));
    }
    out.served.sort_by_key(|s| s.id);
    out
}

impl Live {
    /// The tokens its prefill writes now.
    fn prompt_len_now(&self) -> usize {
        self.req.prompt.len() + self.generated.len()
    }
}

/// One forward pass: the greedy next token of each request.
async fn run(
    runner: &mut Runner,
    inputs: &StepInputs,
    vocab: usize,
    out: &mut Outcome,
) -> Result<Vec<u32>, BackendError> {
    let logits = runner.step(inputs).await?;
    out.forward_passes += 1;
    if let Some(m) = runner.memory() {
        out.step_peak_allocated = out.step_peak_allocated.max(m.peak_allocated_bytes());
    }
    Ok(greedy(&logits, vocab))
}
