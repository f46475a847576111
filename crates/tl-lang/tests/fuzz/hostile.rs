//! Programs written to break the interpreter: values that contain themselves,
//! values nested or chained very deep, sizes past every limit, format specs and
//! repetitions that would take all memory, and recursion at the deepest call
//! nesting allowed.

/// The hostile programs, each a whole file.
pub fn programs() -> Vec<String> {
    let mut programs: Vec<String> = SMALL
        .iter()
        .map(|body| format!("main {{\n{body}\n}}\n"))
        .collect();
    // The deepest expression the parser accepts, inside the deepest recursion
    // the interpreter allows.
    let parens = 60;
    programs.push(format!(
        "fn f(n: int) -> int {{ {}f(n + 1){} }}\nmain {{ f(0); }}\n",
        "(".repeat(parens),
        ")".repeat(parens)
    ));
    programs.push(format!(
        "fn f(n: int) -> int {{ if n > 0 {{ {}f(n - 1){} }} else {{ 0 }} }}\nmain {{ print(f(1990)); }}\n",
        "(".repeat(parens),
        ")".repeat(parens)
    ));
    programs.push(format!(
        "fn f(xs: list) {{ f([{}xs{}]) }}\nmain {{ f([]); }}\n",
        "[".repeat(parens),
        "]".repeat(parens)
    ));
    // Structs that contain themselves, or chain very long.
    let node = "struct Node { v: int, rest: list }\n";
    for body in [
        "let n = Node { v: 1, rest: [] }; n.rest.push(n); print(n); print(n == n); print([n] == [n]);",
        "let n = Node { v: 1, rest: [] }; for i in 0..200000 { n = Node { v: i, rest: [n] }; } print(n.v);",
        "let n = Node { v: 1, rest: [] }; for i in 0..100000 { n = Node { v: i, rest: [n] }; } print(n);",
    ] {
        programs.push(format!("{node}main {{ {body} }}\n"));
    }
    programs
}

/// `main` bodies.
const SMALL: &[&str] = &[
    // A list that contains itself: printed, compared, searched, joined, converted.
    "let a = [1]; a.push(a); print(a); print(\"{}\", a); print(a == a);",
    "let a = [1]; a.push(a); let b = [1]; b.push(b); print(a == b);",
    "let a = [1]; a.push(a); print(a.contains(2)); print(a.join(\", \"));",
    "let a = [1]; a.push(a); let t = tensor(a);",
    "let a = [1]; a.push(a); assert_eq(a, a); let b = [1]; b.push(b); assert_eq(a, b);",
    "let a = [1]; a.push(a); print(str(a)); print(format(\"{}\", a)); print(type_of(a), len(a));",
    "let a = []; a.push(a); print(sorted(a));",
    "let a = [[1]]; a[0].push(a); print(a); print(a[0][1][0][1]);",
    "let a = [1]; a.extend(a); a.insert(0, a); print(a);",
    // Very deep acyclic nesting, built in a loop.
    "let x = [0]; for i in 0..100000 { x = [x]; } print(x); print(x == x); let y = [0]; for i in 0..100000 { y = [y]; } print(x == y);",
    "let x = [0]; for i in 0..100000 { x = [x, 1]; } let t = tensor(x);",
    // Sizes past every limit.
    "print(0..9223372036854775807);",
    "let xs = 0..3000000000; print(len(xs));",
    "print(range(-9223372036854775807 - 1, 9223372036854775807));",
    "print(range(9223372036854775807, -9223372036854775807 - 1, -1));",
    "print(range(0, 9223372036854775807, 4611686018427387904));",
    "print(len(range(-9223372036854775807 - 1, 9223372036854775807, 9223372036854775807)));",
    "let s = \"abcdefgh\"; for i in 0..62 { s = s + s; } print(len(s));",
    "let xs = [1, 2]; for i in 0..62 { xs = xs + xs; } print(len(xs));",
    "let s = \"ab\" * 1000000; print(len(s.replace(\"\", s)));",
    "let s = \"ab\" * 9223372036854775807;",
    "let s = [1, 2] * 4611686018427387904;",
    "let s = [[1] * 100000000] * 100000000;",
    "let x = zeros([1, 100000]) + zeros([100000, 1]);",
    "let x = ones([100000, 1], \"int64\") * ones([1, 100000], \"int64\");",
    "let x = zeros([1, 100000], \"bool\") && zeros([100000, 1], \"bool\");",
    "let x = zeros([1, 100000]) % ones([100000, 1]);",
    "let x = zeros([1, 100000]) < zeros([100000, 1]);",
    "let x = ones([100000, 1]) @ ones([1, 100000]);",
    "let x = matmul(ones([100000, 1]), ones([1, 100000]));",
    "let x = einsum(\"i,j->ij\", ones([100000]), ones([100000]));",
    "let x = einsum(\"i,j,k->ijk\", ones([2000]), ones([2000]), ones([2000]));",
    "let x = linear(ones([100000, 1]), ones([100000, 1]));",
    "let x = embedding(ones([2, 100000]), [0] * 100000);",
    "let x = causal_mask(100000, 100000);",
    "let x = broadcast_to(ones([1]), [100000, 100000]);",
    "let x = full([100000, 100000], 1.0);",
    "let x = eye(100000);",
    "let x = arange(0.0, 1e30, 1.0);",
    "let x = arange(0, 9223372036854775807);",
    "let x = arange(-9223372036854775807 - 1, 9223372036854775807, 4611686018427387904);",
    "let x = rand([100000, 100000]); let y = randn([100000, 100000]);",
    "let x = zeros([100000, 100000], \"int64\");",
    "let x = reshape(zeros([0]), [9223372036854775807, 9223372036854775807, 0]);",
    "let x = reshape(zeros([0]), [4294967296, 4294967296, 0, -1]);",
    "let x = zeros([0, 4294967296]); let y = reshape(x, [4294967296, -1]); print(y);",
    "let x = zeros([0, 4294967296]) + zeros([4294967296, 1]);",
    "let x = zeros([4294967296, 0]) @ zeros([0, 4294967296]);",
    "let x = split(ones([4]), 9223372036854775807); let y = split(zeros([0]), 1000000000);",
    "let x = stack([ones([2])] * 1000000);",
    "let x = concat([zeros([0, 4294967296])] * 4);",
    "let x = tensor([[1] * 100000] * 100000);",
    "for i in 0..100000000 { break; } for i in (-9223372036854775807 - 1)..9223372036854775807 { break; }",
    // More dimensions than candle's kernels walk, and views that do not merge.
    "let x = reshape(to_dtype(arange(512), \"float32\"), [2, 2, 2, 2, 2, 2, 2, 2, 2]); print(sum(x + 1.0));",
    "let x = reshape(arange(256), [2, 2, 2, 2, 2, 2, 2, 2]); let y = permute(x, [7, 6, 5, 4, 3, 2, 1, 0]); print(sum(y + 1), all(y == y), sum(-y), softmax(to_dtype(y, \"float32\"), 3).shape);",
    "let x = zeros([1, 1, 1, 1, 1, 1, 1, 1]); print(unsqueeze(x, 0)); print(stack([x, x])); print(tensor([[[[[[[[[1]]]]]]]]]));",
    "let x = ones([2, 1, 2, 1, 2, 1, 2, 1]) + ones([1, 2, 1, 2, 1, 2, 1, 2]); print(x.shape); print(einsum(\"abcdefgh,ijklmnop->abcdefghijklmnop\", x, x));",
    // Format specs past what Rust's formatter accepts.
    "print(\"{:.99999}\", 1.0); print(\"{:.18446744073709551615}\", 1); print(\"{:.99999e}\", 2.5);",
    "let x = 1.5; print(\"{x:.70000}\"); print(format(\"{:.65536}\", x));",
    "print(\"{:.65535}\", 1e308);",
    // Indexing at the extremes.
    "let x = ones([2, 3]); print(x[-9223372036854775807 - 1]); print(x[9223372036854775807]);",
    "let x = ones([2, 3]); print(x[(-9223372036854775807 - 1)..9223372036854775807]);",
    "let x = ones([2, 3]); x[0..0, 5..5] = 1.0; x[:, (-9223372036854775807 - 1)] = 2.0;",
    "let xs = [1, 2]; xs[-9223372036854775807 - 1] = 0; print(\"abc\"[-9223372036854775807 - 1]);",
    "let xs = [1, 2]; xs[0..2] = xs; xs[0..1] = [xs]; print(xs);",
    // Integer edges in tensors.
    "let x = tensor([-9223372036854775807 - 1]); print(-x); print(abs(x)); print(x / -1); print(x % -1);",
    "let x = tensor([9223372036854775807]); print(sum(x + 0)); print(sum(tensor([9223372036854775807, 1])));",
    "let x = to_dtype(tensor([2147483647]), \"int32\"); print(x + 1); print(x * x); print(-x - 2);",
    "print(pow(2, 63)); print(pow(-2, 64)); print(pow(3, 9223372036854775807)); print(pow(tensor([2]), 1e308));",
    "print(int(1e308)); print(int(-1e308)); print(int(sqrt(-1.0))); print(int(\"99999999999999999999\"));",
    "print(mean(zeros([0]))); print(max(zeros([0]))); print(argmax(zeros([0]))); print(softmax(zeros([0])));",
    "print(max(zeros([3, 0]), 1)); print(min(zeros([0, 3]), 0)); print(argmin(zeros([0, 2]), 0));",
    "print(item(zeros([0]))); print(zeros([0])[0]);",
];
