//! One training step replayed through the caching allocator: the plan's prediction of every
//! byte — per category, over the ops of the step, and at the peak.

use std::sync::Arc;

use serde::Serialize;

use super::Budget;
use super::allocator::{CachingAllocator, Event, OutOfMemory, Placement, Stats};
pub use super::map::TensorTag;
use crate::plan::{Category, Lifetime, Plan, TensorId};

/// Bytes per category; serialises as `{"activations": …, "gradients": …, …}` (names in
/// alphabetical order). An array, not a map: a sweep builds one at every new peak of every
/// batch size (a string-keyed map here was a sixth of a 512-batch sweep, measured).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CategoryBytes([u64; Category::ALL.len()]);

impl CategoryBytes {
    /// Every category, at zero.
    pub fn zero() -> Self {
        Self::default()
    }
    pub fn add(&mut self, c: Category, bytes: u64) {
        let slot = &mut self.0[c.index()];
        *slot = slot.saturating_add(bytes);
    }
    pub fn get(&self, c: Category) -> u64 {
        self.0[c.index()]
    }
    pub fn total(&self) -> u64 {
        self.0.iter().fold(0u64, |a, &b| a.saturating_add(b))
    }
}

impl<'de> serde::Deserialize<'de> for CategoryBytes {
    /// The map [`Serialize`] writes; a category missing from it is 0, an unknown name is an error.
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let map = <std::collections::BTreeMap<String, u64> as serde::Deserialize>::deserialize(deserializer)?;
        let mut out = Self::zero();
        for (name, bytes) in map {
            let c = Category::ALL.into_iter().find(|c| c.name() == name);
            let c = c.ok_or_else(|| serde::de::Error::custom(format!("unknown category {name:?}")))?;
            out.add(c, bytes);
        }
        Ok(out)
    }
}

impl Serialize for CategoryBytes {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap as _;
        let mut by_name: Vec<Category> = Category::ALL.to_vec();
        by_name.sort_by_key(|c| c.name());
        let mut map = serializer.serialize_map(Some(by_name.len()))?;
        for c in by_name {
            map.serialize_entry(c.name(), &self.get(c))?;
        }
        map.end()
    }
}

/// Why an allocator cannot go on at another plan's shape.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ReshapeError {
    #[error("the plans keep different model states")]
    OtherModelStates,
}

/// Memory while one op runs (after its outputs are allocated, before anything is freed).
#[derive(Clone, Debug, PartialEq, Serialize, serde::Deserialize)]
pub struct OpMemory {
    /// None: the state before the first op (persistent tensors and the batch).
    pub op: Option<usize>,
    /// Allocated bytes (block sizes) per category.
    pub allocated: CategoryBytes,
    pub allocated_bytes: u64,
    pub reserved_bytes: u64,
}

/// The whole step's memory.
#[derive(Clone, Debug, Serialize, serde::Deserialize)]
pub struct StepMemory {
    pub capacity_bytes: u64,
    pub timeline: Vec<OpMemory>,
    /// Index into `timeline` of the highest allocated point.
    pub peak_index: usize,
    /// Allocated bytes (block sizes) per category at the peak.
    pub peak_allocated: CategoryBytes,
    /// The tensors' own bytes per category at the peak (before the allocator's rounding).
    pub peak_requested: CategoryBytes,
    /// Tensors alive at the peak.
    pub live_at_peak: Vec<TensorId>,
    /// The most bytes of saved activations alive at any point (their own bytes).
    pub activation_peak_bytes: u64,
    pub stats: Stats,
    /// The largest free block inside the segments at the end.
    pub largest_free_block: u64,
    /// Where each tensor was placed (the last placement, for tensors placed twice).
    pub placements: Vec<Option<Placement>>,
    /// The allocator's segments when `events` began (empty when the log starts with an empty
    /// allocator, as a prediction's does).
    pub segments_before: Vec<super::map::SegmentState>,
    /// The allocator's log from then on (left out of the serialisation: the CPU worker sends
    /// it on its own).
    #[serde(skip)]
    pub events: Vec<Event<TensorTag>>,
}

impl StepMemory {
    pub fn peak_allocated_bytes(&self) -> u64 {
        self.stats.peak_allocated_bytes
    }
    pub fn peak_reserved_bytes(&self) -> u64 {
        self.stats.peak_reserved_bytes
    }
    /// The allocator's segments and blocks while op `op` runs (None: before the first op).
    pub fn segments_at(&self, op: Option<usize>) -> Vec<super::map::SegmentState> {
        super::map::segments_at(&self.segments_before, &self.events, op)
    }
}

/// A step that ran out of memory: which tensor, for which op, and PyTorch's message.
#[derive(Clone, Debug, Serialize, serde::Deserialize)]
pub struct StepOom {
    pub tensor: TensorId,
    pub tensor_name: String,
    pub category: Category,
    /// None: while allocating the persistent tensors or the batch.
    pub op: Option<usize>,
    pub op_label: String,
    pub error: OutOfMemory,
    pub message: String,
    /// The prediction's record of the step up to the failing allocation — the allocator's
    /// segments as they stood, which an allocator map draws — when it was kept (a prediction
    /// with its event log; not sent across the worker boundary).
    #[serde(skip)]
    pub at_failure: Option<Box<StepMemory>>,
}

impl StepOom {
    /// The error for `tensor`, asked for by `op` (labelled `op_label`), with PyTorch's message;
    /// `note` is appended to it.
    pub fn new(
        tensor: TensorId,
        info: &crate::plan::TensorInfo,
        op: Option<usize>,
        op_label: String,
        error: OutOfMemory,
        note: &str,
    ) -> Self {
        let what = format!("{} '{}' {:?} for {op_label}", info.category.name(), info.name, info.shape);
        let mut message = error.message(&what);
        if !note.is_empty() {
            message.push(' ');
            message.push_str(note);
        }
        Self {
            tensor,
            tensor_name: info.name.clone(),
            category: info.category,
            op,
            op_label,
            error,
            message,
            at_failure: None,
        }
    }
}

impl std::fmt::Display for StepOom {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for StepOom {}

/// Drives a caching allocator through the allocations and frees of a plan, in the order an
/// eager framework performs them. Backends use the same driver while they execute, so what they
/// measure is what the plan predicts.
#[derive(Clone, Debug)]
pub struct StepAllocator {
    /// Bytes and category of every tensor (names and labels stay in the plan, which the
    /// fallible calls take, so sweeps copy no strings).
    sizes: Vec<u64>,
    /// What does not depend on the tensors' sizes, shared with the allocators a sweep makes
    /// for other batch sizes ([`Self::with_sizes`]).
    shape: Arc<Schedule>,
    pub allocator: CachingAllocator<TensorTag>,
    /// Where each tensor was last placed (kept after it is freed).
    pub placements: Vec<Option<Placement>>,
    /// Each tensor's placement while it is allocated.
    current: Vec<Option<Placement>>,
    /// Running sums per category (indexed by `Category::index`): block bytes and tensor bytes.
    live_allocated: [u64; Category::ALL.len()],
    live_requested: [u64; Category::ALL.len()],
    /// What the allocator may reserve (its capacity is this budget's).
    budget: Budget,
    /// Every allocation (true) and free (false) since [`Self::clear_log`], in order: a trace
    /// rebuilds the tensors alive at its peak from it, instead of copying the live set at every
    /// new peak (which made a step quadratic in its ops).
    log: Vec<(TensorId, bool)>,
}

/// A plan's tensors and ops as the allocator sees them, sizes aside.
#[derive(Debug, PartialEq)]
pub struct Schedule {
    categories: Vec<Category>,
    lifetimes: Vec<Lifetime>,
    /// Tensors first touched by op i, and last touched by op i.
    starts: Vec<Vec<TensorId>>,
    ends: Vec<Vec<TensorId>>,
    /// The allocator's options the plan's techniques ask for.
    allocator: crate::plan::AllocatorConfig,
}

impl Schedule {
    pub fn new(plan: &Plan) -> Self {
        let lifetimes = plan.lifetimes();
        let mut starts = vec![Vec::new(); plan.ops.len()];
        let mut ends = vec![Vec::new(); plan.ops.len()];
        for (i, l) in lifetimes.iter().enumerate() {
            if let Lifetime::Ops { first, last } = *l {
                starts[first].push(TensorId(i));
                ends[last].push(TensorId(i));
            }
        }
        Self {
            categories: plan.tensors.iter().map(|t| t.category).collect(),
            lifetimes,
            starts,
            ends,
            allocator: plan.techniques.allocator,
        }
    }
}

impl StepAllocator {
    pub fn new(plan: &Plan, budget: impl Into<Budget>, record_events: bool) -> Self {
        let sizes = plan.tensors.iter().map(|t| t.size_bytes()).collect();
        Self::with_schedule(Arc::new(Schedule::new(plan)), sizes, budget.into(), record_events)
    }

    /// An allocator for a plan with `shape`'s tensors and ops and these sizes (a sweep's other
    /// batch sizes), without building that plan.
    pub fn with_schedule(shape: Arc<Schedule>, sizes: Vec<u64>, budget: Budget, record_events: bool) -> Self {
        let allocator = CachingAllocator::new(budget.capacity_bytes()).with_config(shape.allocator);
        let allocator = if record_events { allocator } else { allocator.without_events() };
        let n = sizes.len();
        Self {
            sizes,
            shape,
            allocator,
            placements: vec![None; n],
            current: vec![None; n],
            live_allocated: [0; Category::ALL.len()],
            live_requested: [0; Category::ALL.len()],
            budget,
            log: Vec::new(),
        }
    }

    /// What the allocator may reserve.
    pub fn budget(&self) -> Budget {
        self.budget
    }

    /// Forgets the allocation log (a new step's trace starts).
    pub fn clear_log(&mut self) {
        self.log.clear();
    }

    fn alloc(&mut self, plan: &Plan, tensor: TensorId, op: Option<usize>) -> Result<Placement, Box<StepOom>> {
        let bytes = self.sizes[tensor.0];
        match self.allocator.malloc(bytes, TensorTag { tensor, op }) {
            Ok(p) => {
                self.placements[tensor.0] = Some(p);
                self.current[tensor.0] = Some(p);
                let c = self.shape.categories[tensor.0].index();
                self.live_allocated[c] += p.size;
                self.live_requested[c] += bytes;
                self.log.push((tensor, true));
                Ok(p)
            }
            Err(mut error) => {
                error.device = plan.rank;
                let op_label = op.and_then(|i| plan.op_label(i)).unwrap_or_else(|| "before the step".to_string());
                Err(Box::new(StepOom::new(tensor, plan.tensor(tensor), op, op_label, error, "")))
            }
        }
    }

    /// Allocates the persistent tensors and the batch (before the first step). `plan` is the
    /// plan this allocator was made for (it names the tensor in an out-of-memory error).
    pub fn setup(&mut self, plan: &Plan) -> Result<(), Box<StepOom>> {
        for i in 0..self.sizes.len() {
            if matches!(self.shape.lifetimes[i], Lifetime::Persistent | Lifetime::Step) && self.current[i].is_none() {
                self.alloc(plan, TensorId(i), None)?;
            }
        }
        Ok(())
    }

    /// Allocates what op `i` first touches (unless already allocated); returns the new
    /// placements.
    pub fn before_op(&mut self, plan: &Plan, i: usize) -> Result<Vec<(TensorId, Placement)>, Box<StepOom>> {
        let shape = Arc::clone(&self.shape);
        let starts = shape.starts.get(i).map_or(&[][..], Vec::as_slice);
        let mut out = Vec::with_capacity(starts.len());
        let mut result = Ok(());
        for &t in starts {
            if self.current[t.0].is_some() {
                continue;
            }
            match self.alloc(plan, t, Some(i)) {
                Ok(p) => out.push((t, p)),
                Err(e) => {
                    result = Err(e);
                    break;
                }
            }
        }
        result.map(|()| out)
    }

    /// Frees what op `i` reads for the last time; returns those tensors.
    pub fn after_op(&mut self, i: usize) -> Vec<TensorId> {
        let shape = Arc::clone(&self.shape);
        let mut freed = Vec::new();
        for &t in shape.ends.get(i).map_or(&[][..], Vec::as_slice) {
            if let Some(p) = self.current[t.0].take() {
                self.free_placed(t, p, Some(i));
                freed.push(t);
            }
        }
        freed
    }

    /// Frees every op-lifetime tensor still allocated (after an OOM, or one left by a run that
    /// stopped before its last use), so the next step starts clean. Returns those tensors. The
    /// persistent tensors, the batch and the loss stay.
    pub fn release_step(&mut self) -> Vec<TensorId> {
        let mut freed = Vec::new();
        for i in 0..self.shape.lifetimes.len() {
            if matches!(self.shape.lifetimes[i], Lifetime::Ops { .. })
                && let Some(p) = self.current[i].take()
            {
                let t = TensorId(i);
                self.free_placed(t, p, None);
                freed.push(t);
            }
        }
        freed
    }

    /// Moves to `new`, a plan of the same model states at another shape (a batch of another
    /// sequence length), as an eager framework's next step does: the step's tensors and the batch
    /// are freed, the model states stay where they are, and the allocator keeps its segments and
    /// cache (so memory freed by a long batch is reused, or fragments, for a short one). The new
    /// batch is then allocated. `old` is the plan this allocator was made for. Fails, changing
    /// nothing, when the plans' kept tensors differ.
    pub fn reshape(&mut self, old: &Plan, new: &Plan) -> Result<Result<(), Box<StepOom>>, ReshapeError> {
        fn kept(p: &Plan) -> Vec<(usize, &str, u64)> {
            let lifetimes = p.lifetimes();
            (0..p.tensors.len())
                .filter(|&i| lifetimes[i] == Lifetime::Persistent)
                .map(|i| (i, p.tensors[i].name.as_str(), p.tensors[i].size_bytes()))
                .collect()
        }
        if kept(old) != kept(new) {
            return Err(ReshapeError::OtherModelStates);
        }
        self.release_step();
        for i in 0..self.shape.lifetimes.len() {
            if self.shape.lifetimes[i] == Lifetime::Step
                && let Some(p) = self.current[i].take()
            {
                self.free_placed(TensorId(i), p, None);
            }
        }
        let n = new.tensors.len();
        let keep: Vec<Option<Placement>> = (0..n).map(|i| self.current.get(i).copied().flatten()).collect();
        self.sizes = new.tensors.iter().map(|t| t.size_bytes()).collect();
        self.shape = Arc::new(Schedule::new(new));
        self.placements = keep.clone();
        self.current = keep;
        // The next step's peak is its own (the cache, and so what is reserved, stays).
        self.allocator.reset_peak_stats();
        Ok(self.setup(new))
    }

    /// Frees a tensor's block; the event names `op`, the op whose end freed it (None: released
    /// outside the step's ops).
    fn free_placed(&mut self, t: TensorId, p: Placement, op: Option<usize>) {
        self.allocator.free_as(p, Some(TensorTag { tensor: t, op }));
        let c = self.shape.categories[t.0].index();
        self.live_allocated[c] -= p.size;
        self.live_requested[c] -= self.sizes[t.0];
        self.log.push((t, false));
    }

    /// Bytes per category now: (block bytes, tensor bytes).
    pub fn category_sums(&self) -> (CategoryBytes, CategoryBytes) {
        let mut allocated = CategoryBytes::zero();
        let mut requested = CategoryBytes::zero();
        for c in Category::ALL {
            allocated.add(c, self.live_allocated[c.index()]);
            requested.add(c, self.live_requested[c.index()]);
        }
        (allocated, requested)
    }

    /// Tensor bytes of one category now.
    pub fn requested_bytes(&self, c: Category) -> u64 {
        self.live_requested[c.index()]
    }

    /// A tensor's placement while it is allocated.
    pub fn placement(&self, t: TensorId) -> Option<Placement> {
        self.current.get(t.0).copied().flatten()
    }

    /// The tensors op `i` frees (its last use), still allocated.
    pub fn ending_at(&self, i: usize) -> Vec<TensorId> {
        self.shape.ends.get(i).map_or_else(Vec::new, |e| e.iter().copied().filter(|t| self.is_allocated(*t)).collect())
    }

    /// The op-lifetime tensors still allocated.
    pub fn leftovers(&self) -> Vec<TensorId> {
        (0..self.shape.lifetimes.len())
            .filter(|&i| matches!(self.shape.lifetimes[i], Lifetime::Ops { .. }) && self.current[i].is_some())
            .map(TensorId)
            .collect()
    }

    /// Whether a tensor currently has memory.
    pub fn is_allocated(&self, t: TensorId) -> bool {
        self.current.get(t.0).is_some_and(Option::is_some)
    }

    /// The tensors allocated now, in id order.
    pub fn live(&self) -> Vec<TensorId> {
        (0..self.current.len()).filter(|&i| self.current[i].is_some()).map(TensorId).collect()
    }
}

/// Collects the memory timeline of a step as ops run: the state after each op's allocations,
/// the peak and the largest amount of saved activations.
#[derive(Clone, Debug, Default)]
pub struct Trace {
    /// Keep the per-op timeline (sweeps need only the peak).
    detailed: bool,
    points: usize,
    pub timeline: Vec<OpMemory>,
    pub peak_index: usize,
    pub peak_allocated_bytes: u64,
    pub peak_allocated: CategoryBytes,
    pub peak_requested: CategoryBytes,
    /// The tensors alive at the first point, and the allocator's log position then and at the
    /// peak: the tensors alive at the peak are rebuilt from them when the trace finishes.
    start_live: Vec<TensorId>,
    start_log: usize,
    peak_log: usize,
    pub activation_peak_bytes: u64,
}

impl Trace {
    /// A trace that keeps the per-op timeline.
    pub fn detailed() -> Self {
        Self { detailed: true, ..Self::default() }
    }

    /// Records the allocator's state while op `op` runs (None: before the first op).
    pub fn record(&mut self, sa: &StepAllocator, op: Option<usize>) {
        let stats = sa.allocator.stats();
        self.activation_peak_bytes = self.activation_peak_bytes.max(sa.requested_bytes(Category::Activations));
        if self.points == 0 {
            self.start_live = sa.live();
            self.start_log = sa.log.len();
        }
        if self.points == 0 || stats.allocated_bytes > self.peak_allocated_bytes {
            let (allocated, requested) = sa.category_sums();
            self.peak_index = self.points;
            self.peak_allocated_bytes = stats.allocated_bytes;
            self.peak_allocated = allocated;
            self.peak_requested = requested;
            self.peak_log = sa.log.len();
        }
        if self.detailed {
            let (allocated, _) = sa.category_sums();
            self.timeline.push(OpMemory {
                op,
                allocated,
                allocated_bytes: stats.allocated_bytes,
                reserved_bytes: stats.reserved_bytes,
            });
        }
        self.points += 1;
    }

    /// The finished report.
    pub fn finish(self, sa: &StepAllocator) -> StepMemory {
        // The tensors alive at the peak: those alive at the start, with the allocations and frees
        // between the start and the peak replayed.
        let mut alive = vec![false; sa.sizes.len()];
        for t in &self.start_live {
            alive[t.0] = true;
        }
        for &(t, allocated) in sa.log.get(self.start_log..self.peak_log).unwrap_or(&[]) {
            alive[t.0] = allocated;
        }
        let live_at_peak = (0..alive.len()).filter(|&i| alive[i]).map(TensorId).collect();
        StepMemory {
            capacity_bytes: sa.budget.capacity_bytes(),
            timeline: self.timeline,
            peak_index: self.peak_index,
            peak_allocated: self.peak_allocated,
            peak_requested: self.peak_requested,
            live_at_peak,
            activation_peak_bytes: self.activation_peak_bytes,
            stats: sa.allocator.stats(),
            largest_free_block: sa.allocator.largest_free_block(),
            placements: sa.placements.clone(),
            segments_before: sa.allocator.events_base().iter().map(super::map::SegmentState::of).collect(),
            events: sa.allocator.events().to_vec(),
        }
    }
}

/// Predicts one step's memory under `budget`: setup, then every op with its allocations and
/// frees. An allocation that does not fit is an out-of-memory error naming the tensor and the
/// op; nothing is left allocated.
pub fn simulate(plan: &Plan, budget: impl Into<Budget>) -> Result<StepMemory, Box<StepOom>> {
    simulate_with(plan, budget.into(), true)
}

/// [`simulate`] without the event log, for sweeps.
pub fn simulate_peak(plan: &Plan, budget: impl Into<Budget>) -> Result<StepMemory, Box<StepOom>> {
    simulate_with(plan, budget.into(), false)
}

fn simulate_with(plan: &Plan, budget: Budget, events: bool) -> Result<StepMemory, Box<StepOom>> {
    simulate_on(plan, StepAllocator::new(plan, budget, events), events)
}

/// Runs a plan's ops (`plan` names tensors in an out-of-memory error) through `sa`, an
/// allocator made for its schedule; `events`: a trace of every op, not just the peak.
pub(super) fn simulate_on(plan: &Plan, mut sa: StepAllocator, events: bool) -> Result<StepMemory, Box<StepOom>> {
    sa.setup(plan)?;
    let mut trace = if events { Trace::detailed() } else { Trace::default() };
    trace.record(&sa, None);
    for i in 0..plan.ops.len() {
        if let Err(mut oom) = sa.before_op(plan, i) {
            // With the event log: the record up to the failure, the op's allocations so far
            // in place, for the allocator map of the moment it failed.
            if events {
                trace.record(&sa, Some(i));
                oom.at_failure = Some(Box::new(trace.finish(&sa)));
            }
            sa.release_step();
            return Err(oom);
        }
        trace.record(&sa, Some(i));
        sa.after_op(i);
    }
    let report = trace.finish(&sa);
    sa.release_step();
    Ok(report)
}
