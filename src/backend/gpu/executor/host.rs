//! Offload on the GPU backend: the host tensors live in this process's memory, and the plan's
//! host ops run here between submissions. A copy down (`copy_to_host`) submits what was recorded
//! before it and reads the view back over the bus (awaited, or mapped and polled by the app's
//! path, which never blocks a frame); a copy up (`copy_to_device`) is a queue write, which the
//! queue orders before the commands submitted after it; the optimizer runs its CPU twin
//! (`backend::host_optimizer`) on the host's fp32 values.

use super::readback::{decode, encode};
use super::segments::RecordStop;
use super::{GpuError, GpuExecutor, bytes};
use crate::backend::BackendError;
use crate::backend::host_optimizer;
use crate::plan::{Op, View, op};

/// A copy down whose readback is mapping (the app's path).
pub(super) struct HostWait {
    op: usize,
    staging: wgpu::Buffer,
    size: u64,
    view: View,
    rx: futures_channel::oneshot::Receiver<Result<(), wgpu::BufferAsyncError>>,
}

impl GpuExecutor {
    /// Zeroed host tensors for the plan's host tensors (empty for the device's).
    pub(super) fn new_host_tensors(plan: &crate::plan::Plan) -> Vec<Vec<f32>> {
        plan.tensors.iter().map(|t| if t.host { vec![0.0; crate::units::ix(t.numel())] } else { Vec::new() }).collect()
    }

    /// Bytes this executor holds in host memory for the plan's host tensors (offload).
    pub fn host_bytes(&self) -> u64 {
        self.host_lock().iter().map(|v| bytes(v.len())).sum()
    }

    fn host_lock(&self) -> std::sync::MutexGuard<'_, Vec<Vec<f32>>> {
        self.host.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// A host view's values (empty for a device view).
    pub(super) fn host_values(&self, v: View) -> Vec<f32> {
        let host = self.host_lock();
        let t = host.get(v.tensor.0).map_or(&[][..], Vec::as_slice);
        let (a, b) = (crate::units::ix(v.offset), crate::units::ix(v.offset.saturating_add(v.len)));
        t.get(a..b).map(<[f32]>::to_vec).unwrap_or_default()
    }

    /// Writes (or adds) `values` into a host view; false for a device view.
    pub(super) fn store_host(&self, v: View, values: &[f32], accumulate: bool) -> bool {
        let mut host = self.host_lock();
        let Some(t) = host.get_mut(v.tensor.0).filter(|t| !t.is_empty()) else { return false };
        let a = crate::units::ix(v.offset).min(t.len());
        let b = crate::units::ix(v.offset.saturating_add(v.len)).min(t.len());
        for (d, &x) in t[a..b].iter_mut().zip(values) {
            *d = if accumulate { *d + x } else { x };
        }
        true
    }

    /// The device view host op `i` reads back first (a copy down's source).
    fn host_readback(&self, i: usize) -> Option<View> {
        match self.plan.ops.get(i)?.op {
            Op::CopyToHost(op::CopyToHost { src, .. }) => Some(src),
            _ => None,
        }
    }

    /// Runs host op `i`, `read` being its readback (a copy down's source values).
    fn run_host_op(&mut self, i: usize, read: Vec<f32>) -> Result<(), BackendError> {
        let Some(node) = self.plan.ops.get(i) else { return Ok(()) };
        match node.op {
            Op::Zero(op::Zero { dst }) => {
                self.store_host(dst, &vec![0.0; crate::units::ix(dst.len)], false);
            }
            Op::CopyToHost(op::CopyToHost { dst, accumulate, .. }) => {
                self.store_host(dst, &read, accumulate);
            }
            Op::CopyToDevice(op::CopyToDevice { src, dst }) => {
                let values = self.host_values(src);
                let mut data = encode(self.plan.tensor(dst.tensor).dtype, &values);
                data.resize(data.len().div_ceil(4) * 4, 0);
                let (buffer, offset) = self.locate(dst).ok_or_else(|| {
                    BackendError::Internal(format!("{} has no device memory", self.plan.tensor(dst.tensor).name))
                })?;
                self.ctx.queue.write_buffer(buffer, offset, &data);
            }
            Op::AdamW(op::AdamW { params, grads, m, v, .. }) => {
                let step = self.plan.adamw_step(self.state.steps_taken.max(1));
                let g = self.host_values(grads);
                let mut host = self.host_lock();
                let mut p = std::mem::take(&mut host[params.tensor.0]);
                let mut m1 = std::mem::take(&mut host[m.tensor.0]);
                let mut m2 = std::mem::take(&mut host[v.tensor.0]);
                host_optimizer::adamw(&mut p, &mut m1, &mut m2, &g, &step);
                host[params.tensor.0] = p;
                host[m.tensor.0] = m1;
                host[v.tensor.0] = m2;
            }
            Op::Sgd(op::Sgd { params, grads, momentum, .. }) => {
                let o = self.plan.optimizer;
                let g = self.host_values(grads);
                let mut host = self.host_lock();
                let mut p = std::mem::take(&mut host[params.tensor.0]);
                let mut buf = momentum.map(|b| std::mem::take(&mut host[b.tensor.0]));
                host_optimizer::sgd(&mut p, buf.as_deref_mut(), &g, &o);
                host[params.tensor.0] = p;
                if let (Some(b), Some(values)) = (momentum, buf) {
                    host[b.tensor.0] = values;
                }
            }
            ref other => {
                return Err(BackendError::Internal(format!("{} cannot run on the host", other.name())));
            }
        }
        Ok(())
    }

    /// Runs the started recording to its end, running host ops (awaiting each copy down) on the
    /// way; returns the last commands, unsubmitted.
    pub(super) async fn record_through_host(&mut self) -> Result<wgpu::CommandBuffer, BackendError> {
        loop {
            match self.record_to_collective()? {
                RecordStop::Done(cmd) => return Ok(cmd),
                RecordStop::Host(i) => {
                    let read = match self.host_readback(i) {
                        Some(v) => self.read_view_async(v).await.map_err(|e| self.fail_recording(e.into()))?,
                        None => Vec::new(),
                    };
                    self.run_host_op(i, read).map_err(|e| self.fail_recording(e))?;
                    self.finish_collective(i).map_err(|e| self.fail_recording(e))?;
                }
                RecordStop::Collective(i) => {
                    let label = self.plan.op_label(i).unwrap_or_default();
                    let e = BackendError::Internal(format!("{label} needs every rank: run the step on the cluster"));
                    return Err(self.fail_recording(e));
                }
            }
        }
    }

    /// Stops the run being recorded after a failure, frees the step's memory and returns the
    /// failure (the caller undoes the run's step count, as for any failure).
    fn fail_recording(&mut self, e: BackendError) -> BackendError {
        self.recording = None;
        self.abandon_recording();
        e
    }

    /// The app's path: records on until the end (arming the losses' readback) or until a copy
    /// down must wait for its readback, which [`Self::poll_host`] picks up.
    pub(super) fn pump(&mut self) -> Result<(), BackendError> {
        loop {
            match self.record_to_collective()? {
                RecordStop::Done(cmd) => {
                    self.ctx.queue.submit([cmd]);
                    self.arm_readback();
                    return Ok(());
                }
                RecordStop::Host(i) => match self.host_readback(i) {
                    Some(view) => {
                        let wait = self.start_readback(i, view).map_err(|e| self.fail_recording(e.into()))?;
                        self.host_wait = Some(wait);
                        return Ok(());
                    }
                    None => {
                        self.run_host_op(i, Vec::new()).map_err(|e| self.fail_recording(e))?;
                        self.finish_collective(i).map_err(|e| self.fail_recording(e))?;
                    }
                },
                RecordStop::Collective(i) => {
                    let label = self.plan.op_label(i).unwrap_or_default();
                    let e = BackendError::Internal(format!("{label} needs every rank: run the step on the cluster"));
                    return Err(self.fail_recording(e));
                }
            }
        }
    }

    /// Copies a device view into a new staging buffer and starts mapping it.
    fn start_readback(&self, op: usize, view: View) -> Result<HostWait, GpuError> {
        let size = self.view_bytes(view).max(4);
        let (buffer, offset) = self.locate(view).ok_or_else(|| {
            GpuError::Readback(format!("tensor {} has no memory", self.plan.tensor(view.tensor).name))
        })?;
        let staging = self.ctx.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("copy to host"),
            size,
            usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        let mut enc =
            self.ctx.device.create_command_encoder(&wgpu::CommandEncoderDescriptor { label: Some("copy to host") });
        enc.copy_buffer_to_buffer(buffer, offset, &staging, 0, self.view_bytes(view));
        self.ctx.queue.submit([enc.finish()]);
        let (tx, rx) = futures_channel::oneshot::channel();
        staging.slice(..size).map_async(wgpu::MapMode::Read, move |r| {
            let _ = tx.send(r);
        });
        Ok(HostWait { op, staging, size, view, rx })
    }

    /// The app's path: once a copy down's readback is mapped, runs it and records on. None while
    /// it is still mapping (or no copy is waiting); an error stops the step.
    pub(super) fn poll_host(&mut self) -> Option<Result<(), BackendError>> {
        let wait = self.host_wait.as_mut()?;
        let mapped = match wait.rx.try_recv() {
            Ok(None) => {
                return match self.ctx.check_alive() {
                    Ok(()) => None,
                    Err(e) => {
                        self.host_wait = None;
                        Some(Err(self.fail_recording(e.into())))
                    }
                };
            }
            Ok(Some(r)) => r.map_err(|e| GpuError::Readback(e.to_string())),
            Err(_) => Err(GpuError::Readback("the map callback was dropped".into())),
        };
        let wait = self.host_wait.take()?;
        let read = mapped.and_then(|()| {
            let data =
                wait.staging.slice(..wait.size).get_mapped_range().map_err(|e| GpuError::Readback(e.to_string()))?;
            let values = decode(self.plan.tensor(wait.view.tensor).dtype, &data, crate::units::ix(wait.view.len));
            drop(data);
            wait.staging.unmap();
            Ok(values)
        });
        let done = read
            .map_err(|e| self.fail_recording(e.into()))
            .and_then(|values| self.run_host_op(wait.op, values).map_err(|e| self.fail_recording(e)))
            .and_then(|()| self.finish_collective(wait.op).map_err(|e| self.fail_recording(e)))
            .and_then(|()| self.pump());
        Some(done)
    }
}
