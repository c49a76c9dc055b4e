//! 16-bit storage for the kernels: every shader is written for `array<f32>` bindings, and this
//! module specialises it for the dtype of the tensors a dispatch binds.
//!
//! A float binding can be
//! - `F32`: as written;
//! - `F16Native`: `array<f16>` with `enable f16;`, where the adapter has `SHADER_F16`;
//! - `F16Packed` / `Bf16Packed`: two 16-bit values per `u32` word, converted with bit operations,
//!   where it has not (bf16 always: WGSL has no bf16 type).
//!
//! Math stays fp32 in registers: each access `x[i]` of a 16-bit binding becomes `ld_x(i)` (load
//! and widen) and each `x[i] = v;` becomes `st_x(i, v)` (round to nearest even and store). The
//! conversions are written out with bit operations rather than `pack2x16float`, because WGSL
//! leaves `pack2x16float` of an out-of-range value indeterminate, and fp16 loss scaling depends
//! on an overflow becoming inf. Two invocations may write the two halves of one packed word, so
//! packed stores are two atomic read-modify-writes (`atomicAnd` then `atomicOr` of the invocation's
//! own half), which never disturb the other half; such bindings are `array<atomic<u32>>`.
//!
//! Bytes are laid out identically in all 16-bit forms (element i at byte 2i, little-endian), so
//! a tensor reads back the same whichever form wrote it.

use crate::plan::DType;

/// How one storage binding holds its values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Storage {
    F32,
    F16Native,
    F16Packed,
    Bf16Packed,
}

impl Storage {
    /// The storage of a tensor of `dtype` on an adapter with (`native_f16`) or without f16.
    pub fn of(dtype: DType, native_f16: bool) -> Self {
        match dtype {
            DType::F16 if native_f16 => Storage::F16Native,
            DType::F16 => Storage::F16Packed,
            DType::BF16 => Storage::Bf16Packed,
            DType::F32 | DType::U32 => Storage::F32,
        }
    }
}

/// Conversions between f32 and the 16-bit formats' bits (in the low 16 bits of a u32).
const CONVERSIONS: &str = r#"
fn oomlab_f32_to_f16_bits(v: f32) -> u32 {
    let x = bitcast<u32>(v);
    let sign = (x >> 16u) & 0x8000u;
    let ax = x & 0x7fffffffu;
    if (ax > 0x7f800000u) {
        return sign | 0x7e00u;
    }
    let e = i32(ax >> 23u) - 112;
    let m = ax & 0x7fffffu;
    if (e >= 31) {
        return sign | 0x7c00u;
    }
    if (e <= 0) {
        if (e < -10) {
            return sign;
        }
        let mm = m | 0x800000u;
        let shift = u32(14 - e);
        var h = mm >> shift;
        let rem = mm & ((1u << shift) - 1u);
        let half = 1u << (shift - 1u);
        if (rem > half || (rem == half && (h & 1u) == 1u)) {
            h = h + 1u;
        }
        return sign | h;
    }
    var h = (u32(e) << 10u) | (m >> 13u);
    let rem = m & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1u) == 1u)) {
        h = h + 1u;
    }
    return sign | h;
}

fn oomlab_f16_bits_to_f32(h: u32) -> f32 {
    let sign = (h & 0x8000u) << 16u;
    let e = (h >> 10u) & 0x1fu;
    let m = h & 0x3ffu;
    if (e == 0u) {
        let magnitude = f32(m) * 5.9604644775390625e-8;
        return bitcast<f32>(bitcast<u32>(magnitude) | sign);
    }
    if (e == 31u) {
        return bitcast<f32>(sign | 0x7f800000u | (m << 13u));
    }
    return bitcast<f32>(sign | ((e + 112u) << 23u) | (m << 13u));
}

fn oomlab_f32_to_bf16_bits(v: f32) -> u32 {
    let x = bitcast<u32>(v);
    if ((x & 0x7fffffffu) > 0x7f800000u) {
        return (x >> 16u) | 0x40u;
    }
    return (x + 0x7fffu + ((x >> 16u) & 1u)) >> 16u;
}

fn oomlab_bf16_bits_to_f32(h: u32) -> f32 {
    return bitcast<f32>(h << 16u);
}

fn oomlab_to_f16(v: f32) -> f16 {
    // Beyond f16's range the conversion is not defined, but that of an f32 infinity is.
    let x = bitcast<u32>(v);
    if ((x & 0x7fffffffu) >= 0x477ff000u && (x & 0x7fffffffu) <= 0x7f800000u) {
        return f16(bitcast<f32>((x & 0x80000000u) | 0x7f800000u));
    }
    return f16(v);
}
"#;

/// `source` with the float bindings listed in `storages` (binding number → storage) rewritten
/// for 16-bit storage. Bindings not listed, or `F32`, are left as they are.
pub fn specialize(source: &str, storages: &[(u32, Storage)]) -> String {
    let mut half: Vec<(String, Storage)> = Vec::new();
    let mut out_lines = Vec::new();
    // Comments go: text in them must not be mistaken for code.
    for line in source.lines().map(|l| l.find("//").map_or(l, |c| &l[..c])) {
        match parse_binding(line) {
            Some((binding, name)) => {
                let storage = storages.iter().find(|(b, _)| *b == binding).map_or(Storage::F32, |(_, s)| *s);
                if storage == Storage::F32 {
                    out_lines.push(line.to_string());
                } else {
                    half.push((name, storage));
                    out_lines.push(format!("@@DECL{}@@", half.len() - 1));
                }
            }
            None => out_lines.push(line.to_string()),
        }
    }
    if half.is_empty() {
        return source.to_string();
    }
    let body = out_lines.join("\n");
    let written: Vec<bool> = half.iter().map(|(name, _)| is_written(&body, name)).collect();
    let mut text = rewrite(&body, &half);
    let mut helpers = String::new();
    for (k, ((name, storage), written)) in half.iter().zip(&written).enumerate() {
        let packed = matches!(storage, Storage::F16Packed | Storage::Bf16Packed);
        let elem = match (storage, packed && *written) {
            (Storage::F16Native, _) => "f16",
            (_, true) => "atomic<u32>",
            _ => "u32",
        };
        let binding = parse_binding_number(source, name).unwrap_or(0);
        text = text.replace(
            &format!("@@DECL{k}@@"),
            &format!("@group(0) @binding({binding}) var<storage, read_write> {name}: array<{elem}>;"),
        );
        let (dec, enc) = match storage {
            Storage::Bf16Packed => ("oomlab_bf16_bits_to_f32", "oomlab_f32_to_bf16_bits"),
            _ => ("oomlab_f16_bits_to_f32", "oomlab_f32_to_f16_bits"),
        };
        // Parameter names that no shader uses, so they never shadow a binding.
        match (storage, packed && *written) {
            (Storage::F16Native, _) => helpers.push_str(&format!(
                "fn ld_{name}(oomlab_i: u32) -> f32 {{ return f32({name}[oomlab_i]); }}\n\
                 fn st_{name}(oomlab_i: u32, oomlab_v: f32) {{ {name}[oomlab_i] = oomlab_to_f16(oomlab_v); }}\n"
            )),
            (_, true) => helpers.push_str(&format!(
                "fn ld_{name}(oomlab_i: u32) -> f32 {{\n    \
                 return {dec}((atomicLoad(&{name}[oomlab_i >> 1u]) >> ((oomlab_i & 1u) * 16u)) & 0xffffu);\n}}\n\
                 fn st_{name}(oomlab_i: u32, oomlab_v: f32) {{\n    let oomlab_sh = (oomlab_i & 1u) * 16u;\n    \
                 atomicAnd(&{name}[oomlab_i >> 1u], ~(0xffffu << oomlab_sh));\n    \
                 atomicOr(&{name}[oomlab_i >> 1u], {enc}(oomlab_v) << oomlab_sh);\n}}\n"
            )),
            _ => helpers.push_str(&format!(
                "fn ld_{name}(oomlab_i: u32) -> f32 {{\n    \
                 return {dec}(({name}[oomlab_i >> 1u] >> ((oomlab_i & 1u) * 16u)) & 0xffffu);\n}}\n"
            )),
        }
    }
    let native = half.iter().any(|(_, s)| *s == Storage::F16Native);
    let mut result = String::new();
    if native {
        result.push_str("enable f16;\n");
    }
    result.push_str(&text);
    result.push('\n');
    result.push_str(CONVERSIONS.trim_start());
    if !native {
        // oomlab_to_f16 needs the f16 type.
        if let Some(start) = result.find("fn oomlab_to_f16") {
            result.truncate(start);
        }
    }
    result.push('\n');
    result.push_str(&helpers);
    result
}

/// `@group(0) @binding(N) var<storage, read_write> NAME: array<f32>;` → (N, NAME).
fn parse_binding(line: &str) -> Option<(u32, String)> {
    let line = line.trim();
    if !line.starts_with("@group(0) @binding(") || !line.ends_with("array<f32>;") {
        return None;
    }
    let rest = &line["@group(0) @binding(".len()..];
    let close = rest.find(')')?;
    let binding: u32 = rest[..close].parse().ok()?;
    let after = rest.find('>')?;
    let decl = rest[after + 1..].trim();
    let name = decl.split(':').next()?.trim().to_string();
    Some((binding, name))
}

fn parse_binding_number(source: &str, name: &str) -> Option<u32> {
    source.lines().filter_map(parse_binding).find(|(_, n)| n == name).map(|(b, _)| b)
}

fn is_ident(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_'
}

/// Occurrences of `name[` as a whole identifier (not a member, not part of a longer name):
/// the byte offsets of `name` and of its `[`.
fn find_access(text: &str, name: &str, from: usize) -> Option<(usize, usize)> {
    let bytes = text.as_bytes();
    let mut pos = from;
    while let Some(found) = text[pos..].find(name) {
        let start = pos + found;
        let end = start + name.len();
        let before_ok = start == 0 || !(is_ident(bytes[start - 1]) || bytes[start - 1] == b'.');
        let mut j = end;
        while j < bytes.len() && bytes[j] == b' ' {
            j += 1;
        }
        if before_ok && (end >= bytes.len() || !is_ident(bytes[end])) && j < bytes.len() && bytes[j] == b'[' {
            return Some((start, j));
        }
        pos = end;
    }
    None
}

/// The index of the bracket closing the one at `open`.
fn matching(text: &str, open: usize) -> Option<usize> {
    let mut depth = 0i32;
    for (i, c) in text.bytes().enumerate().skip(open) {
        match c {
            b'[' | b'(' => depth += 1,
            b']' | b')' => {
                depth -= 1;
                if depth == 0 {
                    return Some(i);
                }
            }
            _ => {}
        }
    }
    None
}

/// Whether `text` assigns to `name[...]` anywhere.
fn is_written(text: &str, name: &str) -> bool {
    let mut from = 0;
    while let Some((start, open)) = find_access(text, name, from) {
        let Some(close) = matching(text, open) else { return false };
        if assignment_after(text, close).is_some() {
            return true;
        }
        from = start + name.len();
    }
    false
}

/// If `name[...]` ending at `close` is assigned (`] = expr;`), the range of `expr`.
fn assignment_after(text: &str, close: usize) -> Option<(usize, usize)> {
    let bytes = text.as_bytes();
    let mut j = close + 1;
    while j < bytes.len() && bytes[j] == b' ' {
        j += 1;
    }
    if j + 1 < bytes.len() && bytes[j] == b'=' && bytes[j + 1] != b'=' {
        let expr_start = j + 1;
        let mut depth = 0i32;
        for (k, c) in text.bytes().enumerate().skip(expr_start) {
            match c {
                b'[' | b'(' => depth += 1,
                b']' | b')' => depth -= 1,
                b';' if depth == 0 => return Some((expr_start, k)),
                _ => {}
            }
        }
    }
    None
}

/// Rewrites every access to the 16-bit bindings in `text` (recursively inside indices and
/// assigned expressions).
fn rewrite(text: &str, half: &[(String, Storage)]) -> String {
    // The earliest access of any 16-bit binding.
    let next = half
        .iter()
        .filter_map(|(name, _)| find_access(text, name, 0).map(|(s, o)| (s, o, name)))
        .min_by_key(|(s, _, _)| *s);
    let Some((start, open, name)) = next else { return text.to_string() };
    let Some(close) = matching(text, open) else { return text.to_string() };
    let index = rewrite(&text[open + 1..close], half);
    let mut out = String::with_capacity(text.len() + 32);
    out.push_str(&text[..start]);
    match assignment_after(text, close) {
        Some((expr_start, semicolon)) => {
            let expr = rewrite(text[expr_start..semicolon].trim(), half);
            out.push_str(&format!("st_{name}(u32({index}), {expr});"));
            out.push_str(&rewrite(&text[semicolon + 1..], half));
        }
        None => {
            out.push_str(&format!("ld_{name}(u32({index}))"));
            out.push_str(&rewrite(&text[close + 1..], half));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rewrites_loads_and_stores_only_of_the_listed_bindings() {
        let src = "@group(0) @binding(1) var<storage, read_write> a: array<f32>;\n\
                   @group(0) @binding(2) var<storage, read_write> b: array<f32>;\n\
                   fn f(i: u32) { a[i] = a[b[i + 1u]] * tile_a[i] + p.a[0]; b[0] = 1.0; }";
        let out = specialize(src, &[(1, Storage::Bf16Packed)]);
        assert!(out.contains("var<storage, read_write> a: array<atomic<u32>>;"), "{out}");
        assert!(out.contains("st_a(u32(i), ld_a(u32(b[i + 1u])) * tile_a[i] + p.a[0]);"), "{out}");
        assert!(out.contains("b[0] = 1.0;"));
        assert!(out.contains("fn st_a"));
        assert!(!out.contains("enable f16"));
        let native = specialize(src, &[(2, Storage::F16Native)]);
        assert!(native.starts_with("enable f16;"));
        assert!(native.contains("b: array<f16>"));
        assert!(native.contains("st_b(u32(0), 1.0);"), "{native}");
        assert_eq!(specialize(src, &[]), src);
    }
}
