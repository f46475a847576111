//! Hostile chat templates: each must fail fast with an error naming the limit
//! it hit, on a thread with a small stack (as the server's blocking threads
//! have), without allocating more than the work budget (tens of MiB by
//! default). Before the limits, each of these aborted the process (stack
//! overflow, out of memory) or spun for hours.

use std::time::{Duration, Instant};

use super::*;

/// The stack of the threads that render: tokio's blocking threads get 2 MiB.
const RENDER_STACK: usize = 2 << 20;

/// Generous for a debug-ish test build on a busy two-core machine; the
/// renders below take milliseconds.
const FAST: Duration = Duration::from_secs(10);

/// Renders `source` with no messages on a small-stack thread; returns the
/// outcome and how long it took.
fn render_on_small_stack(source: &str) -> (Result<String>, Duration) {
    let source = source.to_owned();
    let thread = std::thread::Builder::new()
        .stack_size(RENDER_STACK)
        .spawn(move || {
            let start = Instant::now();
            let outcome = ChatTemplate::new(&source, "<s>", "</s>")
                .and_then(|template| template.render(&[ChatMessage::user("hi")], true));
            (outcome, start.elapsed())
        })
        .expect("spawn the render thread");
    thread.join().expect("the render thread must not panic")
}

/// Asserts that `source` fails quickly with an error mentioning `limit`.
fn assert_stopped(source: &str, limit: &str) {
    let (outcome, elapsed) = render_on_small_stack(source);
    match outcome {
        Err(Error::Template(message)) => {
            assert!(
                message.contains(limit),
                "expected the {limit} limit: {message}"
            );
        }
        other => panic!("expected a template error naming the {limit} limit, got {other:?}"),
    }
    assert!(elapsed < FAST, "took {elapsed:?}");
}

#[test]
fn recursive_tojson_of_a_deep_value_is_refused() {
    // Each assignment nests the list one level deeper.
    let source = "{% set ns = namespace(x=[]) %}{% for i in range(100000) %}\
                  {% set ns.x = [ns.x] %}{% endfor %}{{ ns.x|tojson }}";
    assert_stopped(source, "depth limit");
}

#[test]
fn deep_value_built_by_macro_recursion_is_refused() {
    let source = "{% macro wrap(x, n) %}{% if n %}{{ wrap([[[[x]]]], n - 1) }}\
                  {% else %}{{ x|tojson }}{% endif %}{% endmacro %}{{ wrap(1, 100000) }}";
    assert_stopped(source, "depth limit");
}

#[test]
fn string_doubling_in_a_loop_is_stopped() {
    let source = "{% set ns = namespace(s='abcdefgh') %}{% for i in range(64) %}\
                  {% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ ns.s|length }}";
    assert_stopped(source, "work limit");
    let with_plus = source.replace('~', "+");
    assert_stopped(&with_plus, "work limit");
}

#[test]
fn string_doubling_without_a_loop_is_stopped() {
    let doubling = "{% set s = s ~ s %}".repeat(64);
    let source = format!("{{% set s = 'abcdefgh' %}}{doubling}{{{{ s|length }}}}");
    assert_stopped(&source, "work limit");
}

#[test]
fn doubling_through_captured_blocks_is_stopped() {
    let source = "{% set ns = namespace(s='abcdefgh') %}{% for i in range(64) %}\
                  {% set doubled %}{{ ns.s }}{{ ns.s }}{% endset %}{% set ns.s = doubled %}\
                  {% endfor %}{{ ns.s|length }}";
    assert_stopped(source, "output limit");
}

#[test]
fn huge_string_repetition_is_refused() {
    let x = "{% set x = 'x' %}";
    assert_stopped(
        &format!("{x}{{{{ (x * 1000000000)|length }}}}"),
        "work limit",
    );
    // Under minijinja's own 100 MB cap, but not under ours.
    assert_stopped(&format!("{x}{{{{ (x * 99999999)|length }}}}"), "work limit");
    assert_stopped(
        &format!("{x}{{{{ (1000000000 * x)|length }}}}"),
        "work limit",
    );
}

#[test]
fn huge_constants_are_refused_at_load() {
    // minijinja would fold these while compiling, before any guard runs.
    for source in [
        "{{ ('x' * 99999999)|length }}",
        "{{ ((1,) * 99999999)|length }}",
    ] {
        let outcome = ChatTemplate::new(source, "", "");
        assert!(
            matches!(&outcome, Err(Error::Template(message)) if message.contains("constant expression")),
            "{source}: {outcome:?}"
        );
    }
    let big = "x".repeat(MAX_SOURCE_BYTES + 1);
    assert!(ChatTemplate::new(&big, "", "").is_err());
}

#[test]
fn huge_indent_is_refused() {
    assert_stopped("{{ 'a\nb'|indent(1000000000) }}", "work limit");
    assert_stopped("{{ 'a\nb'|indent(width=1000000000) }}", "work limit");
}

#[test]
fn huge_format_widths_are_refused() {
    assert_stopped("{{ '%1000000000d'|format(1) }}", "work limit");
    assert_stopped("{{ '%.1000000000f'|format(1.5) }}", "work limit");
    assert_stopped("{{ '%*d'|format(1000000000, 1) }}", "work limit");
    assert_stopped("{{ '%(a)1000000000s'|format({'a': 1}) }}", "work limit");
    assert_stopped("{{ '{:>1000000000}'.format(1) }}", "work limit");
}

#[test]
fn replace_and_join_amplification_is_stopped() {
    let source = "{% set ns = namespace(s='x') %}{% for i in range(64) %}\
                  {% set ns.s = ns.s|replace('x', 'xx') %}{% endfor %}{{ ns.s|length }}";
    assert_stopped(source, "work limit");
    let source = "{% set ns = namespace(s='x') %}{% for i in range(64) %}\
                  {% set ns.s = ns.s.replace('x', 'xx') %}{% endfor %}{{ ns.s|length }}";
    assert_stopped(source, "work limit");
    let source = "{% set s = 'x' * 100000 %}{{ ([s] * 100000)|join|length }}";
    assert_stopped(source, "work limit");
    let source = "{% set s = 'x' * 100000 %}{{ s.join([s] * 100000)|length }}";
    assert_stopped(source, "work limit");
}

#[test]
fn printing_a_huge_list_is_stopped() {
    let source = "{% set s = 'x' * 100000 %}{{ ([s] * 100000)|string|length }}";
    assert_stopped(source, "work limit");
    let source = "{% set s = 'x' * 100000 %}{{ ([s] * 100000)|pprint|length }}";
    assert_stopped(source, "work limit");
    let source = "{% set s = 'x' * 100000 %}{{ ([s] * 100000)|tojson|length }}";
    assert_stopped(source, "work limit");
    let source = "{% set s = 'x' * 100000 %}{{ 'a' ~ [s] * 100000 }}";
    assert_stopped(source, "work limit");
}

#[test]
fn huge_lists_are_refused_before_sorting() {
    assert_stopped(
        "{{ ((range(100000)|list) * 1000)|sort|length }}",
        "element limit",
    );
    assert_stopped(
        "{{ ((range(100000)|list) + (range(100000)|list) + (range(100000)|list))|unique|list|length }}",
        "element limit",
    );
    assert_stopped(
        "{{ ((range(100000)|list) * 3)|list|length }}",
        "element limit",
    );
}

#[test]
fn huge_range_is_refused() {
    let (outcome, elapsed) = render_on_small_stack("{{ range(1000000000)|list|length }}");
    assert!(
        matches!(&outcome, Err(Error::Template(message)) if message.contains("too many elements")),
        "{outcome:?}"
    );
    assert!(elapsed < FAST);
}

#[test]
fn nested_loops_run_out_of_fuel() {
    assert_stopped(
        "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
        "fuel limit",
    );
    assert_stopped(
        "{% for a in range(100) %}{% for b in range(100) %}{% for c in range(100) %}\
         {% for d in range(100) %}{{ '' }}{% endfor %}{% endfor %}{% endfor %}{% endfor %}",
        "fuel limit",
    );
}

#[test]
fn deep_macro_recursion_is_stopped() {
    assert_stopped(
        "{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}",
        "depth limit",
    );
    // Fan-out instead of depth: 4^12 calls.
    assert_stopped(
        "{% macro f(n) %}{% if n %}{{ f(n - 1) }}{{ f(n - 1) }}{{ f(n - 1) }}{{ f(n - 1) }}\
         {% endif %}{% endmacro %}{{ f(12) }}",
        "fuel limit",
    );
}

#[test]
fn recursive_loops_are_stopped() {
    // A recursive `for` that recurses into the same list forever.
    assert_stopped(
        "{% set ns = namespace(x=[1]) %}{% for item in [ns.x] recursive %}{{ loop([ns.x]) }}{% endfor %}",
        "depth limit",
    );
}

#[test]
fn growing_a_namespace_list_is_stopped() {
    let source = "{% set ns = namespace(l=[1]) %}{% for i in range(64) %}\
                  {% set ns.l = ns.l + ns.l %}{% endfor %}{{ ns.l|length }}";
    assert_stopped(source, "element limit");
    let source = "{% set ns = namespace(l=[1]) %}{% for i in range(64) %}\
                  {% set ns.l = [ns.l, ns.l] %}{% endfor %}{{ ns.l|length }}";
    assert_stopped(source, "element limit");
}

#[test]
fn comparing_shared_structures_is_stopped() {
    // Two equal, separately built lists whose comparison would visit 2^40
    // leaves: refused when built.
    let source = "{% set ns = namespace(a=[1], b=[1]) %}{% for i in range(40) %}\
                  {% set ns.a = [ns.a, ns.a] %}{% set ns.b = [ns.b, ns.b] %}{% endfor %}\
                  {{ ns.a == ns.b }}";
    assert_stopped(source, "element limit");
    // Comparisons in a loop are charged: two 100 000-element lists compared
    // until the work runs out.
    let source = "{% set a = range(100000)|list %}{% set b = range(100000)|list %}\
                  {% for i in range(100000) %}{% if a == b %}{% endif %}{% endfor %}";
    assert_stopped(source, "work limit");
    let source = "{% set a = range(100000)|list %}\
                  {% for i in range(100000) %}{% if -1 in a %}{% endif %}{% endfor %}";
    assert_stopped(source, "work limit");
    // `loop.changed` compares with the previous call's values.
    let source = "{% set a = range(100000)|list %}{% set b = range(100000)|list %}\
                  {% for i in range(100000) %}{% if loop.changed(a if i is odd else b) %}\
                  {% endif %}{% endfor %}";
    assert_stopped(source, "work limit");
    // Comparing with a short constant stays cheap (and unguarded).
    let (outcome, elapsed) = render_on_small_stack(
        "{% set a = range(100000)|list %}{% for i in range(20000) %}\
         {% if a == 'x' or a[0] == 1 or i in [1, 2] %}{% endif %}{% endfor %}",
    );
    assert!(outcome.is_ok(), "{outcome:?}");
    assert!(elapsed < FAST);
}

#[test]
fn a_namespace_cannot_hold_itself() {
    for source in [
        "{% set ns = namespace(a=1) %}{% set ns.me = ns %}{{ ns }}",
        "{% set ns = namespace(a=1) %}{% set ns.l = [ns] %}{{ ns|tojson }}",
        "{% set ns = namespace(a=1) %}{% set other = namespace(b=ns) %}{% set ns.o = other %}{{ ns == ns }}",
    ] {
        let (outcome, elapsed) = render_on_small_stack(source);
        assert!(
            matches!(&outcome, Err(Error::Template(message)) if message.contains("may not hold a namespace")),
            "{source}: {outcome:?}"
        );
        assert!(elapsed < FAST);
    }
}

#[test]
fn writing_too_much_is_stopped() {
    assert_stopped(
        "{% for i in range(100000) %}{{ 'x' * 1000 }}{% endfor %}",
        "output limit",
    );
    let text = "x".repeat(1000);
    let source = format!("{{% for i in range(100000) %}}{text}{{% endfor %}}");
    assert_stopped(&source, "output limit");
}

#[test]
fn splitting_into_too_many_pieces_is_refused() {
    let x = "{% set x = 'x' %}{% set comma = 'x,' %}";
    assert_stopped(
        &format!("{x}{{{{ (x * 1000000)|split('')|length }}}}"),
        "element limit",
    );
    assert_stopped(
        &format!("{x}{{{{ (comma * 1000000).split(',')|length }}}}"),
        "element limit",
    );
}

#[test]
fn unknown_and_unsupported_features_are_errors() {
    for source in [
        "{{ 'x'|center(1000000000) }}",
        "{{ debug() }}",
        "{% include 'chat_template' %}",
        "{% extends 'chat_template' %}",
        "{% import 'chat_template' as self %}",
    ] {
        let (outcome, elapsed) = render_on_small_stack(source);
        assert!(
            matches!(&outcome, Err(Error::Template(_))),
            "{source}: {outcome:?}"
        );
        assert!(elapsed < FAST);
    }
    let splat = ChatTemplate::new("{{ range(*[3])|list }}", "", "");
    assert!(
        matches!(&splat, Err(Error::Template(message)) if message.contains("splats")),
        "{splat:?}"
    );
}

#[test]
fn extras_nested_too_deeply_are_refused() {
    let mut deep = serde_json::Value::Null;
    for _ in 0..100_000 {
        deep = serde_json::Value::Array(vec![deep]);
    }
    let mut extras = serde_json::Map::new();
    extras.insert("tools".into(), deep);
    let template = ChatTemplate::new("{{ tools|tojson }}", "", "").unwrap();
    let outcome = template.render_with_extras(&[], false, &extras);
    assert!(
        matches!(&outcome, Err(Error::InvalidRequest(message)) if message.contains("deeper")),
        "{outcome:?}"
    );
    // Dropping the deep value recursively is the caller's business: leak it
    // rather than overflow the test thread's stack.
    std::mem::forget(extras);
}

#[test]
fn a_limit_error_ends_the_render_for_good() {
    // `default` would hide an undefined value, not a limit error: the render
    // must stop at the first.
    let source = "{% set ns = namespace(s='ab') %}{% for i in range(64) %}\
                  {% set ns.s = (ns.s ~ ns.s)|default('') %}{% endfor %}{{ ns.s|length }}";
    assert_stopped(source, "work limit");
}

/// The depth limit must be safe on the render threads' stacks, for
/// recursion and for nested values alike.
#[test]
fn the_depth_limit_fits_a_small_stack() {
    let depth = TemplateLimits::default().depth;
    let run = |source: String| {
        std::thread::Builder::new()
            .stack_size(RENDER_STACK)
            .spawn(move || {
                let limits = TemplateLimits {
                    elements: 10_000_000,
                    ..TemplateLimits::default()
                };
                let template = ChatTemplate::new(&source, "", "")?.with_limits(limits);
                template.render(&[], false)
            })
            .expect("spawn")
            .join()
            .expect("the render thread must not overflow its stack")
    };
    // A value nested right up to the limit prints, compares, serializes and
    // drops without running out of stack.
    let nest = format!(
        "{{% set ns = namespace(x=1) %}}{{% for i in range({}) %}}{{% set ns.x = [ns.x] %}}{{% endfor %}}",
        depth - 2
    );
    let uses = "{{ ns.x|length }}{{ ns.x == ns.x }}{{ (ns.x|tojson)|length }}{{ (ns.x|pprint)|length }}{{ ns.x }}";
    let outcome = run(format!("{nest}{uses}"));
    assert!(outcome.is_ok(), "{outcome:?}");
    // Recursion up to the limit stops cleanly.
    let outcome = run("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}".into());
    assert!(
        matches!(&outcome, Err(Error::Template(message)) if message.contains("depth limit")),
        "{outcome:?}"
    );
}

#[test]
fn limits_can_be_tightened() {
    let limits = TemplateLimits {
        fuel: 50,
        fuel_per_input_byte: 0,
        ..TemplateLimits::default()
    };
    let template = ChatTemplate::new("{% for i in range(100) %}{{ i }}{% endfor %}", "", "")
        .unwrap()
        .with_limits(limits);
    assert_eq!(template.limits(), &limits);
    let err = template.render(&[], false).unwrap_err();
    assert!(err.to_string().contains("fuel limit of 50"), "{err}");
}

/// Found by fuzzing (`fuzz/crashes/template/`): 5,900 unary minuses in one
/// tag overflowed the stack in minijinja's parser. Chains of `not`, of binary
/// operators and of attributes deepen the tree the same way.
#[test]
fn long_operator_chains_are_refused_before_parsing() {
    // The fuzzer's input is `TEMPLATE \0 MESSAGES \0 FLAGS`.
    let found = include_str!("../../../../fuzz/crashes/template/unary-minus-chain.jinja");
    let chains = [
        found.split('\0').next().unwrap_or_default().to_owned(),
        format!("{{{{ {}1 }}}}", "- ".repeat(100_000)),
        format!("{{% if {}true %}}x{{% endif %}}", "not ".repeat(100_000)),
        format!("{{{{ 1{} }}}}", " + 1".repeat(100_000)),
        format!("{{{{ messages{} }}}}", ".x".repeat(100_000)),
        format!("{{{{ x{} }}}}", "|trim".repeat(100_000)),
    ];
    for source in &chains {
        assert_stopped(source, "operators");
    }
    // The longest tags of real templates stay far below the limit.
    let normal = format!(
        "{{{{ 1{} }}}}",
        " + 1".repeat(expression_size::MAX_TAG_OPERATORS - 1)
    );
    assert!(render_on_small_stack(&normal).0.is_ok());
}
