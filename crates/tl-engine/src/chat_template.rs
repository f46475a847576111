//! Chat templates: render a conversation into the prompt text a model was
//! trained on, from the Jinja template its GGUF file carries
//! (`tokenizer.chat_template`).
//!
//! We render with minijinja configured the way Hugging Face transformers'
//! `apply_chat_template` configures Jinja2, so that the same template gives
//! the same text:
//! - `trim_blocks` and `lstrip_blocks` on, trailing newline dropped;
//! - Python string/dict methods (`.strip()`, `.split()`, `.items()`, …) via
//!   minijinja-contrib's pycompat callback;
//! - the globals `raise_exception(msg)` and `strftime_now(fmt)`;
//! - `tojson` writing Python's `json.dumps` layout without HTML escaping;
//! - context: `messages`, `add_generation_prompt`, `bos_token`, `eos_token`.
//!   `tools` stays undefined unless passed as an extra: templates test it
//!   with `is defined` / `if tools`, and an undefined value also iterates as
//!   empty where a template loops over it unconditionally. A message carries
//!   `tool_calls` (arguments as objects), `tool_call_id` and `name` only
//!   when it has them (see [`ChatMessage`]);
//! - maps keep their keys' order and loops have `loop.previtem` /
//!   `loop.nextitem`, as in Python's Jinja2;
//! - any other keyword variable a template needs (`date_string`, …) through
//!   [`ChatTemplate::render_with_extras`].
//!
//! When this was written, every template in `testdata/templates`
//! rendered byte-identical to Jinja2 3.1 set up the same way.
//!
//! Templates are untrusted code (they come with the model file), so every
//! render runs within [`TemplateLimits`]: fuel bounds the instructions, and the
//! size of everything the template builds, writes, compares or sorts is
//! charged to a budget before it is done (`limits`, `guard`, `bounded`). A
//! template only reaches the builtins registered in `bounded`; `include`,
//! `import` and `extends` find no other template.

mod bounded;
mod constants;
pub mod date;
mod expression_size;
mod functions;
mod guard;
mod limits;
mod message;
mod plain_text;
mod python_json;

#[cfg(test)]
mod hostile_tests;
#[cfg(test)]
mod plain_text_tests;
#[cfg(test)]
mod tests;

pub use limits::TemplateLimits;
pub use message::{ChatFunctionCall, ChatMessage, ChatToolCall};

use std::io;
use std::sync::Arc;

use minijinja::machinery;
use minijinja::syntax::SyntaxConfig;
use minijinja::value::{Serde, Value};
use minijinja::{context, AutoEscape, Environment, ErrorKind};

use crate::{Error, Result};
use bounded::BudgetHandle;
use limits::RenderBudget;
use plain_text::PlainText;

/// The name the template is compiled under; it shows in error locations
/// ("in chat_template:12").
const TEMPLATE_NAME: &str = "chat_template";

/// The largest template accepted. Real ones have a few kilobytes.
const MAX_SOURCE_BYTES: usize = 1 << 20;

/// The template global holding the render's budget (not an identifier, so
/// templates cannot name it).
const BUDGET_GLOBAL: &str = "tl render budget";

/// ChatML, for models whose file carries no template.
const CHATML_SOURCE: &str = "{% for message in messages %}\
{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}\
{% endfor %}\
{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

/// A parsed chat template, ready to render conversations.
#[derive(Debug, Clone)]
pub struct ChatTemplate {
    /// Holds the compiled template, whose bytecode each render copies and
    /// guards (the guarded copy borrows it, so it cannot be kept here).
    compiled: Environment<'static>,
    source: String,
    bos_token: String,
    eos_token: String,
    limits: TemplateLimits,
}

impl ChatTemplate {
    /// Parses `source`; syntax errors become [`Error::Template`] with
    /// minijinja's message and line. The tokens are the model's BOS/EOS
    /// strings, which many templates print themselves. Renders run within
    /// the default [`TemplateLimits`] (see [`with_limits`](Self::with_limits)).
    pub fn new(source: &str, bos_token: &str, eos_token: &str) -> Result<Self> {
        Ok(Self {
            compiled: compile(source)?,
            source: source.to_owned(),
            bos_token: bos_token.to_owned(),
            eos_token: eos_token.to_owned(),
            limits: TemplateLimits::default(),
        })
    }

    /// The same template, rendering within `limits`.
    pub fn with_limits(mut self, limits: TemplateLimits) -> Self {
        self.limits = limits;
        self
    }

    /// The limits each render runs within.
    pub fn limits(&self) -> &TemplateLimits {
        &self.limits
    }

    /// The template stored in a GGUF file (`tokenizer.chat_template`), with the
    /// tokenizer's BOS/EOS text; `None` when the file carries no template.
    pub fn from_gguf(
        file: &tl_gguf::GgufFile,
        tokenizer: &tl_tokenizer::Tokenizer,
    ) -> Result<Option<Self>> {
        let token_text = |id: Option<u32>| id.and_then(|id| tokenizer.token_text(id)).unwrap_or("");
        match file.get_str("tokenizer.chat_template")? {
            Some(source) => Ok(Some(Self::new(
                source,
                token_text(tokenizer.bos_id()),
                token_text(tokenizer.eos_id()),
            )?)),
            None => Ok(None),
        }
    }

    /// The template of the model's architecture (see
    /// [`Architecture::chat_template`](crate::model::arch::Architecture)),
    /// for files that carry none; `None` when the architecture has none.
    pub fn for_architecture(
        architecture: &str,
        tokenizer: &tl_tokenizer::Tokenizer,
    ) -> Result<Option<Self>> {
        let Some(source) = crate::architecture_template(architecture) else {
            return Ok(None);
        };
        let token_text = |id: Option<u32>| id.and_then(|id| tokenizer.token_text(id)).unwrap_or("");
        Self::new(
            source,
            token_text(tokenizer.bos_id()),
            token_text(tokenizer.eos_id()),
        )
        .map(Some)
    }

    /// The ChatML fallback: `<|im_start|>role\ncontent<|im_end|>\n` per
    /// message, and `<|im_start|>assistant\n` as the generation prompt.
    pub fn chatml() -> Self {
        // The source is a constant covered by `chatml_renders_turns_and_prompt`,
        // so parsing cannot fail at run time.
        #[allow(clippy::expect_used)]
        Self::new(CHATML_SOURCE, "", "<|im_end|>").expect("the built-in ChatML template parses")
    }

    /// The Jinja source this template was built from.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// Renders `messages`; with `add_generation_prompt` the text ends with the
    /// header that makes the model answer as the assistant. Errors (including
    /// the template's own `raise_exception`) become [`Error::Template`].
    pub fn render(&self, messages: &[ChatMessage], add_generation_prompt: bool) -> Result<String> {
        self.render_with_extras(messages, add_generation_prompt, &serde_json::Map::new())
    }

    /// Like [`render`](Self::render), with extra template variables: the
    /// keyword arguments transformers passes through `apply_chat_template`
    /// (`tools`, `date_string`, Firefunction's `functions` and `datetime`, …).
    /// Extras may not replace the variables `render` itself sets.
    pub fn render_with_extras(
        &self,
        messages: &[ChatMessage],
        add_generation_prompt: bool,
        extras: &serde_json::Map<String, serde_json::Value>,
    ) -> Result<String> {
        self.render_measured(messages, add_generation_prompt, extras)
            .map(|rendered| rendered.text)
    }

    /// [`render_with_extras`](Self::render_with_extras), also reporting what
    /// the render spent.
    fn render_measured(
        &self,
        messages: &[ChatMessage],
        add_generation_prompt: bool,
        extras: &serde_json::Map<String, serde_json::Value>,
    ) -> Result<Rendered> {
        if let Some(name) = extras
            .keys()
            .find(|name| RESERVED_VARIABLES.contains(&name.as_str()))
        {
            return Err(Error::InvalidRequest(format!(
                "chat template extra `{name}` would replace a variable the renderer sets"
            )));
        }
        check_extras_depth(extras, self.limits.depth)?;
        check_tool_call_depth(messages, self.limits.depth)?;
        let input_bytes = messages
            .iter()
            .map(ChatMessage::input_bytes)
            .sum::<usize>()
            .saturating_add(json_len(extras))
            .saturating_add(self.bos_token.len() + self.eos_token.len());
        let context = context! {
            messages => Value::from(Serde(messages)),
            add_generation_prompt => add_generation_prompt,
            bos_token => &self.bos_token,
            eos_token => &self.eos_token,
            ..Value::from(Serde(extras))
        };
        self.render_context(context, input_bytes)
    }

    /// Renders with a fresh budget scaled to `input_bytes`.
    fn render_context(&self, context: Value, input_bytes: usize) -> Result<Rendered> {
        let budget = Arc::new(RenderBudget::new(&self.limits, input_bytes));
        let environment = render_environment(&budget);
        let (instructions, blocks) = self.program()?;
        let mut text = String::new();
        let outcome = machinery::eval(
            &environment,
            &instructions,
            context,
            &blocks,
            &mut machinery::make_string_output(&mut text),
            AutoEscape::None,
        );
        match outcome {
            Ok((_, state)) => {
                let fuel = state.fuel_levels().map_or(0, |(used, _)| used);
                let (work, output) = budget.spent();
                Ok(Rendered {
                    text,
                    cost: RenderCost { fuel, work, output },
                    input_bytes,
                })
            }
            Err(err) => Err(render_error(&err, &budget)),
        }
    }
}

/// A rendered prompt and what rendering it cost.
#[derive(Debug)]
struct Rendered {
    text: String,
    #[cfg_attr(not(test), allow(dead_code))]
    cost: RenderCost,
    /// The input size the limits were scaled to.
    #[cfg_attr(not(test), allow(dead_code))]
    input_bytes: usize,
}

/// What one render spent of its [`TemplateLimits`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct RenderCost {
    /// Instructions executed.
    fuel: u64,
    /// Work units charged.
    work: u64,
    /// Bytes written, captured text included.
    output: u64,
}

impl ChatTemplate {
    /// The guarded bytecode of one render.
    fn program(&self) -> Result<guard::Program<'_>> {
        let template = self
            .compiled
            .get_template(TEMPLATE_NAME)
            .map_err(|err| Error::Template(format!("template missing: {err}")))?;
        guard::guarded_program(machinery::get_compiled_template(&template))
            .map_err(|why| Error::Template(format!("unsupported template: {why}")))
    }
}

/// Compiles `source` the way transformers' Jinja2 parses it, into an
/// environment that only holds it (renders use their own, bounded one).
fn compile(source: &str) -> Result<Environment<'static>> {
    if source.len() > MAX_SOURCE_BYTES {
        return Err(Error::Template(format!(
            "the template has {} bytes, more than the {MAX_SOURCE_BYTES} allowed",
            source.len()
        )));
    }
    let syntax = hugging_face_syntax()?;
    // Before anything parses it: a long enough expression overflows the stack.
    expression_size::check(source, syntax.clone())
        .map_err(|why| Error::Template(format!("unsupported template: {why}")))?;
    // Before compiling: minijinja folds constants while it compiles.
    constants::check_constant_folding(source, TEMPLATE_NAME, syntax.clone())
        .map_err(|why| Error::Template(format!("unsupported template: {why}")))?;
    let mut environment = Environment::empty();
    environment.set_syntax(syntax);
    environment
        .add_template_owned(TEMPLATE_NAME, source.to_owned())
        .map_err(|err| Error::Template(format!("cannot parse the template: {err}")))?;
    // Guard once now, so that unsupported templates fail at load time.
    let template = environment
        .get_template(TEMPLATE_NAME)
        .map_err(|err| Error::Template(format!("template missing: {err}")))?;
    guard::guarded_program(machinery::get_compiled_template(&template))
        .map_err(|why| Error::Template(format!("unsupported template: {why}")))?;
    Ok(environment)
}

/// The environment of one render: nothing but the bounded builtins and the
/// guards, all charging `budget`.
fn render_environment(budget: &Arc<RenderBudget>) -> Environment<'static> {
    let mut environment = Environment::empty();
    environment.set_fuel(Some(budget.fuel()));
    environment.set_recursion_limit(budget.depth_limit());
    environment.add_global(
        BUDGET_GLOBAL,
        Value::from_object(BudgetHandle(Arc::clone(budget))),
    );
    guard::register_guards(&mut environment, budget);
    bounded::register_builtins(&mut environment, budget);
    environment
}

/// A render error, naming the limit when minijinja stopped the template at
/// one of its own (fuel, recursion).
fn render_error(err: &minijinja::Error, budget: &RenderBudget) -> Error {
    let location = err
        .line()
        .map(|line| format!(" (in {TEMPLATE_NAME}:{line})"))
        .unwrap_or_default();
    let message = if err.kind() == ErrorKind::OutOfFuel {
        format!(
            "the template exceeded its fuel limit of {} instructions{location}",
            budget.fuel()
        )
    } else if err.detail() == Some("recursion limit exceeded") {
        format!(
            "the template exceeded its depth limit of {} (it recursed too deeply){location}",
            budget.depth_limit()
        )
    } else {
        err.to_string()
    };
    Error::Template(format!("cannot render: {message}"))
}

/// Refuses extras nested deeper than `depth`: converting and printing them
/// recurses once per level.
fn check_extras_depth(
    extras: &serde_json::Map<String, serde_json::Value>,
    depth: usize,
) -> Result<()> {
    let values = extras.values().map(|v| (v, 2));
    check_depth(values, depth).map_err(|()| {
        Error::InvalidRequest(format!(
            "chat template extras nest deeper than {depth} levels"
        ))
    })
}

/// Refuses tool-call arguments nested deeper than `depth`, counting the
/// levels of `messages[i].tool_calls[j].function.arguments` above them.
fn check_tool_call_depth(messages: &[ChatMessage], depth: usize) -> Result<()> {
    const ARGUMENTS_LEVEL: usize = 5;
    let arguments = messages
        .iter()
        .flat_map(|message| message.tool_calls.iter().flatten())
        .map(|call| (&call.function.arguments, ARGUMENTS_LEVEL));
    check_depth(arguments, depth).map_err(|()| {
        Error::InvalidRequest(format!(
            "tool call arguments nest deeper than {depth} levels"
        ))
    })
}

/// Whether every value, starting at its level, stays within `depth` levels.
fn check_depth<'v>(
    values: impl Iterator<Item = (&'v serde_json::Value, usize)>,
    depth: usize,
) -> std::result::Result<(), ()> {
    let mut pending: Vec<(&serde_json::Value, usize)> = values.collect();
    while let Some((value, level)) = pending.pop() {
        if level > depth {
            return Err(());
        }
        match value {
            serde_json::Value::Array(items) => {
                pending.extend(items.iter().map(|item| (item, level + 1)));
            }
            serde_json::Value::Object(map) => {
                pending.extend(map.values().map(|item| (item, level + 1)));
            }
            _ => {}
        }
    }
    Ok(())
}

/// Bytes of `value` as JSON, without building the text.
fn json_len(value: &impl serde::Serialize) -> usize {
    struct Counter(usize);
    impl io::Write for Counter {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            self.0 += buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }
    let mut counter = Counter(0);
    // Writing to a counter cannot fail, and JSON values always serialize.
    let _ = serde_json::to_writer(&mut counter, value);
    counter.0
}

/// A chat prompt ready for the model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChatPrompt {
    /// The rendered conversation.
    pub text: String,
    /// Its tokens: the template's markup gives control tokens, what the
    /// messages say never does.
    pub tokens: Vec<u32>,
}

impl ChatTemplate {
    /// Renders `messages` and tokenizes the prompt for `tokenizer`, so that
    /// only the template's own text can produce control tokens: text such as
    /// `<|im_start|>` in a message's role or content stays text (tokenized as
    /// `encode(.., parse_special = false)` would), so a user cannot forge a
    /// turn. Prompts without such text get the tokens
    /// `tokenizer.encode(&render(..), false, true)` gives. No BOS is added:
    /// templates write it themselves, as Hugging Face's do.
    pub fn encode(
        &self,
        tokenizer: &tl_tokenizer::Tokenizer,
        messages: &[ChatMessage],
        add_generation_prompt: bool,
    ) -> Result<ChatPrompt> {
        self.encode_with_extras(
            tokenizer,
            messages,
            add_generation_prompt,
            &serde_json::Map::new(),
        )
    }

    /// [`encode`](Self::encode) with template extras (see
    /// [`render_with_extras`](Self::render_with_extras)), whose strings are
    /// kept from becoming control tokens too.
    pub fn encode_with_extras(
        &self,
        tokenizer: &tl_tokenizer::Tokenizer,
        messages: &[ChatMessage],
        add_generation_prompt: bool,
        extras: &serde_json::Map<String, serde_json::Value>,
    ) -> Result<ChatPrompt> {
        check_extras_depth(extras, self.limits.depth)?;
        let mut plain = PlainText::new(tokenizer.special_token_texts());
        let messages: Vec<ChatMessage> = messages
            .iter()
            .map(|message| protect_message(&mut plain, message))
            .collect();
        let extras = plain.protect_map(extras);
        let rendered = self.render_with_extras(&messages, add_generation_prompt, &extras)?;
        let (text, plain_ranges) = plain.restore(&rendered)?;
        let tokens = tokenizer.encode_with_plain_text(&text, false, &plain_ranges)?;
        Ok(ChatPrompt { text, tokens })
    }
}

/// `message` with every text a user wrote protected: role, content, and
/// the tool fields (names, ids and argument strings).
fn protect_message(plain: &mut PlainText, message: &ChatMessage) -> ChatMessage {
    let mut protect_option = |text: &Option<String>| text.as_ref().map(|text| plain.protect(text));
    let tool_call_id = protect_option(&message.tool_call_id);
    let name = protect_option(&message.name);
    let tool_calls = message.tool_calls.as_ref().map(|calls| {
        calls
            .iter()
            .map(|call| ChatToolCall {
                id: call.id.as_ref().map(|id| plain.protect(id)),
                kind: plain.protect(&call.kind),
                function: ChatFunctionCall {
                    name: plain.protect(&call.function.name),
                    arguments: plain.protect_json(&call.function.arguments),
                },
            })
            .collect()
    });
    ChatMessage {
        role: plain.protect(&message.role),
        content: plain.protect(&message.content),
        tool_calls,
        tool_call_id,
        name,
    }
}

/// The variables [`ChatTemplate::render_with_extras`] always sets.
const RESERVED_VARIABLES: [&str; 4] = [
    "messages",
    "add_generation_prompt",
    "bos_token",
    "eos_token",
];

/// Whitespace handling as in transformers' Jinja2 environment.
fn hugging_face_syntax() -> Result<SyntaxConfig> {
    SyntaxConfig::builder()
        .trim_blocks(true)
        .lstrip_blocks(true)
        .keep_trailing_newline(false)
        .build()
        .map_err(|err| Error::Template(format!("invalid syntax configuration: {err}")))
}
