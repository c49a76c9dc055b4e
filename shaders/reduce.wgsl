// The arithmetic of the collectives between simulated GPUs (data parallelism).
//   scale_add — dst = alpha·dst + beta·src: a rank's bucket summed into the first rank's, the
//               last with alpha = beta = 1/N (the mean), and a reduced slice added to a shard.
//   copy      — dst = src: into and out of the buckets, and a gather's shards (a kernel, not
//               copy_buffer_to_buffer, because both may lie in one segment buffer).
// All storage bindings are read_write (see matmul.wgsl for why); dst and src never overlap.

struct Params {
    n: u32, alpha: f32, beta: f32, _pad: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> dst: array<f32>;
@group(0) @binding(2) var<storage, read_write> src: array<f32>;

@compute @workgroup_size(256, 1, 1)
fn scale_add(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let i = flat_id(wg, nwg, lid, 256u);
    if (i < p.n) {
        dst[i] = p.alpha * dst[i] + p.beta * src[i];
    }
}

@compute @workgroup_size(256, 1, 1)
fn copy(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let i = flat_id(wg, nwg, lid, 256u);
    if (i < p.n) {
        dst[i] = src[i];
    }
}
