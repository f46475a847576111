//! A relation's tuples, stored sparsely: the list of tuples that hold (as
//! element positions), and a membership structure over each tuple's code
//! (its number in the mixed radix of the column sizes). The membership is a
//! bitset over every possible tuple when that is small (a 2,000 × 2,000
//! relation needs 500 KB), else a hash set. A relation becomes a dense 0/1
//! tensor only when a program uses it as a value.
//!
//! [`KeyIndex`] groups the tuples by some of their columns (CSR when the key
//! space is small), which is what a join looks tuples up by.

use std::collections::{HashMap, HashSet};

use candle_core::{Device, Tensor as CandleTensor};

use crate::error::{LangError, Result};
use crate::ops::shapes::checked_numel;

/// Relations with at most this many possible tuples keep a bitset.
const MAX_BITSET_BITS: u64 = 1 << 27;

/// The most tuples one relation may hold (tuple numbers are `u32`).
const MAX_TUPLES: usize = 1 << 30;

/// Key spaces up to this size are indexed with an offsets array.
const MAX_DENSE_KEYS: u64 = 1 << 22;

/// The tuples of one relation.
#[derive(Debug, Clone)]
pub struct TupleSet {
    /// Each column's domain size.
    sizes: Vec<usize>,
    /// The tuples, `arity` positions each, in the order they were added.
    rows: Vec<u32>,
    len: usize,
    members: Members,
}

#[derive(Debug, Clone)]
enum Members {
    Bits(Vec<u64>),
    Hashed(HashSet<u64>),
}

impl TupleSet {
    /// An empty relation over columns of these sizes.
    pub fn new(sizes: Vec<usize>) -> Result<Self> {
        let total = (sizes.iter()).try_fold(1u64, |acc, &n| acc.checked_mul(n as u64));
        let members = match total {
            Some(bits) if bits <= MAX_BITSET_BITS => {
                Members::Bits(vec![0; bits.div_ceil(64) as usize])
            }
            Some(_) => Members::Hashed(HashSet::new()),
            None => {
                return Err(LangError::user(format!(
                    "a relation over domains of sizes {sizes:?} has too many possible tuples"
                )))
            }
        };
        Ok(TupleSet {
            sizes,
            rows: Vec::new(),
            len: 0,
            members,
        })
    }

    /// Each column's domain size.
    pub fn sizes(&self) -> &[usize] {
        &self.sizes
    }

    pub fn arity(&self) -> usize {
        self.sizes.len()
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Tuple `i`.
    #[inline]
    pub fn row(&self, i: usize) -> &[u32] {
        let arity = self.arity();
        &self.rows[i * arity..(i + 1) * arity]
    }

    /// Every tuple, in the order they were added.
    pub fn rows(&self) -> impl Iterator<Item = &[u32]> {
        (0..self.len).map(|i| self.row(i))
    }

    /// The tuple's number in the mixed radix of the column sizes.
    #[inline]
    fn code(&self, tuple: &[u32]) -> u64 {
        (tuple.iter().zip(&self.sizes)).fold(0u64, |acc, (&p, &n)| acc * n as u64 + p as u64)
    }

    #[inline]
    pub fn contains(&self, tuple: &[u32]) -> bool {
        let code = self.code(tuple);
        match &self.members {
            Members::Bits(bits) => bits[(code / 64) as usize] & (1 << (code % 64)) != 0,
            Members::Hashed(set) => set.contains(&code),
        }
    }

    /// Adds a tuple; false when it was already there.
    #[inline]
    pub fn insert(&mut self, tuple: &[u32]) -> Result<bool> {
        let code = self.code(tuple);
        let new = match &mut self.members {
            Members::Bits(bits) => {
                let (word, bit) = ((code / 64) as usize, 1u64 << (code % 64));
                let new = bits[word] & bit == 0;
                bits[word] |= bit;
                new
            }
            Members::Hashed(set) => set.insert(code),
        };
        if new {
            if self.len == MAX_TUPLES {
                return Err(LangError::user(format!(
                    "a relation would hold more than {MAX_TUPLES} tuples"
                )));
            }
            self.rows.extend_from_slice(tuple);
            self.len += 1;
        }
        Ok(new)
    }

    /// The relation as a dense bool tensor over its domains.
    pub fn to_tensor(&self) -> Result<CandleTensor> {
        let numel = checked_numel(&self.sizes)?;
        let mut values = vec![0u8; numel];
        for row in self.rows() {
            values[self.code(row) as usize] = 1;
        }
        Ok(CandleTensor::from_vec(
            values,
            self.sizes.as_slice(),
            &Device::Cpu,
        )?)
    }
}

/// The tuples of a set grouped by the values of some columns.
pub struct KeyIndex {
    radix: Vec<u64>,
    groups: Groups,
}

enum Groups {
    /// The tuples with key `k` are `tuples[starts[k]..starts[k + 1]]`.
    Offsets {
        starts: Vec<u32>,
        tuples: Vec<u32>,
    },
    Hashed(HashMap<u64, Vec<u32>>),
}

impl KeyIndex {
    /// Groups `set` by `columns`.
    pub fn build(set: &TupleSet, columns: &[usize]) -> Self {
        let radix: Vec<u64> = columns.iter().map(|&c| set.sizes[c] as u64).collect();
        let keys = (radix.iter()).try_fold(1u64, |acc, &n| acc.checked_mul(n));
        let mut index = KeyIndex {
            radix,
            groups: Groups::Hashed(HashMap::new()),
        };
        let key_of = |row: &[u32]| index.key(columns.iter().map(|&c| row[c]));
        index.groups = match keys {
            Some(keys) if keys <= MAX_DENSE_KEYS => {
                let mut starts = vec![0u32; keys as usize + 1];
                for row in set.rows() {
                    starts[key_of(row) as usize + 1] += 1;
                }
                for k in 1..starts.len() {
                    starts[k] += starts[k - 1];
                }
                let mut next = starts.clone();
                let mut tuples = vec![0u32; set.len()];
                for (i, row) in set.rows().enumerate() {
                    let slot = &mut next[key_of(row) as usize];
                    tuples[*slot as usize] = i as u32;
                    *slot += 1;
                }
                Groups::Offsets { starts, tuples }
            }
            _ => {
                let mut map: HashMap<u64, Vec<u32>> = HashMap::new();
                for (i, row) in set.rows().enumerate() {
                    map.entry(key_of(row)).or_default().push(i as u32);
                }
                Groups::Hashed(map)
            }
        };
        index
    }

    /// The key of these column values (in the order the index was built with).
    pub fn key(&self, values: impl Iterator<Item = u32>) -> u64 {
        (values.zip(&self.radix)).fold(0u64, |acc, (v, &n)| acc * n + v as u64)
    }

    /// The numbers of the tuples with this key.
    pub fn lookup(&self, key: u64) -> &[u32] {
        match &self.groups {
            Groups::Offsets { starts, tuples } => {
                let k = key as usize;
                match (starts.get(k), starts.get(k + 1)) {
                    (Some(&a), Some(&b)) => &tuples[a as usize..b as usize],
                    _ => &[],
                }
            }
            Groups::Hashed(map) => map.get(&key).map_or(&[], Vec::as_slice),
        }
    }
}
