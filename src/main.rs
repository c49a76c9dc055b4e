//! `oomlab`: with no arguments, the app; with a subcommand, the headless CLI.

#[cfg(not(target_arch = "wasm32"))]
mod cli;

#[cfg(not(target_arch = "wasm32"))]
fn main() {
    std::process::exit(cli::main());
}

#[cfg(target_arch = "wasm32")]
fn main() {
    oomlab::web::start();
}
