//! Data parallelism in one rank's plan: what ZeRO shards, the communication buffers, and the
//! collectives placed where an eager framework runs them (see `plan::parallel`).

use super::Builder;
use crate::model::params::ParamKind;
use crate::plan::parallel::{Unit, unit_of, units};
use crate::plan::{Category, Op, Phase, View, op};

/// One rank's share of data parallelism, while its plan is built.
pub(super) struct Dp {
    pub stage: u8,
    pub rank: u64,
    pub shard_len: u64,
    /// The flat tensors' length, padded so the shards cover it.
    pub padded: u64,
    pub units: Vec<Unit>,
    pub bucket_elems: u64,
    /// DDP: one tensor holding every bucket (a bucket is its unit's range of it); ZeRO: the two
    /// reduce buckets, used in turn.
    pub buckets: Vec<View>,
    turn: usize,
    /// ZeRO-3: each unit's gathered parameters while they are alive.
    gathered: Vec<Option<View>>,
    /// ZeRO-2 and 3: each unit's full gradients from its backward until its reduce-scatter.
    grads: Vec<Option<View>>,
}

impl Dp {
    /// A rank's share of data parallelism (None on one GPU).
    pub fn new(b: &Builder, rank: usize) -> Option<Dp> {
        let p = b.techniques.parallel;
        if !p.is_distributed() {
            return None;
        }
        let flat = b.layout.flat_len;
        let units = units(&b.layout, b.model.n_layers);
        let n = units.len();
        Some(Dp {
            stage: p.stage(),
            rank: rank as u64,
            shard_len: p.shard_len(flat),
            padded: p.padded_len(flat),
            units,
            bucket_elems: p.bucket_elems,
            buckets: Vec::new(),
            turn: 0,
            gathered: vec![None; n],
            grads: vec![None; n],
        })
    }

    /// This rank's shard of a flat tensor as long as the padded layout.
    pub fn own(&self, full: View) -> View {
        View { tensor: full.tensor, offset: full.offset + self.rank * self.shard_len, len: self.shard_len }
    }
}

/// `kind`'s elements inside a tensor holding `unit` (from the unit's first element).
pub(super) fn within(b: &Builder, holder: View, unit: &Unit, kind: ParamKind) -> View {
    let r = b.layout.range(kind);
    View { tensor: holder.tensor, offset: holder.offset + (r.start - unit.start), len: r.end - r.start }
}

impl Builder {
    /// The communication buffers (kept across steps, so made with the model states).
    pub(super) fn communication_buffers(&mut self) {
        let Some(dp) = self.dp.as_ref() else { return };
        let (stage, flat, bucket) = (dp.stage, self.layout.flat_len, dp.bucket_elems);
        let dt = self.dt;
        let buckets = if stage == 0 {
            // PyTorch DDP's Reducer: every bucket's flat tensor, made once; together they hold a
            // second copy of the gradients.
            vec![self.tensor("ddp.buckets", &[flat], dt, Category::Communication, None)]
        } else {
            // DeepSpeed's `ipg_buffer`: two reduce buckets, filled in turn.
            let len = bucket.min(flat);
            (0..2)
                .map(|i| self.tensor(format!("zero.reduce_bucket.{i}"), &[len], dt, Category::Communication, None))
                .collect()
        };
        if let Some(dp) = self.dp.as_mut() {
            dp.buckets = buckets;
        }
    }

    /// A parameter as the ops read it: from the flat parameters, or under ZeRO-3 from its
    /// unit's gathered copy.
    pub(super) fn param_view(&self, kind: ParamKind) -> View {
        if let Some(dp) = self.dp.as_ref().filter(|d| d.stage == 3) {
            let u = unit_of(kind, self.model.n_layers);
            if let (Some(unit), Some(Some(g))) = (dp.units.get(u), dp.gathered.get(u)) {
                return within(self, *g, unit, kind);
            }
        }
        let r = self.layout.range(kind);
        View { tensor: self.params.tensor, offset: r.start, len: r.end - r.start }
    }

    /// A parameter's gradient as the backward ops accumulate it: in the flat gradients, or under
    /// ZeRO-2 and 3 in its unit's full gradients of this backward pass.
    pub(super) fn grad_view(&self, kind: ParamKind) -> View {
        if let Some(v) = self.host_grad_view(kind) {
            return v;
        }
        if let Some(dp) = self.dp.as_ref().filter(|d| d.stage >= 2) {
            let u = unit_of(kind, self.model.n_layers);
            if let (Some(unit), Some(Some(g))) = (dp.units.get(u), dp.grads.get(u)) {
                return within(self, *g, unit, kind);
            }
        }
        let r = self.layout.range(kind);
        View { tensor: self.grads.tensor, offset: r.start, len: r.end - r.start }
    }

    /// ZeRO-3: gathers the units' parameters for the ops that follow (a new copy each time, freed
    /// after its last reader, as DeepSpeed fetches and releases a module's parameters).
    pub(super) fn gather(&mut self, unit_ids: &[usize], phase: Phase) {
        let Some(dp) = self.dp.as_ref().filter(|d| d.stage == 3) else { return };
        let shard = self.params;
        let list: Vec<Unit> = unit_ids.iter().filter_map(|&u| dp.units.get(u).cloned()).collect();
        for (u, unit) in unit_ids.iter().zip(list) {
            let name = self.name(format!("gathered.{}", unit.name));
            let full = self.tensor(name, &[unit.len()], self.dt, Category::Communication, unit.layer);
            self.tensors[full.tensor.0].persistent = false;
            let label = format!("{} (gather)", unit.name);
            self.push(phase, label, Op::AllGather(op::AllGather { shard, full, start: unit.start }));
            if let Some(dp) = self.dp.as_mut()
                && let Some(slot) = dp.gathered.get_mut(*u)
            {
                *slot = Some(full);
            }
        }
    }

    /// ZeRO-2 and 3: the units' full gradients for this backward pass, zeroed (the backward ops
    /// add into them).
    pub(super) fn unit_grads(&mut self, unit_ids: &[usize]) {
        self.host_unit_grads(unit_ids);
        let Some(dp) = self.dp.as_ref().filter(|d| d.stage >= 2) else { return };
        let list: Vec<Unit> = unit_ids.iter().filter_map(|&u| dp.units.get(u).cloned()).collect();
        for (u, unit) in unit_ids.iter().zip(list) {
            let name = self.name(format!("gradients.{}", unit.name));
            let g = self.tensor(name, &[unit.len()], self.dt, Category::Gradients, unit.layer);
            self.tensors[g.tensor.0].persistent = false;
            self.push(Phase::Backward, format!("{} (grad)", unit.name), Op::Zero(op::Zero { dst: g }));
            if let Some(dp) = self.dp.as_mut()
                && let Some(slot) = dp.grads.get_mut(*u)
            {
                *slot = Some(g);
            }
        }
    }

    /// The units' gradients are final for this micro-batch: reduce them, a bucket at a time.
    /// DDP all-reduces and ZeRO-1 reduce-scatters once, after the last micro-batch (PyTorch's
    /// `no_sync`, DeepSpeed's accumulation boundary); ZeRO-2 and 3 reduce-scatter every
    /// micro-batch into the shard and free the unit's full gradients.
    pub(super) fn reduce(&mut self, unit_ids: &[usize]) {
        self.host_copy_down(unit_ids);
        let Some(dp) = self.dp.as_ref() else { return };
        let last_micro = self.micro + 1 == self.techniques.accum;
        if dp.stage < 2 && !last_micro {
            return;
        }
        let (stage, bucket_elems, buckets) = (dp.stage, dp.bucket_elems, dp.buckets.clone());
        let own_grads = dp.own(self.grads);
        let list: Vec<(Unit, Option<View>)> =
            unit_ids.iter().filter_map(|&u| Some((dp.units.get(u)?.clone(), *dp.grads.get(u)?))).collect();
        for (unit, unit_grads) in list {
            let mut at = unit.start;
            while at < unit.end {
                let len = bucket_elems.min(unit.end - at);
                let label = format!("{} (bucket)", unit.name);
                let node = match stage {
                    0 => {
                        let Some(&all) = buckets.first() else { return };
                        let data = View { tensor: self.grads.tensor, offset: at, len };
                        Op::AllReduce(op::AllReduce { data, bucket: View { tensor: all.tensor, offset: at, len } })
                    }
                    _ => {
                        let Some(&b) = buckets.get(self.turn_bucket()) else { return };
                        let bucket = View { tensor: b.tensor, offset: 0, len };
                        let (data, shard) = match (stage, unit_grads) {
                            (1, _) | (_, None) => (View { tensor: self.grads.tensor, offset: at, len }, own_grads),
                            (_, Some(g)) => (View { tensor: g.tensor, offset: at - unit.start, len }, self.grads),
                        };
                        let accumulate = stage >= 2;
                        Op::ReduceScatter(op::ReduceScatter { data, start: at, bucket, shard, accumulate })
                    }
                };
                self.push(Phase::Backward, label, node);
                at += len;
            }
        }
    }

    /// The reduce bucket to fill next (DeepSpeed alternates its two).
    fn turn_bucket(&mut self) -> usize {
        let Some(dp) = self.dp.as_mut() else { return 0 };
        dp.turn = (dp.turn + 1) % 2;
        1 - dp.turn
    }

    /// What the optimizer updates, reads and writes on this rank: (params, grads, copy). With
    /// ZeRO-1 or 2 a rank updates its shard of the full tensors; with ZeRO-3 the shards are the
    /// tensors.
    pub(super) fn optimizer_views(&self) -> (View, View, Option<View>) {
        if let Some(on_host) = self.host_optimizer_views() {
            return on_host;
        }
        let (params, grads) = (self.master.unwrap_or(self.trainable), self.grads);
        let copy = self.master.map(|_| self.trainable);
        let Some(dp) = self.dp.as_ref().filter(|d| d.stage >= 1) else { return (params, grads, copy) };
        let own = |v: View| if v.len == dp.padded { dp.own(v) } else { v };
        (own(params), own(grads), copy.map(own))
    }

    /// ZeRO-1 and 2: after the update every rank gathers the others' updated shards into its full
    /// parameters (in place).
    pub(super) fn gather_updated(&mut self) {
        let Some(dp) = self.dp.as_ref().filter(|d| d.stage == 1 || d.stage == 2) else { return };
        let full = self.params;
        let shard = dp.own(full);
        self.push(Phase::Optimizer, "parameters (gather)", Op::AllGather(op::AllGather { shard, full, start: 0 }));
    }

    /// The model states' lengths on this rank, in elements: (parameters, gradients, master
    /// weights and optimizer state).
    pub(super) fn state_lens(&self, flat: u64) -> (u64, u64, u64) {
        match self.dp.as_ref() {
            None => (flat, flat, flat),
            Some(dp) => {
                let s = dp.shard_len;
                let p = dp.padded;
                match dp.stage {
                    0 => (p, p, p),
                    1 => (p, p, s),
                    2 => (p, s, s),
                    _ => (s, s, s),
                }
            }
        }
    }
}
