//! `oomlab snapshot export|show`: PyTorch memory snapshots (pytorch.org/memory_viz) out of one
//! executed step, and a text summary of any snapshot.

use clap::Subcommand;
use oomlab::memory::snapshot::dump::Dump;
use oomlab::memory::snapshot::explain::{self, Advice, Holding};
use oomlab::memory::snapshot::{export, read, replay};

use super::*;

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
    /// peak allocated and reserved, the largest free block, fragmentation, OOM events and the
    /// biggest blocks alive at the peak.
    Show {
        file: PathBuf,
        /// How many of the largest live blocks at the peak to list.
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
        SnapshotCommand::Show { file, top, json } => show(file, *top, *json),
    }
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
    std::fs::write(out, &bytes).map_err(|e| failure(format!("cannot write {}: {e}", out.display())))?;
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
    /// What held the memory at the peak, by place (categories guessed from the stacks).
    at_peak: Holding,
    /// The same just before the first OOM, if there is one.
    at_oom: Option<Holding>,
    advice: Vec<Advice>,
}

fn size(v: i64) -> String {
    format_bytes(u64::try_from(v).unwrap_or(0))
}

fn show(file: &std::path::Path, top: usize, json: bool) -> Result<(), Failure> {
    // Streamed from the file: a 200 MB dump is never in memory whole.
    let f = std::fs::File::open(file).map_err(|e| failure(format!("cannot read {}: {e}", file.display())))?;
    let length = f.metadata().ok().map(|m| m.len());
    let snap = read::from_reader(f, length, &mut |_| {}).map_err(|e| failure(format!("{}: {e}", file.display())))?;
    let devices: Vec<ShowDevice> = replay::devices(&snap)
        .into_iter()
        .map(|d| {
            let r = replay::replay(&snap, d, top);
            let at_peak = explain::holding(&snap, &r.lifetimes, r.peak_index, top);
            // Just before the failed request: what was alive when it could not be served.
            let at_oom = r.ooms.first().map(|o| explain::holding(&snap, &r.lifetimes, o.index.checked_sub(1), top));
            let advice = explain::diagnose(&snap, &r, at_oom.as_ref().unwrap_or(&at_peak));
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
                at_peak,
                at_oom,
                advice,
            }
        })
        .collect();
    if json {
        let source = if snap.from_oomlab() { "oomlab export (allocator)" } else { "PyTorch snapshot" };
        let doc = serde_json::json!({ "source": source, "file": file.display().to_string(), "devices": devices });
        println!("{doc}");
        return Ok(());
    }
    let what = if snap.from_oomlab() {
        "a memory snapshot written by oomlab (its allocator's account of a step, not a PyTorch measurement)"
    } else {
        "a PyTorch memory snapshot (measured by PyTorch)"
    };
    println!("{}: {what}, {} device(s)", file.display(), devices.len());
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
        if !d.live_at_peak.is_empty() {
            println!("  largest blocks alive at the peak:");
            for l in &d.live_at_peak {
                println!("    {:>12}  {:#x}  {}", size(l.size), l.address, l.frame);
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

/// What held the memory at a moment: by category, then by place.
fn print_holding(when: &str, h: &Holding) {
    if h.count == 0 {
        return;
    }
    let known = h.groups.iter().all(|g| g.known);
    println!(
        "  what held the memory {when}: {} in {} allocations{}",
        size(h.bytes),
        h.count,
        if known {
            ""
        } else {
            " (categories are guesses from the stacks: where memory was asked for, not what it holds)"
        }
    );
    let parts: Vec<String> = h
        .by_guess
        .iter()
        .filter(|(_, b)| *b > 0)
        .map(|(g, b)| format!("{} {} ({:.0} %)", g.name(), size(*b), 100.0 * *b as f64 / h.bytes.max(1) as f64))
        .collect();
    println!("    {}", parts.join(", "));
    for g in &h.groups {
        let guess = if g.known { g.guess.name().to_string() } else { format!("{}?", g.guess.name()) };
        println!("    {:>12}  {:>6}×  {:<18} {}  [{}]", size(g.bytes), g.count, guess, g.site, g.module);
    }
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
            Advice::Grew { guess, bytes } => {
                println!("  what grew most since the trace began: {} (+{})", guess.name(), size(*bytes))
            }
            // The app's words for it (one catalog, not a second English copy).
            Advice::Fix { guess } => println!("  {}", catalog.text(&format!("fix-{}", guess.key()))),
        }
    }
}
