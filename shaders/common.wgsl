// Prepended to every shader when it is loaded (kernels::SHADERS): what they all share.

// The flat index of an invocation in a 1-D grid of `size`-wide workgroups, folded into y past the
// per-dimension workgroup limit (Recorder::grid_1d dispatches (nwg.x, nwg.y, 1) groups).
fn flat_id(wg: vec3<u32>, nwg: vec3<u32>, lid: vec3<u32>, size: u32) -> u32 {
    return (wg.y * nwg.x + wg.x) * size + lid.x;
}
