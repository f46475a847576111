//! einsum against hand-computed results and against `@`.

use candle_core::{DType as CandleDType, Device, Tensor as CandleTensor};

use std::collections::HashMap;

use super::plan::cheapest_pair_of;
use super::{einsum, parse};
use crate::error::LangError;

type TestResult = std::result::Result<(), LangError>;

fn t(values: &[f32], shape: &[usize]) -> CandleTensor {
    CandleTensor::from_vec(values.to_vec(), shape, &Device::Cpu).expect("test tensor")
}

fn seq(shape: &[usize]) -> CandleTensor {
    let n: usize = shape.iter().product();
    let values: Vec<f32> = (0..n).map(|i| (i as f32 * 0.37).sin()).collect();
    t(&values, shape)
}

fn values(x: &CandleTensor) -> Vec<f32> {
    x.flatten_all()
        .and_then(|x| x.to_vec1::<f32>())
        .expect("values")
}

fn close(a: &CandleTensor, b: &CandleTensor) -> bool {
    a.dims() == b.dims()
        && values(a)
            .iter()
            .zip(values(b))
            .all(|(x, y)| (x - y).abs() < 1e-5)
}

#[test]
fn matrix_product() -> TestResult {
    let a = t(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3]);
    let b = t(&[1.0, 0.0, 0.0, 1.0, 1.0, 1.0], &[3, 2]);
    let out = einsum("ij,jk->ik", &[a, b])?;
    assert_eq!(out.dims(), &[2, 2]);
    assert_eq!(values(&out), vec![4.0, 5.0, 10.0, 11.0]);
    Ok(())
}

#[test]
fn one_operand_patterns() -> TestResult {
    let m = t(&[1.0, 2.0, 3.0, 4.0], &[2, 2]);
    assert_eq!(
        values(&einsum("ii->i", std::slice::from_ref(&m))?),
        vec![1.0, 4.0]
    );
    assert_eq!(
        values(&einsum("ii->", std::slice::from_ref(&m))?),
        vec![5.0]
    );
    assert_eq!(
        values(&einsum("ij->ji", std::slice::from_ref(&m))?),
        vec![1.0, 3.0, 2.0, 4.0]
    );
    assert_eq!(
        values(&einsum("ij->i", std::slice::from_ref(&m))?),
        vec![3.0, 7.0]
    );
    assert_eq!(einsum("ij->", &[m])?.dims(), &[] as &[usize]);
    Ok(())
}

#[test]
fn vector_patterns() -> TestResult {
    let u = t(&[1.0, 2.0, 3.0], &[3]);
    let v = t(&[4.0, 5.0], &[2]);
    assert_eq!(
        values(&einsum("i,i->", &[u.clone(), u.clone()])?),
        vec![14.0]
    );
    let outer = einsum("i,j->ij", &[u.clone(), v])?;
    assert_eq!(outer.dims(), &[3, 2]);
    assert_eq!(values(&outer), vec![4.0, 5.0, 8.0, 10.0, 12.0, 15.0]);
    assert_eq!(
        values(&einsum("i,i->i", &[u.clone(), u])?),
        vec![1.0, 4.0, 9.0]
    );
    Ok(())
}

#[test]
fn attention_scores_match_matmul() -> TestResult {
    let q = seq(&[2, 3, 4, 5]);
    let k = seq(&[2, 3, 6, 5]);
    let out = einsum("bhqd,bhkd->bhqk", &[q.clone(), k.clone()])?;
    let expected = q.matmul(&k.transpose(2, 3)?.contiguous()?)?;
    assert!(close(&out, &expected));
    // The same contraction with the output in another order.
    let swapped = einsum("bhqd,bhkd->bhkq", &[q, k])?;
    assert!(close(&swapped, &expected.transpose(2, 3)?.contiguous()?));
    Ok(())
}

#[test]
fn summed_free_letters_and_half_precision() -> TestResult {
    // "ij,k->i" sums j on the left and k on the right before multiplying.
    let a = t(&[1.0, 2.0, 3.0, 4.0], &[2, 2]);
    let b = t(&[1.0, 1.0, 1.0], &[3]);
    assert_eq!(
        values(&einsum("ij,k->i", &[a.clone(), b])?),
        vec![9.0, 21.0]
    );
    let half = a.to_dtype(CandleDType::F16)?;
    let out = einsum("ij,jk->ik", &[half.clone(), half])?;
    assert_eq!(out.dtype(), CandleDType::F16);
    assert_eq!(
        values(&out.to_dtype(CandleDType::F32)?),
        vec![7.0, 10.0, 15.0, 22.0]
    );
    Ok(())
}

#[test]
fn products_without_sums() -> TestResult {
    let a = t(&[1.0, 2.0, 3.0, 4.0], &[2, 2]);
    let b = t(&[5.0, 6.0, 7.0, 8.0], &[2, 2]);
    let hadamard = einsum("ij,ij->ij", &[a.clone(), b.clone()])?;
    assert_eq!(values(&hadamard), vec![5.0, 12.0, 21.0, 32.0]);
    let transposed = einsum("ij,ji->ij", &[a.clone(), b.clone()])?;
    assert_eq!(values(&transposed), vec![5.0, 14.0, 18.0, 32.0]);
    let batched_outer = einsum("bi,bj->bij", &[a, b])?;
    assert_eq!(batched_outer.dims(), &[2, 2, 2]);
    assert_eq!(
        values(&batched_outer),
        vec![5.0, 6.0, 10.0, 12.0, 21.0, 24.0, 28.0, 32.0]
    );
    Ok(())
}

#[test]
fn spec_errors() {
    let m = t(&[0.0; 6], &[2, 3]);
    let err = |spec: &str, ops: &[CandleTensor]| {
        einsum(spec, ops)
            .err()
            .map(|e| e.message)
            .unwrap_or_default()
    };
    assert!(err("ij,jk", &[m.clone(), m.clone()]).contains("explicit output"));
    assert!(err("...ij->ij", std::slice::from_ref(&m)).contains("`...` is not supported"));
    assert!(
        err("ij,jk->ik", std::slice::from_ref(&m)).contains("names 2 operands, but 1 were given")
    );
    assert!(err("ijk->i", std::slice::from_ref(&m))
        .contains("has 3 letters, but float32[2, 3] has 2 dimensions"));
    assert!(err("ij,jk->ik", &[m.clone(), m.clone()])
        .contains("letter `j` is 3 in one place and 2 in another"));
    assert!(err("ij->iz", std::slice::from_ref(&m)).contains("output letter `z` is in no operand"));
    assert!(err("ij->ii", std::slice::from_ref(&m)).contains("appears twice"));
    assert!(err("i1->i", std::slice::from_ref(&m)).contains("`1` is not a letter"));
    let ints = m.to_dtype(CandleDType::I64).expect("ints");
    assert!(err("ij,jk->ik", &[ints, m.clone()]).contains("different element types"));
    assert!(parse("ab , bc -> ac", 2).is_ok());
}

#[test]
fn empty_dimensions() -> TestResult {
    let square = t(&[], &[0, 0]);
    assert_eq!(einsum("ii->i", &[square])?.dims(), &[0]);
    let (a, b) = (t(&[], &[2, 0]), t(&[], &[0, 3]));
    let out = einsum("ij,jk->ik", &[a, b])?;
    assert_eq!(out.dims(), &[2, 3]);
    assert_eq!(values(&out), vec![0.0; 6]);
    Ok(())
}

#[test]
fn results_too_large_to_allocate_are_errors() {
    let long = t(&vec![1.0; 100_000], &[100_000]);
    let outer = einsum("i,j->ij", &[long.clone(), long]).map_err(|e| e.message);
    assert!(outer.is_err_and(|m| m.contains("too large")));
    let short = t(&[1.0; 2000], &[2000]);
    let fine = einsum("i,j->ij", &[short.clone(), short]).map(|t| t.dims().to_vec());
    assert_eq!(fine.ok(), Some(vec![2000, 2000]));
}

fn close_relative(a: &CandleTensor, b: &CandleTensor) -> bool {
    let scale = values(b).iter().fold(1f32, |m, x| m.max(x.abs()));
    a.dims() == b.dims()
        && values(a)
            .iter()
            .zip(values(b))
            .all(|(x, y)| (x - y).abs() <= 1e-5 * scale)
}

#[test]
fn many_operands_contract_cheapest_pair_first() -> TestResult {
    let (a, b, c) = (seq(&[3, 40]), seq(&[40, 50]), seq(&[50, 2]));
    let chained = einsum("ij,jk,kl->il", &[a.clone(), b.clone(), c.clone()])?;
    // Another association order rounds differently: compare relatively.
    assert!(close_relative(&chained, &a.matmul(&b)?.matmul(&c)?));
    // The operands' order does not matter; the result's is the output's.
    let reordered = einsum("kl,ij,jk->li", &[c.clone(), a.clone(), b.clone()])?;
    assert!(close_relative(&reordered, &chained.t()?));
    let sizes = HashMap::from([('i', 3), ('j', 40), ('k', 50)]);
    let letters = [vec!['i', 'j'], vec!['j', 'k'], vec!['k']];
    assert_eq!(
        cheapest_pair_of(&letters, &sizes),
        (1, 2),
        "matrix times vector first"
    );
    Ok(())
}

#[test]
fn ints_sum_exactly_and_bools_join() -> TestResult {
    // 2^50 + 3 needs 51 bits: exact in f64, which f32 sums would not be.
    let big = CandleTensor::from_vec(vec![1i64 << 25, 3, 1, 1], (2, 2), &Device::Cpu)?;
    let out = einsum("ij,jk->ik", &[big.clone(), big])?;
    assert_eq!(out.dtype(), CandleDType::I64);
    assert_eq!(
        out.flatten_all()?.to_vec1::<i64>()?,
        vec![(1 << 50) + 3, 3 * (1 << 25) + 3, (1 << 25) + 1, 4]
    );
    let edges = CandleTensor::from_vec(vec![0u8, 1, 0, 0, 0, 1, 0, 0, 0], (3, 3), &Device::Cpu)?;
    let two_steps = einsum("xy,yz->xz", &[edges.clone(), edges])?;
    assert_eq!(two_steps.dtype(), CandleDType::U8);
    assert_eq!(
        two_steps.flatten_all()?.to_vec1::<u8>()?,
        vec![0, 0, 1, 0, 0, 0, 0, 0, 0]
    );
    Ok(())
}

/// Pseudo-random 0/1 values, about a third of them 1.
fn bools(shape: &[usize], seed: u64) -> CandleTensor {
    let n: usize = shape.iter().product();
    let mut state = seed;
    let values: Vec<u8> = (0..n)
        .map(|_| {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            u8::from((state >> 33).is_multiple_of(3))
        })
        .collect();
    CandleTensor::from_vec(values, shape, &Device::Cpu).expect("bools")
}

#[test]
fn bool_joins_equal_counting_products_over_word_boundaries() -> TestResult {
    // 130 and 90 columns cross 64-bit word boundaries; a batch letter too.
    let (a, b) = (bools(&[2, 70, 130], 1), bools(&[2, 130, 90], 2));
    let joined = einsum("bik,bkj->bij", &[a.clone(), b.clone()])?;
    assert_eq!(joined.dtype(), CandleDType::U8);
    let counts = a
        .to_dtype(CandleDType::F32)?
        .matmul(&b.to_dtype(CandleDType::F32)?)?;
    assert_eq!(
        joined.flatten_all()?.to_vec1::<u8>()?,
        counts.gt(0.0)?.flatten_all()?.to_vec1::<u8>()?
    );
    // "Any" over a letter, and an outer product ("and") of bools.
    let rows = einsum("ik->i", &[bools(&[5, 7], 3)])?;
    assert!(rows.flatten_all()?.to_vec1::<u8>()?.iter().all(|&v| v <= 1));
    let outer = einsum("i,j->ij", &[bools(&[4], 4), bools(&[3], 5)])?;
    assert_eq!(outer.dtype(), CandleDType::U8);
    let nothing = einsum("ik,kj->ij", &[bools(&[2, 0], 6), bools(&[0, 3], 7)])?;
    assert_eq!(nothing.flatten_all()?.to_vec1::<u8>()?, vec![0; 6]);
    Ok(())
}

#[test]
fn small_products_in_a_loop_equal_matmul() -> TestResult {
    // 2·5·7·3 multiply-adds take the plain loop; 2·50·70·30 take matmul.
    for (m, k, n) in [(5, 7, 3), (50, 70, 30)] {
        let (a, b) = (seq(&[2, m, k]), seq(&[2, k, n]));
        let out = einsum("bik,bkj->bij", &[a.clone(), b.clone()])?;
        assert!(close_relative(&out, &a.matmul(&b)?), "{m}×{k}×{n}");
    }
    Ok(())
}

#[test]
fn float32_products_are_fused_chains_in_order_whatever_the_shape() -> TestResult {
    // Each element of a two-operand float32 product is one fused
    // multiply-add chain over the summed letter in order (the engine's
    // `matmul_f32`): the bits of a row do not depend on the rows beside it,
    // and a transposed operand gives the same bits.
    let (m, k, n) = (37, 300, 21);
    let a = seq(&[m, k]);
    let b = (seq(&[k, n]) * 0.5)?;
    let all = values(&einsum("ij,jk->ik", &[a.clone(), b.clone()])?);
    let (av, bv) = (values(&a), values(&b));
    for i in 0..m {
        for j in 0..n {
            let chain = (0..k).fold(0.0f32, |sum, l| av[i * k + l].mul_add(bv[l * n + j], sum));
            assert_eq!(all[i * n + j].to_bits(), chain.to_bits(), "({i}, {j})");
        }
    }
    let row = einsum("ij,jk->ik", &[a.narrow(0, 5, 1)?, b.clone()])?;
    assert_eq!(values(&row), all[5 * n..6 * n]);
    let transposed = einsum("ji,jk->ik", &[a.t()?.contiguous()?, b])?;
    assert_eq!(values(&transposed), all);
    Ok(())
}

#[test]
fn the_matrix_operator_gives_an_equations_bits() -> TestResult {
    // `@` on float32 operands in order runs the product equations use.
    let (a, b) = (seq(&[3, 37, 300]), (seq(&[3, 300, 21]) * 0.5)?);
    let product = crate::ops::matmul(&a, &b)?;
    let equation = einsum("bij,bjk->bik", &[a.clone(), b])?;
    assert_eq!(values(&product), values(&equation));
    let (matrix, vector) = (a.get(0)?, seq(&[300]));
    let by_operator = crate::ops::matmul(&matrix, &vector)?;
    let by_equation = einsum("ij,j->i", &[matrix, vector])?;
    assert_eq!(by_operator.dims(), &[37]);
    assert_eq!(values(&by_operator), values(&by_equation));
    Ok(())
}
