//! While a reply streams, what the user types is not echoed into it: the
//! terminal's echo is off until the reply ends. The typed text stays in the
//! terminal's input queue, so the next prompt reads it (nothing is lost).

/// Echo off on standard input while this lives (nothing where it is not a
/// terminal, or on other platforms).
pub struct QuietInput {
    #[cfg(unix)]
    saved: Option<nix::sys::termios::Termios>,
}

impl QuietInput {
    pub fn start() -> QuietInput {
        QuietInput {
            #[cfg(unix)]
            saved: echo_off(),
        }
    }
}

#[cfg(unix)]
fn echo_off() -> Option<nix::sys::termios::Termios> {
    use nix::sys::termios::{tcgetattr, tcsetattr, LocalFlags, SetArg};
    use std::io::IsTerminal;
    let stdin = std::io::stdin();
    if !stdin.is_terminal() {
        return None;
    }
    let saved = tcgetattr(&stdin).ok()?;
    let mut quiet = saved.clone();
    quiet.local_flags.remove(LocalFlags::ECHO);
    // TCSANOW keeps what was typed already (TCSAFLUSH would drop it).
    tcsetattr(&stdin, SetArg::TCSANOW, &quiet).ok()?;
    Some(saved)
}

impl Drop for QuietInput {
    fn drop(&mut self) {
        #[cfg(unix)]
        if let Some(saved) = &self.saved {
            use nix::sys::termios::{tcsetattr, SetArg};
            let _ = tcsetattr(std::io::stdin(), SetArg::TCSANOW, saved);
        }
    }
}
