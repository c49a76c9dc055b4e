//! `oomlab serve`: the class server. Serves the web app and the class API on one port, keeps
//! classes and answers in a SQLite file, and prints where teachers and students go.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use clap::Args;
use oomlab::serve::limiter::Rate;
use oomlab::serve::{self, Config, Limits, TlsFiles};

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
    /// The address students open, when it is not this machine's own (a school's DNS name, or a
    /// port forwarded elsewhere), e.g. https://oomlab.school.example. Its host is one of the
    /// names the server answers to.
    #[arg(long, value_name = "URL")]
    public_url: Option<String>,
    /// Another name the server answers to (repeatable). It answers only to its own addresses,
    /// localhost and these: a web page cannot reach it through a name of its own (DNS rebinding).
    #[arg(long = "allow-host", value_name = "NAME")]
    allow_hosts: Vec<String>,
    /// Joins a minute from one network address (all the classes together). 60 leaves room for a
    /// class behind one school address; raise it for a lecture hall behind one.
    #[arg(long, default_value_t = 60, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    joins_per_minute: u32,
    /// Live-event streams of one class; more are told to retry, and the students' page then
    /// asks for the state every few seconds instead.
    #[arg(long, default_value_t = 600, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    followers_per_class: u32,
    /// HTTPS: the certificate chain (PEM). Needs --tls-key.
    #[arg(long, value_name = "PEM", requires = "tls_key")]
    tls_cert: Option<PathBuf>,
    /// HTTPS: the certificate's private key (PEM). Needs --tls-cert.
    #[arg(long, value_name = "PEM", requires = "tls_cert")]
    tls_key: Option<PathBuf>,
}

pub(super) fn run(args: &ServeArgs) -> Result<(), Failure> {
    let tls = match (&args.tls_cert, &args.tls_key) {
        (Some(cert), Some(key)) => Some(TlsFiles { cert: cert.clone(), key: key.clone() }),
        _ => None,
    };
    let config = Config {
        bind: SocketAddr::new(args.bind, args.port),
        db: args.db.clone(),
        limits: Limits {
            class_lifetime: Duration::from_secs(u64::from(args.expire_hours) * 3600),
            joins: Rate::per_minute(args.joins_per_minute),
            followers_per_class: usize::try_from(args.followers_per_class).unwrap_or(usize::MAX),
            ..Limits::default()
        },
        public: args.public_url.clone(),
        teacher_key: None,
        allowed_hosts: args.allow_hosts.clone(),
        tls,
    };
    let server = serve::start(&config).map_err(|e| Failure { code: EXIT_FAILURE, message: e.to_string() })?;
    let port = server.addr.port();
    let scheme = if server.https { "https" } else { "http" };
    let here = if args.bind.is_unspecified() || args.bind.is_loopback() {
        format!("{scheme}://localhost:{port}/")
    } else {
        format!("{scheme}://{}/", server.addr)
    };
    // Students reach the machine by its network address, unless it listens on loopback only
    // (serve::public_address); each class's own join link and QR code appear on the projector.
    let students = format!("{}/join", server.public);
    println!("oomlab class server: listening on {}", server.addr);
    println!("  Teacher: open {here}#teach on the projector's computer and choose \"Teach a class\".");
    println!(
        "  Teacher on another computer: open {}/#teach&key={} (the key starts classes: keep it to yourself).",
        server.public, server.teacher_key
    );
    println!("  Students: open {students} (or scan this code), then type the class code.");
    if let Some(qr) = serve::terminal_qr(&students) {
        println!("{qr}");
    }
    // Offline (no default route), or bound to loopback: the address above is this laptop to
    // itself only, and a phone opening it reaches the phone. Say so, with what to pass instead.
    if let Some(warning) =
        serve::students_address_warning(&server.public, server.addr, server.https, args.public_url.is_some())
    {
        println!("{warning}");
    }
    if !serve::assets::has_web_app() {
        println!("  Note: this build has no web app (run web/build.sh, then build oomlab again); the API works.");
    }
    let limit = server.descriptor_limit.map_or("none".to_string(), |n| n.to_string());
    println!("  Connections: at most {} at once (open-file limit {limit}).", server.max_connections);
    if !server.https {
        println!(
            "  Plain HTTP: anyone on this network can read what passes, the teacher's key and class token included. \
             With a certificate, use --tls-cert and --tls-key."
        );
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
