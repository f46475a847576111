//! The fixpoint against naive evaluation, and the tuple store's two kinds
//! of membership.

use tl_syntax::{parse, FileId};

use super::tuples::{KeyIndex, TupleSet};
use super::Logic;

fn logic(text: &str) -> Logic {
    let program = parse(FileId(0), text).unwrap_or_else(|e| panic!("{e}"));
    Logic::new(&program.items).unwrap_or_else(|e| panic!("{}", e.message))
}

/// A chain of `n` nodes `v0 -> v1 -> ...` with `rules` over `Edge` and `Path`.
fn chain(n: usize, rules: &str) -> String {
    let names: Vec<String> = (0..n).map(|i| format!("v{i}")).collect();
    let mut text = format!(
        "domain V = {{{}}};\nrelation Edge(x: V, y: V);\nrelation Path(x: V, y: V);\n",
        names.join(", ")
    );
    for i in 1..n {
        text.push_str(&format!("Edge(v{}, v{i}).\n", i - 1));
    }
    text + rules
}

#[test]
fn linear_and_doubly_recursive_closures_agree() {
    let n = 40;
    let expected = n * (n - 1) / 2;
    for rules in [
        "Path(x, y) <- Edge(x, y).\nPath(x, z) <- Path(x, y), Edge(y, z).\n",
        "Path(x, y) <- Edge(x, y).\nPath(x, z) <- Edge(x, y), Path(y, z).\n",
        "Path(x, y) <- Edge(x, y).\nPath(x, z) <- Path(x, y), Path(y, z).\n",
    ] {
        let logic = logic(&chain(n, rules));
        let path = logic.tuples("Path").expect("Path");
        assert_eq!(path.len(), expected, "{rules}");
        assert!(path.rows().all(|t| t[0] < t[1]), "{rules}");
    }
}

#[test]
fn negation_filters_and_mutual_recursion_reaches_the_fixpoint() {
    let text = chain(
        6,
        "relation Even(x: V);\nrelation Odd(x: V);\nrelation Start(x: V);\nStart(v0).\n\
         Even(x) <- Start(x).\nOdd(y) <- Even(x), Edge(x, y).\nEven(y) <- Odd(x), Edge(x, y).\n\
         relation NotStart(x: V);\nNotStart(x) <- Even(x), !Start(x).\n",
    );
    let logic = logic(&text);
    let firsts = |name: &str| -> Vec<u32> {
        logic
            .tuples(name)
            .expect(name)
            .rows()
            .map(|t| t[0])
            .collect()
    };
    let mut even = firsts("Even");
    even.sort();
    assert_eq!(even, vec![0, 2, 4]);
    let mut not_start = firsts("NotStart");
    not_start.sort();
    assert_eq!(not_start, vec![2, 4]);
}

#[test]
fn large_relations_keep_a_hash_set_and_small_ones_a_bitset() {
    // 600^3 possible tuples is over the bitset's limit.
    let mut big = TupleSet::new(vec![600, 600, 600]).expect("fits u64");
    let mut small = TupleSet::new(vec![3, 3]).expect("small");
    for set in [&mut big, &mut small] {
        let arity = set.arity();
        let tuple = vec![2u32; arity];
        assert!(set.insert(&tuple).expect("room"));
        assert!(!set.insert(&tuple).expect("room"), "a tuple is added once");
        assert!(set.contains(&tuple));
        assert!(!set.contains(&vec![1u32; arity]));
        assert_eq!(set.len(), 1);
    }
    assert!(
        TupleSet::new(vec![1 << 40, 1 << 40]).is_err(),
        "codes must fit in u64"
    );
}

#[test]
fn key_indexes_group_tuples_by_their_columns() {
    let mut set = TupleSet::new(vec![4, 4]).expect("small");
    for (a, b) in [(0, 1), (2, 1), (0, 3), (3, 3)] {
        set.insert(&[a, b]).expect("room");
    }
    let by_second = KeyIndex::build(&set, &[1]);
    let rows = |key| -> Vec<Vec<u32>> {
        (by_second.lookup(key).iter())
            .map(|&i| set.row(i as usize).to_vec())
            .collect()
    };
    assert_eq!(rows(1), vec![vec![0, 1], vec![2, 1]]);
    assert_eq!(rows(3), vec![vec![0, 3], vec![3, 3]]);
    assert!(rows(0).is_empty() && rows(99).is_empty());
}
