//! The conversation of a chat: an optional system prompt and the turns so far, with
//! saving to and loading from JSON, and trimming to fit the context.

use std::path::Path;

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use tl_engine::chat_template::ChatMessage;

/// A chat's messages.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Conversation {
    /// The system prompt, if any.
    pub system: Option<String>,
    /// User and assistant turns, in order.
    pub turns: Vec<ChatMessage>,
}

impl Conversation {
    /// The messages to render: the system prompt first, then the turns.
    pub fn messages(&self) -> Vec<ChatMessage> {
        let system = self.system.iter().map(|s| ChatMessage::system(s.clone()));
        system.chain(self.turns.iter().cloned()).collect()
    }

    /// Drops the oldest exchange (a user turn and the reply after it); returns
    /// whether anything was dropped. The system prompt is kept.
    pub fn drop_oldest_exchange(&mut self) -> bool {
        if self.turns.len() <= 1 {
            return false;
        }
        let next_user = self.turns[1..]
            .iter()
            .position(|m| m.role == "user")
            .map_or(self.turns.len(), |i| i + 1);
        self.turns.drain(..next_user);
        true
    }

    /// Writes the conversation as JSON, atomically (a temporary file renamed over
    /// the target), so a failed save never destroys an earlier one.
    pub fn save(&self, path: &Path) -> Result<()> {
        let json = serde_json::to_string_pretty(self)?;
        let tmp = path.with_extension("json.tmp");
        std::fs::write(&tmp, json).with_context(|| format!("cannot write {}", tmp.display()))?;
        std::fs::rename(&tmp, path).with_context(|| format!("cannot write {}", path.display()))?;
        Ok(())
    }

    /// Reads a conversation saved by [`Conversation::save`].
    pub fn load(path: &Path) -> Result<Self> {
        let json = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read {}", path.display()))?;
        serde_json::from_str(&json)
            .with_context(|| format!("{} is not a saved conversation", path.display()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conversation() -> Conversation {
        Conversation {
            system: Some("be brief".into()),
            turns: vec![
                ChatMessage::user("a"),
                ChatMessage::assistant("b"),
                ChatMessage::user("c"),
                ChatMessage::assistant("d"),
                ChatMessage::user("e"),
            ],
        }
    }

    #[test]
    fn messages_put_system_first() {
        let messages = conversation().messages();
        assert_eq!(messages[0], ChatMessage::system("be brief"));
        assert_eq!(messages.len(), 6);
    }

    #[test]
    fn dropping_removes_one_exchange_and_keeps_the_last_turn() {
        let mut c = conversation();
        assert!(c.drop_oldest_exchange());
        assert_eq!(c.turns[0], ChatMessage::user("c"));
        assert!(c.drop_oldest_exchange());
        assert_eq!(c.turns, vec![ChatMessage::user("e")]);
        assert!(!c.drop_oldest_exchange());
    }

    #[test]
    fn save_and_load_round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("chat.json");
        conversation().save(&path).unwrap();
        assert_eq!(Conversation::load(&path).unwrap(), conversation());
    }

    #[test]
    fn loading_garbage_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bad.json");
        std::fs::write(&path, "not json").unwrap();
        assert!(Conversation::load(&path).is_err());
    }
}
