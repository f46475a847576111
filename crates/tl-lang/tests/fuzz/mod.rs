//! Pieces of the robustness test `no_panic_run`: a seeded generator, the corpus
//! of example programs, the mutations applied to them, odd argument values for
//! builtins, and a runner that turns a panic or a hang into a report.

pub mod corpus;
pub mod hostile;
pub mod mutate;
pub mod odd_values;
pub mod rng;
pub mod runner;
pub mod worker;
