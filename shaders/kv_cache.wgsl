// The KV cache of serving: new tokens' keys and values written into a layer's cache, and
// attention of new tokens over it through each request's block table.
//
// Layouts: qkv (B,T,3C), Q at column h·hs, K at C + h·hs, V at 2C + h·hs; the cache is slots of
// 2C, K then V; slots (B·T): each new token's slot; blocks (B, width): each request's table;
// lens (B): each request's tokens in the cache, this step's included; out (B,T,C).
//   write  — one invocation per element of the new tokens' K and V.
//   attend — one workgroup per (new token, head). Its query sits at position lens[b] − T + t;
//            the keys up to it stream through workgroup memory in tiles of KT positions (each
//            read through the table: block · block_size + offset), the tile's scores are
//            computed one per invocation, and invocation i keeps output dimension i with an
//            online softmax (running max, running sum, rescaled accumulator). Nothing else is
//            kept: this runs for inference only.
// All storage bindings are read_write (see matmul.wgsl for why).

struct Params {
    b: u32, t: u32, c: u32, nh: u32,
    hs: u32, scale: f32, block_size: u32, width: u32,
    cache_len: u32, _pad0: u32, _pad1: u32, _pad2: u32,
}

const KT: u32 = 16u;
const MAXHS: u32 = 64u;

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> qkv: array<f32>;
@group(0) @binding(2) var<storage, read_write> cache: array<f32>;
@group(0) @binding(3) var<storage, read_write> slots: array<u32>;
@group(0) @binding(4) var<storage, read_write> blocks: array<u32>;
@group(0) @binding(5) var<storage, read_write> lens: array<u32>;
@group(0) @binding(6) var<storage, read_write> out: array<f32>;

var<workgroup> q_s: array<f32, 64>;
var<workgroup> k_s: array<f32, 1024>; // KT × MAXHS
var<workgroup> v_s: array<f32, 1024>; // KT × MAXHS
var<workgroup> s_s: array<f32, 16>;   // KT scores
var<workgroup> pos_s: u32;
var<workgroup> live_s: u32;

@compute @workgroup_size(256, 1, 1)
fn write(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let i = flat_id(wg, nwg, lid, 256u);
    let width = 2u * p.c;
    if (i >= p.b * p.t * width) {
        return;
    }
    let row = i / width;
    let e = i % width;
    let dst = slots[row] * width + e;
    if (dst < p.cache_len) {
        cache[dst] = qkv[row * 3u * p.c + p.c + e];
    }
}

// The cache element of position `pos` of request `bi`: its slot's first element.
fn slot_base(bi: u32, pos: u32) -> u32 {
    let block = blocks[bi * p.width + pos / p.block_size];
    return (block * p.block_size + pos % p.block_size) * 2u * p.c;
}

@compute @workgroup_size(64, 1, 1)
fn attend(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let g = flat_id(wg, nwg, vec3<u32>(0u), 64u) / 64u;
    let row = g / p.nh;
    let h = g % p.nh;
    let bi = row / max(p.t, 1u);
    let t1 = row % max(p.t, 1u);
    if (lid.x == 0u) {
        var live = 0u;
        var pos = 0u;
        if (row < p.b * p.t) {
            let len = lens[bi];
            // The cache's last T tokens are this step's; a row before them is padding.
            if (len + t1 >= p.t) {
                live = 1u;
                pos = len + t1 - p.t;
                // Never past the request's table.
                pos = min(pos, p.width * p.block_size - 1u);
            }
        }
        live_s = live;
        pos_s = pos;
    }
    let live = workgroupUniformLoad(&live_s);
    let pos = workgroupUniformLoad(&pos_s);
    if (live == 0u) {
        if (row < p.b * p.t && lid.x < p.hs) {
            out[row * p.c + h * p.hs + lid.x] = 0.0;
        }
        return;
    }
    if (lid.x < p.hs) {
        q_s[lid.x] = qkv[row * 3u * p.c + h * p.hs + lid.x];
    }
    var m = -3.0e38;
    var l = 0.0;
    var acc = 0.0;
    for (var start = 0u; start <= pos; start = start + KT) {
        workgroupBarrier();
        for (var e = lid.x; e < KT * p.hs; e = e + 64u) {
            let r = e / p.hs;
            let i = e % p.hs;
            var k = 0.0;
            var v = 0.0;
            if (start + r <= pos) {
                let base = slot_base(bi, start + r) + h * p.hs + i;
                if (base + p.c < p.cache_len) {
                    k = cache[base];
                    v = cache[base + p.c];
                }
            }
            k_s[r * MAXHS + i] = k;
            v_s[r * MAXHS + i] = v;
        }
        workgroupBarrier();
        if (lid.x < KT) {
            var s = 0.0;
            for (var i = 0u; i < p.hs; i = i + 1u) {
                s = s + q_s[i] * k_s[lid.x * MAXHS + i];
            }
            s_s[lid.x] = s * p.scale;
        }
        workgroupBarrier();
        if (lid.x < p.hs) {
            for (var r = 0u; r < KT; r = r + 1u) {
                if (start + r <= pos) {
                    let s = s_s[r];
                    let m2 = max(m, s);
                    let old = exp(m - m2);
                    let w = exp(s - m2);
                    l = l * old + w;
                    acc = acc * old + w * v_s[r * MAXHS + lid.x];
                    m = m2;
                }
            }
        }
    }
    if (lid.x < p.hs) {
        out[row * p.c + h * p.hs + lid.x] = acc / l;
    }
}
