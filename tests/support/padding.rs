//! The padding chapter's figures, for the tests of lessons and of the veil.

use oomlab::app::settings::Settings;
/// The padding chapter's figures, worked out apart from the app: the first batch's speeches
/// padded to their longest (its activations), and packed into the fewest full rows of that length.
pub fn padded_and_packed(s: &Settings, vocab: usize) -> (u64, u64) {
    let docs = oomlab::documents::Documents::builtin();
    let shape = oomlab::model::StepShape { batch: s.batch, seq: s.dims.max_seq };
    let ids = docs.sample(s.device.batching, shape, s.seed, 0);
    let padded = docs.padded(&ids, s.dims.max_seq);
    let t = padded.shape.seq;
    let rows = (1..=ids.len()).find(|&r| docs.packed(&ids, r, t).1.len() == ids.len()).expect("rows");
    let mut packed = s.clone();
    (packed.device.batching, packed.batch, packed.seq) = (oomlab::plan::Batching::Packed, rows, t);
    let act = |s: &Settings| {
        oomlab::memory::simulate(&s.plan(vocab).expect("a plan"), oomlab::memory::Budget::Unlimited)
            .expect("fits")
            .activation_peak_bytes
    };
    assert_eq!(s.plan(vocab).expect("a plan").shape.seq, t, "the plan is the batch's length");
    (act(s), act(&packed))
}
