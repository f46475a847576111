//! Tensor logic end to end: the equation and logic programs of `tests/lang`
//! run through the checker and the interpreter, and the transitive closure of
//! a random graph, written as rules and as a recursive equation, against a
//! breadth-first search.

mod common;

use std::path::Path;
use std::time::Instant;

use common::{interpreter, run_tests, runtime_error, workspace};
use tl_lang::loader::load_source;

/// Held by the tests that keep both cores busy, so that the timed closure
/// does not share the machine with them (a binary's tests run in parallel).
static BUSY_CORES: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn hold_cores() -> std::sync::MutexGuard<'static, ()> {
    BUSY_CORES
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

#[test]
fn equation_and_logic_programs_pass_their_tests() {
    for file in ["equations.tl", "logic.tl"] {
        let path = workspace().join("tests/lang").join(file);
        let text = std::fs::read_to_string(&path).expect("read the program");
        run_tests(file, &text);
    }
}

/// `count` distinct random edges between `nodes` nodes (no self-loops).
fn random_edges(nodes: usize, count: usize, mut seed: u64) -> Vec<(usize, usize)> {
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        (seed % nodes as u64) as usize
    };
    let mut seen = std::collections::HashSet::new();
    let mut edges = Vec::new();
    while edges.len() < count {
        let (a, b) = (next(), next());
        if a != b && seen.insert((a, b)) {
            edges.push((a, b));
        }
    }
    edges
}

/// The pairs (a, b) with a path of one or more edges from a to b.
fn reachable_by_bfs(nodes: usize, edges: &[(usize, usize)]) -> Vec<Vec<bool>> {
    let mut next = vec![Vec::new(); nodes];
    for &(a, b) in edges {
        next[a].push(b);
    }
    (0..nodes)
        .map(|start| {
            let mut seen = vec![false; nodes];
            let mut queue: Vec<usize> = next[start].clone();
            while let Some(n) = queue.pop() {
                if !seen[n] {
                    seen[n] = true;
                    queue.extend(&next[n]);
                }
            }
            seen
        })
        .collect()
}

/// The graph as a program: its nodes, its edges as facts, then `rules`.
fn graph_program(nodes: usize, edges: &[(usize, usize)], rules: &str) -> String {
    let names: Vec<String> = (0..nodes).map(|i| format!("n{i}")).collect();
    let mut text = format!("domain Node = {{{}}};\n", names.join(", "));
    text.push_str("relation Edge(x: Node, y: Node);\nrelation Path(x: Node, y: Node);\n");
    for (a, b) in edges {
        text.push_str(&format!("Edge(n{a}, n{b}).\n"));
    }
    text.push_str(rules);
    text
}

const CLOSURE_RULES: &str = "Path(x, y) <- Edge(x, y).\nPath(x, z) <- Path(x, y), Edge(y, z).\n";

#[test]
fn transitive_closure_as_rules_equals_bfs_and_is_fast() {
    let _cores = hold_cores();
    let (nodes, edges) = (2000, random_edges(2000, 10_000, 0x9e37_79b9_7f4a_7c15));
    let text = graph_program(nodes, &edges, CLOSURE_RULES);
    let program = load_source("closure.tl", &text, &workspace()).expect("parses");
    // The best of two runs, so that a moment of load on a shared machine does
    // not fail the test; tests build with optimizations (profile.test).
    let mut best = std::time::Duration::MAX;
    let mut logic = None;
    for _ in 0..2 {
        let started = Instant::now();
        logic = Some(tl_lang::logic::Logic::new(&program.items).expect("the rules run"));
        best = best.min(started.elapsed());
    }
    let logic = logic.expect("ran");
    let path = logic.tuples("Path").expect("Path is a relation");
    let expected = reachable_by_bfs(nodes, &edges);
    let pairs: usize = expected
        .iter()
        .map(|row| row.iter().filter(|&&r| r).count())
        .sum();
    assert_eq!(
        path.len(),
        pairs,
        "the closure has as many pairs as BFS finds"
    );
    for tuple in path.rows() {
        assert!(
            expected[tuple[0] as usize][tuple[1] as usize],
            "{tuple:?} is not reachable"
        );
    }
    println!(
        "transitive closure of {nodes} nodes, {} edges: {pairs} pairs in {best:?}",
        edges.len()
    );
    assert!(best.as_secs_f64() < 1.0, "the closure took {best:?}");
}

#[test]
fn transitive_closure_as_a_recursive_equation_equals_the_rules() {
    let _cores = hold_cores();
    let (nodes, edges) = (2000, random_edges(2000, 10_000, 0x2545_f491_4f6c_dd1d));
    let rules = format!(
        "{CLOSURE_RULES}\
         Reach[x, z] = Edge[x, z] + Reach[x, y] Edge[y, z];\n\
         test same_tensor {{ assert_eq(Reach, Path); assert_eq(Reach.dtype, \"bool\"); }}\n"
    );
    let text = graph_program(nodes, &edges, &rules);
    let started = Instant::now();
    assert_eq!(run_tests("closure.tl", &text), 1);
    println!(
        "the recursive equation and its check took {:?}",
        started.elapsed()
    );
    let (interp, _) = interpreter("closure.tl", &text);
    let vars = interp.variables();
    assert!(
        vars.contains(&("Reach".to_string(), "bool[2000, 2000]".to_string())),
        "{vars:?}"
    );
}

#[test]
fn the_valid_checker_case_runs() {
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/check/valid_tensor_logic.tl");
    let text = std::fs::read_to_string(&path).expect("read the case");
    let (mut interp, out) = interpreter("valid_tensor_logic.tl", &text);
    interp.run_main().map_err(|e| e.message).expect("main runs");
    let printed = String::from_utf8(out.0.borrow().clone()).expect("utf-8");
    assert!(printed.contains("[\"bob\"] true"), "{printed}");
    run_tests("valid_tensor_logic.tl", &text);
}

#[test]
fn shapes_known_only_at_run_time_fail_with_the_index_pointed_at() {
    let size = runtime_error(
        "fn f(a, b) { C[i] = a[i, j] b[j]; C }\nmain { f(ones([2, 3]), ones([4])); }",
    );
    assert!(
        size.contains("index `j` is 4 here, but 3 where it was first used"),
        "{size}"
    );
    assert!(
        size.contains("bad.tl:1:31"),
        "points at the second `j`: {size}"
    );
    let rank = runtime_error("fn f(a) { C[i] = a[i, j]; C }\nmain { f(ones([2])); }");
    assert!(
        rank.contains("float32[2] has 1 dimension, but 2 indices are written"),
        "{rank}"
    );
    let left = runtime_error("fn f(a) { C[i, k] = a[i, j]; C }\nmain { f(ones([2, 2])); }");
    assert!(
        left.contains("index `k` is only on the left side"),
        "{left}"
    );
}

/// Equations under `--device cuda`: their float32 contractions run on the
/// GPU (cuBLAS, so they agree with the CPU's `@`, sums and `attention` to
/// rounding); bools, ints and diagonals stay on the CPU.
const ON_THE_GPU: &str = r#"
fn attention_as_equations(q, k, v) {
    let scale = 1.0 / sqrt(float(shape(q)[2]));
    let mask = causal_mask(shape(q)[1]);
    S[h, i, j] = q[h, i, d] k[h, j, d] * scale + mask[i, j];
    let top = max(S, 2);
    E[h, i, j] = exp(S[h, i, j] - top[h, i]);
    Z[h, i] = E[h, i, j];
    O[h, i, e] = E[h, i, j] v[h, j, e] / Z[h, i];
    O
}

test float_contractions_agree_with_the_cpu {
    let a = randn([33, 65], 1);
    let b = randn([65, 17], 2);
    let v = randn([17], 3);
    C[i, k] = a[i, j] b[j, k];
    assert_close(C, a @ b, 1e-5);
    Ct[k, i] = a[i, j] b[j, k];
    assert_close(Ct, transpose(a @ b), 1e-5);
    Chain[i] = a[i, j] b[j, k] v[k];
    assert_close(Chain, a @ (b @ v), 1e-5);
    Rows[i] = a[i, j];
    assert_close(Rows, sum(a, 1), 1e-5);
    Total = a[i, j];
    assert_close(Total, sum(a), 1e-5);
    Outer[i, k] = v[i] v[k];
    assert_close(Outer, unsqueeze(v, 1) * unsqueeze(v, 0), 1e-5);
    Layer[i, k] = relu(a[i, j] b[j, k] + 0.5);
    assert_close(Layer, relu(a @ b + 0.5), 1e-5);
    let queries = randn([4, 40, 16], 4);
    let keys = randn([4, 40, 16], 5);
    let values = randn([4, 40, 16], 6);
    let by_equations = attention_as_equations(queries, keys, values);
    assert_close(by_equations, attention(queries, keys, values), 1e-5);
    let square = randn([9, 9], 7);
    Trace = square[i, i];
    assert_close(Trace, sum(square * eye(9)), 1e-5);
    let edges = tensor([[false, true, false], [false, false, true], [false, false, false]]);
    Two[x, z] = edges[x, y] edges[y, z];
    assert_eq(Two, tensor([[false, false, true], [false, false, false], [false, false, false]]));
    let ints = tensor([[1, 2], [3, 4]]);
    Product[i, k] = ints[i, j] ints[j, k];
    assert_eq(Product, tensor([[7, 10], [15, 22]]));
}
"#;

/// Runs `block`'s value in an interpreter of `ON_THE_GPU` on `device`.
fn value_on(device: tl_engine::DeviceChoice, block: &str) -> tl_lang::Value {
    let text = format!("{ON_THE_GPU}\ntest probe {{ {block} }}\n");
    let program = load_source("gpu.tl", &text, &workspace()).expect("parses");
    let mut context = tl_lang::builtins::Context::captured(".".into(), Box::new(std::io::sink()));
    context.device = device;
    let mut interp = tl_lang::interp::Interpreter::new(context);
    interp.define(program.items).expect("defines");
    let tests = interp.tests().to_vec();
    for test in &tests {
        if let Err(e) = interp.run_block(&test.body) {
            panic!(
                "test {} on {device:?}: {}",
                test.name.name,
                e.to_diagnostic().render(&program.sources)
            );
        }
    }
    let probe = tests.last().expect("the probe");
    interp.run_block(&probe.body).expect("the probe runs")
}

#[test]
fn float_equations_contract_on_the_gpu_under_device_cuda() {
    let _cores = hold_cores();
    if let Err(e) = tl_engine::ops::GpuOps::open(Default::default()) {
        assert!(
            e.means_no_gpu(),
            "a GPU is present but could not be opened: {e}"
        );
        eprintln!("skipped on cuda: no usable GPU here ({e})");
        return;
    }
    let product = "let a = randn([8, 5], 1); C[i, k] = a[i, j] a[k, j]; C";
    let on = |device| match value_on(device, product) {
        tl_lang::Value::Tensor(t) => t.as_gpu().is_some(),
        other => panic!("a tensor, not {}", other.type_name()),
    };
    assert!(on(tl_engine::DeviceChoice::Cuda), "contracted on the GPU");
    assert!(
        !on(tl_engine::DeviceChoice::Auto),
        "auto keeps host tensors on the CPU"
    );
}

#[test]
fn the_gpu_program_passes_on_the_cpu() {
    let _cores = hold_cores();
    // The same checks without a GPU: the program's own correctness.
    value_on(tl_engine::DeviceChoice::Cpu, "0");
}
