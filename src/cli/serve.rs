//! `oomlab serve`: the class server. Serves the web app and the class API on one port, keeps
//! classes and answers in a SQLite file, and prints where teachers and students go.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use clap::Args;
use oomlab::serve::{self, Config, Limits};

use super::*;

#[derive(Args, Debug)]
pub(super) struct ServeArgs {
    /// The port to listen on (0: any free one).
    #[arg(long, default_value_t = 8080)]
    port: u16,
    /// The address to listen on: all of this machine's (the default), so that phones on the
    /// school's network reach it, or 127.0.0.1 for this machine only.
    #[arg(long, default_value = "0.0.0.0")]
    bind: IpAddr,
    /// The SQLite file that keeps classes and answers.
    #[arg(long, default_value = "oomlab-classes.sqlite")]
    db: PathBuf,
    /// Hours a class lives before it and its answers are deleted.
    #[arg(long, default_value_t = 24, value_parser = clap::value_parser!(u32).range(1..=24 * 365))]
    expire_hours: u32,
}

pub(super) fn run(args: &ServeArgs) -> Result<(), Failure> {
    let config = Config {
        bind: SocketAddr::new(args.bind, args.port),
        db: args.db.clone(),
        limits: Limits {
            class_lifetime: Duration::from_secs(u64::from(args.expire_hours) * 3600),
            ..Limits::default()
        },
        public: None,
    };
    let server = serve::start(&config).map_err(|e| Failure { code: EXIT_FAILURE, message: e.to_string() })?;
    let port = server.addr.port();
    let here = if args.bind.is_unspecified() || args.bind.is_loopback() {
        format!("http://localhost:{port}/")
    } else {
        format!("http://{}/", server.addr)
    };
    // Students reach the machine by its network address, unless it listens on loopback only
    // (serve::public_address); each class's own join link and QR code appear on the projector.
    let students = format!("{}/join", server.public);
    println!("oomlab class server: listening on {}", server.addr);
    println!("  Teacher: open {here}#teach on the projector's computer and choose \"Teach a class\".");
    println!("  Students: open {students} (or scan this code), then type the class code.");
    if let Some(qr) = serve::terminal_qr(&students) {
        println!("{qr}");
    }
    if !serve::assets::has_web_app() {
        println!("  Note: this build has no web app (run web/build.sh, then build oomlab again); the API works.");
    }
    println!(
        "  Classes and answers: {} (each class is deleted {} h after it starts). Ctrl-C stops.",
        args.db.display(),
        args.expire_hours
    );
    use std::io::Write as _;
    let _ = std::io::stdout().flush();
    server.wait_for_ctrl_c();
    println!("stopping; every acknowledged answer is in {}", args.db.display());
    server.stop();
    Ok(())
}
