//! Batched decode on the CPU: several sequences stepped in one pass must give
//! each sequence exactly the logits it gets when stepped alone (the server's
//! promise that a request's output does not depend on what else runs).
//! Uses the default model (fetched by `tl model pull`, which the README's test
//! command runs first).

use std::path::PathBuf;

use tl_engine::model::Model;
use tl_engine::sampler::argmax;
use tl_engine::{Backend, Picked, Session, Wanted};
use tl_gguf::GgufFile;

const CONTEXT: usize = 128;

/// The default model: `TL_TEST_MODEL`, else where `tl model pull` puts it.
fn real_model() -> PathBuf {
    tl_testdata::default_model().unwrap_or_else(|e| panic!("{e}"))
}

/// One batched step; every session's row of logits.
fn logits_rows(model: &Backend, sessions: &mut [Session], tokens: &[u32]) -> Vec<Vec<f32>> {
    let mut refs: Vec<&mut Session> = sessions.iter_mut().collect();
    let wants = vec![Wanted::Logits; tokens.len()];
    Session::advance(model, &mut refs, &singles(tokens), &wants)
        .unwrap()
        .into_iter()
        .map(|picked| match picked {
            Picked::Row(row) => row,
            other => panic!("asked for rows, got {other:?}"),
        })
        .collect()
}

/// One token per session, as [`Session::advance`] takes them.
fn singles(tokens: &[u32]) -> Vec<&[u32]> {
    tokens.iter().map(std::slice::from_ref).collect()
}

#[test]
fn batched_steps_equal_lone_steps_bit_for_bit() {
    let file = GgufFile::open(real_model()).unwrap();
    let model = Backend::Cpu(Model::load(&file, CONTEXT).unwrap());
    // Prompts of different lengths, so the rows sit at different positions.
    let prompts: Vec<Vec<u32>> = (0..5u32)
        .map(|i| (0..3 + 7 * i).map(|t| 100 + 37 * t + 11 * i).collect())
        .collect();
    let start = |prompt: &Vec<u32>| {
        let mut session = Session::new(&model, CONTEXT).unwrap();
        let logits = session
            .prefill(&model, prompt, 0, &mut || true)
            .unwrap()
            .unwrap();
        (session, argmax(&logits).unwrap())
    };
    let (mut alone, mut alone_next): (Vec<Session>, Vec<u32>) = prompts.iter().map(start).unzip();
    let (mut batched, mut batched_next): (Vec<Session>, Vec<u32>) =
        prompts.iter().map(start).unzip();
    for step in 0..12 {
        let rows = logits_rows(&model, &mut batched, &batched_next);
        for (i, row) in rows.iter().enumerate() {
            let lone = alone[i].feed(&model, &[alone_next[i]]).unwrap();
            assert!(
                lone.iter()
                    .zip(row)
                    .all(|(a, b)| a.to_bits() == b.to_bits()),
                "sequence {i} differs at step {step}"
            );
            alone_next[i] = argmax(&lone).unwrap();
            batched_next[i] = argmax(row).unwrap();
        }
        // Sequences leave the batch as they would in a server.
        if step == 5 {
            batched.remove(1);
            batched_next.remove(1);
            alone.remove(1);
            alone_next.remove(1);
        }
    }
    for (a, b) in alone.iter().zip(&batched) {
        assert_eq!(a.tokens(), b.tokens());
    }
}

#[test]
fn a_failed_batch_leaves_every_session_as_it_was() {
    let file = GgufFile::open(real_model()).unwrap();
    let model = Backend::Cpu(Model::load(&file, CONTEXT).unwrap());
    let mut a = Session::new(&model, CONTEXT).unwrap();
    let mut b = Session::new(&model, CONTEXT).unwrap();
    a.prefill(&model, &[1, 2, 3], 0, &mut || true).unwrap();
    b.prefill(&model, &[4, 5], 0, &mut || true).unwrap();
    let vocab = model.config().vocab_size as u32;
    let wants = [Wanted::Logits; 2];
    let err =
        Session::advance(&model, &mut [&mut a, &mut b], &singles(&[7, vocab]), &wants).unwrap_err();
    assert!(err.to_string().contains("outside the vocabulary"), "{err}");
    assert_eq!(a.tokens(), &[1, 2, 3]);
    assert_eq!(b.tokens(), &[4, 5]);
    // Both still step correctly afterwards.
    let rows = Session::advance(&model, &mut [&mut a, &mut b], &singles(&[7, 8]), &wants).unwrap();
    assert_eq!(rows.len(), 2);
    assert_eq!(a.tokens(), &[1, 2, 3, 7]);
}

/// Rows that ask for the argmax get their token picked on the CPU (on all
/// threads): the argmax of the row they would have got; the other rows still
/// get their whole row.
#[test]
fn argmax_rows_get_the_argmax_of_their_row() {
    let file = GgufFile::open(real_model()).unwrap();
    let model = Backend::Cpu(Model::load(&file, CONTEXT).unwrap());
    let sessions = || -> Vec<Session> {
        (0..3u32)
            .map(|i| {
                let mut session = Session::new(&model, CONTEXT).unwrap();
                let prompt: Vec<u32> = (0..4 + i).map(|t| 200 + 13 * t + i).collect();
                session.prefill(&model, &prompt, 0, &mut || true).unwrap();
                session
            })
            .collect()
    };
    let tokens = [11, 22, 33];
    let mut as_rows = sessions();
    let rows = logits_rows(&model, &mut as_rows, &tokens);
    let mut mixed = sessions();
    let mut refs: Vec<&mut Session> = mixed.iter_mut().collect();
    let wants = [Wanted::Argmax, Wanted::Logits, Wanted::Argmax];
    let picked = Session::advance(&model, &mut refs, &singles(&tokens), &wants).unwrap();
    assert_eq!(picked[0], Picked::Token(argmax(&rows[0]).unwrap()));
    assert_eq!(picked[1], Picked::Row(rows[1].clone()));
    assert_eq!(picked[2], Picked::Token(argmax(&rows[2]).unwrap()));
}
