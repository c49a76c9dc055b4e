//! `snapshot show` with several files (the ranks of one run) and `snapshot diff`: two or more
//! real runs side by side, by kind and by place.

use oomlab::memory::snapshot::compare::{self, Diff};
use oomlab::memory::snapshot::replay;

use super::{Failure, PathBuf, failure, main_replay, name_of, open, size};

/// Several snapshots as the ranks of one run.
pub(super) fn show_ranks(files: &[PathBuf], top: usize, json: bool) -> Result<(), Failure> {
    let mut replays = Vec::with_capacity(files.len());
    for f in files {
        let snap = open(f)?;
        replays.push((name_of(f), main_replay(&snap, 0)?));
    }
    let named: Vec<(String, &replay::Replay)> = replays.iter().map(|(n, r)| (n.clone(), r)).collect();
    let ranks = compare::ranks(&named).ok_or_else(|| failure("no snapshot to compare"))?;
    if json {
        println!("{}", serde_json::json!(ranks));
        return Ok(());
    }
    println!("{} ranks of one run (PyTorch snapshots, measured by PyTorch):", ranks.ranks.len());
    for r in &ranks.ranks {
        let mark = if r.rank == ranks.worst { "  ← worst" } else { "" };
        println!(
            "  rank {:>3}: peak allocated {:>12}, peak reserved {:>12}  {}{mark}",
            r.rank,
            size(r.side.peak_allocated_bytes),
            size(r.side.peak_reserved_bytes),
            r.side.file
        );
    }
    println!(
        "  the worst rank ({}) peaks {} above the best ({}), {:.1} % above the mean",
        ranks.worst,
        size(ranks.spread_bytes),
        ranks.best,
        ranks.worst_over_mean_percent
    );
    println!("  where the worst rank's extra memory went (rank {} → rank {}):", ranks.best, ranks.worst);
    print_diff_rows(&ranks.extra, top);
    Ok(())
}

/// `snapshot diff A B`.
pub(super) fn diff(a: &std::path::Path, b: &std::path::Path, top: usize, json: bool) -> Result<(), Failure> {
    let (sa, sb) = (open(a)?, open(b)?);
    let (ra, rb) = (main_replay(&sa, 0)?, main_replay(&sb, 0)?);
    let d = compare::diff(&name_of(a), &ra, &name_of(b), &rb);
    if json {
        println!("{}", serde_json::json!(d));
        return Ok(());
    }
    println!(
        "A: {}: peak allocated {}, peak reserved {}",
        d.a.file,
        size(d.a.peak_allocated_bytes),
        size(d.a.peak_reserved_bytes)
    );
    println!(
        "B: {}: peak allocated {}, peak reserved {}",
        d.b.file,
        size(d.b.peak_allocated_bytes),
        size(d.b.peak_reserved_bytes)
    );
    let grew = d.grew();
    let word = if grew >= 0 { "higher" } else { "lower" };
    println!("B's peak is {} {word} than A's; at the peaks:", size(grew.abs()));
    print_diff_rows(&d, top);
    Ok(())
}

pub(super) fn signed(v: i64) -> String {
    if v >= 0 { format!("+{}", size(v)) } else { format!("-{}", size(v.abs())) }
}

/// A diff's kinds, then its places, the largest change first.
fn print_diff_rows(d: &Diff, top: usize) {
    println!("    by kind:");
    for k in d.by_kind.iter().filter(|k| k.a_bytes != 0 || k.b_bytes != 0) {
        println!(
            "      {:<16} {:>12} → {:>12}  ({})",
            k.kind.name(),
            size(k.a_bytes),
            size(k.b_bytes),
            signed(k.b_bytes.saturating_sub(k.a_bytes))
        );
    }
    println!("    by place (what changed, the largest change first):");
    let changed: Vec<_> = d.by_place.iter().filter(|p| p.grew() != 0).collect();
    for p in changed.iter().take(top) {
        println!("      {:>12} → {:>12}  ({:>12})  {}", size(p.a_bytes), size(p.b_bytes), signed(p.grew()), p.place);
    }
    if changed.len() > top {
        println!("      … {} more places changed", changed.len() - top);
    }
    let same = d.by_place.len() - changed.len();
    if same > 0 {
        println!("      {same} places held the same bytes at both peaks");
    }
}
