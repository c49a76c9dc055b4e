//! The tiled GEMM on its own, for `oomlab bench`.

use super::executor::bind::{
    Cmd, Recorded, dispatch_bind_group, encode_commands, placeholder_binding, placeholder_buffer, uniform_buffer,
};
use super::executor::{bytes, storage_buffer};
use super::kernels::{Binding, Command, Kernels, Recorder};
use super::{GpuContext, GpuError};
use crate::backend::ix;
use crate::plan::{Phase, TensorId, View};

/// Times the tiled GEMM on an m×k · k×n product, `iters` dispatches in one submission.
/// Returns GFLOP/s (2·m·n·k per product).
#[cfg(not(target_arch = "wasm32"))]
pub fn bench_matmul(
    ctx: &GpuContext,
    kernels: &Kernels,
    m: usize,
    n: usize,
    k: usize,
    iters: usize,
) -> Result<f64, GpuError> {
    use super::kernels::matmul::{GemmCall, Operand};
    let device = &ctx.device;
    let view = |id: usize, len: usize| View { tensor: TensorId(id), offset: 0, len: len as u64 };
    let (a, b, c) = (view(0, m * k), view(1, k * n), view(2, m * n));
    let mut rec = Recorder::new(ctx.limits().max_compute_workgroups_per_dimension);
    rec.set_context(Phase::Forward, "bench");
    kernels.matmul.gemm.record(
        &mut rec,
        &GemmCall {
            m,
            n,
            k,
            outer: 1,
            heads: 1,
            a: (a, Operand::rows(k)),
            b: (Some(b), Operand::rows(n)),
            c: (c, Operand::rows(n)),
            bias: None,
            alpha: 1.0,
            accumulate: false,
        },
    )?;
    let commands = pollster::block_on(ctx.scoped("matmul benchmark", || {
        let buffers: Vec<wgpu::Buffer> =
            [a, b, c].iter().map(|v| storage_buffer(device, "bench", bytes(ix(v.len)))).collect();
        let uniforms = uniform_buffer(ctx, "bench uniforms", &rec.uniforms);
        let placeholder = placeholder_buffer(device);
        rec.commands
            .iter()
            .filter_map(|(phase, label, command)| match command {
                Command::Dispatch(spec) => {
                    let bindings = spec.bindings.iter().map(|(slot, binding)| match binding {
                        Binding::View(v) => buffers[v.tensor.0].as_entire_buffer_binding(),
                        Binding::Dummy => placeholder_binding(&placeholder, *slot),
                    });
                    let bind_group = dispatch_bind_group(device, label, spec, &uniforms, bindings);
                    let pipeline = kernels.pipeline(device, spec);
                    let cmd = Cmd::Dispatch { pipeline, bind_group, groups: spec.groups };
                    Some(Recorded { phase: *phase, label: label.clone(), cmd })
                }
                Command::Clear(_) => None,
            })
            .collect::<Vec<_>>()
    }))?;
    let commands: Vec<&Recorded> = commands.iter().collect();
    let run = |count: usize| -> Result<f64, GpuError> {
        let start = std::time::Instant::now();
        let mut enc = device.create_command_encoder(&wgpu::CommandEncoderDescriptor { label: Some("bench") });
        for _ in 0..count {
            encode_commands(&mut enc, &commands);
        }
        ctx.queue.submit([enc.finish()]);
        device.poll(wgpu::PollType::wait_indefinitely()).map_err(|e| GpuError::DeviceLost(e.to_string()))?;
        Ok(start.elapsed().as_secs_f64())
    };
    run(1)?; // warm-up
    let secs = run(iters.max(1))?;
    Ok(2.0 * (m * n * k) as f64 * iters.max(1) as f64 / secs / 1e9)
}
