//! ggml's reference quantizers (`quantize_row_*_ref` in ggml-quants.c, which
//! `llama-quantize` runs when it has no importance matrix), so a file we write
//! holds the bytes llama.cpp writes for the same values. ggml builds these
//! without FMA contraction (its base library has no target flags), so every
//! product and sum here rounds on its own, in ggml's order, with C's
//! conversions: an `int` meets a `float` as a `float`.

use half::f16;
use tl_gguf::GgmlType;

/// Values per block of the 32-value types.
pub const BLOCK_VALUES: usize = 32;
/// Values per K-quant super-block.
pub const SUPER_BLOCK_VALUES: usize = 256;
/// ggml's `GROUP_MAX_EPS`: a group whose largest magnitude is below it is zero.
const GROUP_MAX_EPS: f32 = 1e-15;

/// Whether [`encode`] writes `ty`.
pub fn can_encode(ty: GgmlType) -> bool {
    use GgmlType as G;
    matches!(
        ty,
        G::F32
            | G::F16
            | G::Q8_0
            | G::Q4_0
            | G::Q4_1
            | G::Q5_0
            | G::Q5_1
            | G::Q4_K
            | G::Q5_K
            | G::Q6_K
    )
}

/// Appends `values` in `ty`'s layout. `values` must be whole blocks of `ty`
/// (GGUF rows are) and `ty` one that [`can_encode`]; the caller checks both.
pub fn encode(ty: GgmlType, values: &[f32], out: &mut Vec<u8>) {
    use GgmlType as G;
    match ty {
        G::F32 => encode_f32(values, out),
        G::F16 => encode_f16(values, out),
        G::Q8_0 => encode_blocks(values, out, quantize_q8_0),
        G::Q4_0 => encode_blocks(values, out, quantize_q4_0),
        G::Q4_1 => encode_blocks(values, out, quantize_q4_1),
        G::Q5_0 => encode_blocks(values, out, quantize_q5_0),
        G::Q5_1 => encode_blocks(values, out, quantize_q5_1),
        G::Q4_K => encode_blocks(values, out, quantize_q4_k),
        G::Q5_K => encode_blocks(values, out, quantize_q5_k),
        G::Q6_K => encode_blocks(values, out, quantize_q6_k),
        _ => debug_assert!(false, "no reference quantizer for {ty}"),
    }
}

/// F32 values as little-endian bytes (norm weights).
pub fn encode_f32(values: &[f32], out: &mut Vec<u8>) {
    out.extend(values.iter().flat_map(|v| v.to_le_bytes()));
}

/// Round to nearest, ties to even, like `GGML_FP32_TO_FP16`.
fn encode_f16(values: &[f32], out: &mut Vec<u8>) {
    out.extend(values.iter().flat_map(|&v| f16_bytes(v)));
}

fn f16_bytes(v: f32) -> [u8; 2] {
    f16::from_f32(v).to_le_bytes()
}

/// `GGML_FP16_TO_FP32(GGML_FP32_TO_FP16(v))`: what a block's stored factor reads back as.
fn through_f16(v: f32) -> f32 {
    f16::from_f32(v).to_f32()
}

fn encode_blocks<const IN: usize, const OUT: usize>(
    values: &[f32],
    out: &mut Vec<u8>,
    quantize: fn(&[f32; IN]) -> [u8; OUT],
) {
    debug_assert!(values.len().is_multiple_of(IN));
    let (blocks, _) = values.as_chunks::<IN>();
    for block in blocks {
        out.extend_from_slice(&quantize(block));
    }
}

/// ggml's `nearest_int`: round to nearest, ties to even, through the float
/// `x + 1.5·2²³` whose low mantissa bits then hold the integer (valid for
/// |x| < 2²²).
fn nearest_int(x: f32) -> i32 {
    let bits = (x + 12_582_912.0).to_bits() as i32;
    (bits & 0x007f_ffff) - 0x0040_0000
}

/// The value of largest magnitude, with its sign (the first such value on ties).
fn signed_max(x: &[f32]) -> (f32, f32) {
    let (mut amax, mut max) = (0.0f32, 0.0f32);
    for &v in x {
        if amax < v.abs() {
            amax = v.abs();
            max = v;
        }
    }
    (amax, max)
}

/// `f16 d` then 32 `i8`: `d = amax / 127`, `q = round(x / d)` (half away from zero).
pub fn quantize_q8_0(x: &[f32; BLOCK_VALUES]) -> [u8; 34] {
    let amax = x.iter().fold(0.0f32, |m, v| m.max(v.abs()));
    let d = amax / 127.0;
    let id = if d != 0.0 { 1.0 / d } else { 0.0 };
    let mut block = [0u8; 34];
    block[..2].copy_from_slice(&f16_bytes(d));
    for (q, &v) in block[2..].iter_mut().zip(x) {
        // `as i8` saturates; |v·id| ≤ 127 anyway.
        *q = (v * id).round() as i8 as u8;
    }
    block
}

/// `f16 d` then 16 bytes of nibbles (value `j` low, `j + 16` high): `d = max / -8`
/// where `max` is the value of largest magnitude, with its sign;
/// `q = min(15, trunc(x / d + 8.5))`.
pub fn quantize_q4_0(x: &[f32; BLOCK_VALUES]) -> [u8; 18] {
    let (_, max) = signed_max(x);
    let d = max / -8.0;
    let id = if d != 0.0 { 1.0 / d } else { 0.0 };
    let mut block = [0u8; 18];
    block[..2].copy_from_slice(&f16_bytes(d));
    let levels = x.map(|v| ((v * id + 8.5) as i8).min(15) as u8);
    pack_nibbles(&levels, &mut block[2..]);
    block
}

/// `f16 d`, `f16 m` then 16 bytes of nibbles: `d = (max - min) / 15`, `m = min`,
/// `q = min(15, trunc((x - min) / d + 0.5))`.
pub fn quantize_q4_1(x: &[f32; BLOCK_VALUES]) -> [u8; 20] {
    let (min, max) = min_max(x);
    let d = (max - min) / 15.0;
    let id = if d != 0.0 { 1.0 / d } else { 0.0 };
    let mut block = [0u8; 20];
    block[..2].copy_from_slice(&f16_bytes(d));
    block[2..4].copy_from_slice(&f16_bytes(min));
    let levels = x.map(|v| (((v - min) * id + 0.5) as i8).min(15) as u8);
    pack_nibbles(&levels, &mut block[4..]);
    block
}

/// `f16 d`, 32 fifth bits, 16 bytes of nibbles: `d = max / -16` (`max` signed
/// as in Q4_0), `q = min(31, trunc(x / d + 16.5))`.
pub fn quantize_q5_0(x: &[f32; BLOCK_VALUES]) -> [u8; 22] {
    let (_, max) = signed_max(x);
    let d = max / -16.0;
    let id = if d != 0.0 { 1.0 / d } else { 0.0 };
    let mut block = [0u8; 22];
    block[..2].copy_from_slice(&f16_bytes(d));
    let levels = x.map(|v| ((v * id + 16.5) as i8).min(31) as u8);
    block[2..6].copy_from_slice(&fifth_bits(&levels));
    pack_nibbles(&levels, &mut block[6..]);
    block
}

/// `f16 d`, `f16 m`, 32 fifth bits, 16 bytes of nibbles: `d = (max - min) / 31`,
/// `m = min`, `q = trunc((x - min) / d + 0.5)`.
pub fn quantize_q5_1(x: &[f32; BLOCK_VALUES]) -> [u8; 24] {
    let (min, max) = min_max(x);
    let d = (max - min) / 31.0;
    let id = if d != 0.0 { 1.0 / d } else { 0.0 };
    let mut block = [0u8; 24];
    block[..2].copy_from_slice(&f16_bytes(d));
    block[2..4].copy_from_slice(&f16_bytes(min));
    let levels = x.map(|v| ((v - min) * id + 0.5) as u8);
    block[4..8].copy_from_slice(&fifth_bits(&levels));
    pack_nibbles(&levels, &mut block[8..]);
    block
}

fn min_max(x: &[f32]) -> (f32, f32) {
    x.iter()
        .fold((f32::MAX, -f32::MAX), |(lo, hi), &v| (lo.min(v), hi.max(v)))
}

/// Packs the low 4 bits of 32 values two to a byte: value `j` low, `j + 16` high.
fn pack_nibbles(levels: &[u8; BLOCK_VALUES], qs: &mut [u8]) {
    let (low, high) = levels.split_at(BLOCK_VALUES / 2);
    for ((q, &lo), &hi) in qs.iter_mut().zip(low).zip(high) {
        *q = (lo & 0x0f) | ((hi & 0x0f) << 4);
    }
}

/// Bit 4 of value `j` as bit `j` of a little-endian word.
fn fifth_bits(levels: &[u8; BLOCK_VALUES]) -> [u8; 4] {
    let bits = levels
        .iter()
        .enumerate()
        .fold(0u32, |bits, (j, &l)| bits | (u32::from(l >> 4) & 1) << j);
    bits.to_le_bytes()
}

/// Q4_K (144 bytes): 8 sub-blocks of 32 with 6-bit scales and minimums.
pub fn quantize_q4_k(x: &[f32; SUPER_BLOCK_VALUES]) -> [u8; 144] {
    let mut block = [0u8; 144];
    let levels = k4_levels(x, 15, -1.0, 20, &mut block[..16]);
    for (q, (low, high)) in block[16..]
        .chunks_exact_mut(32)
        .zip(levels.chunks_exact(64).map(|group| group.split_at(32)))
    {
        for ((q, &lo), &hi) in q.iter_mut().zip(low).zip(high) {
            *q = lo | (hi << 4);
        }
    }
    block
}

/// Q5_K (176 bytes): Q4_K's header and scales, 32 bytes of fifth bits (value
/// `64j + 32h + i` at bit `2j + h` of byte `i`), 128 bytes of nibbles.
pub fn quantize_q5_k(x: &[f32; SUPER_BLOCK_VALUES]) -> [u8; 176] {
    let mut block = [0u8; 176];
    let levels = k4_levels(x, 31, -0.5, 15, &mut block[..16]);
    let (high, low) = block[16..].split_at_mut(32);
    for (j, (q, group)) in low
        .chunks_exact_mut(32)
        .zip(levels.chunks_exact(64))
        .enumerate()
    {
        let (first, second) = group.split_at(32);
        for i in 0..32 {
            high[i] |= ((first[i] >> 4) << (2 * j)) | ((second[i] >> 4) << (2 * j + 1));
            q[i] = (first[i] & 0x0f) | ((second[i] & 0x0f) << 4);
        }
    }
    block
}

/// The levels (0..=`nmax`) of a Q4_K or Q5_K super-block, writing its `f16 d`,
/// `f16 dmin` and 12 bytes of packed scales into `header` (16 bytes). Each
/// sub-block of 32 gets a scale and minimum by `make_qkx2_quants`; those are
/// quantized to 6 bits against the largest of each, and the values then
/// re-quantized against the stored factors.
fn k4_levels(
    x: &[f32; SUPER_BLOCK_VALUES],
    nmax: i32,
    rmin: f32,
    nstep: i32,
    header: &mut [u8],
) -> [u8; SUPER_BLOCK_VALUES] {
    let mut levels = [0u8; SUPER_BLOCK_VALUES];
    let mut scales = [0.0f32; 8];
    let mut mins = [0.0f32; 8];
    let (mut max_scale, mut max_min) = (0.0f32, 0.0f32);
    for (j, sub) in x.chunks_exact(32).enumerate() {
        let sum_x2 = sub.iter().fold(0.0f32, |s, &v| s + v * v);
        let av_x = (sum_x2 / 32.0).sqrt();
        let weights: [f32; 32] = std::array::from_fn(|l| av_x + sub[l].abs());
        let (scale, min) = make_qkx2_quants(
            sub,
            &weights,
            nmax,
            (rmin, 0.1, nstep),
            &mut levels[32 * j..32 * j + 32],
        );
        scales[j] = scale;
        mins[j] = min;
        if scale > max_scale {
            max_scale = scale;
        }
        if min > max_min {
            max_min = min;
        }
    }
    let inv_scale = if max_scale > 0.0 {
        63.0 / max_scale
    } else {
        0.0
    };
    let inv_min = if max_min > 0.0 { 63.0 / max_min } else { 0.0 };
    let six_bits = |v: f32| (nearest_int(v) as u8).min(63);
    let ls = scales.map(|s| six_bits(inv_scale * s));
    let lm = mins.map(|m| six_bits(inv_min * m));
    header[0..2].copy_from_slice(&f16_bytes(max_scale / 63.0));
    header[2..4].copy_from_slice(&f16_bytes(max_min / 63.0));
    let packed = &mut header[4..16];
    for j in 0..8 {
        if j < 4 {
            packed[j] = ls[j];
            packed[j + 4] = lm[j];
        } else {
            packed[j + 4] = (ls[j] & 0x0f) | ((lm[j] & 0x0f) << 4);
            packed[j - 4] |= (ls[j] >> 4) << 6;
            packed[j] |= (lm[j] >> 4) << 6;
        }
    }
    let d = through_f16(max_scale / 63.0);
    let dmin = through_f16(max_min / 63.0);
    for j in 0..8 {
        let sd = d * f32::from(ls[j]);
        if sd == 0.0 {
            continue;
        }
        let dm = dmin * f32::from(lm[j]);
        for (level, &v) in levels[32 * j..32 * j + 32]
            .iter_mut()
            .zip(&x[32 * j..32 * j + 32])
        {
            *level = nearest_int((v + dm) / sd).clamp(0, nmax) as u8;
        }
    }
    levels
}

/// ggml's `make_qkx2_quants` for `n` values with a minimum: levels
/// `0..=nmax` for `x` at scale and minimum found by trying `nstep + 1`
/// scales around `nmax / (max − min)` and keeping the weighted least-squares
/// fit of lowest error. Returns `(scale, −min)`.
fn make_qkx2_quants(
    x: &[f32],
    weights: &[f32],
    nmax: i32,
    (rmin, rdelta, nstep): (f32, f32, i32),
    levels: &mut [u8],
) -> (f32, f32) {
    let n = x.len();
    let (mut min, mut max) = (x[0], x[0]);
    let mut sum_w = weights[0];
    let mut sum_x = sum_w * x[0];
    for i in 1..n {
        if x[i] < min {
            min = x[i];
        }
        if x[i] > max {
            max = x[i];
        }
        let w = weights[i];
        sum_w += w;
        sum_x += w * x[i];
    }
    if min > 0.0 {
        min = 0.0;
    }
    if max == min {
        levels.fill(0);
        return (0.0, -min);
    }
    let nmax_f = nmax as f32;
    let mut iscale = nmax_f / (max - min);
    let mut scale = 1.0 / iscale;
    let mut best_error = 0.0f32;
    for i in 0..n {
        let l = nearest_int(iscale * (x[i] - min)).clamp(0, nmax);
        levels[i] = l as u8;
        let diff = scale * l as f32 + min - x[i];
        best_error += weights[i] * (diff * diff);
    }
    let mut aux = [0u8; 32];
    for is in 0..=nstep {
        iscale = (rmin + rdelta * is as f32 + nmax_f) / (max - min);
        let (mut sum_l, mut sum_l2, mut sum_xl) = (0.0f32, 0.0f32, 0.0f32);
        for i in 0..n {
            let l = nearest_int(iscale * (x[i] - min)).clamp(0, nmax);
            aux[i] = l as u8;
            let (w, lf) = (weights[i], l as f32);
            sum_l += w * lf;
            sum_l2 += w * lf * lf;
            sum_xl += w * lf * x[i];
        }
        let det = sum_w * sum_l2 - sum_l * sum_l;
        if det > 0.0 {
            let mut this_scale = (sum_w * sum_xl - sum_x * sum_l) / det;
            let mut this_min = (sum_l2 * sum_x - sum_l * sum_xl) / det;
            if this_min > 0.0 {
                this_min = 0.0;
                this_scale = sum_xl / sum_l2;
            }
            let mut cur_error = 0.0f32;
            for i in 0..n {
                let diff = this_scale * f32::from(aux[i]) + this_min - x[i];
                cur_error += weights[i] * (diff * diff);
            }
            if cur_error < best_error {
                levels[..n].copy_from_slice(&aux[..n]);
                best_error = cur_error;
                scale = this_scale;
                min = this_min;
            }
        }
    }
    (scale, -min)
}

/// Q6_K (210 bytes): 128 bytes of low nibbles, 64 of 2-bit high parts, 16
/// signed 8-bit scales (one per 16 values), `f16 d`.
pub fn quantize_q6_k(x: &[f32; SUPER_BLOCK_VALUES]) -> [u8; 210] {
    let mut block = [0u8; 210];
    let mut levels = [0i8; SUPER_BLOCK_VALUES];
    let mut scales = [0.0f32; 16];
    let (mut max_scale, mut max_abs_scale) = (0.0f32, 0.0f32);
    for (ib, sub) in x.chunks_exact(16).enumerate() {
        let scale = make_qx_quants_rmse1(sub, 32, &mut levels[16 * ib..16 * ib + 16]);
        scales[ib] = scale;
        if scale.abs() > max_abs_scale {
            max_abs_scale = scale.abs();
            max_scale = scale;
        }
    }
    if max_abs_scale < GROUP_MAX_EPS {
        return block;
    }
    let iscale = -128.0 / max_scale;
    let d = 1.0 / iscale;
    block[208..].copy_from_slice(&f16_bytes(d));
    // C's int → int8_t conversion keeps the low byte.
    let stored = scales.map(|s| nearest_int(iscale * s).min(127) as i8);
    for (b, &s) in block[192..208].iter_mut().zip(&stored) {
        *b = s as u8;
    }
    let d = through_f16(d);
    let mut stored_levels = [0u8; SUPER_BLOCK_VALUES];
    for (j, &s) in stored.iter().enumerate() {
        let sd = d * f32::from(s);
        let range = 16 * j..16 * j + 16;
        if sd == 0.0 {
            // ggml keeps make_qx_quants' levels for a sub-block whose scale rounds to 0.
            for (out, &l) in stored_levels[range.clone()].iter_mut().zip(&levels[range]) {
                *out = l as u8;
            }
            continue;
        }
        for (out, &v) in stored_levels[range.clone()].iter_mut().zip(&x[range]) {
            *out = (nearest_int(v / sd).clamp(-32, 31) + 32) as u8;
        }
    }
    pack_q6_k(&stored_levels, &mut block[..192]);
    block
}

/// Q6_K's quants: value `128j + 32k + i` low nibble into byte `64j + 32(k % 2) + i`
/// (high nibble for k ≥ 2), bits 4..6 into bits `2k..2k+2` of byte `128 + 32j + i`.
fn pack_q6_k(levels: &[u8; SUPER_BLOCK_VALUES], out: &mut [u8]) {
    let (ql, qh) = out.split_at_mut(128);
    for (half, (ql, qh)) in levels
        .chunks_exact(128)
        .zip(ql.chunks_exact_mut(64).zip(qh.chunks_exact_mut(32)))
    {
        for l in 0..32 {
            let q = [half[l], half[l + 32], half[l + 64], half[l + 96]];
            ql[l] = (q[0] & 0x0f) | ((q[2] & 0x0f) << 4);
            ql[l + 32] = (q[1] & 0x0f) | ((q[3] & 0x0f) << 4);
            qh[l] = (q[0] >> 4) | ((q[1] >> 4) << 2) | ((q[2] >> 4) << 4) | ((q[3] >> 4) << 6);
        }
    }
}

/// ggml's `make_qx_quants(n, nmax, x, L, rmse_type = 1, NULL)`: signed levels
/// `−nmax..nmax−1` (stored `+ nmax`) for `x`, trying 19 scales around
/// `−nmax / max` and keeping the best `x²`-weighted least-squares fit.
/// Returns the scale.
fn make_qx_quants_rmse1(x: &[f32], nmax: i32, levels: &mut [i8]) -> f32 {
    let (amax, max) = signed_max(x);
    if amax < GROUP_MAX_EPS {
        levels.fill(0);
        return 0.0;
    }
    let nmax_f = nmax as f32;
    let level = |iscale: f32, v: f32| nearest_int(iscale * v).clamp(-nmax, nmax - 1);
    let fit = |iscale: f32| {
        x.iter().fold((0.0f32, 0.0f32), |(sumlx, suml2), &v| {
            let l = level(iscale, v) as f32;
            let w = v * v;
            (sumlx + w * v * l, suml2 + w * l * l)
        })
    };
    let mut iscale = -nmax_f / max;
    for (out, &v) in levels.iter_mut().zip(x) {
        *out = (level(iscale, v) + nmax) as i8;
    }
    let (sumlx, suml2) = fit(iscale);
    let mut scale = if suml2 != 0.0 { sumlx / suml2 } else { 0.0 };
    let mut best = scale * sumlx;
    for is in -9..=9 {
        if is == 0 {
            continue;
        }
        iscale = -(nmax_f + 0.1 * is as f32) / max;
        let (sumlx, suml2) = fit(iscale);
        if suml2 > 0.0 && sumlx * sumlx > best * suml2 {
            for (out, &v) in levels.iter_mut().zip(x) {
                *out = (level(iscale, v) + nmax) as i8;
            }
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    scale
}

#[cfg(test)]
mod tests;
