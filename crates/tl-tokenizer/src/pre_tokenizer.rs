//! Byte-level BPE pre-tokenizers: `tokenizer.ggml.pre` names and what they mean.
//!
//! Each name selects a list of split regexes (applied one after another, each to
//! the pieces of the previous one) plus a few behaviour flags, exactly as in
//! llama.cpp's `llm_tokenizer_bpe` constructor and `llama_vocab::impl::load`. The
//! regex strings are kept verbatim because llama.cpp recognises some of them by
//! their exact text and runs hand-written code instead (see `split_custom`).
//! Non-ASCII characters are written as `\x{..}` escapes: several of DeepSeek's
//! range ends (U+1F7D, U+1FD3, U+212A, ...) have canonical decompositions, and a
//! copy that went through Unicode normalization would silently change them.

/// GPT-2's split regex, run by `split_custom::split_gpt2`.
pub(crate) const GPT2_PATTERN: &str =
    r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)";

/// Llama 3's split regex, as published and as adapted by llama.cpp; both run
/// `split_custom::split_llama3`.
pub(crate) const LLAMA3_PATTERNS: [&str; 2] = [
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
    r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
];

const DEFAULT_RULES: &[&str] = &[
    r"[\p{P}\$\+<=>\^~\|]+",
    GPT2_PATTERN,
    r"\p{N}+",
    r"[0-9][0-9][0-9]",
];
const GPT2_RULES: &[&str] = &[GPT2_PATTERN];
const LLAMA3_RULES: &[&str] = &[LLAMA3_PATTERNS[1]];
const STARCODER_RULES: &[&str] = &[r"\p{N}", GPT2_PATTERN];
const QWEN2_RULES: &[&str] = &[
    r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
];
const FALCON_RULES: &[&str] = &[r"[\p{P}\$\+<=>\^~\|`]+", GPT2_PATTERN, r"[0-9][0-9][0-9]"];
const DEEPSEEK_LLM_RULES: &[&str] = &[
    "[\r\n]",
    r"\s?[A-Za-z\x{B5}\x{C0}-\x{D6}\x{D8}-\x{F6}\x{F8}-\x{1BA}\x{1BC}-\x{1BF}\x{1C4}-\x{293}\x{295}-\x{2AF}\x{370}-\x{373}\x{376}\x{377}\x{37B}-\x{37D}\x{37F}\x{386}\x{388}-\x{38A}\x{38C}\x{38E}-\x{3A1}\x{3A3}-\x{3F5}\x{3F7}-\x{481}\x{48A}-\x{52F}\x{531}-\x{556}\x{10A0}-\x{10C5}\x{13A0}-\x{13F5}\x{13F8}-\x{13FD}\x{1C90}-\x{1CBA}\x{1CBD}-\x{1CBF}\x{1D00}-\x{1D2B}\x{1D6B}-\x{1D77}\x{1D79}-\x{1D9A}\x{1E00}-\x{1F15}\x{1F18}-\x{1F1D}\x{1F20}-\x{1F45}\x{1F48}-\x{1F4D}\x{1F50}-\x{1F57}\x{1F59}\x{1F5B}\x{1F5D}\x{1F5F}-\x{1F7D}\x{1F80}-\x{1FB4}\x{1FB6}-\x{1FBC}\x{1FBE}\x{1FC2}-\x{1FC4}\x{1FC6}-\x{1FCC}\x{1FD0}-\x{1FD3}\x{1FD6}-\x{1FDB}\x{1FE0}-\x{1FEC}\x{1FF2}-\x{1FF4}\x{1FF6}-\x{1FFC}\x{2102}\x{2107}\x{210A}-\x{2113}\x{2115}\x{2119}-\x{211D}\x{2124}\x{2126}\x{2128}\x{212A}-\x{212D}\x{212F}-\x{2134}\x{2139}\x{213C}-\x{213F}\x{2145}-\x{2149}\x{214E}\x{2183}\x{2184}\x{2C00}-\x{2C7B}\x{2C7E}-\x{2CE4}\x{2CEB}-\x{2CEE}\x{2CF2}\x{2CF3}\x{A640}-\x{A66D}\x{A680}-\x{A69B}\x{A722}-\x{A76F}\x{A771}-\x{A787}\x{A78B}-\x{A78E}\x{AB70}-\x{ABBF}\x{FB00}-\x{FB06}\x{FB13}-\x{FB17}\x{FF21}-\x{FF3A}\x{FF41}-\x{FF5A}\x{10400}-\x{1044F}\x{104B0}-\x{104D3}\x{104D8}-\x{104FB}\x{10C80}-\x{10CB2}\x{10CC0}-\x{10CF2}\x{118A0}-\x{118DF}\x{1E900}-\x{1E943}]+",
    r"\s?[!-/:-~\x{FF01}-\x{FF0F}\x{FF1A}-\x{FF5E}\x{2018}-\x{201F}\x{3000}-\x{3002}]+",
    r"\s+$",
    r"[\x{4E00}-\x{9FA5}\x{800}-\x{4E00}\x{AC00}-\x{D7FF}]+",
    r"\p{N}+",
];
const DEEPSEEK_CODER_RULES: &[&str] = &[
    "[\r\n]",
    r"\s?\p{L}+",
    r"\s?\p{P}+",
    r"[\x{4E00}-\x{9FA5}\x{800}-\x{4E00}\x{AC00}-\x{D7FF}]+",
    r"\p{N}",
];
const DEEPSEEK_V3_RULES: &[&str] = &[
    r"\p{N}{1,3}",
    r"[\x{4E00}-\x{9FA5}\x{3040}-\x{309F}\x{30A0}-\x{30FF}]+",
    "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+",
];
const BLOOM_RULES: &[&str] =
    &[r" ?[^(\s|.,!?\x{2026}\x{3002}\x{FF0C}\x{3001}\x{964}\x{6D4}\x{60C})]+"];
const VIKING_RULES: &[&str] = &[
    r" ?[^(\s|.,!?\x{2026}\x{3002}\x{FF0C}\x{3001}\x{964}\x{6D4}\x{60C})]+",
    r"\p{N}",
];

/// What a pre-tokenizer name configures.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct PreTokenizerConfig {
    /// The canonical name reported by `Tokenizer::pre_tokenizer_name`.
    pub(crate) name: &'static str,
    pub(crate) rules: &'static [&'static str],
    /// Whether decoding removes spaces before punctuation (`clean_spaces`).
    pub(crate) clean_spaces: bool,
    /// Whether a pre-tokenized word that is itself a token skips the merges.
    pub(crate) ignore_merges: bool,
    /// The `add_bos` default before `tokenizer.ggml.add_bos_token` is read.
    pub(crate) add_bos: bool,
    /// ChatGLM drops the BPE default BOS id.
    pub(crate) clears_default_bos: bool,
}

impl PreTokenizerConfig {
    const fn new(name: &'static str, rules: &'static [&'static str], clean_spaces: bool) -> Self {
        Self {
            name,
            rules,
            clean_spaces,
            ignore_merges: false,
            add_bos: false,
            clears_default_bos: false,
        }
    }

    /// The configuration of the pre-tokenizer llama.cpp calls `default`.
    pub(crate) const fn default_config() -> Self {
        Self::new("default", DEFAULT_RULES, true)
    }

    /// The configuration for a `tokenizer.ggml.pre` value, if supported.
    pub(crate) fn for_name(pre: &str) -> Option<Self> {
        let gpt2 = |clean| Self::new("gpt-2", GPT2_RULES, clean);
        let starcoder = |clean| Self::new("starcoder", STARCODER_RULES, clean);
        let qwen2 = |clean| Self::new("qwen2", QWEN2_RULES, clean);
        let config = match pre {
            "default" => Self::default_config(),
            "llama3" | "llama-v3" | "llama-bpe" | "falcon3" | "falcon-h1" | "pixtral"
            | "midm-2.0" | "lfm2" | "jina-v5-nano" => Self {
                ignore_merges: true,
                add_bos: true,
                ..Self::new("llama3", LLAMA3_RULES, true)
            },
            "dbrx" | "smaug-bpe" => Self::new("llama3", LLAMA3_RULES, true),
            "glm4" | "chatglm-bpe" => Self {
                clears_default_bos: true,
                ..Self::new("chatglm4", LLAMA3_RULES, true)
            },
            "deepseek-llm" => Self::new("deepseek-llm", DEEPSEEK_LLM_RULES, false),
            "deepseek-coder" => Self::new("deepseek-coder", DEEPSEEK_CODER_RULES, false),
            "deepseek-v3" | "hunyuan-dense" | "joyai-llm" | "hy_v4" => {
                Self::new("deepseek-v3", DEEPSEEK_V3_RULES, false)
            }
            "falcon" => Self::new("falcon", FALCON_RULES, true),
            "gpt-2" | "phi-2" | "jina-es" | "jina-de" | "gigachat" | "jina-v2-es"
            | "jina-v2-de" | "a.x-4.0" | "mellum" | "modern-bert" | "jina-v1-en"
            | "jina-v2-code" | "roberta-bpe" | "mpt" | "olmo" | "jais" | "exaone4" => gpt2(true),
            "trillion" | "granite-docling" => gpt2(false),
            "starcoder" | "refact" | "codeshell" | "exaone" | "minerva-7b" | "mellum2" => {
                starcoder(true)
            }
            "command-r" => starcoder(false),
            "smollm" => Self::new("smollm", STARCODER_RULES, false),
            "qwen2" | "deepseek-r1-qwen" | "kormo" | "f2llmv2" | "hunyuan" | "solar-open" => {
                qwen2(false)
            }
            "stablelm2" | "megrez" => qwen2(true),
            "poro-chat" => Self::new("bloom", BLOOM_RULES, false),
            "bloom" | "gpt3-finnish" => Self::new("bloom", BLOOM_RULES, true),
            "viking" => Self::new("viking", VIKING_RULES, false),
            _ => return None,
        };
        Some(config)
    }
}
