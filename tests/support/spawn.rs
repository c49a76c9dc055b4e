//! `oomlab serve` as a child process, for the tests that meet the server as an attacker would:
//! the real binary (or OOMLAB_SERVE_BIN, e.g. an older build), on a free loopback port, with an
//! open-file limit of the test's choosing.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

/// A running `oomlab serve`: its address, what it printed, and the teacher key it printed.
pub struct Spawned {
    pub child: Child,
    pub addr: SocketAddr,
    pub key: String,
    pub printed: String,
}

impl Drop for Spawned {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn binary() -> PathBuf {
    std::env::var_os("OOMLAB_SERVE_BIN").map_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_oomlab")), PathBuf::from)
}

/// Starts `oomlab serve` on a free loopback port with its classes in `db`; `files`: the open-file
/// limit (soft, hard) it starts with.
pub fn spawn(db: &Path, files: Option<(u64, u64)>) -> Spawned {
    spawn_with(db, files, &[])
}

/// [`spawn`] with more of `oomlab serve`'s options.
pub fn spawn_with(db: &Path, files: Option<(u64, u64)>, options: &[&str]) -> Spawned {
    let mut command = Command::new(binary());
    command.args(["serve", "--bind", "127.0.0.1", "--port", "0", "--db"]).arg(db).args(options).stdout(Stdio::piped());
    if let Some((soft, hard)) = files {
        use std::os::unix::process::CommandExt;
        // SAFETY: setrlimit is async-signal-safe and touches only the child's own limits.
        unsafe {
            command.pre_exec(move || {
                let limit = libc::rlimit { rlim_cur: soft as libc::rlim_t, rlim_max: hard as libc::rlim_t };
                if libc::setrlimit(libc::RLIMIT_NOFILE, &limit) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
    }
    let mut child = command.spawn().expect("oomlab serve starts");
    let mut out = BufReader::new(child.stdout.take().expect("its output"));
    let mut printed = String::new();
    while !printed.contains("Classes and answers") && out.read_line(&mut printed).unwrap_or(0) > 0 {}
    std::thread::spawn(move || std::io::copy(&mut out, &mut std::io::sink()));
    let first = printed.lines().next().unwrap_or_default();
    let addr: SocketAddr = first.rsplit(' ').next().and_then(|a| a.parse().ok()).expect("the address it listens on");
    let key =
        printed.split("&key=").nth(1).and_then(|rest| rest.split_whitespace().next()).unwrap_or_default().to_string();
    Spawned { child, addr, key, printed }
}
