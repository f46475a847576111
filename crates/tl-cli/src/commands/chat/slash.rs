//! The chat REPL's `/commands`, parsed into a type so the loop only dispatches.

use std::path::PathBuf;

/// Help text shown by `/help`.
pub const HELP: &str = "\
Commands:
  /help                 this help
  /reset                forget the conversation (keeps the system prompt)
  /system TEXT          set the system prompt and start over (/system alone clears it)
  /set NAME VALUE       change a setting: temperature, top_p, top_k, min_p,
                        repeat_penalty, repeat_last_n, presence_penalty,
                        frequency_penalty, seed, max_tokens
  /show                 the model, the system prompt and the current settings
  /save FILE            save the conversation as JSON
  /load FILE            load a conversation saved with /save
  /stats                timings of the last reply and of the session
  /quit                 leave (also /exit or Ctrl-D)
Input: end a line with \\ to continue on the next one, or wrap several lines in \"\"\".
Ctrl-C stops a reply that is being written.";

/// A parsed `/command`.
#[derive(Debug, Clone, PartialEq)]
pub enum SlashCommand {
    Help,
    Reset,
    /// A new system prompt; `None` clears it.
    System(Option<String>),
    Set {
        name: String,
        value: String,
    },
    Show,
    Save(PathBuf),
    Load(PathBuf),
    Stats,
    Quit,
}

/// Parses a line starting with `/`; `Err` holds a message for the user.
pub fn parse(line: &str) -> Result<SlashCommand, String> {
    let line = line.trim();
    let (name, rest) = line.split_once(char::is_whitespace).unwrap_or((line, ""));
    let rest = rest.trim();
    let needs = |what: &str| format!("{name} needs {what} (see /help)");
    match name {
        "/help" | "/?" => Ok(SlashCommand::Help),
        "/reset" | "/clear" => Ok(SlashCommand::Reset),
        "/system" if rest.is_empty() => Ok(SlashCommand::System(None)),
        "/system" => Ok(SlashCommand::System(Some(rest.to_string()))),
        "/set" => match rest.split_once(char::is_whitespace) {
            Some((name, value)) => Ok(SlashCommand::Set {
                name: name.to_string(),
                value: value.trim().to_string(),
            }),
            None => Err(needs("a name and a value, e.g. /set temperature 0.7")),
        },
        "/save" if rest.is_empty() => Err(needs("a file name")),
        "/save" => Ok(SlashCommand::Save(PathBuf::from(rest))),
        "/load" if rest.is_empty() => Err(needs("a file name")),
        "/load" => Ok(SlashCommand::Load(PathBuf::from(rest))),
        "/stats" => Ok(SlashCommand::Stats),
        "/show" => Ok(SlashCommand::Show),
        "/quit" | "/exit" | "/bye" => Ok(SlashCommand::Quit),
        other => Err(format!("unknown command {other} (see /help)")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_commands_with_arguments() {
        assert_eq!(
            parse("/system be brief"),
            Ok(SlashCommand::System(Some("be brief".into())))
        );
        assert_eq!(parse("/system"), Ok(SlashCommand::System(None)));
        assert_eq!(parse("/show"), Ok(SlashCommand::Show));
        assert_eq!(
            parse("/set temperature 0.5"),
            Ok(SlashCommand::Set {
                name: "temperature".into(),
                value: "0.5".into()
            })
        );
        assert_eq!(
            parse("/save my chat.json"),
            Ok(SlashCommand::Save("my chat.json".into()))
        );
        assert_eq!(parse("/quit"), Ok(SlashCommand::Quit));
    }

    #[test]
    fn reports_missing_arguments_and_unknown_commands() {
        assert!(parse("/set temperature").unwrap_err().contains("needs"));
        assert!(parse("/save").unwrap_err().contains("file name"));
        assert!(parse("/frobnicate")
            .unwrap_err()
            .contains("unknown command"));
    }
}
