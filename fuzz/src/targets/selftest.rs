//! `selftest` (hidden): a target that fails on demand, so the harness's own
//! tests can check that each kind of failure is caught and named. The input
//! says what to do: `panic`, `abort`, `overflow` (the stack), `oom` (an
//! allocation past the worker's cap), `hang`; anything else succeeds.

use super::Runner;
use crate::mutate::{Dictionary, Shape};

pub fn seeds() -> Vec<Vec<u8>> {
    vec![b"ok".to_vec()]
}

pub fn dictionary() -> (Shape, Dictionary) {
    (Shape::Text, Dictionary::default())
}

pub struct SelftestRunner;

impl Runner for SelftestRunner {
    fn run(&mut self, input: &[u8]) -> String {
        match input {
            b"panic" => panic!("selftest panic"),
            b"abort" => std::process::abort(),
            b"overflow" => format!("{}", recurse(u64::MAX)),
            b"oom" => {
                // black_box: an optimised build would otherwise elide the allocation.
                let huge = std::hint::black_box(vec![1u8; 1 << 40]);
                format!("{}", huge.len())
            }
            b"hang" => loop {
                std::thread::sleep(std::time::Duration::from_secs(1));
            },
            _ => "ok".into(),
        }
    }
}

/// Recursion the optimiser cannot turn into a loop: the result depends on
/// work after the call, and on a stack array it cannot drop.
fn recurse(depth: u64) -> u64 {
    let frame = std::hint::black_box([depth; 64]);
    if depth == 0 {
        return 0;
    }
    recurse(depth - 1).wrapping_add(frame[(depth % 64) as usize])
}
