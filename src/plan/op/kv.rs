//! The KV cache's ops (serving): writing new tokens' keys and values into a layer's cache, and
//! attention of new tokens over it through a block table — one layout for all three of
//! serving's: a contiguous reservation is a request's consecutive blocks, a growing cache a new
//! tensor with its own table, vLLM's pages any blocks of one pool.

use crate::plan::View;

/// K and V of new tokens into a layer's cache. qkv (B,T,3C) holds them beside Q; the cache is
/// (slots, 2, C): slot s holds K at `s·2C` and V at `s·2C + C`; `slots` (B·T u32) gives each
/// token's slot (vLLM's `slot_mapping`: its block's index × the block's tokens + its offset).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct KvWrite {
    pub qkv: View,
    pub slots: View,
    pub cache: View,
}

/// Attention of new tokens over the cache. Token t of request b (qkv (B,T,3C)) sits at position
/// `lens[b] − T + t` (`lens`, B u32: each request's tokens in the cache, these included) and
/// attends to the cached positions up to its own; position p of request b is at slot
/// `blocks[b·W + p / block_size]·block_size + p % block_size` (`blocks`, B × W u32: each
/// request's table of W blocks). out (B,T,C). No probabilities are kept: nothing runs backward.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CachedAttention {
    pub qkv: View,
    pub cache: View,
    pub blocks: View,
    pub lens: View,
    pub out: View,
    /// Tokens per block.
    pub block_size: usize,
}
