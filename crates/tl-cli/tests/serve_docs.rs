//! `docs/api.md` is tested: every ```sh example (each one `curl` command) is
//! run against a real `tl serve` and must succeed with a 2xx answer, and
//! every route the server has must be documented. With curl installed the
//! commands run as written (plus `--fail`); without it the test sends the
//! same request, parsed from the command line, itself.

mod common;

use std::path::Path;
use std::process::Command;

use common::server::{request, Server};

const DOCUMENTED_URL: &str = "http://127.0.0.1:8080";

fn read(relative: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(relative);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The bodies of the ```sh blocks.
fn sh_examples(markdown: &str) -> Vec<String> {
    let mut examples = Vec::new();
    let mut current: Option<String> = None;
    for line in markdown.lines() {
        match (&mut current, line.trim_start().strip_prefix("```")) {
            (None, Some(lang)) if lang.trim() == "sh" => current = Some(String::new()),
            (Some(body), Some(_)) => {
                examples.push(body.trim().to_owned());
                current = None;
            }
            (Some(body), None) => {
                body.push_str(line);
                body.push('\n');
            }
            (None, _) => {}
        }
    }
    examples
}

/// Splits a command line into words (double and single quotes, no escapes
/// needed by the examples).
fn shell_words(line: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut quote: Option<char> = None;
    let mut in_word = false;
    for c in line.chars() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), c) => word.push(c),
            (None, '\'' | '"') => {
                quote = Some(c);
                in_word = true;
            }
            (None, c) if c.is_whitespace() => {
                if in_word {
                    words.push(std::mem::take(&mut word));
                    in_word = false;
                }
            }
            (None, c) => {
                word.push(c);
                in_word = true;
            }
        }
    }
    if in_word {
        words.push(word);
    }
    words
}

/// Sends the request a curl command line describes; returns the status and body.
fn send_parsed(words: &[String], address: &str) -> (u16, String) {
    let mut data = None;
    let mut method = None;
    let mut headers = Vec::new();
    let mut url = None;
    let mut args = words.iter().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "-d" | "--data" => data = args.next().cloned(),
            "-X" => method = args.next().cloned(),
            "-H" => headers.extend(args.next().and_then(|h| {
                h.split_once(':')
                    .map(|(k, v)| (k.trim().to_owned(), v.trim().to_owned()))
            })),
            flag if flag.starts_with('-') => {} // -s, -N: output details only
            other => url = Some(other.to_owned()),
        }
    }
    let url = url.expect("the example names a URL");
    let path = url
        .strip_prefix(&format!("http://{address}"))
        .unwrap_or_else(|| panic!("unexpected URL {url}"));
    let method = method.unwrap_or_else(|| {
        if data.is_some() {
            "POST".into()
        } else {
            "GET".into()
        }
    });
    let headers: Vec<(&str, &str)> = headers
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    let response = request(address, &method, path, data.as_deref(), &headers);
    (response.status, response.body)
}

fn curl_available() -> bool {
    Command::new("curl")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

#[test]
fn every_api_example_runs() {
    let docs = read("../../docs/api.md");
    let examples = sh_examples(&docs);
    assert!(
        examples.len() >= 10,
        "expected the endpoint examples, found {}",
        examples.len()
    );
    // A models folder of the test's own, so the examples' presets and
    // deletions stay in it; it holds a link to the default model, which
    // the `/api/pull` example then finds without fetching.
    let cache = tempfile::tempdir().unwrap();
    let model = common::default_model();
    let cached = cache.path().join(model.file_name().unwrap());
    if std::fs::hard_link(model, &cached).is_err() {
        std::fs::copy(model, &cached).unwrap();
    }
    let server = Server::start_with_env(
        &["--ctx", "512"],
        &[("TL_CACHE_DIR", cache.path().to_str().unwrap())],
    );
    let with_curl = curl_available();
    if !with_curl {
        eprintln!("curl is not installed: sending each example's request from the test instead");
    }
    for example in &examples {
        assert!(
            example.starts_with("curl ") && !example.contains('\n'),
            "each example is one curl command: {example}"
        );
        let command = example.replace(DOCUMENTED_URL, &server.url());
        let (ok, output) = if with_curl {
            let command = command.replacen("curl ", "curl --fail-with-body ", 1);
            let out = Command::new("sh")
                .args(["-c", &command])
                .output()
                .expect("sh");
            (
                out.status.success(),
                String::from_utf8_lossy(&out.stdout).into_owned(),
            )
        } else {
            let (status, body) = send_parsed(&shell_words(&command), &server.address);
            ((200..300).contains(&status), body)
        };
        assert!(
            ok,
            "{example}\nfailed: {output}\nserver log:\n{}",
            server.log()
        );
        assert!(!output.trim().is_empty(), "{example} printed nothing");
    }
}

#[test]
fn every_route_is_documented() {
    let docs = read("../../docs/api.md");
    let router = read("../tl-server/src/http/mod.rs");
    let routes: Vec<&str> = router
        .match_indices(".route(\"")
        .map(|(at, m)| {
            let rest = &router[at + m.len()..];
            &rest[..rest.find('"').unwrap_or(0)]
        })
        .collect();
    assert!(routes.len() >= 12, "found routes {routes:?}");
    for route in routes {
        // Documented as `METHOD /path` in a heading or the text.
        assert!(
            docs.contains(&format!(" {route}`")),
            "{route} is not in docs/api.md"
        );
    }
}

#[test]
fn command_lines_split_like_a_shell() {
    assert_eq!(
        shell_words(r#"curl -s http://x/y -d '{"a": "b c"}' -H "K: v""#),
        [
            "curl",
            "-s",
            "http://x/y",
            "-d",
            r#"{"a": "b c"}"#,
            "-H",
            "K: v"
        ]
    );
}
