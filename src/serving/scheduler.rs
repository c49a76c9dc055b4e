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
    /// The caches' blocks at the first iteration at the most reserved: each block's request
    /// (id + 1) or 0 (see `KvSpace::owners`).
    pub map_at_peak: Option<Vec<u32>>,
}

/// The scheduler's state between iterations: a run that can be carried out an iteration at a
/// time (the app does one or a few per frame).
pub struct Server {
    waiting: VecDeque<Live>,
    running: Vec<Live>,
    out: Outcome,
    max_num_seqs: usize,
    /// The most the cache reserved so far (the map is kept from the first iteration at it).
    peak_reserved: u64,
}

impl Server {
    /// `requests`, all arriving at once, to serve at most `max_num_seqs` at a time.
    pub fn new(requests: Vec<Request>, max_num_seqs: usize) -> Self {
        let waiting = requests.into_iter().map(|req| Live { req, generated: Vec::new(), preempted: 0 }).collect();
        let out = Outcome {
            served: Vec::new(),
            iterations: Vec::new(),
            preemptions: 0,
            forward_passes: 0,
            stopped: None,
            step_peak_allocated: 0,
            map_at_peak: None,
        };
        Self { waiting, running: Vec::new(), out, max_num_seqs: max_num_seqs.max(1), peak_reserved: 0 }
    }

    /// Whether every request is served (or the run stopped).
    pub fn done(&self) -> bool {
        self.out.stopped.is_some() || (self.waiting.is_empty() && self.running.is_empty())
    }

    /// The iterations so far.
    pub fn iterations(&self) -> &[Iteration] {
        &self.out.iterations
    }

    /// The caches' blocks at the peak so far (see [`Outcome::map_at_peak`]).
    pub fn map_at_peak(&self) -> Option<&[u32]> {
        self.out.map_at_peak.as_deref()
    }

    /// Requests served so far.
    pub fn served(&self) -> usize {
        self.out.served.len()
    }

    /// One iteration: room for the running requests' next tokens (preempting the newest while
    /// there is none), admission, a decode step, the admitted requests' prefills.
    pub async fn iteration(&mut self, runner: &mut Runner, space: &mut KvSpace) {
        if self.done() {
            return;
        }
        let (vocab, width) = (runner.vocab(), space.shape().table_width);
        let (running, waiting, out) = (&mut self.running, &mut self.waiting, &mut self.out);
        let peak_reserved = &mut self.peak_reserved;
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
        while !preempted_now && running.len() + admitted.len() < self.max_num_seqs {
            let Some(front) = waiting.front() else { break };
            let (id, tokens, last) = (front.req.id, front.prompt_len_now(), front.final_tokens());
            if space.admit(id, tokens, last) {
                admitted.extend(waiting.pop_front());
                continue;
            }
            if running.is_empty() && admitted.is_empty() {
                // It cannot fit even alone, in an empty cache: refused, as a server refuses a
                // prompt too long for it.
                out.served.extend(waiting.pop_front().map(|l| l.served(true)));
                continue;
            }
            break;
        }
        let kv = space.bytes();
        if out.iterations.is_empty() || kv.reserved > *peak_reserved {
            *peak_reserved = kv.reserved;
            out.map_at_peak = space.owners();
        }
        out.iterations.push(Iteration { running: running.len() + admitted.len(), waiting: waiting.len(), kv });
        // 3. One decode step for the running requests.
        if !running.is_empty() {
            let mut inputs = StepInputs { requests: running.len(), new_tokens: 1, ..StepInputs::default() };
            for live in running.iter() {
                let id = live.req.id;
                let n = space.tokens(id);
                let pos = n.saturating_sub(1);
                inputs.tokens.push(live.generated.last().copied().unwrap_or(0));
                inputs.positions.push(pos as u32);
                inputs.slots.push(space.slot(id, pos));
                inputs.tables.extend(space.table(id, width));
                inputs.lens.push(n as u32);
            }
            match run(runner, &inputs, vocab, out).await {
                Ok(next) => {
                    for (live, t) in running.iter_mut().zip(next) {
                        live.generated.push(t);
                    }
                }
                Err(e) => {
                    out.stopped = Some(e);
                    waiting.extend(admitted);
                    return;
                }
            }
            let (done, still): (Vec<Live>, Vec<Live>) = running.drain(..).partition(Live::done);
            *running = still;
            for live in done {
                space.release(live.req.id);
                out.served.push(live.served(false));
            }
        }
        // 4. Each admitted request's prefill.
        let mut admitted = admitted.into_iter();
        while let Some(mut live) = admitted.next() {
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
            match run(runner, &inputs, vocab, out).await {
                Ok(next) => live.generated.extend(next),
                Err(e) => {
                    out.stopped = Some(e);
                    waiting.push_back(live);
                    waiting.extend(admitted);
                    return;
                }
            }
            if live.done() {
                space.release(id);
                out.served.push(live.served(false));
            } else {
                running.push(live);
            }
        }
    }

    /// The outcome: every request as it ended (a stopped run's with what it had generated).
    pub fn finish(mut self) -> Outcome {
        for live in self.running.into_iter().chain(self.waiting) {
            self.out.served.push(live.served(false));
        }
        self.out.served.sort_by_key(|s| s.id);
        self.out
    }
}

/// Serves `requests`, all arriving at once, at most `max_num_seqs` at a time, to the end.
pub async fn serve(runner: &mut Runner, space: &mut KvSpace, requests: Vec<Request>, max_num_seqs: usize) -> Outcome {
    let mut server = Server::new(requests, max_num_seqs);
    while !server.done() {
        server.iteration(runner, space).await;
    }
    server.finish()
}

impl Live {
    /// The tokens its prefill writes now.
    fn prompt_len_now(&self) -> usize {
        self.req.prompt.len() + self.generated.len()
    }

    /// How it ended.
    fn served(self, refused: bool) -> Served {
        Served {
            id: self.req.id,
            prompt_len: self.req.prompt.len(),
            output_len: self.req.output_len,
            tokens: self.generated,
            preempted: self.preempted,
            refused,
        }
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
