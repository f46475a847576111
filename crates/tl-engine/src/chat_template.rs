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
//!   empty where a template loops over it unconditionally;
//! - any other keyword variable a template needs (`date_string`, …) through
//!   [`ChatTemplate::render_with_extras`].
//!
//! When this was written, every template in `testdata/templates`
//! rendered byte-identical to Jinja2 3.1 set up the same way.

pub mod date;
mod functions;
mod message;
mod python_json;

#[cfg(test)]
mod tests;

pub use message::ChatMessage;

use minijinja::syntax::SyntaxConfig;
use minijinja::value::{Serde, Value};
use minijinja::{context, Environment};

use crate::{Error, Result};

/// The name the template is stored under; it shows in error locations
/// ("in chat_template:12").
const TEMPLATE_NAME: &str = "chat_template";

/// ChatML, for models whose file carries no template.
const CHATML_SOURCE: &str = "{% for message in messages %}\
{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}\
{% endfor %}\
{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

/// A parsed chat template, ready to render conversations.
#[derive(Debug)]
pub struct ChatTemplate {
    environment: Environment<'static>,
    source: String,
    bos_token: String,
    eos_token: String,
}

impl ChatTemplate {
    /// Parses `source`; syntax errors become [`Error::Template`] with
    /// minijinja's message and line. The tokens are the model's BOS/EOS
    /// strings, which many templates print themselves.
    pub fn new(source: &str, bos_token: &str, eos_token: &str) -> Result<Self> {
        let mut environment = hugging_face_environment()?;
        environment
            .add_template_owned(TEMPLATE_NAME, source.to_owned())
            .map_err(|err| Error::Template(format!("cannot parse the template: {err}")))?;
        Ok(Self {
            environment,
            source: source.to_owned(),
            bos_token: bos_token.to_owned(),
            eos_token: eos_token.to_owned(),
        })
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
        if let Some(name) = extras
            .keys()
            .find(|name| RESERVED_VARIABLES.contains(&name.as_str()))
        {
            return Err(Error::InvalidRequest(format!(
                "chat template extra `{name}` would replace a variable the renderer sets"
            )));
        }
        let template = self
            .environment
            .get_template(TEMPLATE_NAME)
            .map_err(|err| Error::Template(format!("template missing: {err}")))?;
        template
            .render(context! {
                messages => Value::from(Serde(messages)),
                add_generation_prompt => add_generation_prompt,
                bos_token => &self.bos_token,
                eos_token => &self.eos_token,
                ..Value::from(Serde(extras))
            })
            .map_err(|err| Error::Template(format!("cannot render: {err}")))
    }
}

/// The variables [`ChatTemplate::render_with_extras`] always sets.
const RESERVED_VARIABLES: [&str; 4] = [
    "messages",
    "add_generation_prompt",
    "bos_token",
    "eos_token",
];

/// A minijinja environment that behaves like transformers' Jinja2 sandbox.
fn hugging_face_environment() -> Result<Environment<'static>> {
    let syntax = SyntaxConfig::builder()
        .trim_blocks(true)
        .lstrip_blocks(true)
        .keep_trailing_newline(false)
        .build()
        .map_err(|err| Error::Template(format!("invalid syntax configuration: {err}")))?;
    let mut environment = Environment::new();
    environment.set_syntax(syntax);
    environment.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
    environment.add_function("raise_exception", functions::raise_exception);
    environment.add_function("strftime_now", functions::strftime_now);
    environment.add_filter("tojson", python_json::tojson);
    Ok(environment)
}
