//! Serving's decode speed (a benchmark, not a test): the toy's decode tokens per second over its
//! KV cache on the CPU backend, at batch 1 and 16 — the same measurement as
//! `oomlab bench --decode`, which also runs PyTorch CPU eager with transformers' cache beside it.
//!
//!   cargo bench --bench decode

use oomlab::backend::{BackendKind, ready_now};
use oomlab::data::Dataset;
use oomlab::model::ModelConfig;
use oomlab::serving::bench::decode_rate;

fn main() {
    let vocab = Dataset::builtin().tokenizer.vocab_size();
    let model = ModelConfig { seq_len: oomlab::serving::CONTEXT, ..ModelConfig::toy(vocab) };
    // `cargo test` runs benches once as a smoke run (`--bench` absent): a few steps.
    let full = std::env::args().any(|a| a == "--bench");
    let (prompt, steps, repeats) = if full { (64, 64, 5) } else { (8, 4, 1) };
    for batch in [1usize, 16] {
        match ready_now(decode_rate(BackendKind::Cpu, None, &model, (batch, prompt, steps, repeats))) {
            Some(Ok(r)) => println!(
                "decode, cpu, batch {batch:>2}: {:>8.0} tokens/s ({:.3} ms a step)",
                r.decode_tokens_per_sec, r.ms_per_step
            ),
            Some(Err(e)) => println!("decode, cpu, batch {batch}: {e}"),
            None => println!("decode, cpu, batch {batch}: the CPU backend did not finish at once"),
        }
    }
}
