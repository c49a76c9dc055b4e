//! A model's layers when they are not all alike: a mixture's dense layers (DeepSeek-V3's first
//! three, Llama 4's interleaved ones) and layers without RoPE (Llama 4's every fourth). Each kind
//! of layer is an architecture of its own ([`Architecture::of_kind`]): the same block with a
//! dense MLP, or rotating nothing; parameters and saved tensors are counted per kind, times the
//! layers of that kind.

use super::arch::{Architecture, LayerKind, Target};

impl Architecture {
    /// The layers with the mixture of experts (all of them without one: 0).
    pub fn moe_layers(&self) -> u64 {
        (0..self.layers).filter(|&i| self.layer_kind(i).experts).count() as u64
    }

    /// The dense layers among a mixture's (0 without a mixture, or with it in every layer).
    pub fn dense_layers(&self) -> u64 {
        if self.block.moe.is_some() { self.layers - self.moe_layers() } else { 0 }
    }

    /// A dense layer among a mixture's, as an architecture of its own: the same block with a
    /// dense MLP of the mixture's `dense_ffn`. None when every layer has the mixture.
    pub fn dense_layer(&self) -> Option<Architecture> {
        (self.dense_layers() > 0).then(|| self.of_kind(LayerKind { experts: false, rope: true }))
    }

    /// Layer `i` (from 0) has no RoPE.
    pub fn is_nope_layer(&self, i: u64) -> bool {
        match self.block.nope_every {
            0 => false,
            n => (i + 1).is_multiple_of(n),
        }
    }

    /// Layer `i`'s kind (of a pipeline stage: its `i`-th layer, which under the interleaved
    /// schedule is not the first layer plus `i`).
    pub fn layer_kind(&self, i: u64) -> LayerKind {
        let i = self.stage.map_or(i, |s| s.layer(i));
        LayerKind { experts: self.block.moe.is_some_and(|m| m.at_layer(i)), rope: !self.is_nope_layer(i) }
    }

    /// The kinds of layer the model has and how many of each, in the order they first come.
    pub fn kinds(&self) -> Vec<(LayerKind, u64)> {
        let mut kinds: Vec<(LayerKind, u64)> = Vec::new();
        for i in 0..self.layers {
            let kind = self.layer_kind(i);
            match kinds.iter_mut().find(|(k, _)| *k == kind) {
                Some((_, n)) => *n += 1,
                None => kinds.push((kind, 1)),
            }
        }
        kinds
    }

    /// A layer of `kind` as an architecture: a dense one's MLP of the mixture's `dense_ffn`; one
    /// without RoPE marked so (`nope_every` 1; its weightless query/key norms gone); one with
    /// it, every layer rotating (`nope_every` 0).
    pub fn of_kind(&self, kind: LayerKind) -> Architecture {
        let mut a = self.clone();
        if let Some(m) = self.block.moe.filter(|_| !kind.experts) {
            a.block.moe = None;
            a.ffn = m.dense_ffn;
        }
        if self.block.nope_every > 0 {
            a.block.nope_every = if kind.rope { 0 } else { 1 };
            if !kind.rope && a.block.qk_norm_weightless {
                a.block.qk_norm = false;
            }
        }
        a
    }

    /// Every layer's linear layers outside the experts and routers (what LoRA can adapt).
    pub(crate) fn all_block_linears(&self) -> Vec<(Target, u64, u64)> {
        type Linears = Vec<(Target, u64, u64)>;
        let kinds: Vec<(LayerKind, Linears)> =
            self.kinds().into_iter().map(|(k, _)| (k, self.of_kind(k).block_linears())).collect();
        (0..self.layers)
            .flat_map(|i| {
                let kind = self.layer_kind(i);
                kinds.iter().find(|(k, _)| *k == kind).map(|(_, l)| l.clone()).unwrap_or_default()
            })
            .collect()
    }
}
