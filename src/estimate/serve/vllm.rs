//! vLLM v1's KV-cache pool, computed as vLLM computes it (vllm-project/vllm @001cabc1,
//! `vllm/v1/kv_cache_interface.py` and `vllm/v1/core/kv_cache_utils.py`; its budget from
//! `vllm/v1/worker/gpu_worker.py`). The lines each function follows are quoted beside it.

use super::LayerAttention;

/// vLLM's options that size the pool (its defaults: `--block-size 16`,
/// `--gpu-memory-utilization 0.9`; `--max-num-batched-tokens` 8192 and `--max-num-seqs` 256,
/// the online server's on a large GPU).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Options {
    pub block_size: u64,
    pub gpu_memory_utilization: f64,
    pub max_num_batched_tokens: u64,
    pub max_num_seqs: u64,
    /// `--kv-cache-memory`: the pool's bytes, given (vLLM then skips its profiling).
    pub kv_cache_memory: Option<u64>,
    /// Memory outside PyTorch's allocator (the CUDA context, NCCL): vLLM measures it; assumed.
    pub non_torch_bytes: u64,
    /// CUDA graphs' memory, when vLLM counts it before sizing the pool.
    pub cuda_graph_bytes: u64,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            block_size: 16,
            gpu_memory_utilization: 0.9,
            max_num_batched_tokens: 8192,
            max_num_seqs: 256,
            kv_cache_memory: None,
            non_torch_bytes: 500 << 20,
            cuda_graph_bytes: 0,
        }
    }
}

/// The pool vLLM allocates and what it logs about it.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Pool {
    /// One block of one layer (`page_size_bytes`).
    pub page_bytes: u64,
    /// Each KV-cache group's attention; the layers of a group share one block table.
    pub groups: Vec<LayerAttention>,
    /// Layers per group (every group the same).
    pub layers_per_group: u64,
    /// Layers added so that every group has as many ("Add %d padding layers").
    pub padding_layers: u64,
    /// `num_gpu_blocks`.
    pub num_blocks: u64,
    /// "GPU KV cache size: %s tokens".
    pub tokens: u64,
    /// Blocks one request of `max_model_len` tokens may hold (over every group).
    pub blocks_per_request: u64,
    /// "Maximum concurrency for %s tokens per request: %.2fx".
    pub max_concurrency: f64,
}

/// `_get_kv_cache_groups_uniform_page_size`: layers of one kind share a group; groups hold the
/// same number of layers — "the minimum number of layers among all attention types", or the
/// maximum "if max_num_layers < min_num_layers * 1.5" — the last of each kind padded. One kind
/// only: one group of every layer (`_get_kv_cache_groups_uniform_spec`). Returns each group's
/// kind, the layers per group and the padding layers.
pub fn groups(layers: &[LayerAttention]) -> (Vec<LayerAttention>, u64, u64) {
    let mut kinds: Vec<(LayerAttention, u64)> = Vec::new();
    for &l in layers {
        match kinds.iter_mut().find(|(k, _)| *k == l) {
            Some((_, n)) => *n += 1,
            None => kinds.push((l, 1)),
        }
    }
    let (min, max) = kinds.iter().fold((u64::MAX, 0), |(lo, hi), &(_, n)| (lo.min(n), hi.max(n)));
    if kinds.len() <= 1 {
        return (kinds.iter().map(|&(k, _)| k).collect(), max, 0);
    }
    // max < 1.5 · min, in integers.
    let size = if 2 * max < 3 * min { max } else { min };
    let (mut out, mut padding) = (Vec::new(), 0);
    for (kind, n) in kinds {
        let count = n.div_ceil(size);
        padding += count * size - n;
        out.extend(std::iter::repeat_n(kind, count as usize));
    }
    (out, size, padding)
}

/// `max_memory_usage_bytes` of one layer's spec: the most one request of `max_model_len` tokens
/// holds. Full: `cdiv(max_model_len, self.block_size) * self.page_size_bytes`. Sliding:
/// `num_tokens = min(self.sliding_window - 1 + max_num_batched_tokens, max_model_len)`, then
/// `(cdiv(num_tokens, self.block_size) + 1) * self.page_size_bytes` ("+1 here because the sliding
/// window may not start from the beginning of the block"). Chunked: `num_tokens =
/// min(self.attention_chunk_size + max_num_batched_tokens, max_model_len)`, `cdiv(num_tokens,
/// self.block_size) * self.page_size_bytes`.
pub fn max_memory_usage(kind: LayerAttention, page: u64, max_model_len: u64, o: &Options) -> u64 {
    let blocks = |tokens: u64| tokens.div_ceil(o.block_size.max(1));
    let n = match kind {
        LayerAttention::Full => blocks(max_model_len),
        LayerAttention::Sliding(w) => {
            blocks((w.saturating_sub(1).saturating_add(o.max_num_batched_tokens)).min(max_model_len)) + 1
        }
        LayerAttention::Chunked(c) => blocks(c.saturating_add(o.max_num_batched_tokens).min(max_model_len)),
    };
    n.saturating_mul(page)
}

/// The pool in `available` bytes for requests of `max_model_len` tokens.
/// `get_num_blocks`: `num_blocks = int(available_memory // page_size // num_layers)` (the layers
/// per group). `_report_kv_cache_config`: `num_tokens = num_blocks // len(kv_cache_groups) *
/// min_block_size`. `get_max_concurrency_for_kv_cache_config`: `max_memory_usage_per_request =
/// num_layer_per_group * max_memory_usage_bytes(...)` (summed over the groups' specs),
/// `memory_per_block = page_size_bytes * num_layer_per_group`, `num_block_per_request =
/// cdiv(max_memory_usage_per_request, memory_per_block)`, `max_concurrency = num_blocks /
/// num_block_per_request`.
pub fn pool(layers: &[LayerAttention], page: u64, available: u64, max_model_len: u64, o: &Options) -> Pool {
    let (groups, size, padding) = groups(layers);
    let size = size.max(1);
    let num_blocks = available / page.max(1) / size;
    let tokens = (num_blocks / (groups.len() as u64).max(1)).saturating_mul(o.block_size);
    let blocks_per_request = blocks_per_request(&groups, size, page, max_model_len, o);
    let max_concurrency = num_blocks as f64 / blocks_per_request.max(1) as f64;
    Pool {
        page_bytes: page,
        groups,
        layers_per_group: size,
        padding_layers: padding,
        num_blocks,
        tokens,
        blocks_per_request,
        max_concurrency,
    }
}

fn blocks_per_request(groups: &[LayerAttention], size: u64, page: u64, max_model_len: u64, o: &Options) -> u64 {
    let usage: u64 = groups.iter().map(|&g| max_memory_usage(g, page, max_model_len, o)).fold(0, u64::saturating_add);
    size.saturating_mul(usage).div_ceil(page.max(1).saturating_mul(size))
}

/// The longest `max_model_len` (up to `model_len`) at which `concurrency` requests fit the
/// pool's blocks: 0 when not even one token does (as `_estimate_max_model_len_from_groups`,
/// a binary search).
pub fn longest_context(
    layers: &[LayerAttention],
    page: u64,
    available: u64,
    concurrency: u64,
    model_len: u64,
    o: &Options,
) -> u64 {
    let (groups, size, _) = groups(layers);
    let size = size.max(1);
    let num_blocks = available / page.max(1) / size;
    let fits = |len: u64| blocks_per_request(&groups, size, page, len, o).saturating_mul(concurrency) <= num_blocks;
    let (mut lo, mut hi) = (0, model_len);
    while lo < hi {
        let mid = lo + (hi - lo).div_ceil(2);
        if fits(mid) { lo = mid } else { hi = mid - 1 }
    }
    lo
}

#[cfg(test)]
mod tests {
    use super::LayerAttention::{Chunked, Full, Sliding};
    use super::*;

    #[test]
    fn layers_group_as_vllm_groups_them() {
        // Gemma-3-27B: 52 sliding and 10 full layers → groups of 10: six sliding groups (8
        // padding layers) and one full.
        let mut gemma = Vec::new();
        for i in 0..62 {
            gemma.push(if (i + 1) % 6 == 0 { Full } else { Sliding(1024) });
        }
        let (g, size, padding) = groups(&gemma);
        assert_eq!((g.len(), size, padding), (7, 10, 8));
        assert_eq!(g.iter().filter(|k| **k == Full).count(), 1);
        // gpt-oss-20b: 12 sliding + 12 full → two groups of 12.
        let oss: Vec<_> = (0..24).map(|i| if i % 2 == 0 { Sliding(128) } else { Full }).collect();
        assert_eq!(groups(&oss), (vec![Sliding(128), Full], 12, 0));
        // "12 sw + 13 full. We pad it to (13 sw, 13 full)".
        let eagle: Vec<_> = (0..25).map(|i| if i < 12 { Sliding(128) } else { Full }).collect();
        assert_eq!(groups(&eagle), (vec![Sliding(128), Full], 13, 1));
        // Llama 4: 3 chunked to 1 full, 48 layers → 12 per group, four groups.
        let llama4: Vec<_> = (0..48).map(|i| if (i + 1) % 4 == 0 { Full } else { Chunked(8192) }).collect();
        assert_eq!(groups(&llama4).0.len(), 4);
        assert_eq!(groups(&[Full; 40]), (vec![Full], 40, 0));
    }

    #[test]
    fn a_request_holds_what_its_spec_says() {
        let o = Options::default();
        assert_eq!(max_memory_usage(Full, 100, 33, &o), 3 * 100);
        // min(4096 − 1 + 8192, 131072) = 12287 tokens: 768 blocks, + 1.
        assert_eq!(max_memory_usage(Sliding(4096), 1, 131_072, &o), 769);
        assert_eq!(max_memory_usage(Sliding(4096), 1, 1000, &o), 63 + 1, "never past the request's length");
        assert_eq!(max_memory_usage(Chunked(8192), 1, 131_072, &o), 1024);
    }
}
