//! Models: configuration from GGUF metadata, weights, the KV cache and the forward
//! pass of each supported architecture.

pub mod activation;
pub mod arch;
pub mod attention;
pub mod cache;
pub mod config;
pub mod f16_vector;
pub mod linear;
pub mod norm;
pub mod rope;
pub mod schedule;
pub mod tensor_names;
#[cfg(test)]
mod test_values;
mod tiled_attention;
mod vector_exp;
pub mod weights;

pub use crate::cpu::model::{BatchStep, Logits, Model};
pub use cache::KvCache;
pub use config::ModelConfig;
