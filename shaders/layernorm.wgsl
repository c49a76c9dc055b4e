// LayerNorm over the last dimension (C), eps 1e-5, with weight and bias.
//   forward           — one thread per row: out = (x − mean)·rstd·w + b; saves mean, rstd
//   backward_input    — one thread per row: dinp (+)= (w·dy − mean(w·dy) − x̂·mean(w·dy·x̂))·rstd
//   backward_params   — one thread per column: dw += Σ dy·x̂, db += Σ dy
// All storage bindings are read_write (see matmul.wgsl for why).

struct Params {
    rows: u32, cols: u32, accumulate: u32, _pad: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> inp: array<f32>;
@group(0) @binding(2) var<storage, read_write> weight: array<f32>;
@group(0) @binding(3) var<storage, read_write> bias: array<f32>;
@group(0) @binding(4) var<storage, read_write> out: array<f32>;
@group(0) @binding(5) var<storage, read_write> mean: array<f32>;
@group(0) @binding(6) var<storage, read_write> rstd: array<f32>;
@group(0) @binding(7) var<storage, read_write> dout: array<f32>;
@group(0) @binding(8) var<storage, read_write> dinp: array<f32>;
@group(0) @binding(9) var<storage, read_write> dweight: array<f32>;
@group(0) @binding(10) var<storage, read_write> dbias: array<f32>;

const EPS: f32 = 1e-5;

@compute @workgroup_size(64, 1, 1)
fn forward(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let r = flat_id(wg, nwg, lid, 64u);
    if (r >= p.rows) {
        return;
    }
    let base = r * p.cols;
    let n = f32(p.cols);
    var sum = 0.0;
    for (var i = 0u; i < p.cols; i = i + 1u) {
        sum = sum + inp[base + i];
    }
    let m = sum / n;
    var var_sum = 0.0;
    for (var i = 0u; i < p.cols; i = i + 1u) {
        let d = inp[base + i] - m;
        var_sum = var_sum + d * d;
    }
    let s = 1.0 / sqrt(var_sum / n + EPS);
    for (var i = 0u; i < p.cols; i = i + 1u) {
        out[base + i] = (inp[base + i] - m) * s * weight[i] + bias[i];
    }
    mean[r] = m;
    rstd[r] = s;
}

@compute @workgroup_size(64, 1, 1)
fn backward_input(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let r = flat_id(wg, nwg, lid, 64u);
    if (r >= p.rows) {
        return;
    }
    let base = r * p.cols;
    let n = f32(p.cols);
    let m = mean[r];
    let s = rstd[r];
    var dnorm_mean = 0.0;
    var dnorm_norm_mean = 0.0;
    for (var i = 0u; i < p.cols; i = i + 1u) {
        let xhat = (inp[base + i] - m) * s;
        let dnorm = weight[i] * dout[base + i];
        dnorm_mean = dnorm_mean + dnorm;
        dnorm_norm_mean = dnorm_norm_mean + dnorm * xhat;
    }
    dnorm_mean = dnorm_mean / n;
    dnorm_norm_mean = dnorm_norm_mean / n;
    for (var i = 0u; i < p.cols; i = i + 1u) {
        let xhat = (inp[base + i] - m) * s;
        var dx = (weight[i] * dout[base + i] - dnorm_mean - xhat * dnorm_norm_mean) * s;
        if (p.accumulate != 0u) {
            dx = dx + dinp[base + i];
        }
        dinp[base + i] = dx;
    }
}

@compute @workgroup_size(64, 1, 1)
fn backward_params(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = gid.x;
    if (i >= p.cols) {
        return;
    }
    var dw = 0.0;
    var db = 0.0;
    for (var r = 0u; r < p.rows; r = r + 1u) {
        let xhat = (inp[r * p.cols + i] - mean[r]) * rstd[r];
        let d = dout[r * p.cols + i];
        dw = dw + d * xhat;
        db = db + d;
    }
    dweight[i] = dweight[i] + dw;
    dbias[i] = dbias[i] + db;
}
