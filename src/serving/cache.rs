//! The KV cache's three layouts: where each request's tokens go, what each reserves, and what
//! that reservation wastes, named as the PagedAttention paper names it.
//!
//! Every layout hands the kernels the same thing — each token's slot in a layer's cache and each
//! request's block table — so the math never changes; what changes is how much memory a request
//! holds and when:
//! - **contiguous** (StaticCache, FasterTransformer, Orca): a request takes a row of the model's
//!   whole context when it is admitted, and keeps it until it finishes;
//! - **growing** (transformers' `DynamicCache`): each layer's keys and values are tensors that
//!   `torch.cat` replaces by one a token longer at every step, through the caching allocator;
//! - **paged** (vLLM): a pool of blocks of `block_size` tokens, reserved once; a request takes a
//!   block when its last one is full.

use std::collections::{BTreeMap, VecDeque};

use crate::memory::Placement;
use crate::memory::allocator::{CachingAllocator, OutOfMemory};

/// How the cache is laid out (see the module's text).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Layout {
    Contiguous,
    Growing,
    Paged,
}

impl Layout {
    pub const ALL: [Layout; 3] = [Layout::Contiguous, Layout::Growing, Layout::Paged];

    /// Its name, as the CLI and JSON write it.
    pub fn name(self) -> &'static str {
        match self {
            Layout::Contiguous => "contiguous",
            Layout::Growing => "growing",
            Layout::Paged => "paged",
        }
    }

    /// The layout named `name`, if any.
    pub fn parse(name: &str) -> Option<Layout> {
        Layout::ALL.into_iter().find(|l| l.name() == name)
    }
}

/// The bytes a layout holds for its requests at one moment, and how they split.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct KvBytes {
    /// Set aside for the requests running: their rows (contiguous), their blocks (paged), the
    /// caching allocator's segments (growing).
    pub reserved: u64,
    /// Holding a token's keys and values.
    pub used: u64,
    /// Reserved for tokens a request has yet to generate.
    pub reservation: u64,
    /// Reserved inside a request's own memory that it will never fill: the rest of a
    /// contiguous row past its last token, the last block's empty slots, the allocator's
    /// rounding of a tensor.
    pub internal_fragmentation: u64,
    /// Reserved but held by no request: the caching allocator's free cached blocks.
    pub external_fragmentation: u64,
}

impl KvBytes {
    /// The share of what is reserved that holds no token (0 when nothing is reserved).
    pub fn waste_fraction(&self) -> f64 {
        if self.reserved == 0 { 0.0 } else { 1.0 - self.used as f64 / self.reserved as f64 }
    }
}

/// A request's hold on the cache.
#[derive(Clone, Debug, Default)]
struct Hold {
    /// Tokens in the cache (once the step that writes the newest has run).
    tokens: usize,
    /// The tokens it will hold when it finishes (what the server cannot know; for the figures).
    final_tokens: usize,
    /// Its blocks, in order (contiguous: its row's; growing: one slot per block).
    table: Vec<u32>,
    /// Growing: its tensors' places in the caching allocator (K and V of every layer).
    tensors: Vec<Placement>,
}

/// The cache of one serving run in one layout.
pub struct KvSpace {
    layout: Layout,
    /// Tokens per block of the tables the kernels read (1 for growing: a slot per entry).
    block_size: usize,
    /// Blocks in a contiguous row (the model's context, in blocks).
    row_blocks: usize,
    /// Bytes of one token's keys and values over every layer.
    token_bytes: u64,
    /// Bytes of one token in one layer's K (or V) tensor: what a growing cache's tensors hold.
    tensor_token_bytes: u64,
    layers: usize,
    /// Blocks of the executor's caches (per layer; every layer has the same).
    blocks: usize,
    /// Free blocks, taken from the front (paged, growing), or free rows (contiguous).
    free: VecDeque<u32>,
    holds: BTreeMap<u64, Hold>,
    /// Growing: the caching allocator `torch.cat`'s tensors go through, over the cache's room.
    allocator: Option<CachingAllocator<u64>>,
    /// Growing: the last time it ran out (PyTorch's own words follow from it).
    last_oom: Option<OutOfMemory>,
}

/// The shape of a layout's cache: what its plan's caches and tables are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SpaceShape {
    pub block_size: usize,
    pub blocks: usize,
    /// Blocks in a request's table.
    pub table_width: usize,
}

impl SpaceShape {
    /// Token slots in each layer's cache.
    pub fn slots(&self) -> u64 {
        self.blocks as u64 * self.block_size as u64
    }
}

impl KvSpace {
    /// A cache in `layout` over `room` bytes (every layer together) for a model of `context`
    /// tokens whose one token takes `token_bytes` over `layers` layers. Paged blocks hold
    /// `block_size` tokens; a contiguous row holds the context rounded up to whole blocks.
    pub fn new(layout: Layout, room: u64, token_bytes: u64, layers: usize, context: usize, block_size: usize) -> Self {
        let token_bytes = token_bytes.max(1);
        // A growing cache's tensors are read slot by slot: a table entry per token.
        let block_size = if layout == Layout::Growing { 1 } else { block_size.max(1) };
        let row_blocks = context.div_ceil(block_size);
        let (blocks, free) = match layout {
            Layout::Paged => {
                let blocks = usize::try_from(room / (token_bytes * block_size as u64)).unwrap_or(usize::MAX);
                (blocks, (0..blocks as u32).collect())
            }
            Layout::Contiguous => {
                let row_bytes = token_bytes * (row_blocks * block_size) as u64;
                let rows = usize::try_from(room / row_bytes).unwrap_or(usize::MAX);
                (rows * row_blocks, (0..rows as u32).collect())
            }
            Layout::Growing => {
                let slots = usize::try_from(room / token_bytes).unwrap_or(usize::MAX);
                (slots, (0..slots as u32).collect())
            }
        };
        let allocator = (layout == Layout::Growing).then(|| CachingAllocator::new(room).without_events());
        let layers = layers.max(1);
        Self {
            layout,
            block_size,
            row_blocks,
            token_bytes,
            tensor_token_bytes: token_bytes / (2 * layers as u64),
            layers,
            blocks,
            free,
            holds: BTreeMap::new(),
            allocator,
            last_oom: None,
        }
    }

    pub fn layout(&self) -> Layout {
        self.layout
    }

    /// What the plan's caches and tables are.
    pub fn shape(&self) -> SpaceShape {
        SpaceShape { block_size: self.block_size, blocks: self.blocks.max(1), table_width: self.row_blocks.max(1) }
    }

    /// The most tokens the whole cache can hold.
    pub fn capacity_tokens(&self) -> u64 {
        self.blocks as u64 * self.block_size as u64
    }

    /// Whether a request of `tokens` tokens could ever be held alone.
    pub fn could_hold(&self, tokens: usize) -> bool {
        match self.layout {
            Layout::Contiguous => self.blocks > 0 && tokens <= self.row_blocks * self.block_size,
            Layout::Paged => tokens.div_ceil(self.block_size) <= self.blocks,
            // Whatever the allocator's rounding: a trial of the request's tensors in an empty
            // allocator of the same capacity (less than one segment holds nothing).
            Layout::Growing => {
                let capacity = self.allocator.as_ref().map_or(0, CachingAllocator::capacity);
                let mut trial = CachingAllocator::new(capacity).without_events();
                let bytes = self.tensor_token_bytes.saturating_mul(tokens as u64);
                (tokens as u64) <= self.capacity_tokens()
                    && (0..2 * self.layers).all(|_| trial.malloc(bytes, 0).is_ok())
            }
        }
    }

    /// Takes what request `id` needs to hold `tokens` tokens (a prefill: its prompt, or its
    /// prompt and what it generated before it was preempted). False, changing nothing, when
    /// they do not fit now.
    pub fn admit(&mut self, id: u64, tokens: usize, final_tokens: usize) -> bool {
        let mut hold = Hold { final_tokens, ..Hold::default() };
        match self.layout {
            Layout::Contiguous => {
                let Some(row) = self.free.pop_front() else { return false };
                let first = row as usize * self.row_blocks;
                hold.table = (first..first + self.row_blocks).map(|b| b as u32).collect();
            }
            Layout::Paged | Layout::Growing => {
                let need = tokens.div_ceil(self.block_size);
                if need > self.free.len() {
                    return false;
                }
                if self.layout == Layout::Growing {
                    match self.cat(&[], tokens) {
                        Some(tensors) => hold.tensors = tensors,
                        None => return false,
                    }
                }
                hold.table = self.free.drain(..need).collect();
            }
        }
        hold.tokens = tokens;
        self.holds.insert(id, hold);
        true
    }

    /// Makes room for request `id`'s next token. False, changing nothing, when there is none.
    pub fn grow(&mut self, id: u64) -> bool {
        let Some(hold) = self.holds.get(&id) else { return false };
        let tokens = hold.tokens + 1;
        match self.layout {
            Layout::Contiguous => {
                if tokens > hold.table.len() * self.block_size {
                    return false;
                }
            }
            Layout::Paged | Layout::Growing => {
                let need = tokens.div_ceil(self.block_size).saturating_sub(hold.table.len());
                if need > self.free.len() {
                    return false;
                }
                if self.layout == Layout::Growing {
                    let old = hold.tensors.clone();
                    match self.cat(&old, tokens) {
                        Some(tensors) => {
                            if let Some(h) = self.holds.get_mut(&id) {
                                h.tensors = tensors;
                            }
                        }
                        None => return false,
                    }
                }
                let new: Vec<u32> = self.free.drain(..need).collect();
                if let Some(h) = self.holds.get_mut(&id) {
                    h.table.extend(new);
                }
            }
        }
        if let Some(h) = self.holds.get_mut(&id) {
            h.tokens = tokens;
        }
        true
    }

    /// `torch.cat` for every layer's K and V: tensors of `tokens` tokens allocated while the old
    /// ones still live, then the old ones freed. None (everything new freed) when one does not
    /// fit.
    fn cat(&mut self, old: &[Placement], tokens: usize) -> Option<Vec<Placement>> {
        let bytes = self.tensor_token_bytes.saturating_mul(tokens as u64);
        let alloc = self.allocator.as_mut()?;
        let mut new = Vec::with_capacity(2 * self.layers);
        for _ in 0..2 * self.layers {
            match alloc.malloc(bytes, 0) {
                Ok(p) => new.push(p),
                Err(oom) => {
                    for p in new {
                        alloc.free(p);
                    }
                    self.last_oom = Some(oom);
                    return None;
                }
            }
        }
        for &p in old {
            alloc.free(p);
        }
        Some(new)
    }

    /// Frees everything request `id` holds.
    pub fn release(&mut self, id: u64) {
        let Some(hold) = self.holds.remove(&id) else { return };
        match self.layout {
            Layout::Contiguous => {
                if let Some(&first) = hold.table.first() {
                    self.free.push_back(first / self.row_blocks.max(1) as u32);
                }
            }
            Layout::Paged | Layout::Growing => self.free.extend(hold.table),
        }
        if let Some(alloc) = self.allocator.as_mut() {
            for p in hold.tensors {
                alloc.free(p);
            }
        }
    }

    /// Request `id`'s block table, padded with block 0 to `width` entries.
    pub fn table(&self, id: u64, width: usize) -> Vec<u32> {
        let mut t = self.holds.get(&id).map(|h| h.table.clone()).unwrap_or_default();
        t.resize(width, 0);
        t
    }

    /// The slot of request `id`'s token at `position`.
    pub fn slot(&self, id: u64, position: usize) -> u32 {
        let bs = self.block_size.max(1);
        let block = self.holds.get(&id).and_then(|h| h.table.get(position / bs)).copied().unwrap_or(0);
        block.saturating_mul(bs as u32).saturating_add((position % bs) as u32)
    }

    /// The bytes held now, and how they split.
    pub fn bytes(&self) -> KvBytes {
        let tb = self.token_bytes;
        let mut b = KvBytes::default();
        for h in self.holds.values() {
            let (n, f) = (h.tokens as u64, (h.final_tokens as u64).max(h.tokens as u64));
            b.used += n * tb;
            match self.layout {
                Layout::Contiguous | Layout::Paged => {
                    let held = (h.table.len() * self.block_size) as u64;
                    let future = (f - n).min(held - n.min(held));
                    b.reserved += held * tb;
                    b.reservation += future * tb;
                    b.internal_fragmentation += (held - n.min(held) - future) * tb;
                }
                Layout::Growing => {}
            }
        }
        if let Some(alloc) = &self.allocator {
            let s = alloc.stats();
            b.reserved = s.reserved_bytes;
            b.internal_fragmentation = s.allocated_bytes.saturating_sub(b.used);
            b.external_fragmentation = s.reserved_bytes.saturating_sub(s.allocated_bytes);
        }
        b
    }

    /// Each block of the executor's caches: which request holds it (its id + 1), or 0 when free.
    /// None for a growing cache, whose memory is the caching allocator's segments, not blocks.
    pub fn owners(&self) -> Option<Vec<u32>> {
        if self.layout == Layout::Growing {
            return None;
        }
        let mut map = vec![0u32; self.blocks];
        for (&id, h) in &self.holds {
            let owner = u32::try_from(id.saturating_add(1)).unwrap_or(u32::MAX);
            for &b in &h.table {
                if let Some(m) = map.get_mut(b as usize) {
                    *m = owner;
                }
            }
        }
        Some(map)
    }

    /// Growing: why its last allocation failed, in PyTorch's words.
    pub fn last_oom(&self) -> Option<&OutOfMemory> {
        self.last_oom.as_ref()
    }

    /// Tokens request `id` holds.
    pub fn tokens(&self, id: u64) -> usize {
        self.holds.get(&id).map_or(0, |h| h.tokens)
    }
}
