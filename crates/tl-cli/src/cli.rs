//! Command-line definitions (clap). Only argument shapes live here; each command's
//! behaviour lives in `commands/`.

use std::path::PathBuf;
use tl_engine::DeviceChoice;

use clap::{Args, Parser, Subcommand};
use tl_engine::sampler::SamplerConfig;

/// TensorLogic: a tensor language and a local LLM runtime.
#[derive(Debug, Parser)]
#[command(name = "tl", version, about, long_about = None, propagate_version = true)]
pub struct Cli {
    /// Print load times, memory use and other diagnostics on stderr.
    #[arg(short, long, global = true)]
    pub verbose: bool,

    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Check and run a TensorLogic program (`.tl`): its `main`, its `test`
    /// blocks (--test) or its `bench` blocks (--bench).
    Run(RunArgs),
    /// Check a TensorLogic program without running it: names, arity, shapes.
    Check(CheckArgs),
    /// The TensorLogic language REPL (multi-line input, history, :type, :vars,
    /// :load, tab completion).
    Repl(ReplArgs),
    /// Chat with a model in the terminal (streamed replies, history, /commands).
    Chat(ChatArgs),
    /// Generate one completion of a prompt to stdout.
    Generate(GenerateArgs),
    /// Compute a model's perplexity on a text file, as llama.cpp's llama-perplexity does.
    Perplexity(PerplexityArgs),
    /// Measure prompt processing and generation speed, like llama-bench:
    /// tokens/s (median and range over repetitions), time to first token,
    /// host-device syncs per token and device memory.
    Bench(BenchArgs),
    /// Serve models over HTTP with OpenAI's (/v1/chat/completions,
    /// /v1/completions, /v1/models) and Ollama's (/api/chat, /api/generate,
    /// /api/tags, /api/show, /api/version) APIs, many requests at once.
    Serve(ServeArgs),
    /// Inspect and manage model files.
    #[command(subcommand)]
    Model(ModelCommand),
}

/// `tl serve`.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// GGUF model file to serve; repeat to serve several (requests pick one by
    /// its file name without `.gguf`). The first is loaded at start, the
    /// others when a request names them. Default: the default model.
    #[arg(short, long, value_name = "FILE")]
    pub model: Vec<PathBuf>,
    /// Address to listen on. The default accepts only this machine.
    #[arg(long, value_name = "ADDRESS", default_value = "127.0.0.1")]
    pub host: String,
    /// Port to listen on (0: any free port; the address is printed).
    #[arg(long, value_name = "PORT", default_value_t = 8080)]
    pub port: u16,
    /// Requests generated at once; each has its own KV cache of --ctx tokens.
    #[arg(long, value_name = "N", default_value_t = 4)]
    pub parallel: usize,
    /// Requests that may wait for a free slot; more get HTTP 429.
    #[arg(long, value_name = "N", default_value_t = 64)]
    pub max_queue: usize,
    /// Context per request in tokens. Default: the model's training context,
    /// at most 4096; more than the training context is cut to it.
    #[arg(long, value_name = "N")]
    pub ctx: Option<usize>,
    /// Run prompts in chunks of N tokens, so a long prompt does not stall the
    /// other streams.
    #[arg(long, value_name = "N", default_value_t = 512)]
    pub prefill_chunk: usize,
    /// Megabytes of weights loaded at once; loading another model evicts the
    /// least recently used idle ones. Default: no limit.
    #[arg(long, value_name = "MB")]
    pub model_memory_mb: Option<u64>,
    /// Reuse the KV cache of an earlier request whose tokens start a new prompt
    /// (faster chat follow-ups). Off by default: reused tokens were computed in
    /// differently shaped passes, so outputs could depend on earlier requests.
    #[arg(long)]
    pub prompt_cache: bool,
    /// Require `Authorization: Bearer KEY` on every route but /health (also
    /// read from TL_API_KEY, which keeps the key out of the process list).
    #[arg(long, value_name = "KEY", env = "TL_API_KEY", hide_env_values = true)]
    pub api_key: Option<String>,
    /// Where to run models: cpu, cuda (or gpu), or auto (the GPU when one is
    /// usable).
    #[arg(long, value_name = "DEVICE", default_value = "auto")]
    pub device: DeviceChoice,
}

/// Which model to load and how.
#[derive(Debug, Clone, Args)]
pub struct ModelArgs {
    /// GGUF model file. Default: SmolLM2-135M-Instruct (Q4_1), fetched on first use
    /// into the cache folder.
    #[arg(short, long, value_name = "FILE")]
    pub model: Option<PathBuf>,

    /// Context size in tokens (KV cache capacity). Default: the model's training
    /// context, at most 4096.
    #[arg(long, value_name = "N")]
    pub ctx: Option<usize>,

    /// Run the prompt through the model in chunks of N tokens (0: all at once).
    #[arg(long, value_name = "N", default_value_t = 512)]
    pub prefill_chunk: usize,

    /// Where to run the model: cpu, cuda or gpu (the first NVIDIA GPU), or auto
    /// (the GPU when one is usable, else the CPU).
    #[arg(long, value_name = "DEVICE", default_value = "auto")]
    pub device: DeviceChoice,
}

/// Sampling settings shared by `chat` and `generate`.
#[derive(Debug, Clone, Args)]
pub struct SamplingArgs {
    /// Sampling temperature; 0 picks the most likely token (greedy).
    #[arg(long, value_name = "T", default_value_t = SamplerConfig::default().temperature)]
    pub temperature: f32,
    /// Keep only the K most likely tokens (0: off).
    #[arg(long, value_name = "K", default_value_t = SamplerConfig::default().top_k)]
    pub top_k: usize,
    /// Keep the smallest set of tokens whose probability adds up to P (1: off).
    #[arg(long, value_name = "P", default_value_t = SamplerConfig::default().top_p)]
    pub top_p: f32,
    /// Drop tokens less likely than P times the most likely one (0: off).
    #[arg(long, value_name = "P", default_value_t = SamplerConfig::default().min_p)]
    pub min_p: f32,
    /// Penalise tokens seen in the last --repeat-last-n tokens (1: off).
    #[arg(long, value_name = "X", default_value_t = SamplerConfig::default().repeat_penalty)]
    pub repeat_penalty: f32,
    /// How many recent tokens the penalties look at.
    #[arg(long, value_name = "N", default_value_t = SamplerConfig::default().repeat_last_n)]
    pub repeat_last_n: usize,
    /// Subtract X from the logit of every token already present (0: off).
    #[arg(long, value_name = "X", default_value_t = 0.0)]
    pub presence_penalty: f32,
    /// Subtract X times its count from the logit of every token present (0: off).
    #[arg(long, value_name = "X", default_value_t = 0.0)]
    pub frequency_penalty: f32,
    /// Random seed: the same seed and input give the same tokens on every run.
    #[arg(long, value_name = "N", default_value_t = SamplerConfig::default().seed)]
    pub seed: u64,
}

impl SamplingArgs {
    /// The sampler configuration these flags describe.
    pub fn to_config(&self) -> SamplerConfig {
        SamplerConfig {
            temperature: self.temperature,
            top_k: self.top_k,
            top_p: self.top_p,
            min_p: self.min_p,
            repeat_penalty: self.repeat_penalty,
            repeat_last_n: self.repeat_last_n,
            presence_penalty: self.presence_penalty,
            frequency_penalty: self.frequency_penalty,
            seed: self.seed,
        }
    }
}

/// `tl run`.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// The program.
    #[arg(value_name = "FILE.tl")]
    pub file: PathBuf,
    /// Arguments for the program (`args()` in the language).
    #[arg(
        value_name = "ARGS",
        trailing_var_arg = true,
        allow_hyphen_values = true
    )]
    pub args: Vec<String>,
    /// Run the program's `test` blocks and print a summary instead of running `main`.
    #[arg(long, conflicts_with = "bench")]
    pub test: bool,
    /// Run the program's `bench` blocks and print their timings.
    #[arg(long)]
    pub bench: bool,
    /// With --test or --bench: only the blocks whose name contains this text.
    #[arg(long, value_name = "TEXT")]
    pub filter: Option<String>,
}

/// `tl check`.
#[derive(Debug, Args)]
pub struct CheckArgs {
    /// The program (its imports are checked too).
    #[arg(value_name = "FILE.tl")]
    pub file: PathBuf,
}

/// `tl repl`.
#[derive(Debug, Args)]
pub struct ReplArgs {
    /// Load this program's declarations first (like `:load FILE`).
    #[arg(value_name = "FILE.tl")]
    pub file: Option<PathBuf>,
}

/// `tl chat`.
#[derive(Debug, Args)]
pub struct ChatArgs {
    #[command(flatten)]
    pub model: ModelArgs,
    #[command(flatten)]
    pub sampling: SamplingArgs,
    /// System prompt for the conversation.
    #[arg(long, value_name = "TEXT")]
    pub system: Option<String>,
    /// Most tokens per reply.
    #[arg(short = 'n', long, value_name = "N", default_value_t = 1024)]
    pub max_tokens: usize,
}

/// `tl generate`.
#[derive(Debug, Args)]
pub struct GenerateArgs {
    #[command(flatten)]
    pub model: ModelArgs,
    #[command(flatten)]
    pub sampling: SamplingArgs,
    /// The prompt.
    #[arg(short, long, value_name = "TEXT")]
    pub prompt: String,
    /// Most tokens to generate.
    #[arg(short = 'n', long, value_name = "N", default_value_t = 256)]
    pub max_tokens: usize,
    /// Feed the prompt as is, without the chat template (BOS only if the model's
    /// metadata asks for it; special-token text becomes special tokens).
    #[arg(long)]
    pub raw: bool,
    /// Stop when this string appears (repeatable); it is not printed.
    #[arg(long = "stop", value_name = "TEXT")]
    pub stop: Vec<String>,
    /// Print timings and token counts on stderr when done.
    #[arg(long)]
    pub stats: bool,
}

/// `tl bench`.
#[derive(Debug, Args)]
pub struct BenchArgs {
    #[command(flatten)]
    pub model: ModelArgs,

    /// Prompt lengths to time (prompt processing, "ppN"), comma-separated; 0 for none.
    #[arg(
        short = 'p',
        long,
        value_name = "N,...",
        value_delimiter = ',',
        default_value = "512"
    )]
    pub prompt: Vec<usize>,

    /// Tokens to generate for the generation test ("tgN"); 0 for none.
    #[arg(short = 'n', long, value_name = "N", default_value_t = 128)]
    pub generate: usize,

    /// Tokens already in the context before the generation test starts.
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub depth: usize,

    /// Timed repetitions of each test (after one untimed warm-up).
    #[arg(long, value_name = "N", default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..))]
    pub reps: u32,

    /// Seed of the random prompt tokens (and of the sampler).
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub seed: u64,

    /// Sequences decoded together in the generation test, each with its own
    /// random history of --depth tokens (at least 1), as a server's batch of
    /// streams; tokens/s counts every sequence's tokens.
    #[arg(short = 'b', long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub batch: u32,

    /// Sample the generation test at this temperature (the other sampler
    /// settings at their defaults: top-k 40, top-p 0.95, min-p 0.05) instead of
    /// taking the argmax; on a GPU the top 40 logits come back every step.
    #[arg(long, value_name = "T", default_value_t = 0.0)]
    pub temperature: f32,

    /// Print the results as JSON instead of a table.
    #[arg(long)]
    pub json: bool,

    /// After each test's timed runs, run it once more timing every GPU kernel on
    /// its own, and print where the device time goes (per token). The profiled
    /// run waits for each kernel, so its total is above the test's time.
    #[arg(long)]
    pub profile: bool,
}

/// `tl perplexity`.
#[derive(Debug, Args)]
pub struct PerplexityArgs {
    /// GGUF model file (default: the default model).
    #[arg(short, long, value_name = "FILE")]
    pub model: Option<PathBuf>,
    /// Text file to score.
    #[arg(short, long, value_name = "FILE")]
    pub file: PathBuf,
    /// Window size in tokens.
    #[arg(short = 'c', long, value_name = "N", default_value_t = 512)]
    pub ctx: usize,
    /// Where to run: cpu, cuda (or gpu), or auto (a GPU when one is usable).
    /// On a GPU, windows of 64 tokens or more (any window, for float weights)
    /// are summed in another order, so the last digits can differ from the
    /// CPU's and llama.cpp's.
    #[arg(long, value_name = "DEVICE", default_value = "auto")]
    pub device: DeviceChoice,
}

/// `tl model ...`.
#[derive(Debug, Subcommand)]
pub enum ModelCommand {
    /// Show a GGUF file's architecture, hyperparameters, tensors, vocabulary and template.
    Inspect(InspectArgs),
    /// Fetch the default model into the cache folder (if needed) and print its path.
    Pull,
    /// Write a random-weight GGUF model of a real shape (TinyLlama, SmolLM2,
    /// Qwen3-0.6B, Llama-3-8B) for benchmarks and tests.
    ///
    /// Matrices and the token embedding are normal(0, 0.02) in the chosen type
    /// (ggml's reference quantizers), norm weights are f32 ones. The same seed
    /// gives a byte-identical file. The file's size is printed before writing
    /// starts, and the command refuses to start when the output folder has less
    /// free space than that.
    #[command(after_help = crate::commands::synth_shape_table())]
    Synth(SynthArgs),
}

/// `tl model inspect`.
#[derive(Debug, Args)]
pub struct InspectArgs {
    /// GGUF file.
    #[arg(value_name = "FILE")]
    pub file: PathBuf,
    /// List every tensor (default: the first 12 and a summary).
    #[arg(long)]
    pub all_tensors: bool,
}

/// `tl model synth`.
#[derive(Debug, Args)]
pub struct SynthArgs {
    /// Shape: tiny, tiny-qwen3, tinyllama, smollm2, qwen3-0.6b or llama-8b (table below).
    #[arg(long, value_name = "NAME")]
    pub shape: String,
    /// Weight type of the matrices and the token embedding: f16, q8_0, q4_0 or q4_1.
    #[arg(long, value_name = "TYPE")]
    pub quant: String,
    /// Architecture: llama or qwen3. Optional, implied by --shape; an error when it
    /// disagrees with the shape.
    #[arg(long, value_name = "NAME")]
    pub arch: Option<String>,
    /// Copy the tokenizer (every `tokenizer.*` key) from this GGUF file; its token
    /// count becomes the vocabulary size. Default: a made-up SentencePiece-style
    /// vocabulary of the shape's size.
    #[arg(long, value_name = "FILE.gguf")]
    pub vocab: Option<PathBuf>,
    /// Random seed: the same seed gives the same bytes.
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub seed: u64,
    /// The file to write (through OUT.gguf.tmp, renamed when complete).
    #[arg(short, long, value_name = "OUT.gguf")]
    pub output: PathBuf,
}
