//! What every backend promises about a sequence's steps, one test body each,
//! run on the CPU and, where one can be opened, on a GPU (`backend_tests!`;
//! each test is `<property>::cpu` and `<property>::cuda`): what a sequence
//! gets does not depend on what else runs in its batch (the server's promise
//! to each request), on how its prompt is cut into chunks, or on the run.

mod common;

use common::{
    backend_tests, greedy, k_quant_blocks, last_logits, prompt_of, quantized_blocks,
    relative_error, same_bits, singles, CONTEXT,
};
use tl_engine::sampler::{argmax, Sampler, SamplerConfig};
use tl_engine::{Backend, Picked, Session, Wanted};

/// A session that has run `prompt` in one step.
fn session_after(backend: &Backend, prompt: &[u32]) -> Session {
    let mut session = Session::new(backend, CONTEXT).unwrap();
    session.prefill(backend, prompt, 0, &mut || true).unwrap();
    session
}

/// A session that has run `prompt`, and the most likely token after it.
fn started(backend: &Backend, prompt: &[u32]) -> (Session, u32) {
    let mut session = Session::new(backend, CONTEXT).unwrap();
    let logits = session
        .prefill(backend, prompt, 0, &mut || true)
        .unwrap()
        .unwrap();
    (session, argmax(&logits).unwrap())
}

/// One batched step asking every session for its row of logits.
fn logits_rows(backend: &Backend, sessions: &mut [Session], tokens: &[u32]) -> Vec<Vec<f32>> {
    let mut refs: Vec<&mut Session> = sessions.iter_mut().collect();
    let wants = vec![Wanted::Logits; tokens.len()];
    Session::advance(backend, &mut refs, &singles(tokens), &wants)
        .unwrap()
        .into_iter()
        .map(|picked| match picked {
            Picked::Row(row) => row,
            other => panic!("asked for rows, got {other:?}"),
        })
        .collect()
}

/// Whether two picks are the same; rows by their bits.
fn same_pick(a: &Picked, b: &Picked) -> bool {
    match (a, b) {
        (Picked::Row(a), Picked::Row(b)) => same_bits(a, b),
        (a, b) => a == b,
    }
}

/// The token a pick leads to: its token, or its row's argmax.
fn next_token(picked: &Picked) -> u32 {
    match picked {
        Picked::Token(token) => *token,
        Picked::Row(row) => argmax(row).unwrap(),
    }
}

/// What sequence `i` of a batch wants at `step`: logits, the argmax or a
/// sampled token (a CPU backend answers the last with the row).
fn want_of(step: usize, i: usize, sampling: Wanted<'_>) -> Wanted<'_> {
    match (step + i) % 3 {
        0 => Wanted::Logits,
        1 => Wanted::Argmax,
        _ => sampling,
    }
}

backend_tests! {
    /// A batched decode step gives every sequence exactly what its lone step
    /// gives: the same logits bit for bit, the same argmax, the same sampled
    /// token (with a penalty window), wants mixed in one batch; for more
    /// sequences than one GPU pass takes (64), at different positions, and
    /// with sequences leaving the batch as they would in a server.
    fn batched_steps_equal_lone_steps_bit_for_bit(backend: &Backend, model: &Path) {
        let vocab = backend.config().vocab_size as u32;
        // A GPU runs at most 64 sequences a pass: 70 take two passes and,
        // once seven have left, the 63 left take one. The CPU has no such
        // limit, and five keep CI time flat.
        let count = if backend.device_name() == "cpu" {
            5
        } else {
            70
        };
        // Prompts of 3 to 31 tokens, so the rows sit at different positions.
        let prompt = |i: u32| -> Vec<u32> {
            (0..3 + 7 * (i % 5))
                .map(|t| (100 + 37 * t + 11 * i) % vocab)
                .collect()
        };
        let (mut lone, mut lone_next): (Vec<Session>, Vec<u32>) =
            (0..count).map(|i| started(backend, &prompt(i))).unzip();
        let (mut batched, mut batched_next): (Vec<Session>, Vec<u32>) =
            (0..count).map(|i| started(backend, &prompt(i))).unzip();
        let mut ids: Vec<u32> = (0..count).collect();
        let sampler = Sampler::new(SamplerConfig {
            repeat_penalty: 1.2,
            ..SamplerConfig::default()
        });
        let window = [1u32, 2, 3];
        let sampling = Wanted::Sample {
            params: sampler.device_sampling().unwrap(),
            window: &window,
        };
        for step in 0..12 {
            let wants: Vec<Wanted<'_>> = (0..batched.len())
                .map(|i| want_of(step, i, sampling))
                .collect();
            let mut refs: Vec<&mut Session> = batched.iter_mut().collect();
            let picked =
                Session::advance(backend, &mut refs, &singles(&batched_next), &wants).unwrap();
            for (i, picked) in picked.iter().enumerate() {
                let expected = lone[i]
                    .advance_one(backend, &[lone_next[i]], wants[i])
                    .unwrap();
                assert!(
                    same_pick(&expected, picked),
                    "{}: sequence {} differs at step {step} ({:?})",
                    model.display(),
                    ids[i],
                    wants[i]
                );
                lone_next[i] = next_token(&expected);
                batched_next[i] = next_token(picked);
            }
            // Every tenth sequence, from the second, leaves.
            if step == 5 {
                for i in (1..batched.len()).step_by(10).rev() {
                    lone.remove(i);
                    lone_next.remove(i);
                    batched.remove(i);
                    batched_next.remove(i);
                    ids.remove(i);
                }
            }
        }
        for (a, b) in lone.iter().zip(&batched) {
            assert_eq!(a.tokens(), b.tokens());
        }
    }

    /// A batch that fails (a token outside the vocabulary) leaves every
    /// session as it was, and they then step as sessions that never saw it.
    fn a_failed_batch_leaves_every_session_as_it_was(backend: &Backend, model: &Path) {
        let vocab = backend.config().vocab_size as u32;
        let mut a = session_after(backend, &[1, 2, 3]);
        let mut b = session_after(backend, &[4, 5]);
        let wants = [Wanted::Logits; 2];
        let err = Session::advance(
            backend,
            &mut [&mut a, &mut b],
            &singles(&[7, vocab]),
            &wants,
        )
        .unwrap_err();
        assert!(err.to_string().contains("outside the vocabulary"), "{err}");
        assert_eq!(a.tokens(), &[1, 2, 3]);
        assert_eq!(b.tokens(), &[4, 5]);
        let rows =
            Session::advance(backend, &mut [&mut a, &mut b], &singles(&[7, 8]), &wants).unwrap();
        assert_eq!(a.tokens(), &[1, 2, 3, 7]);
        assert_eq!(b.tokens(), &[4, 5, 8]);
        let mut a_fresh = session_after(backend, &[1, 2, 3]);
        let mut b_fresh = session_after(backend, &[4, 5]);
        let fresh_rows = Session::advance(
            backend,
            &mut [&mut a_fresh, &mut b_fresh],
            &singles(&[7, 8]),
            &wants,
        )
        .unwrap();
        for (i, (got, want)) in rows.iter().zip(&fresh_rows).enumerate() {
            assert!(
                same_pick(got, want),
                "{}: session {i} steps differently after the failed batch",
                model.display()
            );
        }
    }

    /// Rows that ask for the argmax get the argmax of the row they would have
    /// got (picked on the device, or on the CPU on all threads); the other
    /// rows of the batch still get their whole row.
    fn argmax_rows_get_the_argmax_of_their_row(backend: &Backend, model: &Path) {
        let sessions = || -> Vec<Session> {
            (0..3u32)
                .map(|i| {
                    let prompt: Vec<u32> = (0..4 + i).map(|t| 200 + 13 * t + i).collect();
                    session_after(backend, &prompt)
                })
                .collect()
        };
        let tokens = [11, 22, 33];
        let rows = logits_rows(backend, &mut sessions(), &tokens);
        let mut mixed = sessions();
        let mut refs: Vec<&mut Session> = mixed.iter_mut().collect();
        let wants = [Wanted::Argmax, Wanted::Logits, Wanted::Argmax];
        let picked = Session::advance(backend, &mut refs, &singles(&tokens), &wants).unwrap();
        let name = model.display();
        assert_eq!(
            picked[0],
            Picked::Token(argmax(&rows[0]).unwrap()),
            "{name}"
        );
        assert!(
            same_pick(&picked[1], &Picked::Row(rows[1].clone())),
            "{name}"
        );
        assert_eq!(
            picked[2],
            Picked::Token(argmax(&rows[2]).unwrap()),
            "{name}"
        );
    }

    /// Greedy decoding twice from fresh caches gives the same tokens, and the
    /// backend's argmax (on the device, where there is one) agrees with the
    /// host's argmax of the same step's logits.
    fn greedy_runs_are_deterministic(backend: &Backend, model: &Path) {
        let prompt = prompt_of(backend.config().vocab_size, 24);
        let run = || {
            let mut cache = backend.new_cache(CONTEXT).unwrap();
            let mut next = argmax(&last_logits(backend, &prompt, &mut cache)).unwrap();
            let mut out = vec![next];
            for _ in 0..32 {
                next = greedy(backend, next, &mut cache);
                out.push(next);
            }
            out
        };
        let first = run();
        assert_eq!(first, run(), "{}: two greedy runs differ", model.display());
        let mut cache = backend.new_cache(CONTEXT).unwrap();
        let mut logits = last_logits(backend, &prompt, &mut cache);
        for (i, &token) in first.iter().take(8).enumerate() {
            assert_eq!(
                argmax(&logits),
                Some(token),
                "{}: the backend's argmax and the host's differ at step {i}",
                model.display()
            );
            logits = last_logits(backend, &[token], &mut cache);
        }
    }

    /// A prompt run in one step and run in chunks gives the same last logits
    /// and leaves the same cache (the next step's logits agree too). Passes
    /// under 64 rows compute each row as a decode step does, bit for bit, on
    /// the CPU and on a GPU with quantized weights ([`quantized_blocks`]). So
    /// the prompt stays under 64 tokens: from 64 rows both backends take a
    /// prompt path of their own (the CPU llama.cpp's tiled f32 attention, a
    /// GPU GEMMs and tensor-core attention) that sums in another order
    /// (measured on the CPU: a 150-token prompt gives one set of bits in
    /// chunks of 1, 7 or 63, another in chunks of 64 or whole). Float weights
    /// on a GPU take GEMMs for any pass of several rows and are held to the
    /// 1e-2 relative difference `cuda_backend.rs` allows (measured: 1.1e-3
    /// on SmolLM2's shape in f16).
    ///
    /// K-quant products round a pass of fewer than 8 rows as llama.cpp's
    /// single-row kernels do, and larger ones as its batch kernels (Q4_K's
    /// repacked gemm in groups of 4): chunks of 8 and 16 give the bits of one
    /// step of 48 rows, and chunks of 1 and 7 are only held to 1e-1 (measured
    /// on the CPU: 5.6e-2 on a synthetic TinyLlama Q4_K_M, whose 22 layers of
    /// random weights amplify the last bits; 2e-7 to 6e-3 on the small
    /// synthetic K-quant models).
    fn a_prompt_in_chunks_gives_the_logits_of_one_step(backend: &Backend, model: &Path) {
        let exact = backend.device_name() == "cpu" || quantized_blocks(model);
        let k_quants = k_quant_blocks(model);
        let prompt = prompt_of(backend.config().vocab_size, 48);
        let run = |chunk_tokens: usize| {
            let mut session = Session::new(backend, CONTEXT).unwrap();
            let last = session
                .prefill(backend, &prompt, chunk_tokens, &mut || true)
                .unwrap()
                .unwrap();
            let next = session.feed(backend, &prompt[..1]).unwrap();
            (last, next)
        };
        let (whole, whole_next) = run(0);
        for chunk_tokens in [1, 7, 8, 16] {
            let small_batches = k_quants && chunk_tokens < 8;
            let (last, next) = run(chunk_tokens);
            for (what, got, want) in [("last", &last, &whole), ("next step's", &next, &whole_next)]
            {
                let error = relative_error(got, want);
                eprintln!("chunks of {chunk_tokens}: {what} logits differ by {error:.2e}");
                let close = if small_batches {
                    error < 1e-1
                } else if exact {
                    same_bits(got, want)
                } else {
                    error < 1e-2
                };
                assert!(
                    close,
                    "{}: chunks of {chunk_tokens} give other {what} logits than one step ({error:.2e})",
                    model.display()
                );
            }
        }
    }

    /// A program's own cache access (the language's `cache.store`,
    /// `cache.keys`, `cache.values`) reads what the model's pass wrote and
    /// writes what a later pass reads: a cache filled by storing back every
    /// layer's keys and values as read gives the next step the same logits
    /// as the cache the pass filled.
    fn cache_reads_and_stores_round_trip(backend: &Backend, _model: &Path) {
        use tl_engine::KvHalf;
        let c = backend.config().clone();
        let prompt = prompt_of(c.vocab_size, 12);
        let mut filled = backend.new_cache(CONTEXT).unwrap();
        last_logits(backend, &prompt, &mut filled);
        let end = prompt.len();
        let mut copied = backend.new_cache(CONTEXT).unwrap();
        let width = c.head_count_kv * c.head_dim;
        for layer in 0..c.block_count {
            let keys = backend.read_kv(&filled, layer, KvHalf::Keys, end).unwrap();
            let values = backend.read_kv(&filled, layer, KvHalf::Values, end).unwrap();
            assert_eq!(keys.len(), width * end);
            // [kv_head][position][head_dim] back to one position's
            // [kv_head][head_dim] rows.
            for position in 0..end {
                let row = |all: &[half::f16]| -> Vec<f32> {
                    (0..c.head_count_kv)
                        .flat_map(|head| {
                            let at = (head * end + position) * c.head_dim;
                            all[at..at + c.head_dim].iter().map(|v| v.to_f32())
                        })
                        .collect()
                };
                backend
                    .store_kv(&mut copied, layer, position, &row(&keys), &row(&values))
                    .unwrap();
            }
            let stored = backend.read_kv(&copied, layer, KvHalf::Keys, end).unwrap();
            assert!(
                stored.iter().zip(&keys).all(|(a, b)| a.to_bits() == b.to_bits()),
                "layer {layer}: stored keys read back differently"
            );
        }
        copied.commit(end);
        let next = (prompt[end - 1] + 1) % c.vocab_size as u32;
        let want = last_logits(backend, &[next], &mut filled);
        let got = last_logits(backend, &[next], &mut copied);
        assert!(same_bits(&got, &want), "a copied cache gives other logits");
        // Out of range is an error, not a panic.
        assert!(backend.read_kv(&copied, c.block_count, KvHalf::Keys, 1).is_err());
        assert!(backend.read_kv(&copied, 0, KvHalf::Values, 0).unwrap().is_empty());
        let short = vec![0.0; width - 1];
        assert!(backend.store_kv(&mut copied, 0, 0, &short, &short).is_err());
    }
}
