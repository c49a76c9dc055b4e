//! Real snapshots at real size: a generated dump of over 100,000 trace events, written as
//! Python's pickler writes (shared and fresh frame objects, batches, unknown actions and fields a
//! newer PyTorch writes), read by the streaming reader, and its summary checked against the
//! generator's own count: the peak and where, what was alive there by category and by place, the
//! OOM — and the same from its JSON, read by the other decoder.

#[path = "support/pickle_gen.rs"]
mod pickle_gen;

use oomlab::memory::snapshot::explain::{self, Advice, Guess};
use oomlab::memory::snapshot::{read, replay};
use pickle_gen::Kind;

fn guess_of(k: Kind) -> Guess {
    match k {
        Kind::Parameters => Guess::Parameters,
        Kind::Optimizer => Guess::OptimizerState,
        Kind::Gradients => Guess::Gradients,
        Kind::Activations => Guess::Activations,
        Kind::Other => Guess::Other,
    }
}

#[test]
fn a_large_snapshot_matches_its_own_count() {
    let g = pickle_gen::generate(120_000, 7);
    assert!(g.events > 100_000, "{} events", g.events);
    let mut heard = Vec::new();
    let d = read::from_reader(&g.bytes[..], None, &mut |n| heard.push(n)).expect("reads");
    assert!(heard.len() >= 2 && heard.windows(2).all(|w| w[0] < w[1]), "progress as it reads: {heard:?}");
    assert_eq!(heard.last().copied(), Some(g.bytes.len() as u64), "the whole file read");
    assert_eq!(d.events(), g.events);
    // Stacks interned on a second thread (a file of unknown size) or in line: the same dump, ids
    // and all.
    let inline = read::from_reader_with(&g.bytes[..], None, &mut |_| {}, read::Interning::InLine).expect("in line");
    assert_eq!(inline, d);
    // Thousands of stacks, a few dozen frames: each stored once.
    assert!(d.stacks.frames.len() <= 100, "{} frames interned", d.stacks.frames.len());
    assert!(d.stacks.len() <= 300, "{} stacks interned", d.stacks.len());

    let r = replay::replay(&d, 0, 10);
    assert_eq!(r.events, g.events);
    assert_eq!(r.peak_allocated, g.peak);
    assert_eq!(r.peak_index, Some(g.peak_index));
    assert_eq!(r.ooms.len(), g.ooms);
    assert_eq!((r.ooms[0].size, r.ooms[0].device_free), (1 << 30, 1 << 20));
    assert!(!r.truncated(), "the trace starts from nothing");

    // What held the memory at the peak: by place, as the generator counted; by category as the
    // stacks say (the generator's phases are interleaved at random, so the kinds read from
    // each allocation's life are not what it counted: its stacks' categories are).
    let h = explain::holding(&r, r.peak_index, usize::MAX);
    assert_eq!(h.bytes, g.peak);
    let sites_of = oomlab::memory::snapshot::place::Sites::new(&d.stacks);
    let mut by_stack: std::collections::BTreeMap<Guess, i64> = std::collections::BTreeMap::new();
    for l in r.lifetimes.iter().filter(|l| l.alive_after(r.peak_index)) {
        *by_stack.entry(sites_of.of(l.stack).guess).or_default() += l.size;
    }
    for (kind, bytes) in &g.at_peak {
        assert_eq!(by_stack.get(&guess_of(*kind)).copied().unwrap_or(0), *bytes, "{kind:?} at the peak");
    }
    let mut sites = std::collections::BTreeMap::new();
    for grp in &h.groups {
        assert!(!grp.known, "a PyTorch snapshot's categories are not oomlab's own");
        *sites.entry(grp.site.clone()).or_insert(0i64) += grp.bytes;
    }
    assert_eq!(sites, g.sites, "bytes by user frame");
    let summed: i64 = h.by_guess.iter().map(|(_, b)| b).sum();
    assert_eq!(summed, g.peak, "every byte has one kind");

    // The workflow: the peak against the device the OOM implies, what grew most, its fixes.
    let advice = explain::diagnose(&r, &h);
    let start = explain::holding(&r, None, 0);
    let grew = |k: Guess| {
        h.by_guess.iter().find(|x| x.0 == k).map_or(0, |x| x.1)
            - start.by_guess.iter().find(|x| x.0 == k).map_or(0, |x| x.1)
    };
    let most = Guess::ALL.into_iter().max_by_key(|&k| grew(k)).expect("kinds");
    assert!(advice.contains(&Advice::Grew { guess: most, bytes: grew(most) }), "{advice:?}");
    assert!(advice.contains(&Advice::Fix { guess: most }));
    assert!(advice.iter().any(|a| matches!(a, Advice::Capacity { peak, .. } if *peak == g.peak)));

    // Scrubbing: at any event, what is alive is what the replay's totals say.
    for at in [0, g.events / 3, g.events / 2, g.events - 2] {
        let alive = explain::holding(&r, Some(at), 0);
        assert_eq!(alive.bytes, r.timeline[at].allocated, "after event {at}");
    }

    // The same snapshot as JSON, read by serde: the same summary.
    let json = serde_json::to_vec(&d.to_wire()).expect("json");
    let j = read::from_bytes(&json).expect("JSON reads");
    let rj = replay::replay(&j, 0, 10);
    assert_eq!((rj.peak_allocated, rj.peak_index, rj.events), (r.peak_allocated, r.peak_index, r.events));
}

/// The guesses, frame by frame: which stacks mean which category.
#[test]
fn stacks_are_mapped_to_categories() {
    use oomlab::memory::snapshot::dump::FrameRef;
    let f = |filename: &'static str, name: &'static str| FrameRef { filename, line: 1, name };
    let torch = "/opt/conda/lib/python3.11/site-packages/torch";
    let cases: Vec<(Vec<FrameRef>, Guess, bool)> = vec![
        (vec![f("oomlab/optimizer_state", "adam_m")], Guess::OptimizerState, true),
        (
            vec![f(format!("{torch}/optim/adamw.py").leak(), "_init_group"), f("/me/train.py", "main")],
            Guess::OptimizerState,
            false,
        ),
        (vec![f(format!("{torch}/autograd/graph.py").leak(), "_engine_run_backward")], Guess::Gradients, false),
        (
            vec![f(format!("{torch}/nn/modules/module.py").leak(), "_apply"), f("/me/train.py", "main")],
            Guess::Parameters,
            false,
        ),
        (
            vec![f(format!("{torch}/nn/functional.py").leak(), "gelu"), f("/me/model.py", "forward")],
            Guess::Activations,
            false,
        ),
        (vec![f("/me/train.py", "main")], Guess::Other, false),
        (vec![], Guess::Other, false),
    ];
    for (frames, want, known) in cases {
        let (_, signals) = oomlab::memory::snapshot::place::place_of(frames.iter().copied());
        assert_eq!(explain::guess(frames.iter().copied(), signals), (want, known), "{frames:?}");
    }
}

/// The worker's hand-over (the browser reads a large snapshot in a Web Worker and sends the page
/// the dump as one buffer): the dump comes back equal, and a cut or foreign buffer is an error.
#[test]
fn the_workers_buffer_carries_the_dump() {
    use oomlab::memory::snapshot::transfer;
    let g = pickle_gen::generate(5_000, 11);
    let d = read::from_bytes(&g.bytes).expect("reads");
    let bytes = transfer::to_bytes(&d);
    assert_eq!(transfer::from_bytes(&bytes).expect("back"), d);
    for cut in [0, 7, 8, 100, bytes.len() / 2, bytes.len() - 1] {
        assert!(transfer::from_bytes(&bytes[..cut]).is_err(), "cut at {cut}");
    }
    let mut foreign = bytes.clone();
    foreign[0] ^= 1;
    assert!(transfer::from_bytes(&foreign).is_err());
    // A length field claiming more than the buffer holds is refused before anything is made.
    let mut huge = bytes[..8].to_vec();
    huge.extend(u64::MAX.to_le_bytes());
    assert!(transfer::from_bytes(&huge).is_err());
    // The browser's limit: a file larger than a tab can read is refused with a message.
    use oomlab::app::snapshot_view::{BROWSER_LIMIT, fits_in_browser};
    assert!(fits_in_browser(200 << 20) && fits_in_browser(BROWSER_LIMIT) && !fits_in_browser(BROWSER_LIMIT + 1));
    // Files over 1 GiB open too (1.2 GB measured in headless Chromium: web/snapshot-test.mjs).
    assert!(fits_in_browser(1_195_279_189), "a 1.2 GB snapshot");
}

/// `oomlab snapshot show` on a generated dump: what held the memory at the peak and at the OOM,
/// the workflow's fix in the catalog's words, and the same numbers as JSON.
#[test]
fn the_cli_says_what_filled_the_gpu() {
    use oomlab::i18n::{Catalog, Lang};
    let g = pickle_gen::generate(6_000, 3);
    assert!(g.ooms > 0, "the generator ends in an OOM");
    let file = std::env::temp_dir().join(format!("oomlab-show-{}.pickle", std::process::id()));
    std::fs::write(&file, &g.bytes).expect("written");
    let run = |json: bool| {
        let mut c = std::process::Command::new(env!("CARGO_BIN_EXE_oomlab"));
        c.args(["snapshot", "show"]).arg(&file);
        if json {
            c.arg("--json");
        }
        let out = c.output().expect("oomlab runs");
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).expect("UTF-8")
    };
    let (text, json) = (run(false), run(true));
    let _ = std::fs::remove_file(&file);

    // The library's own answer, for the CLI to print.
    let d = read::from_bytes(&g.bytes).expect("reads");
    let r = replay::replay(&d, 0, 10);
    let at_oom = explain::holding(&r, r.ooms[0].index.checked_sub(1), 10);
    let fix = explain::diagnose(&r, &at_oom)
        .into_iter()
        .find_map(|a| match a {
            Advice::Fix { guess } => Some(guess),
            _ => None,
        })
        .expect("a fix");
    let words = Catalog::new(Lang::En).text(&format!("fix-{}", fix.key()));
    assert!(text.contains(&words), "the fix as the app words it: {words}\n{text}");
    assert!(text.contains("what held the memory at the peak"), "{text}");
    assert!(text.contains("what held the memory when the OOM struck"), "{text}");
    assert!(text.contains("a guess from the stack"), "a kind only the stack gives is said to be a guess");

    let doc: serde_json::Value = serde_json::from_str(&json).expect("JSON");
    let dev = &doc["devices"][0];
    assert_eq!(dev["peak_allocated_bytes"], g.peak);
    assert_eq!(dev["at_peak"]["bytes"], g.peak);
    assert_eq!(dev["at_oom"]["bytes"], at_oom.bytes);
    assert_eq!(dev["events"], g.events);
}
