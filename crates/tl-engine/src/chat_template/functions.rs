//! The global functions Hugging Face's `apply_chat_template` gives templates:
//! `raise_exception(message)` and `strftime_now(format)`.

use std::time::{SystemTime, UNIX_EPOCH};

use minijinja::{Error, ErrorKind};

use super::date::{strftime, CivilDateTime};

/// Fails the render with the template's own message, e.g. Gemma's "System
/// role not supported".
pub fn raise_exception(message: String) -> Result<String, Error> {
    Err(Error::new(ErrorKind::InvalidOperation, message))
}

/// The current date and time, formatted like Python's `strftime`. We use UTC
/// where transformers uses the local zone: a server's zone is an accident of
/// deployment, and UTC keeps renders reproducible across machines.
pub fn strftime_now(format: String) -> Result<String, Error> {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_err(|err| {
            Error::new(
                ErrorKind::InvalidOperation,
                format!("strftime_now: the system clock is before 1970 ({err})"),
            )
        })?;
    let seconds = i64::try_from(now.as_secs()).map_err(|_| {
        Error::new(
            ErrorKind::InvalidOperation,
            "strftime_now: the system clock is out of range",
        )
    })?;
    Ok(strftime(
        &format,
        &CivilDateTime::from_unix_seconds(seconds),
    ))
}
