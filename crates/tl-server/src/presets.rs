//! Names made by Ollama's `/api/create` and `/api/copy`: a served model
//! under another name, with its own system prompt and sampling defaults.
//! They are kept in a small JSON file in the models folder, so they survive
//! restarts; every name, prompt and parameter is bounded before it is kept.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// Longest name, in bytes.
pub const MAX_NAME_BYTES: usize = 100;
/// Longest system prompt, in bytes.
pub const MAX_SYSTEM_BYTES: usize = 32 * 1024;
/// Most names the file may hold.
pub const MAX_PRESETS: usize = 256;
/// Most stop strings a preset may give (as a request to `/api/chat` may).
const MAX_STOP_STRINGS: usize = 16;
/// Longest stop string, in bytes.
const MAX_STOP_BYTES: usize = 256;
/// Largest file read back at start: 256 presets of 32 KiB, and room.
const MAX_FILE_BYTES: u64 = 16 * 1024 * 1024;

/// A name for a served model with defaults of its own.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Preset {
    pub name: String,
    /// The served model's name (never another preset: a copy of a preset
    /// copies its settings).
    pub from: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system: Option<String>,
    #[serde(default)]
    pub parameters: Parameters,
}

/// Sampling defaults, as Ollama's `parameters` (and `options`) name them; a
/// request's own value wins over these.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Parameters {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub top_k: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub top_p: Option<f32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min_p: Option<f32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub repeat_penalty: Option<f32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub repeat_last_n: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub presence_penalty: Option<f32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub frequency_penalty: Option<f32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seed: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub num_ctx: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub num_predict: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stop: Option<Vec<String>>,
}

impl Parameters {
    /// Rejects values no request could give: a preset is checked once, when
    /// it is made, not at each use.
    pub fn validate(&self) -> Result<(), String> {
        let finite = [
            ("temperature", self.temperature),
            ("top_p", self.top_p),
            ("min_p", self.min_p),
            ("repeat_penalty", self.repeat_penalty),
            ("presence_penalty", self.presence_penalty),
            ("frequency_penalty", self.frequency_penalty),
        ];
        if let Some((name, _)) = finite
            .iter()
            .find(|(_, v)| v.is_some_and(|v| !v.is_finite()))
        {
            return Err(format!("parameter {name} must be a finite number"));
        }
        if self.temperature.is_some_and(|t| t < 0.0) {
            return Err("parameter temperature must not be negative".into());
        }
        for (name, value) in [("top_p", self.top_p), ("min_p", self.min_p)] {
            if value.is_some_and(|v| !(0.0..=1.0).contains(&v)) {
                return Err(format!("parameter {name} must be between 0 and 1"));
            }
        }
        if self.num_ctx == Some(0) || self.num_predict == Some(0) {
            return Err("parameters num_ctx and num_predict must not be 0".into());
        }
        let stop = self.stop.as_deref().unwrap_or_default();
        if stop.len() > MAX_STOP_STRINGS {
            return Err(format!(
                "at most {MAX_STOP_STRINGS} stop strings, got {}",
                stop.len()
            ));
        }
        if stop
            .iter()
            .any(|s| s.len() > MAX_STOP_BYTES || s.is_empty())
        {
            return Err(format!(
                "a stop string must have 1 to {MAX_STOP_BYTES} bytes"
            ));
        }
        Ok(())
    }

    /// The parameters as Ollama's `/api/show` lists them: `name value` lines.
    pub fn lines(&self) -> Vec<String> {
        let value = serde_json::to_value(self).unwrap_or_default();
        let Some(fields) = value.as_object() else {
            return Vec::new();
        };
        let mut lines = Vec::new();
        for (key, value) in fields {
            match value {
                serde_json::Value::Array(items) => {
                    lines.extend(items.iter().map(|item| format!("{key} {item}")));
                }
                other => lines.push(format!("{key} {other}")),
            }
        }
        // In name order, whatever order serde_json's maps keep (insertion
        // order when another crate turns on `preserve_order`).
        lines.sort();
        lines
    }
}

impl Preset {
    /// Checks the name, the system prompt and the parameters.
    pub fn validate(&self) -> Result<(), String> {
        check_name(&self.name)?;
        if let Some(system) = &self.system {
            if system.len() > MAX_SYSTEM_BYTES {
                return Err(format!(
                    "the system prompt has {} bytes, more than {MAX_SYSTEM_BYTES}",
                    system.len()
                ));
            }
        }
        self.parameters.validate()
    }
}

/// A name as requests give it, without Ollama's default `:latest` tag.
pub fn normalize(name: &str) -> &str {
    name.strip_suffix(":latest").unwrap_or(name)
}

/// Names become keys in a file and appear in URLs and logs, so they are
/// short and plain: ASCII letters, digits, `.`, `_`, `-` and `:` (Ollama's
/// tags), starting with a letter or digit, no `..` (nothing that could be
/// read as a path).
pub fn check_name(name: &str) -> Result<(), String> {
    if name.is_empty() || name.len() > MAX_NAME_BYTES {
        return Err(format!(
            "a model name must have 1 to {MAX_NAME_BYTES} characters"
        ));
    }
    let plain = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | ':');
    let starts_plain = name.starts_with(|c: char| c.is_ascii_alphanumeric());
    if !name.chars().all(plain) || !starts_plain || name.contains("..") {
        return Err(format!(
            "invalid model name '{}': use letters, digits, '.', '_', '-' and ':', starting with a letter or digit",
            name.escape_debug()
        ));
    }
    Ok(())
}

/// The file presets are kept in.
#[derive(Debug, Clone)]
pub struct PresetFile {
    path: PathBuf,
}

#[derive(Serialize, Deserialize)]
struct Stored {
    presets: Vec<Preset>,
}

impl PresetFile {
    pub fn new(path: PathBuf) -> Self {
        PresetFile { path }
    }

    /// The presets kept, skipping (with a warning) any that no longer pass
    /// the checks; none when the file does not exist.
    pub fn load(&self) -> Result<Vec<Preset>, String> {
        let fail = |e: &dyn std::fmt::Display| format!("cannot read {}: {e}", self.path.display());
        match std::fs::metadata(&self.path) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(fail(&e)),
            Ok(meta) if meta.len() > MAX_FILE_BYTES => {
                return Err(fail(&format!("larger than {MAX_FILE_BYTES} bytes")))
            }
            Ok(_) => {}
        }
        let text = std::fs::read(&self.path).map_err(|e| fail(&e))?;
        let stored: Stored = serde_json::from_slice(&text).map_err(|e| fail(&e))?;
        let mut presets = Vec::new();
        for preset in stored.presets.into_iter().take(MAX_PRESETS) {
            match preset.validate() {
                Ok(()) => presets.push(preset),
                Err(e) => tracing::warn!("{}: skipping a preset: {e}", self.path.display()),
            }
        }
        Ok(presets)
    }

    /// Writes `presets` whole, through a temporary file renamed over the
    /// old one, so a crash leaves either the old list or the new.
    pub fn save(&self, presets: &[Preset]) -> Result<(), String> {
        let fail = |e: &dyn std::fmt::Display| format!("cannot write {}: {e}", self.path.display());
        let stored = Stored {
            presets: presets.to_vec(),
        };
        let text = serde_json::to_vec_pretty(&stored).map_err(|e| fail(&e))?;
        if let Some(dir) = self.path.parent() {
            std::fs::create_dir_all(dir).map_err(|e| fail(&e))?;
        }
        let partial = partial_path(&self.path);
        std::fs::write(&partial, text).map_err(|e| fail(&e))?;
        std::fs::rename(&partial, &self.path).map_err(|e| fail(&e))
    }
}

fn partial_path(path: &Path) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(".partial");
    path.with_file_name(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_cannot_be_paths() {
        for bad in [
            "", "../x", "a/b", "a\\b", ".hidden", "a..b", "x y", "é", "-x",
        ] {
            assert!(check_name(bad).is_err(), "{bad:?}");
        }
        assert!(check_name(&"a".repeat(MAX_NAME_BYTES + 1)).is_err());
        for good in ["mario", "my-model:v2", "SmolLM2-135M-Instruct.Q4_1"] {
            assert!(check_name(good).is_ok(), "{good:?}");
        }
    }

    #[test]
    fn parameters_are_bounded() {
        let bad = [
            r#"{"temperature": -1}"#,
            r#"{"top_p": 2}"#,
            r#"{"num_ctx": 0}"#,
            r#"{"stop": [""]}"#,
        ];
        for text in bad {
            let p: Parameters = serde_json::from_str(text).unwrap();
            assert!(p.validate().is_err(), "{text}");
        }
        let long_stop = serde_json::json!({ "stop": ["x".repeat(MAX_STOP_BYTES + 1)] });
        let p: Parameters = serde_json::from_value(long_stop).unwrap();
        assert!(p.validate().is_err());
        assert!(serde_json::from_str::<Parameters>(r#"{"mirostat": 1}"#).is_err());
    }

    #[test]
    fn presets_survive_a_round_trip() {
        let dir = std::env::temp_dir().join(format!("tl-presets-{}", std::process::id()));
        let file = PresetFile::new(dir.join("presets.json"));
        assert_eq!(file.load().unwrap(), Vec::new());
        let preset = Preset {
            name: "mario".into(),
            from: "base".into(),
            system: Some("You are Mario.".into()),
            parameters: Parameters {
                temperature: Some(0.5),
                stop: Some(vec!["\n".into()]),
                ..Parameters::default()
            },
        };
        file.save(std::slice::from_ref(&preset)).unwrap();
        assert_eq!(file.load().unwrap(), vec![preset.clone()]);
        assert_eq!(
            preset.parameters.lines(),
            ["stop \"\\n\"", "temperature 0.5"]
        );
        let _ = std::fs::remove_dir_all(dir);
    }
}
