//! Two snapshots side by side (`oomlab snapshot diff A B`), and the ranks of one run
//! (`oomlab snapshot show rank0.pickle rank1.pickle …`): their peaks, and the difference at the
//! peak by place and by kind — what grew, and from where. PyTorch's own `memory_viz compare`
//! compares segments only.
//!
//! At a peak, what is alive adds up to the peak exactly (every allocation belongs to one place
//! and one kind), so each side's column of [`Diff::by_place`] and [`Diff::by_kind`] sums to its
//! peak, and the differences to the difference of the peaks.
//!
//! Places are matched across files by how they read (`model.py:41 forward (aten::addmm)`: the
//! file's name, not its path), so two machines' runs of the same code line up.

use std::collections::BTreeMap;

use serde::Serialize;

use super::explain::{self, Guess, Holding};
use super::place::Place;
use super::replay::Replay;

/// One file's figures.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Side {
    pub file: String,
    pub device: i64,
    pub peak_allocated_bytes: i64,
    pub peak_reserved_bytes: i64,
    /// The event after which allocated memory peaked.
    pub peak_event: Option<usize>,
}

impl Side {
    pub fn of(file: &str, r: &Replay) -> Side {
        Side {
            file: file.to_string(),
            device: r.device,
            peak_allocated_bytes: r.peak_allocated,
            peak_reserved_bytes: r.peak_reserved,
            peak_event: r.peak_index,
        }
    }
}

/// A place's bytes at each peak.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct PlaceRow {
    /// How it reads in English.
    pub place: String,
    pub a_bytes: i64,
    pub b_bytes: i64,
    /// The place itself (for words in another language).
    #[serde(skip)]
    pub of: Place,
}

impl PlaceRow {
    pub fn grew(&self) -> i64 {
        self.b_bytes.saturating_sub(self.a_bytes)
    }
}

/// A kind's bytes at each peak.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct KindRow {
    pub kind: Guess,
    pub a_bytes: i64,
    pub b_bytes: i64,
}

/// Two peaks and what differs between them.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Diff {
    pub a: Side,
    pub b: Side,
    /// Every place alive at either peak, the largest change first.
    pub by_place: Vec<PlaceRow>,
    /// Every kind, in [`Guess::ALL`]'s order.
    pub by_kind: Vec<KindRow>,
}

impl Diff {
    /// How much higher B's peak is than A's (negative: lower).
    pub fn grew(&self) -> i64 {
        self.b.peak_allocated_bytes.saturating_sub(self.a.peak_allocated_bytes)
    }
}

/// What is alive at a replay's peak, every place.
pub fn at_peak(r: &Replay) -> Holding {
    explain::holding(r, r.peak_index, usize::MAX)
}

/// A and B at their peaks.
pub fn diff(a_file: &str, a: &Replay, b_file: &str, b: &Replay) -> Diff {
    diff_holdings(Side::of(a_file, a), &at_peak(a), Side::of(b_file, b), &at_peak(b))
}

/// [`diff`] from holdings already computed.
pub fn diff_holdings(a: Side, ha: &Holding, b: Side, hb: &Holding) -> Diff {
    let mut places: BTreeMap<String, (i64, i64, Place)> = BTreeMap::new();
    for g in &ha.groups {
        let e = places.entry(g.site.clone()).or_insert_with(|| (0, 0, g.place.clone()));
        e.0 = e.0.saturating_add(g.bytes);
    }
    for g in &hb.groups {
        let e = places.entry(g.site.clone()).or_insert_with(|| (0, 0, g.place.clone()));
        e.1 = e.1.saturating_add(g.bytes);
    }
    let mut by_place: Vec<PlaceRow> =
        places.into_iter().map(|(place, (a_bytes, b_bytes, of))| PlaceRow { place, a_bytes, b_bytes, of }).collect();
    by_place.sort_by(|x, y| {
        y.grew()
            .unsigned_abs()
            .cmp(&x.grew().unsigned_abs())
            .then(y.b_bytes.cmp(&x.b_bytes))
            .then(x.place.cmp(&y.place))
    });
    let kind = |h: &Holding, k: Guess| h.by_guess.iter().find(|(g, _)| *g == k).map_or(0, |x| x.1);
    let by_kind = Guess::ALL.iter().map(|&k| KindRow { kind: k, a_bytes: kind(ha, k), b_bytes: kind(hb, k) }).collect();
    Diff { a, b, by_place, by_kind }
}

/// One rank's figures.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Rank {
    /// The rank the file's name says (`rank3`, `_3.pickle`), else its place in the list.
    pub rank: u32,
    #[serde(flatten)]
    pub side: Side,
}

/// The ranks of one run side by side.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Ranks {
    /// By rank.
    pub ranks: Vec<Rank>,
    /// The rank with the highest peak allocated, and the one with the lowest.
    pub worst: u32,
    pub best: u32,
    /// The worst peak less the best.
    pub spread_bytes: i64,
    /// The worst peak over the mean of all, in percent above it.
    pub worst_over_mean_percent: f64,
    /// Where the worst rank's extra memory went: the best rank (a) against the worst (b).
    pub extra: Diff,
}

/// The rank a file's name says: the number after `rank` (`rank3`, `rank_3`, `rank-3`), else the
/// last number in its stem (`snapshot_3.pickle`).
pub fn rank_of(name: &str) -> Option<u32> {
    let stem = name.rsplit(['/', '\\']).next().unwrap_or(name);
    let stem = stem.split('.').next().unwrap_or(stem).to_ascii_lowercase();
    let number_after = |s: &str| -> Option<u32> {
        let digits: String = s.trim_start_matches(['_', '-']).chars().take_while(char::is_ascii_digit).collect();
        digits.parse().ok()
    };
    if let Some(i) = stem.rfind("rank")
        && let Some(r) = number_after(&stem[i + 4..])
    {
        return Some(r);
    }
    let digits: Vec<&str> = stem.split(|c: char| !c.is_ascii_digit()).filter(|d| !d.is_empty()).collect();
    digits.last().and_then(|d| d.parse().ok())
}

/// The ranks of one run, each file's replay with its name. At least one.
pub fn ranks(files: &[(String, &Replay)]) -> Option<Ranks> {
    let mut ranks: Vec<(u32, &str, &Replay)> = Vec::with_capacity(files.len());
    let named: Vec<Option<u32>> = files.iter().map(|(f, _)| rank_of(f)).collect();
    // Numbers from the names only if they tell the files apart (a handful of files: no sort).
    let distinct = named.iter().enumerate().all(|(i, n)| !named[..i].contains(n));
    let by_name = named.iter().all(Option::is_some) && distinct;
    for (i, (file, r)) in files.iter().enumerate() {
        let rank = if by_name { named[i].unwrap_or(0) } else { u32::try_from(i).unwrap_or(u32::MAX) };
        ranks.push((rank, file.as_str(), r));
    }
    // By rank (insertion: a run has a handful of files, and the web module one sort less).
    for i in 1..ranks.len() {
        let mut j = i;
        while j > 0 && ranks[j - 1].0 > ranks[j].0 {
            ranks.swap(j - 1, j);
            j -= 1;
        }
    }
    let worst = ranks.iter().max_by_key(|(rank, _, r)| (r.peak_allocated, std::cmp::Reverse(*rank)))?;
    let best = ranks.iter().min_by_key(|(rank, _, r)| (r.peak_allocated, *rank))?;
    let mean = ranks.iter().map(|(_, _, r)| r.peak_allocated as f64).sum::<f64>() / ranks.len() as f64;
    let extra = diff(best.1, best.2, worst.1, worst.2);
    Some(Ranks {
        worst: worst.0,
        best: best.0,
        spread_bytes: worst.2.peak_allocated.saturating_sub(best.2.peak_allocated),
        worst_over_mean_percent: if mean > 0.0 { 100.0 * (worst.2.peak_allocated as f64 / mean - 1.0) } else { 0.0 },
        ranks: ranks.iter().map(|&(rank, file, r)| Rank { rank, side: Side::of(file, r) }).collect(),
        extra,
    })
}

#[cfg(test)]
mod tests {
    use super::rank_of;

    #[test]
    fn ranks_from_file_names() {
        assert_eq!(rank_of("memory_snapshot_rank3.pickle"), Some(3));
        assert_eq!(rank_of("snap_rank_12.pickle"), Some(12));
        assert_eq!(rank_of("snapshot-7.pickle"), Some(7));
        assert_eq!(rank_of("gpu_step.pickle"), None);
        assert_eq!(rank_of("RANK-2_mem.pkl"), Some(2));
    }
}
