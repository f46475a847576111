//! Command-line definitions (clap). Only argument shapes live here; each command's
//! behaviour lives in `commands/`.

use std::path::PathBuf;
use tl_engine::DeviceChoice;

use clap::{Args, Parser, Subcommand, ValueEnum};
use tl_engine::gpu_options::{self, GpuOptions, KernelDefine};
use tl_engine::sampler::SamplerConfig;

/// TensorLogic: a tensor language and a local LLM runtime.
#[derive(Debug, Parser)]
#[command(name = "tl", version, about, long_about = None, propagate_version = true)]
pub struct Cli {
    /// Print load times, memory use and other diagnostics on stderr.
    #[arg(short, long, global = true)]
    pub verbose: bool,

    /// CPU threads for the model's arithmetic and the language's tensor ops.
    /// Default: one per core.
    #[arg(long, global = true, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=1024))]
    pub threads: Option<u16>,

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
    /// Print embeddings of texts as JSON: the mean of the model's final hidden
    /// states over each text's tokens, unit length (llama-embedding --pooling
    /// mean --embd-normalize 2).
    Embed(EmbedArgs),
    /// Compute a model's perplexity on a text file, as llama.cpp's llama-perplexity does.
    Perplexity(PerplexityArgs),
    /// Measure prompt processing and generation speed, like llama-bench:
    /// tokens/s (median and range over repetitions), time to first token,
    /// host-device syncs per token and device memory.
    Bench(BenchArgs),
    /// Serve models over HTTP with OpenAI's (/v1/chat/completions,
    /// /v1/completions, /v1/embeddings, /v1/models) and Ollama's (/api/chat,
    /// /api/generate, /api/embed, /api/tags, /api/show, /api/version) APIs,
    /// many requests at once.
    Serve(ServeArgs),
    /// Inspect and manage model files.
    #[command(subcommand)]
    Model(ModelCommand),
}

/// `tl serve`.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// GGUF model file (or catalogue name) to serve; repeat to serve several
    /// (requests pick one by its file name without `.gguf`). The first is
    /// loaded at start, the others when a request names them. Default: the
    /// default model.
    #[arg(short, long, value_name = "FILE|NAME")]
    pub model: Vec<PathBuf>,
    /// Address to listen on. The default accepts only this machine.
    #[arg(long, value_name = "ADDRESS", default_value = "127.0.0.1")]
    pub host: String,
    /// Port to listen on (0: any free port; the address is printed). Ollama's
    /// clients expect 11434: give `--port 11434` to stand in for Ollama.
    #[arg(long, value_name = "PORT", default_value_t = 8080)]
    pub port: u16,
    /// Let web pages from ORIGIN (`http://localhost:3000`, or `*` for any)
    /// call the server from a browser; repeat for several. Off by default.
    #[arg(long, value_name = "ORIGIN")]
    pub cors: Vec<String>,
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
    /// Require `Authorization: Bearer KEY` on every route but /health; repeat
    /// for several keys, each its own prompt-cache scope (also read from
    /// TL_API_KEY, keys separated by commas, which keeps them out of the
    /// process list).
    #[arg(
        long,
        value_name = "KEY",
        env = "TL_API_KEY",
        hide_env_values = true,
        value_delimiter = ','
    )]
    pub api_key: Vec<String>,
    /// Seconds a request's headers, and then its body, may take to arrive;
    /// slower clients are dropped (headers) or get 408 (body).
    #[arg(long, value_name = "SECONDS", default_value_t = 10)]
    pub request_timeout: u64,
    /// Connections open at once; more wait until one closes. Default: the
    /// process's limit on open files less 100, at most 16384.
    #[arg(long, value_name = "N")]
    pub max_connections: Option<usize>,
    /// Where to run models: cpu, cuda (or gpu), or auto (the GPU when one is
    /// usable).
    #[arg(long, value_name = "DEVICE", default_value = "auto")]
    pub device: DeviceChoice,
    #[command(flatten)]
    pub gpu: GpuArgs,
}

/// Which model to load and how.
#[derive(Debug, Clone, Args)]
pub struct ModelArgs {
    /// GGUF model file, or a catalogue name (`smollm2`, `gemma3`; `tl model
    /// list`) fetched on first use into the cache folder. Default: smollm2
    /// (SmolLM2-135M-Instruct, Q4_1).
    #[arg(short, long, value_name = "FILE|NAME")]
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

    #[command(flatten)]
    pub gpu: GpuArgs,
}

/// How a GPU is used (`tl_engine::GpuOptions`): switches for comparisons and
/// knobs for measurements, hidden from `--help` (README, "GPU options").
/// Each also reads the environment variable the scripts set; a flag left out
/// keeps the runtime's default.
#[derive(Debug, Clone, Default, Args)]
pub struct GpuArgs {
    /// Replay each decode step as a CUDA graph (on) or launch its kernels one
    /// by one (off).
    #[arg(long, hide = true, value_name = "on|off", env = "TL_CUDA_GRAPHS")]
    pub cuda_graphs: Option<Switch>,
    /// Keep f16 copies of the weights for prompt GEMMs when the GPU has room.
    #[arg(long, hide = true, value_name = "on|off", env = "TL_CUDA_F16_WEIGHTS")]
    pub cuda_f16_weights: Option<Switch>,
    /// What decode kernels ask L2 for ahead of need: 0 nothing, 1 their own
    /// first reads, 2 also the next matrix's weights.
    #[arg(
        long,
        hide = true,
        value_name = "0|1|2",
        env = "TL_CUDA_L2_PREFETCH",
        value_parser = l2_prefetch
    )]
    pub cuda_l2_prefetch: Option<u8>,
    /// Programmatic dependent launches (sm_90 and later).
    #[arg(long, hide = true, value_name = "on|off", env = "TL_CUDA_PDL")]
    pub cuda_pdl: Option<Switch>,
    /// Batched products of Q4_0, Q4_1 and Q8_0 weights on tensor cores (on)
    /// or CUDA cores (off); the same bits either way.
    #[arg(long, hide = true, value_name = "on|off", env = "TL_CUDA_MMA")]
    pub cuda_mma: Option<Switch>,
    /// Rows per quantized GEMV tile (default: one tile per multiprocessor).
    #[arg(
        long,
        hide = true,
        value_name = "N",
        env = "TL_GEMV_TILE_ROWS",
        value_parser = gemv_tile_rows
    )]
    pub gemv_tile_rows: Option<usize>,
    /// The fewest threads per quantized GEMV block (32 to 512).
    #[arg(
        long,
        hide = true,
        value_name = "N",
        env = "TL_GEMV_TILE_THREADS",
        value_parser = gemv_tile_threads
    )]
    pub gemv_tile_threads: Option<usize>,
    /// Warps per float GEMV block (even, 2 to 16).
    #[arg(
        long,
        hide = true,
        value_name = "N",
        env = "TL_GEMV_WARPS",
        value_parser = gemv_warps
    )]
    pub gemv_warps: Option<usize>,
    /// The most float GEMV blocks per multiprocessor.
    #[arg(
        long,
        hide = true,
        value_name = "N",
        env = "TL_GEMV_BLOCKS_PER_SM",
        value_parser = gemv_blocks_per_sm
    )]
    pub gemv_blocks_per_sm: Option<usize>,
    /// `#define`s for the kernels' source (e.g. GEMV_CLOCKS=1).
    #[arg(
        long,
        hide = true,
        value_name = "NAME=VALUE,...",
        env = "TL_CUDA_KERNEL_DEFINES",
        value_delimiter = ','
    )]
    pub cuda_kernel_defines: Vec<KernelDefine>,
    /// Where compiled kernels are cached (default: the cache folder's
    /// `tensorlogic/kernels`).
    #[arg(long, hide = true, value_name = "DIR", env = "TL_KERNEL_CACHE")]
    pub kernel_cache: Option<PathBuf>,
    /// Run as a GPU of this older compute capability (e.g. 8.0 on an H100:
    /// its kernels and code paths), for tests and measurements.
    #[arg(
        long,
        hide = true,
        value_name = "MAJOR.MINOR",
        env = "TL_CUDA_OLDER_CARD",
        value_parser = compute_capability
    )]
    pub cuda_older_card: Option<(i32, i32)>,
}

/// A compute capability as `MAJOR.MINOR`, 8.0 or later (what the kernels need).
fn compute_capability(text: &str) -> Result<(i32, i32), String> {
    let parsed = text
        .split_once('.')
        .and_then(|(major, minor)| Some((major.parse().ok()?, minor.parse().ok()?)));
    match parsed {
        Some((major, minor)) if major >= 8 && minor >= 0 => Ok((major, minor)),
        Some(_) => Err(format!(
            "{text}: the kernels need compute capability 8.0 or later"
        )),
        None => Err(format!("{text}: expected MAJOR.MINOR, such as 8.0 or 8.6")),
    }
}

/// `on` or `off`; `1`/`0` and `true`/`false` too, as the environment
/// variables were set before they became flags.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Switch {
    #[value(alias = "1", alias = "true")]
    On,
    #[value(alias = "0", alias = "false")]
    Off,
}

impl Switch {
    fn is_on(self) -> bool {
        self == Switch::On
    }
}

impl GpuArgs {
    /// The options these flags describe (valid: each flag's value was
    /// checked when parsed).
    pub fn to_options(&self) -> GpuOptions {
        let default = GpuOptions::default();
        GpuOptions {
            graphs: self.cuda_graphs.map_or(default.graphs, Switch::is_on),
            f16_weights: self
                .cuda_f16_weights
                .map_or(default.f16_weights, Switch::is_on),
            l2_prefetch: self.cuda_l2_prefetch.unwrap_or(default.l2_prefetch),
            dependent_launches: self
                .cuda_pdl
                .map_or(default.dependent_launches, Switch::is_on),
            tensor_core_gemv: self
                .cuda_mma
                .map_or(default.tensor_core_gemv, Switch::is_on),
            gemv_tile_rows: self.gemv_tile_rows.or(default.gemv_tile_rows),
            gemv_tile_threads: self.gemv_tile_threads.unwrap_or(default.gemv_tile_threads),
            gemv_warps: self.gemv_warps.unwrap_or(default.gemv_warps),
            gemv_blocks_per_sm: self
                .gemv_blocks_per_sm
                .unwrap_or(default.gemv_blocks_per_sm),
            kernel_defines: self.cuda_kernel_defines.clone(),
            kernel_cache: self.kernel_cache.clone(),
            older_card: self.cuda_older_card,
        }
    }
}

/// A number, then the range check `tl_engine::gpu_options` gives for it.
fn checked<T: std::str::FromStr + Copy>(
    text: &str,
    check: fn(T) -> Result<(), String>,
) -> Result<T, String> {
    let value = text
        .trim()
        .parse()
        .map_err(|_| format!("'{text}' is not a whole number"))?;
    check(value)?;
    Ok(value)
}

fn l2_prefetch(text: &str) -> Result<u8, String> {
    checked(text, gpu_options::check_l2_prefetch)
}

fn gemv_tile_rows(text: &str) -> Result<usize, String> {
    checked(text, gpu_options::check_gemv_tile_rows)
}

fn gemv_tile_threads(text: &str) -> Result<usize, String> {
    checked(text, gpu_options::check_gemv_tile_threads)
}

fn gemv_warps(text: &str) -> Result<usize, String> {
    checked(text, gpu_options::check_gemv_warps)
}

fn gemv_blocks_per_sm(text: &str) -> Result<usize, String> {
    checked(text, gpu_options::check_gemv_blocks_per_sm)
}

/// Sampling settings shared by `chat` and `generate`.
#[derive(Debug, Clone, Args)]
pub struct SamplingArgs {
    /// Sampling temperature; 0 picks the most likely token (greedy).
    #[arg(long, allow_negative_numbers = true, value_name = "T", default_value_t = SamplerConfig::default().temperature)]
    pub temperature: f32,
    /// Keep only the K most likely tokens (0: off).
    #[arg(long, value_name = "K", default_value_t = SamplerConfig::default().top_k)]
    pub top_k: usize,
    /// Keep the smallest set of tokens whose probability adds up to P (1: off).
    #[arg(long, allow_negative_numbers = true, value_name = "P", default_value_t = SamplerConfig::default().top_p)]
    pub top_p: f32,
    /// Drop tokens less likely than P times the most likely one (0: off).
    #[arg(long, allow_negative_numbers = true, value_name = "P", default_value_t = SamplerConfig::default().min_p)]
    pub min_p: f32,
    /// Penalise tokens seen in the last --repeat-last-n tokens (1: off).
    #[arg(long, allow_negative_numbers = true, value_name = "X", default_value_t = SamplerConfig::default().repeat_penalty)]
    pub repeat_penalty: f32,
    /// How many recent tokens the penalties look at.
    #[arg(long, value_name = "N", default_value_t = SamplerConfig::default().repeat_last_n)]
    pub repeat_last_n: usize,
    /// Subtract X from the logit of every token already present (0: off).
    #[arg(
        long,
        allow_negative_numbers = true,
        value_name = "X",
        default_value_t = 0.0
    )]
    pub presence_penalty: f32,
    /// Subtract X times its count from the logit of every token present (0: off).
    #[arg(
        long,
        allow_negative_numbers = true,
        value_name = "X",
        default_value_t = 0.0
    )]
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
#[derive(Debug, Clone, Args)]
pub struct RunArgs {
    /// The program; with --test, also a folder whose .tl files are all tested.
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
    #[command(flatten)]
    pub models: ProgramModelArgs,
}

/// Where the models a program loads (`load_model`) run.
#[derive(Debug, Clone, Args)]
pub struct ProgramModelArgs {
    /// Where `load_model` puts a model's weights: cpu, cuda or gpu (the first
    /// NVIDIA GPU), or auto (the GPU when one is usable, else the CPU).
    /// `model.forward` runs there; the program's own tensors stay on the CPU.
    #[arg(long, value_name = "DEVICE", default_value = "auto")]
    pub device: DeviceChoice,
    /// The most memory the program may hold (e.g. 512M, 4G): a tensor that
    /// would take it past this is an error, as is holding more at a loop
    /// iteration or call. Without it, only the machine's memory bounds it.
    #[arg(long, value_name = "SIZE", value_parser = byte_size)]
    pub max_memory: Option<u64>,
    #[command(flatten)]
    pub gpu: GpuArgs,
}

/// A size in bytes, with an optional K, M, G or T suffix (powers of 1024).
fn byte_size(text: &str) -> Result<u64, String> {
    let upper = text.trim().to_ascii_uppercase();
    let digits = upper.trim_end_matches('B');
    let (number, shift) = match digits.chars().last() {
        Some('K') => (&digits[..digits.len() - 1], 10),
        Some('M') => (&digits[..digits.len() - 1], 20),
        Some('G') => (&digits[..digits.len() - 1], 30),
        Some('T') => (&digits[..digits.len() - 1], 40),
        _ => (digits, 0),
    };
    number
        .trim()
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(1u64 << shift))
        .filter(|&n| n > 0)
        .ok_or_else(|| {
            format!("'{text}' is not a size: write bytes, or a number with K, M, G or T")
        })
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
    #[command(flatten)]
    pub models: ProgramModelArgs,
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
    /// Answer this message and leave, without the interactive prompt.
    #[arg(value_name = "MESSAGE")]
    pub message: Option<String>,
}

/// `tl generate`.
#[derive(Debug, Args)]
pub struct GenerateArgs {
    #[command(flatten)]
    pub model: ModelArgs,
    #[command(flatten)]
    pub sampling: SamplingArgs,
    /// The prompt; `-` reads it from standard input.
    #[arg(
        short,
        long,
        value_name = "TEXT",
        required_unless_present = "file",
        conflicts_with = "file"
    )]
    pub prompt: Option<String>,
    /// Read the prompt from FILE.
    #[arg(short = 'f', long, value_name = "FILE")]
    pub file: Option<PathBuf>,
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
    #[command(flatten)]
    pub format: OutputFormatArgs,
}

/// What the output must follow (constrained decoding); at most one.
#[derive(Debug, Args)]
#[group(multiple = false)]
pub struct OutputFormatArgs {
    /// Output only text the Lark grammar in FILE allows (llguidance's
    /// dialect; at most 64 KiB).
    #[arg(long, value_name = "FILE")]
    pub grammar: Option<PathBuf>,
    /// Output only JSON that follows the JSON schema in FILE (at most 64 KiB).
    #[arg(long, value_name = "FILE")]
    pub json_schema: Option<PathBuf>,
    /// Output only a JSON object.
    #[arg(long)]
    pub json: bool,
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

/// `tl embed`.
#[derive(Debug, Args)]
pub struct EmbedArgs {
    #[command(flatten)]
    pub model: ModelArgs,
    /// Texts to embed, one vector each; `-` reads stdin. Without texts or
    /// --file, stdin is read.
    #[arg(value_name = "TEXT")]
    pub texts: Vec<String>,
    /// Embed this file's text too (repeatable).
    #[arg(short, long, value_name = "FILE")]
    pub file: Vec<PathBuf>,
    /// Each non-empty line of stdin and of the files is a text of its own.
    #[arg(long)]
    pub lines: bool,
    /// Keep each vector's first N values (scaled to unit length again).
    #[arg(long, value_name = "N")]
    pub dimensions: Option<usize>,
    /// Cut texts longer than the context to it instead of failing.
    #[arg(long)]
    pub truncate: bool,
}

/// `tl perplexity`.
#[derive(Debug, Args)]
pub struct PerplexityArgs {
    /// GGUF model file or catalogue name (default: the default model).
    #[arg(short, long, value_name = "FILE|NAME")]
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
    #[command(flatten)]
    pub gpu: GpuArgs,
}

/// `tl model ...`.
#[derive(Debug, Subcommand)]
pub enum ModelCommand {
    /// Show a GGUF file's architecture, hyperparameters, tensors, vocabulary and template.
    Inspect(InspectArgs),
    /// Fetch a model of the catalogue (default: smollm2, the default model)
    /// into the cache folder, if it is missing or again if the cached copy
    /// fails its sha256, and print its path.
    Pull(PullArgs),
    /// List the catalogue's models, with their sizes and whether they are cached.
    List,
    /// Remove a catalogue model's cached file.
    Rm(RmArgs),
    /// Write a random-weight GGUF model of a real shape (TinyLlama, SmolLM2, Gemma 3 270M,
    /// Qwen3-0.6B, Llama-3-8B) for benchmarks and tests.
    ///
    /// Matrices and the token embedding are normal(0, 0.02) in the chosen type
    /// (ggml's reference quantizers), norm weights are f32 ones. The same seed
    /// gives a byte-identical file. The file's size is printed before writing
    /// starts, and the command refuses to start when the output folder has less
    /// free space than that.
    #[command(after_help = crate::commands::synth_shape_table())]
    Synth(SynthArgs),
    /// Re-encode a GGUF model's weights in another type, writing the same
    /// bytes as llama.cpp's `llama-quantize` (0c1e570) without an importance
    /// matrix.
    ///
    /// The K-quant mixes follow llama.cpp's recipe: q4_k_m and q5_k_m give the
    /// output matrix and a spread of attn_v and ffn_down layers Q6_K; every
    /// quantized type gives the output Q6_K (Q8_0 for q8_0); rows that are not
    /// whole 256-value super-blocks fall back to Q5_0, Q5_1 or Q8_0. Norms
    /// and other vectors are copied as they are. A tensor that is already
    /// quantized is refused unless --allow-requantize (which dequantizes it
    /// first, losing some accuracy, as llama-quantize does).
    Quantize(QuantizeArgs),
}

/// `tl model quantize`.
#[derive(Debug, Args)]
pub struct QuantizeArgs {
    /// The model to read.
    #[arg(value_name = "IN.gguf")]
    pub input: PathBuf,
    /// The file to write (through OUT.gguf.tmp, renamed when complete).
    #[arg(value_name = "OUT.gguf")]
    pub output: PathBuf,
    /// The file type: f16, q8_0, q4_0, q4_1, q5_0, q5_1, q4_k_m, q5_k_m or q6_k.
    #[arg(long = "type", value_name = "TYPE")]
    pub file_type: String,
    /// Re-encode tensors that are already quantized (dequantized first).
    #[arg(long)]
    pub allow_requantize: bool,
}

/// `tl model pull`.
#[derive(Debug, Args)]
pub struct PullArgs {
    /// The models' names in the catalogue (`tl model list`), fetched in
    /// order.
    #[arg(value_name = "NAME", default_value = "smollm2")]
    pub names: Vec<String>,
}

/// `tl model rm`.
#[derive(Debug, Args)]
pub struct RmArgs {
    /// The model's name in the catalogue (`tl model list`).
    #[arg(value_name = "NAME")]
    pub name: String,
}

/// `tl model inspect`.
#[derive(Debug, Args)]
pub struct InspectArgs {
    /// GGUF file, or a catalogue name (`tl model list`).
    #[arg(value_name = "FILE|NAME")]
    pub file: PathBuf,
    /// List every tensor (default: the first 12 and a summary).
    #[arg(long)]
    pub all_tensors: bool,
}

/// `tl model synth`.
#[derive(Debug, Args)]
pub struct SynthArgs {
    /// Shape: tiny, tiny-qwen3, tiny-qwen2, tiny-gemma3, tiny-wide, tinyllama, smollm2, qwen3-0.6b, llama-8b or gemma3-270m (table below).
    #[arg(long, value_name = "NAME")]
    pub shape: String,
    /// Weight type: f16, q8_0, q4_0, q4_1, q5_0 or q5_1 for every matrix and the
    /// token embedding; q4_k_m, q5_k_m or q6_k for the types `tl model quantize`
    /// gives each tensor in that mix.
    #[arg(long, value_name = "TYPE")]
    pub quant: String,
    /// Architecture: llama, qwen2, qwen3 or gemma3. Optional, implied by --shape; an error when it
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

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::{byte_size, Cli, Command, GpuOptions};

    #[test]
    fn memory_sizes_read_with_binary_suffixes() {
        assert_eq!(byte_size("1000"), Ok(1000));
        assert_eq!(byte_size("512M"), Ok(512 << 20));
        assert_eq!(byte_size("4g"), Ok(4 << 30));
        assert_eq!(byte_size("2GB"), Ok(2 << 30));
        for bad in ["", "0", "lots", "-1G", "99999999999T"] {
            assert!(byte_size(bad).is_err(), "{bad}");
        }
    }

    fn gpu_options(args: &[&str]) -> Result<GpuOptions, String> {
        let cli =
            Cli::try_parse_from([&["tl", "bench"], args].concat()).map_err(|e| e.to_string())?;
        match cli.command {
            Command::Bench(bench) => Ok(bench.model.gpu.to_options()),
            other => Err(format!("parsed as {other:?}")),
        }
    }

    #[test]
    fn the_hidden_gpu_flags_fill_the_options() {
        assert_eq!(gpu_options(&[]).unwrap(), GpuOptions::default());
        let options = gpu_options(&[
            "--cuda-graphs=off",
            "--cuda-f16-weights",
            "0",
            "--cuda-l2-prefetch=1",
            "--cuda-pdl=off",
            "--cuda-mma=off",
            "--gemv-tile-rows=32",
            "--gemv-tile-threads=256",
            "--gemv-warps=8",
            "--gemv-blocks-per-sm=2",
            "--cuda-kernel-defines=GEMV_CLOCKS=1,X=2",
            "--kernel-cache=/tmp/kernels",
        ])
        .unwrap();
        assert!(!options.graphs && !options.f16_weights && !options.dependent_launches);
        assert!(!options.tensor_core_gemv);
        assert_eq!(options.l2_prefetch, 1);
        assert_eq!(options.gemv_tile_rows, Some(32));
        assert_eq!((options.gemv_tile_threads, options.gemv_warps), (256, 8));
        assert_eq!(options.gemv_blocks_per_sm, 2);
        let defines: Vec<_> = options
            .kernel_defines
            .iter()
            .map(|d| (&*d.name, &*d.value))
            .collect();
        assert_eq!(defines, [("GEMV_CLOCKS", "1"), ("X", "2")]);
        assert_eq!(options.kernel_cache, Some("/tmp/kernels".into()));
        options.validate().unwrap();
    }

    #[test]
    fn out_of_range_gpu_flags_are_errors_that_say_the_range() {
        for (flag, words) in [
            ("--gemv-warps=3", "an even number from 2 to 16"),
            ("--gemv-warps=many", "not a whole number"),
            ("--gemv-tile-threads=1024", "32 to 512"),
            ("--gemv-tile-rows=1", "at least 2"),
            ("--gemv-blocks-per-sm=0", "at least 1"),
            ("--cuda-l2-prefetch=3", "0, 1 or 2"),
            ("--cuda-graphs=maybe", "maybe"),
            ("--cuda-kernel-defines=GEMV_CLOCKS", "NAME=VALUE"),
        ] {
            let error = gpu_options(&[flag]).unwrap_err();
            let name = flag.split('=').next().unwrap_or(flag);
            assert!(
                error.contains(name) && error.contains(words),
                "{flag}: {error}"
            );
        }
    }
}
