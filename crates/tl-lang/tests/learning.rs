//! Learning end to end: `tests/lang/learning.tl` (an MLP of equations learns
//! XOR, a perceptron learns OR, ...), `grad` against central finite
//! differences for every differentiable builtin of the table and every
//! operator, and the errors of misuse.

mod common;

use common::{check_errors, run_tests, runtime_error, workspace};
use tl_lang::builtins::{self, Gradient};

#[test]
fn the_learning_programs_pass_their_tests() {
    let path = workspace().join("tests/lang/learning.tl");
    let text = std::fs::read_to_string(&path).expect("read the program");
    let started = std::time::Instant::now();
    run_tests("learning.tl", &text);
    println!("learning.tl ran in {:?}", started.elapsed());
}

/// A float32[2, 3] away from every kink (0 for relu and abs, ties for max).
const MATRIX: &str = "[[0.3, -0.7, 1.1], [0.5, 0.9, -0.4]]";
/// Positive, for log, sqrt and fractional powers.
const POSITIVE: &str = "[[0.3, 0.7, 1.1], [0.5, 0.9, 1.4]]";
/// float32[3, 2, 4]: rope's [seq, heads, head_dim], attention's [heads, len, dim].
const CUBE: &str = "[[[0.1, -0.2, 0.3, 0.4], [0.5, -0.6, 0.7, 0.8]], \
     [[-0.9, 1.0, 0.2, -0.3], [0.4, 0.6, -0.8, 0.9]], \
     [[0.7, 0.1, -0.5, 0.2], [-0.3, 0.8, 0.6, -0.1]]]";

/// A case: the builtin (or operator) it covers, the input `x`, and an
/// expression of `x` to differentiate.
struct Case {
    covers: &'static str,
    input: &'static str,
    expr: &'static str,
}

const fn case(covers: &'static str, input: &'static str, expr: &'static str) -> Case {
    Case {
        covers,
        input,
        expr,
    }
}

/// The cases of differentiable builtins and operators: grad must agree
/// with finite differences.
const DIFFERENTIABLE: &[Case] = &[
    case("tensor", MATRIX, "tensor(x)"),
    case("reshape", MATRIX, "reshape(x, [3, 2])"),
    case("transpose", MATRIX, "transpose(x)"),
    case("permute", CUBE, "permute(x, [2, 0, 1])"),
    case("squeeze", MATRIX, "squeeze(reshape(x, [1, 6]), 0)"),
    case("unsqueeze", MATRIX, "unsqueeze(x, 1)"),
    case("concat", MATRIX, "concat([x, x * x], 1)"),
    case("stack", MATRIX, "stack([x, exp(x)])"),
    case("split", MATRIX, "split(x, [1, 2], 1)[1]"),
    case("slice", MATRIX, "slice(x, 1, 1, 3)"),
    case("broadcast_to", MATRIX, "broadcast_to(x[0], [4, 3])"),
    case("flatten", CUBE, "flatten(x)"),
    case("to_dtype", MATRIX, "to_dtype(x, \"float32\") * x"),
    case("exp", MATRIX, "exp(x)"),
    case("log", POSITIVE, "log(x)"),
    case("sqrt", POSITIVE, "sqrt(x)"),
    case("abs", MATRIX, "abs(x)"),
    case("sin", MATRIX, "sin(x)"),
    case("cos", MATRIX, "cos(x)"),
    case("tanh", MATRIX, "tanh(x)"),
    case("sigmoid", MATRIX, "sigmoid(x)"),
    case("sigmoid", MATRIX, "sigmoid(x, 0.5)"),
    case("relu", MATRIX, "relu(x)"),
    case("gelu", MATRIX, "gelu(x)"),
    case("silu", MATRIX, "silu(x)"),
    case("pow", MATRIX, "pow(x, 3)"),
    case("pow", POSITIVE, "pow(x, 0.5)"),
    case("sum", MATRIX, "sum(x, 1)"),
    case("sum", MATRIX, "x * sum(x)"),
    case("mean", MATRIX, "mean(x, [0, 1], true) * x"),
    case("mean", MATRIX, "x * mean(x)"),
    case("max", MATRIX, "max(x, 1)"),
    case("max", MATRIX, "x * max(x)"),
    case("max", MATRIX, "max(x, full([2, 3], 0.2))"),
    case("min", MATRIX, "min(x, 0)"),
    case("min", MATRIX, "x * min(x)"),
    case("min", MATRIX, "min(x, full([3], 0.2))"),
    case("matmul", MATRIX, "matmul(x, randn([3, 2], 5))"),
    case("softmax", MATRIX, "softmax(x)"),
    case("softmax", MATRIX, "softmax(x, 0)"),
    case("log_softmax", MATRIX, "log_softmax(x, 0)"),
    case(
        "layer_norm",
        MATRIX,
        "layer_norm(x, randn([3], 3), randn([3], 4))",
    ),
    case(
        "layer_norm",
        POSITIVE,
        "layer_norm(randn([2, 3], 5), x[0], x[1])",
    ),
    case("einsum", MATRIX, "einsum(\"ij,kj->ik\", x, x)"),
    case("einsum", MATRIX, "einsum(\"ii->i\", x @ transpose(x))"),
    case(
        "linear",
        MATRIX,
        "linear(x, randn([4, 3], 6), randn([4], 7))",
    ),
    case("linear", MATRIX, "linear(randn([5, 3], 6), x)"),
    case("rms_norm", MATRIX, "rms_norm(x, randn([3], 3))"),
    case("rms_norm", POSITIVE, "rms_norm(randn([4, 3], 3), x[1])"),
    case("rope", CUBE, "rope(x, 1)"),
    case("rope", CUBE, "rope(x, 2, 100.0, none, \"neox\")"),
    case("attention", CUBE, "attention(x, x * 0.7, sin(x))"),
    case("attention", CUBE, "attention(x[:, 0..1], x, cos(x), 1)"),
    case("attention", CUBE, "attention(x, x[0..1] * 0.5, x[1..2], 0)"),
    case("embedding", MATRIX, "embedding(x, [1, 0, 1])"),
    case("+", MATRIX, "x + x * x"),
    case("-", MATRIX, "x - 2.0 * x - (1.0 - x)"),
    case("*", MATRIX, "x * x * 3.0"),
    case("/", MATRIX, "x / (x * x + 1.0) + 1.0 / (x + 2.0)"),
    case("%", MATRIX, "x % 0.53 + 2.3 % (x + 1.5)"),
    case("negation", MATRIX, "-x"),
    case(
        "@",
        MATRIX,
        "(x @ randn([3, 4], 5))[:, 0..3] + randn([2, 2], 6) @ x",
    ),
    case("indexing", MATRIX, "x[1, 0..2] * x[0, 2] + x[:, 1..3][0]"),
    case("element stores", MATRIX, "stored(x)"),
    case("user functions", MATRIX, "twice(twice(x))"),
    case("equations", MATRIX, "layer(x)"),
    case("equations", MATRIX, "products(x)"),
    case(
        "equations",
        CUBE,
        "attention_as_equations(x, x * 0.5, sin(x))",
    ),
];

/// Functions the cases call.
const PRELUDE: &str = r#"
fn twice(v) { v + v }

fn stored(v) {
    let y = v * 2.0;
    y[0, 1] = v[1, 2] * v[0, 0];
    y[1] = exp(v[0]);
    y
}

fn layer(v) {
    let m = randn([3, 4], 8);
    let c = randn([4], 9);
    Y[i, k] = tanh(v[i, j] m[j, k] + c[k]);
    Y
}

fn products(v) {
    Outer[i, j, k] = v[i, j] v[i, k] / (v[i, j] v[i, j] + 1.0);
    Diagonal[i] = (v @ transpose(v))[i, i];
    Total = Outer[i, j, k] + Diagonal[i] - 2.0 * v[i, j];
    Total * Diagonal
}

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

// A loss that weighs each element differently, so that no gradient
// vanishes by symmetry (softmax sums to 1).
fn weigh(y) { sum(y * randn(shape(y), 11)) }
"#;

/// The loss's slope along each element of x0, from a step of 0.01 either
/// side, compared with `grad`'s `g`.
const CENTRAL_DIFFERENCES: &str = "let flat = flatten(x0);
    let fd = zeros([numel(x0)]);
    for i in 0..numel(x0) {
        let up = flat;
        up[i] = flat[i] + 0.01;
        let down = flat;
        down[i] = flat[i] - 0.01;
        fd[i] = (loss_INDEX(reshape(up, shape(x0))) - loss_INDEX(reshape(down, shape(x0)))) / 0.02;
    }
    assert_close(flatten(g), fd, 5e-3);";

/// The program of one case: a loss of `x`, and a test comparing `grad` of
/// it with central differences (the loss of a plain tensor is computed
/// without the graph, as a number summed in f64), or with zeros.
fn case_program(index: usize, case: &Case, zero: bool) -> String {
    let check = match zero {
        true => "assert_eq(g, zeros(shape(x0)));",
        false => CENTRAL_DIFFERENCES,
    };
    let test = format!(
        "fn loss_INDEX(x) {{ weigh({expr}) }}\n\
         test case_INDEX {{\n\
         \x20   let x0 = tensor({input});\n\
         \x20   let x = learnable(x0);\n\
         \x20   let g = grad(loss_INDEX(x), x);\n\
         \x20   {check}\n\
         }}\n",
        expr = case.expr,
        input = case.input,
    );
    test.replace("INDEX", &index.to_string())
}

/// Cases of builtins whose gradient is zero by the table.
const ZERO: &[Case] = &[
    case("step", MATRIX, "step(x) * 2.0"),
    case("argmax", MATRIX, "to_dtype(argmax(x, 1), \"float32\")"),
    case("argmin", MATRIX, "to_dtype(argmin(x, 0), \"float32\")"),
    case("learnable", MATRIX, "learnable(x) * 3.0"),
    case("grad", MATRIX, "grad(sum(x * x), x)"),
];

#[test]
fn grad_agrees_with_finite_differences_for_every_differentiable_builtin() {
    for builtin in builtins::all() {
        let (cases, kind) = match builtin.gradient {
            Gradient::Differentiable => (DIFFERENTIABLE, "a finite-difference case"),
            Gradient::Zero(_) => (ZERO, "a zero-gradient case"),
            Gradient::NotApplicable => continue,
        };
        assert!(
            cases.iter().any(|c| c.covers == builtin.name),
            "`{}` has no {kind} in tests/learning.rs: add one (or say in the builtin table why it has no gradient)",
            builtin.name
        );
    }
    let mut program = PRELUDE.to_string();
    for (i, case) in DIFFERENTIABLE.iter().enumerate() {
        program.push_str(&format!("// {}: {}\n", case.covers, case.expr));
        program.push_str(&case_program(i, case, false));
    }
    for (i, case) in ZERO.iter().enumerate() {
        program.push_str(&format!("// {}: {}\n", case.covers, case.expr));
        program.push_str(&case_program(DIFFERENTIABLE.len() + i, case, true));
    }
    assert_eq!(
        run_tests("gradients.tl", &program),
        DIFFERENTIABLE.len() + ZERO.len()
    );
}

#[test]
fn on_the_graph_the_engine_ops_compute_the_engine_numbers() {
    let program = format!(
        "test same_numbers {{
            let x = tensor({CUBE});
            let w = learnable(ones([1]));
            let on_graph = x * w;
            assert_close(rms_norm(on_graph, randn([4], 2)), rms_norm(x, randn([4], 2)), 1e-5);
            assert_close(rope(on_graph, 3), rope(x, 3), 1e-6);
            assert_close(rope(on_graph, 3, 500.0, none, \"neox\"), rope(x, 3, 500.0, none, \"neox\"), 1e-6);
            assert_close(attention(on_graph, x, x), attention(x, x, x), 1e-5);
            assert_close(silu(on_graph), silu(x), 1e-6);
            assert_close(softmax(on_graph), softmax(x), 1e-6);
            assert_close(on_graph % 0.3, x % 0.3, 1e-6);
            assert_close(sum(on_graph), sum(x), 1e-6);
        }}"
    );
    run_tests("engine_numbers.tl", &program);
}

#[test]
fn misuse_is_an_error_pointing_at_the_code() {
    let cases = [
        (
            "fn loss(w) { w * 2.0 }\nmain { let w = learnable(ones([3])); grad(loss(w), w); }",
            "a loss must be a float tensor of one element, found float32[3]",
            "bad.tl:2:43",
        ),
        (
            "main { let w = ones([3]); grad(sum(w), w); }",
            "float32[3] is not learnable",
            "bad.tl:1:40",
        ),
        (
            "main { let w = learnable(ones([3])); sgd([w, ones([2])], 0.1); }",
            "item 1 of the list: float32[2] is not learnable",
            "bad.tl:1:42",
        ),
        (
            "main { let w = learnable(ones([3])); adam([w], -1.0); }",
            "adam needs a number above 0 here, found -1",
            "bad.tl:1:48",
        ),
        (
            "main { learnable(tensor([true, false])); }",
            "learnable needs numbers, found bool[2]",
            "bad.tl:1:18",
        ),
        (
            "main { let w = learnable(ones([3])); w = \"text\"; }",
            "cannot assign to `w`: a learnable tensor cannot be replaced by string",
            "bad.tl:1:38",
        ),
        (
            "main { let w = learnable(ones([3])); let o = sgd([w], 0.1); o.step(w); }",
            "a loss must be a float tensor of one element, found float32[3]",
            "bad.tl:1:68",
        ),
    ];
    let wrong: Vec<String> = cases
        .iter()
        .map(|(text, message, place)| (text, message, place, runtime_error(text)))
        .filter(|(_, message, place, error)| !error.contains(*message) || !error.contains(*place))
        .map(|(text, message, place, error)| {
            format!("{text}\nexpected {message} at {place}:\n{error}")
        })
        .collect();
    assert!(wrong.is_empty(), "{}", wrong.join("\n\n"));
}

#[test]
fn the_checker_refuses_a_loss_of_many_elements_and_int_parameters() {
    let loss = check_errors("main { let w = learnable(ones([3])); grad(ones([3]), w); }");
    assert!(
        loss.contains("grad needs a loss of one element, found float32[3]"),
        "{loss}"
    );
    let int = check_errors("tensor counts: int64[2] learnable;\nmain {}");
    assert!(int.contains("only float tensors can be learnable"), "{int}");
}
