//! `oomlab snapshot export|show|replay|diff`: PyTorch memory snapshots (pytorch.org/memory_viz)
//! out of one executed step; a text summary of any snapshot (places, phases, kinds); several
//! files as the ranks of one run; a real run replayed through oomlab's allocator; two snapshots
//! compared.

use clap::Subcommand;
use oomlab::memory::snapshot::dump::Dump;
use oomlab::memory::snapshot::explain::{self, Advice, Holding};
use oomlab::memory::snapshot::phase::Phase;
use oomlab::memory::snapshot::simulate::{self, Simulation};
use oomlab::memory::snapshot::{AllocatorSettings, SnapshotError, export, read, replay};

use super::*;

mod several;
use several::{diff, show_ranks, signed};

#[derive(Subcommand, Debug)]
pub(super) enum SnapshotCommand {
    /// Run one step of this setup and write the allocator's segments and trace as a snapshot
    /// pickle, for PyTorch's memory_viz and `python -m torch.cuda._memory_viz`.
    Export {
        /// The file to write (pickle, protocol 3).
        #[arg(long)]
        out: PathBuf,
        #[command(flatten)]
        config: Box<ConfigArgs>,
    },
    /// Summarise a snapshot (from `torch.cuda.memory._dump_snapshot()` or `snapshot export`):
    /// peak allocated and reserved, the run's phases, what held the memory at the peak by place
    /// (the user's own line) and by kind (parameters, gradients, optimizer state, activations,
    /// temporaries: from each allocation's life), OOM events, fragmentation. Several files (or a
    /// folder) are the ranks of one run: each rank's peak, the worst rank, the spread, and where
    /// the worst rank's extra memory went.
    Show {
        /// One snapshot, several (one per rank), or a folder of them.
        #[arg(required = true)]
        files: Vec<PathBuf>,
        /// How many of the largest places to list.
        #[arg(long, default_value_t = 10, value_parser = count)]
        top: usize,
        /// Machine-readable output on stdout.
        #[arg(long)]
        json: bool,
    },
    /// Replay a real run's allocations and frees, in order, through oomlab's caching allocator
    /// (PyTorch's rules), from the segments alive when the trace began, with the run's own
    /// allocator settings or others: the real run beside the replay (peak reserved, segments
    /// reserved, the largest free block at the peak). "This run would have reserved X instead
    /// of Y with expandable_segments:True."
    Replay {
        file: PathBuf,
        /// Allocator options to try instead of the run's own, as PYTORCH_CUDA_ALLOC_CONF:
        /// expandable_segments:True, max_split_size_mb:N, garbage_collection_threshold:T.
        #[arg(long, value_parser = oomlab::plan::AllocatorConfig::parse)]
        alloc_conf: Option<oomlab::plan::AllocatorConfig>,
        /// The GPU's memory (needed by garbage_collection_threshold when the snapshot has no
        /// OOM event to tell it): e.g. 80GiB. Without it, the replay never runs out.
        #[arg(long, value_parser = oomlab::units::parse_bytes)]
        device_memory: Option<u64>,
        /// Machine-readable output on stdout.
        #[arg(long)]
        json: bool,
    },
    /// Compare two snapshots: both peaks, and the difference at the peak by place and by kind.
    Diff {
        a: PathBuf,
        b: PathBuf,
        /// How many places to list.
        #[arg(long, default_value_t = 10, value_parser = count)]
        top: usize,
        /// Machine-readable output on stdout.
        #[arg(long)]
        json: bool,
    },
}

pub(super) fn run(command: &SnapshotCommand) -> Result<(), Failure> {
    match command {
        SnapshotCommand::Export { out, config } => export_step(out, config),
        SnapshotCommand::Show { files, top, json } => {
            let files = expand(files)?;
            match &files[..] {
                [one] => show(one, *top, *json),
                _ => show_ranks(&files, *top, *json),
            }
        }
        SnapshotCommand::Replay { file, alloc_conf, device_memory, json } => {
            replay_run(file, *alloc_conf, *device_memory, *json)
        }
        SnapshotCommand::Diff { a, b, top, json } => diff(a, b, *top, *json),
    }
}

/// The files named, a folder's snapshots (`.pickle`, `.pkl`, `.json`) in name order.
fn expand(files: &[PathBuf]) -> Result<Vec<PathBuf>, Failure> {
    let mut out = Vec::new();
    for f in files {
        if f.is_dir() {
            let entries = std::fs::read_dir(f).map_err(|e| refused(f, &SnapshotError::Unreadable(e.to_string())))?;
            let mut found: Vec<PathBuf> = entries
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| {
                    p.is_file()
                        && p.extension()
                            .and_then(|x| x.to_str())
                            .is_some_and(|x| matches!(x, "pickle" | "pkl" | "json"))
                })
                .collect();
            found.sort();
            if found.is_empty() {
                return Err(refused(f, &SnapshotError::EmptyFolder));
            }
            out.extend(found);
        } else {
            out.push(f.clone());
        }
    }
    Ok(out)
}

/// A snapshot, streamed from its file (a 200 MB dump is never in memory whole).
fn open(file: &std::path::Path) -> Result<Dump, Failure> {
    let f = std::fs::File::open(file).map_err(|e| refused(file, &SnapshotError::Unreadable(e.to_string())))?;
    let length = f.metadata().ok().map(|m| m.len());
    read::from_reader(f, length, &mut |_| {}).map_err(|e| refused(file, &e))
}

/// The device a comparison reads: the first with a trace, else the first.
fn main_replay(snap: &Dump, top: usize) -> Result<replay::Replay, Failure> {
    let all = replay::replay_all(snap, top);
    let i = all.iter().position(|r| r.events > 0).unwrap_or(0);
    all.into_iter().nth(i).ok_or_else(|| failure(system_catalog().text("cli-err-no-device")))
}

fn name_of(file: &std::path::Path) -> String {
    file.display().to_string()
}

/// Why a snapshot file was refused, the file named, in the system's language (exit 2).
fn refused(file: &std::path::Path, e: &SnapshotError) -> Failure {
    failure(format!("{}: {}", file.display(), e.text(&system_catalog())))
}

fn failure(e: impl std::fmt::Display) -> Failure {
    Failure { code: EXIT_USAGE, message: e.to_string() }
}

fn export_step(out: &std::path::Path, config: &ConfigArgs) -> Result<(), Failure> {
    let dataset = Dataset::builtin();
    let r = config.resolve_one(&dataset)?;
    let plan = r.plan();
    let gpu = open_gpu(&r)?;
    // The executed step's own allocator log; if the step runs out of memory, the same driver's
    // log up to the failed request (the backends run exactly this driver: tests/backends.rs).
    let (events, how) = match real_step(&r, plan.clone(), &dataset, gpu.as_ref()) {
        Ok(step) => {
            // A backend's step log starts after it placed the persistent tensors and the batch.
            let mut events = export::setup_events(&plan, r.budget_bytes).map_err(|o| failure(o.message))?;
            events.extend(step.memory.events);
            (events, format!("one step executed on {}", step.backend))
        }
        Err(f) if f.code == EXIT_OOM => {
            let (events, oom) = export::record_step(&plan, r.budget_bytes);
            let what = oom.map_or_else(String::new, |o| format!(": {}", o.message));
            (events, format!("the step runs out of memory; the trace ends with its oom event{what}"))
        }
        Err(f) => return Err(f),
    };
    let snap = export::snapshot(&plan, &events, r.budget_bytes);
    let bytes = export::to_pickle(&snap).map_err(failure)?;
    std::fs::write(out, &bytes).map_err(|e| failure(super::config::cannot_write(out, &e)))?;
    let replay = replay::replay(&Dump::from_wire(&snap), 0, 0);
    println!(
        "wrote {} ({} bytes): {} segments, {} trace events; peak {} allocated, {} reserved — {how}",
        out.display(),
        bytes.len(),
        snap.segments.len(),
        replay.events,
        format_bytes(u64::try_from(replay.peak_allocated).unwrap_or(0)),
        format_bytes(u64::try_from(replay.peak_reserved).unwrap_or(0)),
    );
    Ok(())
}

/// What `snapshot show --json` prints, per device.
#[derive(serde::Serialize)]
struct ShowDevice {
    device: i64,
    events: usize,
    truncated: bool,
    initial_allocated_bytes: i64,
    initial_reserved_bytes: i64,
    peak_allocated_bytes: i64,
    peak_reserved_bytes: i64,
    peak_event: Option<usize>,
    final_allocated_bytes: i64,
    final_reserved_bytes: i64,
    segments: usize,
    largest_free_block_bytes: i64,
    free_in_segments_bytes: i64,
    fragmentation_percent: f64,
    ooms: Vec<replay::OomEvent>,
    live_at_peak: Vec<replay::Live>,
    /// The run's phases: its annotations, else its stacks.
    phases: Vec<Phase>,
    /// Private pools' segments (CUDA graphs, MemPools) and expandable segments.
    private_pool_segments: usize,
    private_pool_bytes: i64,
    expandable_segments: usize,
    segment_maps: usize,
    segment_unmaps: usize,
    /// What held the memory at the peak, by place and kind (each with its evidence).
    at_peak: Holding,
    /// The same just before the first OOM, if there is one.
    at_oom: Option<Holding>,
    advice: Vec<Advice>,
}

fn size(v: i64) -> String {
    format_bytes(u64::try_from(v).unwrap_or(0))
}

fn show(file: &std::path::Path, top: usize, json: bool) -> Result<(), Failure> {
    let snap = open(file)?;
    let devices: Vec<ShowDevice> = replay::replay_all(&snap, top)
        .into_iter()
        .map(|r| {
            let d = r.device;
            let at_peak = explain::holding(&r, r.peak_index, top);
            // Just before the failed request: what was alive when it could not be served.
            let at_oom = r.ooms.first().map(|o| explain::holding(&r, o.index.checked_sub(1), top));
            let advice = explain::diagnose(&r, at_oom.as_ref().unwrap_or(&at_peak));
            ShowDevice {
                device: d,
                events: r.events,
                truncated: r.truncated(),
                initial_allocated_bytes: r.initial.allocated,
                initial_reserved_bytes: r.initial.reserved,
                peak_allocated_bytes: r.peak_allocated,
                peak_reserved_bytes: r.peak_reserved,
                peak_event: r.peak_index,
                final_allocated_bytes: r.final_state.allocated,
                final_reserved_bytes: r.final_state.reserved,
                segments: snap.segments.iter().filter(|g| g.device == d).count(),
                largest_free_block_bytes: r.largest_free_block,
                free_in_segments_bytes: r.free_in_segments,
                fragmentation_percent: r.fragmentation_percent(),
                ooms: r.ooms,
                live_at_peak: r.live_at_peak,
                phases: r.phases,
                private_pool_segments: snap.segments.iter().filter(|g| g.device == d && g.is_private()).count(),
                private_pool_bytes: snap
                    .segments
                    .iter()
                    .filter(|g| g.device == d && g.is_private())
                    .map(|g| g.total_size)
                    .sum(),
                expandable_segments: snap.segments.iter().filter(|g| g.device == d && g.expandable).count(),
                segment_maps: count_action(&snap, d, oomlab::memory::snapshot::dump::Action::SegmentMap),
                segment_unmaps: count_action(&snap, d, oomlab::memory::snapshot::dump::Action::SegmentUnmap),
                at_peak,
                at_oom,
                advice,
            }
        })
        .collect();
    if json {
        let source = if snap.from_oomlab() { "oomlab export (allocator)" } else { "PyTorch snapshot" };
        let doc = serde_json::json!({
            "source": source,
            "file": file.display().to_string(),
            "allocator_settings": snap.allocator_settings.as_ref().map(settings_json),
            "annotations": snap.annotations.len(),
            "user_metadata": snap.metadata,
            "unknown": snap.unknown,
            "devices": devices,
        });
        println!("{doc}");
        return Ok(());
    }
    let what = if snap.from_oomlab() {
        "a memory snapshot written by oomlab (its allocator's account of a step, not a PyTorch measurement)"
    } else {
        "a PyTorch memory snapshot (measured by PyTorch)"
    };
    println!("{}: {what}, {} device(s)", file.display(), devices.len());
    print_format(&snap);
    for d in &devices {
        println!("device {}: {} trace events, {} segments", d.device, d.events, d.segments);
        if d.truncated {
            println!(
                "  the trace starts with {} allocated and {} reserved: recording began mid-run, or the ring buffer dropped older events (truncated)",
                size(d.initial_allocated_bytes),
                size(d.initial_reserved_bytes)
            );
        }
        println!(
            "  peak allocated {}{}, peak reserved {}",
            size(d.peak_allocated_bytes),
            d.peak_event.map_or(String::new(), |i| format!(" (after event {i})")),
            size(d.peak_reserved_bytes)
        );
        println!(
            "  at the dump: {} allocated of {} reserved; largest free block {} of {} free in segments (fragmentation {:.1} %)",
            size(d.final_allocated_bytes),
            size(d.final_reserved_bytes),
            size(d.largest_free_block_bytes),
            size(d.free_in_segments_bytes),
            d.fragmentation_percent
        );
        for o in &d.ooms {
            println!(
                "  OUT OF MEMORY at event {}: asked for {} with {} free on the device — {}",
                o.index,
                size(o.size),
                size(o.device_free),
                o.frame
            );
        }
        if d.private_pool_segments > 0 {
            println!(
                "  private pools (CUDA graphs, MemPools): {} segments, {} reserved",
                d.private_pool_segments,
                size(d.private_pool_bytes)
            );
        }
        if d.expandable_segments > 0 || d.segment_maps > 0 {
            println!(
                "  expandable segments: {} at the dump; {} mappings and {} unmappings in the trace",
                d.expandable_segments, d.segment_maps, d.segment_unmaps
            );
        }
        print_phases(&d.phases);
        if !d.live_at_peak.is_empty() {
            println!("  largest blocks alive at the peak:");
            for l in &d.live_at_peak {
                println!("    {:>12}  {:#x}  {:<16} {}", size(l.size), l.address, l.kind.name(), l.frame);
            }
        }
        print_holding("at the peak", &d.at_peak);
        if let Some(h) = &d.at_oom {
            print_holding("when the OOM struck", h);
        }
        print_advice(&d.advice);
    }
    Ok(())
}

/// What held the memory at a moment: by kind, then by place.
fn print_holding(when: &str, h: &Holding) {
    if h.count == 0 {
        return;
    }
    println!("  what held the memory {when}: {} in {} allocations", size(h.bytes), h.count);
    let parts: Vec<String> = h
        .by_guess
        .iter()
        .filter(|(_, b)| *b > 0)
        .map(|(g, b)| format!("{} {} ({:.0} %)", g.name(), size(*b), 100.0 * *b as f64 / h.bytes.max(1) as f64))
        .collect();
    println!("    {}", parts.join(", "));
    for g in &h.groups {
        let guess = if g.evidence.is_guess() { format!("{}?", g.guess.name()) } else { g.guess.name().to_string() };
        println!("    {:>12}  {:>6}×  {:<18} {}", size(g.bytes), g.count, guess, g.site);
        println!("    {:>12}   {:>6}  ({})", "", "", g.evidence.text());
    }
    if h.groups.iter().any(|g| g.evidence.is_guess()) {
        println!("    (? a guess from the stack: where memory was asked for, not what it holds)");
    }
}

/// The run's phases, as bands of events.
fn print_phases(phases: &[Phase]) {
    if phases.is_empty() {
        return;
    }
    println!("  phases ({} spans; from the run's annotations, else its stacks):", phases.len());
    const SHOWN: usize = 12;
    for p in phases.iter().take(SHOWN) {
        let source = match p.source {
            oomlab::memory::snapshot::phase::PhaseSource::Annotation => "annotation",
            oomlab::memory::snapshot::phase::PhaseSource::Stacks => "stacks",
        };
        println!("    events {:>7}–{:<7} {} [{source}]", p.first, p.last, p.label());
    }
    if phases.len() > SHOWN {
        println!("    … and {} more", phases.len() - SHOWN);
    }
}

fn count_action(snap: &Dump, device: i64, action: oomlab::memory::snapshot::dump::Action) -> usize {
    replay::trace(snap, device).iter().filter(|e| e.action() == action).count()
}

fn settings_json(a: &AllocatorSettings) -> serde_json::Value {
    let mut v = serde_json::to_value(a).unwrap_or_default();
    if let Some(m) = v.as_object_mut() {
        for (k, x) in &a.other {
            m.insert(k.clone(), serde_json::Value::String(x.clone()));
        }
    }
    v
}

/// What the file says of its recording: the allocator's settings, annotations, user metadata,
/// and what oomlab read past.
fn print_format(snap: &Dump) {
    if let Some(a) = &snap.allocator_settings {
        let conf = if a.alloc_conf.is_empty() { "(not set)".to_string() } else { a.alloc_conf.clone() };
        let mut parts =
            vec![format!("PYTORCH_CUDA_ALLOC_CONF {conf}"), format!("expandable_segments {}", a.expandable_segments)];
        if let Some(m) = a.max_split_size {
            parts.push(format!("max_split_size {}", if m < 0 { "unlimited".to_string() } else { size(m) }));
        }
        if let Some(t) = a.garbage_collection_threshold {
            parts.push(format!("garbage_collection_threshold {t}"));
        }
        if a.rounds_power2() {
            parts.push("roundup_power2_divisions set".into());
        }
        for (k, v) in &a.other {
            parts.push(format!("{k} {v}"));
        }
        println!("  the run's allocator settings: {}", parts.join(", "));
    }
    if !snap.annotations.is_empty() {
        let mut names: Vec<&str> = snap.annotations.iter().map(|a| a.name.as_str()).collect();
        names.sort_unstable();
        names.dedup();
        let shown: Vec<&str> = names.iter().take(4).copied().collect();
        let more = if names.len() > 4 { format!(", … {} names", names.len()) } else { String::new() };
        println!("  annotations: {} (record_function: {}{more})", snap.annotations.len(), shown.join(", "));
    }
    if let Some(m) = snap.metadata.first() {
        println!(
            "  events with user metadata: {} (event {} of device {}: {})",
            snap.metadata.len(),
            m.index,
            m.device,
            m.text
        );
    }
    if !snap.unknown.is_empty() {
        let list = |m: &std::collections::BTreeMap<String, u64>| {
            m.iter().map(|(k, n)| format!("{k} ×{n}")).collect::<Vec<_>>().join(", ")
        };
        let mut parts = Vec::new();
        if !snap.unknown.actions.is_empty() {
            parts.push(format!("actions {}", list(&snap.unknown.actions)));
        }
        if !snap.unknown.keys.is_empty() {
            parts.push(format!("keys {}", list(&snap.unknown.keys)));
        }
        println!("  read past what oomlab does not know (a newer PyTorch's): {}", parts.join("; "));
    }
}

/// `snapshot replay FILE`.
fn replay_run(
    file: &std::path::Path,
    config: Option<oomlab::plan::AllocatorConfig>,
    capacity: Option<u64>,
    json: bool,
) -> Result<(), Failure> {
    let snap = open(file)?;
    let mut out: Vec<Simulation> = Vec::new();
    for r in replay::replay_all(&snap, 0).iter().filter(|r| r.events > 0) {
        out.push(simulate::simulate(&snap, r, config, capacity).map_err(failure)?);
    }
    if out.is_empty() {
        return Err(failure(format!("{}: {}", file.display(), system_catalog().text("cli-err-no-trace"))));
    }
    if json {
        let doc = serde_json::json!({ "file": file.display().to_string(), "devices": out });
        println!("{doc}");
        return Ok(());
    }
    for s in &out {
        let settings = if s.run_settings {
            let conf = if s.alloc_conf.is_empty() { "PyTorch's defaults".to_string() } else { s.alloc_conf.clone() };
            format!("the run's own settings ({conf})")
        } else {
            format!("PYTORCH_CUDA_ALLOC_CONF={}", if s.alloc_conf.is_empty() { "(defaults)" } else { &s.alloc_conf })
        };
        println!("{}, device {}: replayed through oomlab's allocator with {settings}", file.display(), s.device);
        println!("  {:<40} {:>14} {:>14}", "", "the real run", "the replay");
        let row = |what: &str, a: String, b: String| println!("  {what:<40} {a:>14} {b:>14}");
        row("peak reserved", size(s.real.peak_reserved_bytes), size(s.replayed.peak_reserved_bytes));
        row(
            "segments reserved during the trace",
            s.real.segment_allocs.to_string(),
            s.replayed.segment_allocs.to_string(),
        );
        row(
            "segments released during the trace",
            s.real.segment_frees.to_string(),
            s.replayed.segment_frees.to_string(),
        );
        row(
            "reserved at the peak allocated",
            size(s.real.reserved_at_peak_bytes),
            size(s.replayed.reserved_at_peak_bytes),
        );
        row(
            "largest free block at the peak allocated",
            size(s.real.largest_free_at_peak_bytes),
            size(s.replayed.largest_free_at_peak_bytes),
        );
        let delta = s.replayed.peak_reserved_bytes.saturating_sub(s.real.peak_reserved_bytes);
        if s.run_settings {
            println!(
                "  the replay's peak reserved is {:.2} % off the run's",
                100.0 * delta.abs() as f64 / s.real.peak_reserved_bytes.max(1) as f64
            );
        } else {
            println!(
                "  this run would have reserved {} at its peak instead of {} ({})",
                size(s.replayed.peak_reserved_bytes),
                size(s.real.peak_reserved_bytes),
                signed(delta)
            );
        }
        if s.releases > 0 {
            println!(
                "  the run released its cache {} times (empty_cache, or a retry before an OOM): replayed as it happened",
                s.releases
            );
        }
        if s.real_ooms > 0 || s.replayed_ooms > 0 {
            println!("  out of memory: {} times in the run, {} in the replay", s.real_ooms, s.replayed_ooms);
        }
        if s.unmatched_frees > 0 {
            println!("  {} frees of blocks the replay could not place (allocated before the trace)", s.unmatched_frees);
        }
        if s.power2_rounding {
            println!(
                "  the run set roundup_power2_divisions, which oomlab's allocator does not follow: expect differences"
            );
        }
    }
    Ok(())
}

/// The diagnostic workflow, step by step.
fn print_advice(advice: &[Advice]) {
    let catalog = oomlab::i18n::Catalog::new(oomlab::i18n::Lang::En);
    for a in advice {
        match a {
            Advice::Capacity { peak, capacity } => println!(
                "  the peak ({}) is {:.0} % of the device's {} (reserved + free at the OOM){}",
                size(*peak),
                100.0 * *peak as f64 / (*capacity).max(1) as f64,
                size(*capacity),
                if *peak as f64 > 0.9 * *capacity as f64 { ": above 90 %, profile by module (below)" } else { "" }
            ),
            Advice::Fragmented { free_in_segments, request } => println!(
                "  {} was free inside the cached segments, more than the {} asked for, but not in one piece: fragmentation (try PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True)",
                size(*free_in_segments),
                size(*request)
            ),
            Advice::Where { place, bytes, .. } => {
                println!("  most of it made at {} (+{})", place.text(), size(*bytes))
            }
            Advice::Grew { guess, bytes } => {
                println!("  what grew most since the trace began: {} (+{})", guess.name(), size(*bytes))
            }
            // The app's words for it (one catalog, not a second English copy).
            Advice::Fix { guess } => println!("  {}", catalog.text(&format!("fix-{}", guess.key()))),
        }
    }
}
