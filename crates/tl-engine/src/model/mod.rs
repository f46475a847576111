//! What every backend shares about a model: its configuration from GGUF
//! metadata, the architecture table, the schedule of a forward pass, the step
//! types and checks, the file's tensors checked against the configuration,
//! tensor names, weight loading and RoPE tables.

pub mod arch;
pub mod config;
pub mod consistency;
pub mod gelu;
pub mod rope;
pub mod schedule;
pub mod step;
pub mod tensor_names;
pub mod weights;

pub use config::ModelConfig;
