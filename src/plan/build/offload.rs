//! Offload to host memory in a plan (see `plan::offload`): the host's tensors, the copies
//! between the device and the host, and the optimizer's operands on the host.

use super::Builder;
use super::shard::within;
use crate::model::params::ParamKind;
use crate::plan::parallel::{Unit, unit_of, units};
use crate::plan::{Category, DType, Offload, Op, Phase, View, op};

/// The host's side of an offloaded step, while its plan is built.
pub(super) struct HostSide {
    pub mode: Offload,
    /// The fp32 copy of the parameters the CPU's optimizer updates.
    pub master: View,
    /// The fp32 gradients the CPU's optimizer reads.
    pub grads: View,
    pub units: Vec<Unit>,
    /// `optimizer+gradients`: each unit's gradients on the device, from its backward until they
    /// are copied down.
    slots: Vec<Option<View>>,
}

impl Builder {
    /// A tensor in host memory, kept for the run.
    pub(super) fn host_tensor(&mut self, name: &str, len: u64, category: Category) -> View {
        let v = self.tensor(name, &[len], DType::F32, category, None);
        self.tensors[v.tensor.0].host = true;
        v
    }

    /// The optimizer's states (`flat` elements each), on the host when offloaded.
    pub(super) fn optimizer_states(&mut self, flat: u64) -> Vec<View> {
        let names = self.optimizer.state_names();
        let on_host = self.host.is_some();
        names
            .iter()
            .map(|name| {
                let v = self.tensor(format!("optimizer.{name}"), &[flat], DType::F32, Category::OptimizerState, None);
                self.tensors[v.tensor.0].host = on_host;
                v
            })
            .collect()
    }

    /// The host's tensors: the fp32 master copy and the fp32 gradients (the optimizer's state is
    /// made with the optimizer). Called once the device's parameters exist.
    pub(super) fn host_side(&mut self) {
        let mode = self.techniques.offload;
        if !mode.is_on() {
            return;
        }
        let flat = self.layout.flat_len;
        let master = self.host_tensor("host.master_weights", flat, Category::MasterWeights);
        let grads = self.host_tensor("host.gradients", flat, Category::Gradients);
        let list = units(&self.layout, self.model.n_layers);
        let n = list.len();
        if mode.gradients() {
            // The gradients' home is the host: zero_grad clears it, the units add into it.
            self.grads = grads;
        }
        self.host = Some(HostSide { mode, master, grads, units: list, slots: vec![None; n] });
    }

    /// `optimizer+gradients`: a parameter's gradient in its unit's device tensor of this backward
    /// pass (None otherwise).
    pub(super) fn host_grad_view(&self, kind: ParamKind) -> Option<View> {
        let h = self.host.as_ref().filter(|h| h.mode.gradients())?;
        let u = unit_of(kind, self.model.n_layers);
        let (unit, g) = (h.units.get(u)?, (*h.slots.get(u)?)?);
        Some(within(self, g, unit, kind))
    }

    /// `optimizer+gradients`: the units' gradients on the device for this backward pass, zeroed.
    pub(super) fn host_unit_grads(&mut self, unit_ids: &[usize]) {
        let Some(h) = self.host.as_ref().filter(|h| h.mode.gradients()) else { return };
        let list: Vec<Unit> = unit_ids.iter().filter_map(|&u| h.units.get(u).cloned()).collect();
        for (u, unit) in unit_ids.iter().zip(list) {
            let name = self.name(format!("gradients.{}", unit.name));
            let g = self.tensor(name, &[unit.len()], self.dt, Category::Gradients, unit.layer);
            self.tensors[g.tensor.0].persistent = false;
            self.push(Phase::Backward, format!("{} (grad)", unit.name), Op::Zero(op::Zero { dst: g }));
            if let Some(slot) = self.host.as_mut().and_then(|h| h.slots.get_mut(*u)) {
                *slot = Some(g);
            }
        }
    }

    /// `optimizer+gradients`: the units' gradients are final for this micro-batch: each is copied
    /// down and added to the host's, and its device tensor freed (DeepSpeed copies each bucket of
    /// gradients to the CPU as the backward pass fills it).
    pub(super) fn host_copy_down(&mut self, unit_ids: &[usize]) {
        let Some(h) = self.host.as_ref().filter(|h| h.mode.gradients()) else { return };
        let host_grads = h.grads;
        let list: Vec<(Unit, View)> =
            unit_ids.iter().filter_map(|&u| Some((h.units.get(u)?.clone(), (*h.slots.get(u)?)?))).collect();
        for (unit, src) in list {
            let dst = View { tensor: host_grads.tensor, offset: unit.start, len: unit.len() };
            let label = format!("{} (to host)", unit.name);
            self.push(Phase::Backward, label, Op::CopyToHost(op::CopyToHost { src, dst, accumulate: true }));
        }
    }

    /// The optimizer's operands on the host: (master copy, gradients, no 16-bit copy).
    pub(super) fn host_optimizer_views(&self) -> Option<(View, View, Option<View>)> {
        self.host.as_ref().map(|h| (h.master, h.grads, None))
    }

    /// Before the update: `optimizer` copies the device's gradients down.
    pub(super) fn host_before_update(&mut self) {
        let Some(h) = self.host.as_ref().filter(|h| h.mode == Offload::Optimizer) else { return };
        let (src, dst) = (self.grads, h.grads);
        let node = Op::CopyToHost(op::CopyToHost { src, dst, accumulate: false });
        self.push(Phase::Optimizer, "gradients (to host)", node);
    }

    /// After the update: the updated parameters go up, rounded to the device's precision.
    pub(super) fn host_after_update(&mut self) {
        let Some(h) = self.host.as_ref() else { return };
        let (src, dst) = (h.master, self.params);
        self.push(Phase::Optimizer, "parameters (to device)", Op::CopyToDevice(op::CopyToDevice { src, dst }));
    }
}
