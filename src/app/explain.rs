//! The explanations under the views, as data (the languages issue moves them into catalogs).

pub const EXPLAIN_BREAKDOWN: &str = "Parameters, gradients and optimizer state depend on the model only: AdamW keeps two more \
copies of every weight (m and v), and mixed precision adds fp32 master weights. Activations — the tensors the forward \
pass saves for the backward pass — grow with batch × sequence (and the attention probabilities with the square of the \
sequence), which is why a large batch runs out of memory while the model itself fits.";

pub const EXPLAIN_TIMELINE: &str = "Memory rises through the forward pass as each layer saves its activations, peaks \
around the start of the backward pass, and falls as the backward pass frees what it no longer needs. Model state is \
the flat floor underneath. Checkpointing lowers the ridge by recomputing activations during the backward pass.";

pub const EXPLAIN_SWEEP: &str = "Each bar is the peak of one step at that batch size. Model state is the same at every \
batch; activations grow linearly with it, so the bars cross the budget line at some batch: the first out-of-memory. \
Techniques move that point: checkpointing and fused attention shrink activations, accumulation keeps the micro-batch \
small, mixed precision halves activations but adds master weights.";

pub const EXPLAIN_ALLOCATOR: &str = "The caching allocator (PyTorch's rules) reserves segments from the device and \
carves blocks out of them. Freed blocks stay cached for reuse rather than returning to the device, so reserved memory \
exceeds allocated memory; free gaps that are too small for the next request are fragmentation.";
