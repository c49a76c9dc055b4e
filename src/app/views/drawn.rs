//! What each view drew, recorded as it draws: the figures a person sees — sizes, counts, op
//! labels, sources, and the summary lines word for word — so that a test can compare a view with
//! the record it comes from (the plan's prediction, the allocator's account of a real step, the
//! estimator, a snapshot), after a real step as before it. The browser build logs a view's
//! record when it changes: its canvas has no widgets a page script could read.

use serde::Serialize;

use super::Source;

/// One view's figures, as drawn in the last frame that drew it.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Drawn {
    Breakdown(BreakdownDrawn),
    Timeline(TimelineDrawn),
    Sweep(SweepDrawn),
    /// Memory per GPU against the number of simulated GPUs, by ZeRO stage.
    PerGpu(PerGpuDrawn),
    AllocatorMap(MapDrawn),
    Training(TrainingDrawn),
    RealModels(RealDrawn),
    Snapshot(SnapshotDrawn),
    /// Offload: what lives in host memory, and what it costs.
    Host(HostDrawn),
    /// The three ways to batch the speeches.
    Ways(WaysDrawn),
    /// The class's full-screen projector view (`classroom::full`).
    Projector(Box<ProjectorDrawn>),
}

/// One round's distribution as the full view drew it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RoundDrawn {
    pub round: u32,
    pub answers: usize,
    /// The slots' labels and counts, left to right (numbers: below, the bins, above).
    pub slots: Vec<(String, u32)>,
    pub log: bool,
    pub median: Option<f64>,
    pub middle_half: Option<(f64, f64)>,
    pub truth: Option<String>,
    /// Guesses within the chapter's tolerance of the true value (numbers), or right (choices).
    pub within: Option<u32>,
    /// The size the slots' labels were drawn at.
    pub label_px: f32,
}

/// The full view's record.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ProjectorDrawn {
    pub question: String,
    pub question_px: f32,
    pub label_px: f32,
    /// The distributions' height over the screen's.
    pub chart_share: f32,
    pub rounds: Vec<RoundDrawn>,
    /// The code and QR code: in a corner (students have joined) or large in the middle.
    pub join_in_corner: bool,
}

/// The breakdown at the peak: a row per category, from each source.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct BreakdownDrawn {
    /// (category, predicted bytes, allocator bytes once a step ran), in the table's order.
    pub rows: Vec<(String, u64, Option<u64>)>,
    pub predicted_total_bytes: u64,
    pub allocator_total_bytes: Option<u64>,
    pub predicted_reserved_bytes: u64,
    pub allocator_reserved_bytes: Option<u64>,
    /// The driver's segment bytes at the peak, when it reported.
    pub device_reserved_bytes: Option<u64>,
    /// A chapter's open question veiled the figures: the rows are named, every cell drew "?"
    /// (and holds 0 or None here).
    pub veiled: bool,
}

/// The ways to batch the speeches: (way, padding share, bytes per useful token, largest batch
/// that fits), each as the table drew it.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct WaysDrawn {
    pub batch: usize,
    pub rows: Vec<(String, f64, Option<u64>, Option<usize>)>,
    pub veiled: bool,
}

/// Offload's host memory (predicted, from the plan) and its trade.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct HostDrawn {
    /// (category, bytes in host memory), in the table's order.
    pub rows: Vec<(String, u64)>,
    pub total_bytes: u64,
    /// What the GPU keeps less.
    pub saved_bytes: u64,
    /// Bytes copied to the host and back each step.
    pub down_bytes: u64,
    pub up_bytes: u64,
    /// Measured step times with and without offload (seconds).
    pub with_secs: Option<f64>,
    pub without_secs: Option<f64>,
    /// A chapter's open question veiled the figures.
    pub veiled: bool,
}

/// The timeline: its source, its peak and the op under the scrubber.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TimelineDrawn {
    pub source: Source,
    /// Bars along the op axis (one per timeline point).
    pub points: usize,
    pub peak_allocated_bytes: u64,
    pub peak_op: String,
    pub scrub_op: String,
    pub scrub_allocated_bytes: u64,
    pub scrub_reserved_bytes: u64,
    /// The summary line above the chart, word for word.
    pub summary: String,
    /// The timeline points at which a collective ran (data parallelism), each marked.
    pub collectives: Vec<usize>,
    /// The timeline points at which offload copied between the GPU and the host, each marked.
    pub transfers: Vec<usize>,
    /// A chapter's open question veiled the step: no bars were drawn, the figures said "?"
    /// (and are 0 here), the tensors alive were not listed.
    pub veiled: bool,
}

/// One series of the memory-vs-batch chart.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SeriesDrawn {
    pub name: String,
    /// (batch, peak allocated bytes) where it fits.
    pub points: Vec<(usize, u64)>,
    pub largest_fitting: Option<usize>,
    pub first_oom: Option<usize>,
}

/// The memory-vs-batch chart.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SweepDrawn {
    pub series: Vec<SeriesDrawn>,
    pub budget_bytes: u64,
    pub current_batch: usize,
    /// A chapter's open question veiled the sweep: the series are named, without their points.
    pub veiled: bool,
}

/// The memory-per-GPU chart: each stage's peak per GPU at 1 to 8 GPUs (where its plan builds).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PerGpuDrawn {
    pub batch: usize,
    pub budget_bytes: u64,
    pub series: Vec<(u8, Vec<(usize, u64)>)>,
    /// The fewest GPUs on which each stage's step fits the budget (None: not within 8).
    pub fewest_fitting: Vec<(u8, Option<usize>)>,
    pub current_gpus: usize,
    pub veiled: bool,
}

/// One segment of the allocator map.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SegmentDrawn {
    pub segment: u64,
    pub size_bytes: u64,
    pub allocated_bytes: u64,
    /// The tensors in its allocated blocks, in address order.
    pub tensors: Vec<String>,
    /// The category names written inside its blocks (those wide enough), in address order.
    pub labels: Vec<String>,
}

/// The allocator map at one op.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct MapDrawn {
    /// Where the segments come from: the prediction, or the allocator as a real step ran.
    pub source: Source,
    pub op: String,
    pub segments: Vec<SegmentDrawn>,
    pub reserved_bytes: u64,
    pub allocated_bytes: u64,
    /// The driver's memory blocks drawn under the segments (after a real step on a GPU).
    pub driver_blocks: Option<usize>,
    /// The summary line above the bars, word for word.
    pub summary: String,
    /// A chapter's open question veiled the step: no segments were drawn, the figures said "?".
    pub veiled: bool,
}

/// The training view.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TrainingDrawn {
    pub steps: usize,
    pub losses: Vec<f32>,
    /// The status line, word for word.
    pub status: String,
    /// The memory chart's steps: each one's length, peak allocated and reserved after it (empty
    /// while a question veils the step's figures).
    pub memory: Vec<crate::app::timing::StepMark>,
    pub memory_veiled: bool,
}

/// The real-model view's estimate.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RealDrawn {
    pub peak_bytes: u64,
    pub capacity_bytes: u64,
    pub fits: bool,
    /// (category, bytes) per table row.
    pub lines: Vec<(String, u64)>,
    pub max_micro_batch: u64,
    /// The verdict heading, word for word.
    pub verdict: String,
    /// A chapter's open question veiled the estimate: the rows are named, their bytes drew "?"
    /// (0 here), the chart drew no bars.
    pub veiled: bool,
    /// Under pipeline parallelism, (stage, its peak) for each stage drawn (peaks 0 when veiled:
    /// a veiled estimate draws no stage list).
    pub stages: Vec<(u64, u64)>,
}

/// The Snapshot tab: the snapshot's figures beside the toy's.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SnapshotDrawn {
    pub name: String,
    pub peak_allocated_bytes: u64,
    pub peak_reserved_bytes: u64,
    pub events: usize,
    pub segments: usize,
    /// The toy's column: where its figures come from, and its peaks.
    pub toy: Option<(Source, u64, u64)>,
    /// The run's phases drawn as bands: kind, first and last event.
    pub phases: Vec<(crate::memory::snapshot::phase::PhaseKind, usize, usize)>,
    /// What held the memory at the peak, by kind.
    pub kinds_at_peak: Vec<(crate::memory::snapshot::explain::Guess, u64)>,
    /// The replay through oomlab's allocator, once it ran: its peak reserved.
    pub replayed_peak_reserved_bytes: Option<u64>,
    /// With several files open: how many, the worst rank, the spread of their peaks.
    pub compared: Option<(usize, u32, i64)>,
}

impl Drawn {
    /// The view's name, as the marks and the log name it.
    pub fn view(&self) -> &'static str {
        match self {
            Drawn::Breakdown(_) => "breakdown",
            Drawn::Timeline(_) => "timeline",
            Drawn::Sweep(_) => "sweep",
            Drawn::PerGpu(_) => "per-gpu",
            Drawn::Host(_) => "host-memory",
            Drawn::Ways(_) => "ways",
            Drawn::AllocatorMap(_) => "allocator-map",
            Drawn::Training(_) => "training",
            Drawn::RealModels(_) => "real-models",
            Drawn::Snapshot(_) => "snapshot",
            Drawn::Projector(_) => "projector",
        }
    }

    /// A short JSON line for the log: the allocator map's segments in full, the sweep's summary
    /// per series (its points would fill the console), everything else as it is.
    fn log_line(&self) -> String {
        let doc = match self {
            Drawn::Sweep(s) => serde_json::json!({
                "budget_bytes": s.budget_bytes,
                "current_batch": s.current_batch,
                "series": s.series.iter().map(|x| serde_json::json!({
                    "name": x.name, "points": x.points.len(),
                    "largest_fitting": x.largest_fitting, "first_oom": x.first_oom,
                })).collect::<Vec<_>>(),
            }),
            Drawn::Training(t) => serde_json::json!({"steps": t.steps, "status": t.status}),
            other => serde_json::to_value(other).unwrap_or_default(),
        };
        doc.to_string()
    }
}

fn key(view: &str) -> egui::Id {
    egui::Id::unique(("oomlab_drawn", view))
}

/// Records what a view drew this frame; logs it when it differs from what the view last drew.
pub fn record(ui: &egui::Ui, drawn: Drawn) {
    let ctx = ui.ctx();
    let frame = ctx.cumulative_frame_nr();
    let id = key(drawn.view());
    let changed = ctx.data(|d| d.get_temp::<(u64, Drawn)>(id)).is_none_or(|(_, before)| before != drawn);
    if changed {
        log::info!("oomlab: {} drawn: {}", drawn.view(), drawn.log_line());
    }
    ctx.data_mut(|d| d.insert_temp(id, (frame, drawn)));
}

/// What view `view` drew in this frame or the last, if it was drawn.
pub fn drawn(ctx: &egui::Context, view: &str) -> Option<Drawn> {
    let frame = ctx.cumulative_frame_nr();
    let seen = ctx.data(|d| d.get_temp::<(u64, Drawn)>(key(view)));
    seen.filter(|(f, _)| f + 1 >= frame).map(|(_, d)| d)
}
