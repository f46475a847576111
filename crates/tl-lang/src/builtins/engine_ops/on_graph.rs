//! `rms_norm`, `rope` and `attention` written in candle's operations, for
//! operands on the gradient's graph: the engine's kernels compute on plain
//! f32 slices and have no backward pass. The results agree with the
//! kernels' to float32 rounding (a test compares them), and are computed in
//! float32 and converted back to the input's element type.

use candle_core::{DType as CandleDType, Device, Tensor as CandleTensor};
use tl_engine::ops::RopeStyle;

use crate::builtins::nn::causal_mask_tensor;
use crate::error::Result;
use crate::ops::matmul;

fn in_f32(t: &CandleTensor) -> Result<CandleTensor> {
    Ok(t.to_dtype(CandleDType::F32)?)
}

/// x / sqrt(mean(x²) + eps) · weight over the last dimension.
pub fn rms_norm(x: &CandleTensor, weight: &CandleTensor, eps: f64) -> Result<CandleTensor> {
    let work = in_f32(x)?;
    let last = work.rank().saturating_sub(1);
    let scale = work.sqr()?.mean_keepdim(last)?.affine(1.0, eps)?.sqrt()?;
    let out = work
        .broadcast_div(&scale)?
        .broadcast_mul(&in_f32(weight)?)?;
    Ok(out.to_dtype(x.dtype())?)
}

/// The rotation is linear in x: out = D⊙x + O⊙P(x), where P swaps each
/// element with its pair partner. D and O come from rotating 0/1 patterns
/// with the engine's own table (`rotate_rows`), so the angles are the
/// engine's.
pub fn rope(
    x: &CandleTensor,
    style: RopeStyle,
    rotate_rows: impl Fn(&mut [f32]),
) -> Result<CandleTensor> {
    let dims = x.dims().to_vec();
    let head_dim = dims.last().copied().unwrap_or(0);
    let half = head_dim / 2;
    let leads = |i: usize| match style {
        RopeStyle::Adjacent => i.is_multiple_of(2),
        RopeStyle::Halves => i < half,
    };
    let partner = |i: usize| match style {
        RopeStyle::Adjacent => i ^ 1,
        RopeStyle::Halves => (i + half) % head_dim,
    };
    let lead: Vec<bool> = (0..x.elem_count())
        .map(|k| leads(k % head_dim.max(1)))
        .collect();
    // `from_lead` holds, at a pair's lead, what the lead keeps of itself and,
    // at the other element, what it receives from the lead; `from_other`
    // the same for the other element.
    let pattern = |on_lead: bool| -> Vec<f32> {
        let mut values: Vec<f32> = lead
            .iter()
            .map(|&l| f32::from(u8::from(l == on_lead)))
            .collect();
        rotate_rows(&mut values);
        values
    };
    let (from_lead, from_other) = (pattern(true), pattern(false));
    let pick = |keep: bool| -> Vec<f32> {
        (0..lead.len())
            .map(|k| match lead[k] == keep {
                true => from_lead[k],
                false => from_other[k],
            })
            .collect()
    };
    let tensor = |values: Vec<f32>| CandleTensor::from_vec(values, dims.as_slice(), &Device::Cpu);
    let (diagonal, off) = (tensor(pick(true))?, tensor(pick(false))?);
    let partners: Vec<u32> = (0..head_dim).map(|i| partner(i) as u32).collect();
    let partners = CandleTensor::new(partners.as_slice(), &Device::Cpu)?;
    let work = in_f32(x)?;
    let swapped = work.index_select(&partners, work.rank() - 1)?;
    let out = (work.mul(&diagonal)? + swapped.mul(&off)?)?;
    Ok(out.to_dtype(x.dtype())?)
}

/// softmax(q kᵀ / sqrt(d) + causal mask) v, each key/value head repeated
/// for its group of query heads. Shapes are checked by the caller.
pub fn attention(
    q: &CandleTensor,
    k: &CandleTensor,
    v: &CandleTensor,
    start: usize,
) -> Result<CandleTensor> {
    let (heads, seq, dim) = q.dims3()?;
    let (kv_heads, kv_len, _) = k.dims3()?;
    let group = heads / kv_heads.max(1);
    let shared: Vec<u32> = (0..heads).map(|h| (h / group.max(1)) as u32).collect();
    let shared = CandleTensor::new(shared.as_slice(), &Device::Cpu)?;
    let keys = in_f32(k)?.index_select(&shared, 0)?;
    let values = in_f32(v)?.index_select(&shared, 0)?;
    let scale = 1.0 / (dim as f64).sqrt();
    let scores = matmul(&in_f32(q)?, &keys.transpose(1, 2)?)?.affine(scale, 0.0)?;
    let scores = scores.broadcast_add(&causal_mask_tensor(seq, kv_len, start)?)?;
    let shifted = scores.broadcast_sub(&scores.max_keepdim(2)?)?.exp()?;
    let weights = shifted.broadcast_div(&shifted.sum_keepdim(2)?)?;
    matmul(&weights, &values)
}
