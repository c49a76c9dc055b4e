//! The native app in a real window: started under `xvfb-run` on lavapipe, it trains two steps on
//! eframe's own wgpu device (scripted by `OOMLAB_TRAIN_STEPS`), and a screenshot is taken with
//! ImageMagick's `import` (saved as target/tmp/desktop-screenshot.png). Needs `xvfb-run` and
//! `import` (scripts/test.sh installs them).

use std::process::Command;

#[test]
fn the_native_app_opens_trains_and_draws() {
    let out = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("desktop-screenshot.png");
    let _ = std::fs::remove_file(&out);
    let xdg = std::env::temp_dir().join(format!("oomlab-desktop-xdg-{}", std::process::id()));
    std::fs::create_dir_all(&xdg).expect("a runtime dir");
    let log = std::env::temp_dir().join(format!("oomlab-desktop-{}.log", std::process::id()));
    let bin = env!("CARGO_BIN_EXE_oomlab");
    // Start the app, wait for its second step (at most 120 s), screenshot, stop it.
    let script = format!(
        "{bin} > {log} 2>&1 & pid=$!; \
         for i in $(seq 1 240); do grep -q 'oomlab: step 2 ' {log} && break; kill -0 $pid 2>/dev/null || break; sleep 0.5; done; \
         sleep 1; import -window root {out}; kill $pid; wait $pid; true",
        log = log.display(),
        out = out.display()
    );
    let status = Command::new("xvfb-run")
        .args(["-a", "-s", "-screen 0 1280x800x24", "sh", "-c", &script])
        .env("XDG_RUNTIME_DIR", &xdg)
        .env("OOMLAB_TRAIN_STEPS", "2")
        .env("RUST_LOG", "warn,oomlab=info")
        .env("OOMLAB_EXPORT_DIR", std::env::temp_dir())
        // A fresh place for eframe's persisted settings: the defaults, not a previous run's.
        .env("XDG_DATA_HOME", &xdg)
        .env("HOME", &xdg)
        .status()
        .expect("xvfb-run (install xvfb: scripts/test.sh does)");
    assert!(status.success(), "xvfb-run failed");
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(text.contains("oomlab: step 1 on gpu"), "the app did not train on the GPU:\n{text}");
    assert!(text.contains("oomlab: step 2 "), "no second step:\n{text}");
    assert!(!text.contains("panicked"), "{text}");
    // The screenshot shows a drawn window, not a blank screen.
    let file = std::fs::File::open(&out).expect("a screenshot (install imagemagick: scripts/test.sh does)");
    let mut reader = png::Decoder::new(std::io::BufReader::new(file)).read_info().expect("a PNG");
    let mut buf = vec![0; reader.output_buffer_size().expect("size")];
    let info = reader.next_frame(&mut buf).expect("pixels");
    assert_eq!((info.width, info.height), (1280, 800));
    let pixels = &buf[..info.buffer_size()];
    let distinct: std::collections::HashSet<&[u8]> = pixels.chunks(3).take(1280 * 800).collect();
    assert!(distinct.len() > 20, "the screenshot is nearly uniform ({} colours)", distinct.len());
    println!("screenshot: {}", out.display());
}
