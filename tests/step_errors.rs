//! Why a step did not run, typed and worded by the catalogs (issue 57 §4): the GPU's errors (the
//! driver's own words quoted), the backend's, the CPU worker's loss and the Snapshot tab's. Each
//! reads in English as the CLI and the logs print it, in Chinese with the same numbers and
//! quoted words, every message of theirs is reached, and the app shows them in the reader's
//! language.

#[path = "support/xdg.rs"]
mod support_xdg;

use oomlab::backend::gpu::GpuError as G;
use oomlab::backend::{BackendError as B, CpuOnly, WorkerLost as W};
use oomlab::i18n::{Catalog, Lang};
use oomlab::memory::snapshot::SnapshotError as S;
use oomlab::model::StepShape;

/// One of every kind, with the English it reads as (the GPU's as they read before they were
/// worded by the catalogs).
fn examples() -> Vec<(B, &'static str)> {
    let gpu = |e: G| B::Gpu(e);
    vec![
        (
            gpu(G::NoAdapter("no Vulkan ICD".into())),
            "no GPU adapter was found (no Vulkan ICD); use --backend cpu, or install a Vulkan driver (e.g. Mesa's \
             lavapipe: apt install mesa-vulkan-drivers)",
        ),
        (
            gpu(G::RequestDevice("Limit 'max_buffer_size' value 9 is better".into())),
            "could not open the GPU device: Limit 'max_buffer_size' value 9 is better",
        ),
        (gpu(G::NoCompute("Gl".into())), "the Gl adapter has no compute shaders"),
        (
            gpu(G::ExceedsLimit { what: "an allocator segment".into(), needed: 3 << 30, limit: 2 << 30, bytes: true }),
            "an allocator segment needs 3.00 GiB, but this GPU adapter allows at most 2.00 GiB; choose a smaller \
             configuration",
        ),
        (
            gpu(G::ExceedsLimit { what: "workgroups".into(), needed: 70000, limit: 65535, bytes: false }),
            "workgroups needs 70000, but this GPU adapter allows at most 65535; choose a smaller configuration",
        ),
        (gpu(G::OutOfMemory("Not enough memory left".into())), "the GPU ran out of memory: Not enough memory left"),
        (
            gpu(G::Validation("Buffer binding 0 range 4096 exceeds".into())),
            "the GPU rejected the work (validation error): Buffer binding 0 range 4096 exceeds",
        ),
        (
            gpu(G::Readback("Buffer is destroyed".into())),
            "reading results back from the GPU failed: Buffer is destroyed",
        ),
        (gpu(G::DeviceLost("VK_ERROR_DEVICE_LOST".into())), "the GPU device was lost: VK_ERROR_DEVICE_LOST"),
        (
            B::ShapeMismatch { plan: StepShape { batch: 4, seq: 64 }, batch: StepShape { batch: 2, seq: 64 } },
            "the batch is 2×64 but the plan was built for 4×64",
        ),
        (
            B::Internal("index out of bounds: the len is 3 but the index is 7".into()),
            "an internal error in oomlab stopped the step (index out of bounds: the len is 3 but the index is 7); \
             please report it",
        ),
        (
            B::NotProduced { op: "attn_bwd".into(), tensor: "h.0.attn.probs".into() },
            "op attn_bwd needs tensor 'h.0.attn.probs', which this step has not produced (run the forward pass first)",
        ),
        (B::NoGpu, "the GPU backend was asked for, but no GPU is open"),
        (B::WorkerLost(W::Stopped), "the CPU worker stopped: it stopped"),
        (B::WorkerLost(W::Silent(60)), "the CPU worker stopped: it did not start within 60 s"),
        (
            B::WorkerLost(W::Browser("SyntaxError: Unexpected token '<'".into())),
            "the CPU worker stopped: SyntaxError: Unexpected token '<'",
        ),
        (
            B::WorkerLost(W::Garbled("expected value at line 1 column 1".into())),
            "the CPU worker stopped: a message could not be written or read: expected value at line 1 column 1",
        ),
        (B::WorkerHasNoExecutor, "the CPU worker has no executor for these settings"),
        (
            B::NotOnGpu(CpuOnly::UnevenBatchesOverGpus),
            "a batch of another length over several simulated GPUs runs on the CPU backend only, so far: choose the \
             CPU backend",
        ),
        (
            B::NotOnGpu(CpuOnly::MixedPrecisionOverGpus),
            "mixed precision over several simulated GPUs runs on the CPU backend only, so far: choose the CPU backend",
        ),
        (B::Cancelled, "building was cancelled"),
    ]
}

fn snapshot_examples() -> Vec<(S, &'static str)> {
    vec![
        (S::Foreign("the file is empty".into()), "it is not a PyTorch memory snapshot (the file is empty)"),
        (S::Corrupt("too many events".into()), "the snapshot is damaged (too many events)"),
        (S::Write("unsupported type".into()), "the snapshot could not be written (unsupported type)"),
        (
            S::Unreadable("Permission denied (os error 13)".into()),
            "the file cannot be read (Permission denied (os error 13))",
        ),
        (S::EmptyFolder, "the folder has no .pickle, .pkl or .json file"),
        // What the browser's worker reports crosses as its catalog message, and reads as itself.
        (S::Reported(S::Corrupt("too many events".into()).worded()), "the snapshot is damaged (too many events)"),
    ]
}

fn has_chinese(s: &str) -> bool {
    s.chars().any(|c| ('\u{4e00}'..='\u{9fff}').contains(&c))
}

/// The pieces of an English text that must survive translation: its numbers, and what it quotes
/// (the driver's words, names, sizes).
fn quoted_pieces(e: &B) -> Vec<String> {
    let detail = match e {
        B::Gpu(G::NoAdapter(d) | G::RequestDevice(d) | G::NoCompute(d))
        | B::Gpu(G::OutOfMemory(d) | G::Validation(d) | G::Readback(d) | G::DeviceLost(d)) => vec![d.clone()],
        B::Gpu(G::ExceedsLimit { what, .. }) => vec![what.clone()],
        B::Internal(d) | B::WorkerLost(W::Browser(d) | W::Garbled(d)) => vec![d.clone()],
        B::NotProduced { op, tensor } => vec![op.clone(), tensor.clone()],
        _ => vec![],
    };
    let digits = e
        .to_string()
        .split(|c: char| !c.is_ascii_digit())
        .filter(|w| !w.is_empty())
        .map(str::to_owned)
        .collect::<Vec<_>>();
    detail.into_iter().chain(digits).collect()
}

#[test]
fn every_step_error_reads_in_english_as_the_cli_prints_it() {
    for (e, english) in examples() {
        assert_eq!(e.to_string(), english, "{e:?}");
    }
    for (e, english) in snapshot_examples() {
        assert_eq!(e.text(&Catalog::new(Lang::En)), english, "{e:?}");
    }
}

#[test]
fn every_step_error_is_worded_in_chinese_with_its_numbers_and_the_drivers_words() {
    let zh = Catalog::new(Lang::Zh);
    for (e, _) in examples() {
        let text = e.text(&zh);
        // A browser's own words are the whole of what it says (nothing of ours to translate).
        if !matches!(e, B::WorkerLost(W::Browser(_))) {
            assert!(has_chinese(&text), "{e:?}: {text}");
        }
        for piece in quoted_pieces(&e) {
            assert!(text.contains(&piece), "{e:?}: {piece:?} is missing from {text:?}");
        }
    }
    for (e, _) in snapshot_examples() {
        let text = e.text(&zh);
        assert!(has_chinese(&text), "{e:?}: {text}");
        if let S::Foreign(d) | S::Corrupt(d) | S::Write(d) | S::Unreadable(d) = &e {
            assert!(text.contains(d.as_str()), "{e:?}: {text}");
        }
        // As the worker sends it (JSON), and back: the same words in the page's language.
        let json = serde_json::to_string(&e.worded()).expect("serialises");
        let crossed = S::Reported(serde_json::from_str(&json).expect("reads back"));
        assert_eq!(crossed.text(&zh), text, "{json}");
    }
}

/// Every message of these kinds is reached by one of the examples: its words before its first
/// argument appear in some example's English.
#[test]
fn every_step_error_message_is_reached_by_a_kind() {
    let en = Catalog::new(Lang::En);
    let texts: Vec<String> = examples()
        .iter()
        .map(|(e, _)| e.to_string())
        .chain(snapshot_examples().iter().map(|(e, _)| e.text(&en)))
        .collect();
    let prefixes = ["gpu-err-", "backend-err-", "worker-lost-", "snap-error-"];
    let mut checked = 0;
    for line in include_str!("../i18n/en.ftl").lines() {
        let Some((id, pattern)) = line.split_once(" = ") else { continue };
        if !prefixes.iter().any(|p| id.starts_with(p)) {
            continue;
        }
        let fixed: Vec<&str> = pattern.split(['{', '}']).step_by(2).map(str::trim).filter(|w| w.len() > 2).collect();
        assert!(texts.iter().any(|t| fixed.iter().all(|w| t.contains(w))), "{id} ({pattern}) is reached by no example");
        checked += 1;
    }
    assert_eq!(checked, 25, "the messages of these kinds");
}

/// The app shows a failed GPU step in the reader's language, the driver's words quoted, and
/// re-words it when the language changes; the Snapshot tab's error too.
#[test]
fn the_app_shows_a_failed_gpu_step_and_a_bad_snapshot_in_the_readers_language() {
    use egui_kittest::Harness;
    use egui_kittest::kittest::Queryable;
    use oomlab::app::OomlabApp;
    use oomlab::app::settings::Settings;
    support_xdg::xdg();
    let mut h = Harness::builder()
        .with_size([1280.0, 900.0])
        .build_ui_state(|ui, app: &mut OomlabApp| app.show(ui), OomlabApp::headless(Settings::default()));
    h.run_steps(3);
    h.state_mut().run.fail(B::Gpu(G::DeviceLost("VK_ERROR_DEVICE_LOST".into())));
    h.run_steps(3);
    // The main area's label, and the screen reader's announcement of it.
    assert!(
        h.get_all_by_label_contains("The GPU step failed: the GPU device was lost: VK_ERROR_DEVICE_LOST").count() >= 1
    );
    h.state_mut().set_lang(Lang::Zh);
    h.run_steps(3);
    assert!(h.get_all_by_label_contains("GPU 上的这一步失败了：GPU 设备丢失：VK_ERROR_DEVICE_LOST").count() >= 1);
    h.snapshot("gpu_error_zh");

    h.state_mut().open_snapshot_bytes("notes.txt", b"not a snapshot");
    h.state_mut().shown.tab = oomlab::app::Tab::Snapshot;
    h.run_steps(3);
    h.get_by_label_contains("无法打开 notes.txt：这不是 PyTorch 显存快照（");
    h.state_mut().set_lang(Lang::En);
    h.run_steps(3);
    h.get_by_label_contains("Could not open notes.txt: it is not a PyTorch memory snapshot (");
}

/// A catalog message crosses the worker as one string: every argument back as it went, a
/// separator inside a value replaced, and a malformed string read as what it holds.
#[test]
fn a_worded_message_crosses_as_one_string() {
    use oomlab::model::{Arg, Worded};
    let w = Worded {
        key: "cfg-err-zero".into(),
        args: vec![
            ("name".into(), Arg::Key("cfg-dim-batch".into())),
            ("value".into(), Arg::Text("=0 @x".into())),
            ("empty".into(), Arg::Text(String::new())),
        ],
    };
    let json = serde_json::to_string(&w).expect("serialises");
    assert!(json.starts_with('"'), "one string: {json}");
    assert_eq!(serde_json::from_str::<Worded>(&json).expect("reads"), w);
    let odd = Worded::of("k", &[("v", "a\u{1f}b".into())]);
    assert_eq!(Worded::decode(&odd.encode()), Worded::of("k", &[("v", "a\u{fffd}b".into())]));
    assert_eq!(Worded::decode(""), Worded { key: String::new(), args: vec![] });
    assert_eq!(Worded::decode("k\u{1f}name"), Worded::of("k", &[("name", String::new())]));
    assert!(serde_json::from_str::<Worded>("{\"key\": 1}").is_err(), "not a string: an error, not a panic");
}
