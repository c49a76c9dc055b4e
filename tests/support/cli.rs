//! Runs the `oomlab` binary as a script would: English whatever the machine's locale (`claims`
//! follows LANG), a private XDG_RUNTIME_DIR for the GPU, and no peer configured from the
//! environment (`bench` reads `$OOMLAB_TORCH_PYTHON` and `$OOMLAB_BURN_BENCH`).

#![allow(dead_code)] // each test binary that includes this uses part of it

use std::process::{Command, Output};

pub fn oomlab(args: &[&str]) -> Output {
    oomlab_in("C.UTF-8", args)
}

/// `oomlab` as run on a machine whose locale is `lang` (`zh_CN.UTF-8`: the text that follows
/// the system's language is Chinese).
pub fn oomlab_in(lang: &str, args: &[&str]) -> Output {
    let xdg = std::env::temp_dir().join("oomlab-cli-xdg");
    let _ = std::fs::create_dir_all(&xdg);
    Command::new(env!("CARGO_BIN_EXE_oomlab"))
        .args(args)
        .env("XDG_RUNTIME_DIR", xdg)
        .env("LANG", lang)
        .env_remove("LC_ALL")
        .env_remove("LC_MESSAGES")
        .env_remove("OOMLAB_TORCH_PYTHON")
        .env_remove("OOMLAB_BURN_BENCH")
        .output()
        .expect("run oomlab")
}
