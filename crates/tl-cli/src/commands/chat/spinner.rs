//! A spinner on stderr while a prompt is read, so a long prompt does not look
//! like a hang; only on a terminal.

use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

const FRAMES: [char; 10] = ['⠋', '⠙', '⠹', '⠸', '⠼', '⠴', '⠦', '⠧', '⠇', '⠏'];
const FRAME_TIME: Duration = Duration::from_millis(100);
/// How long a prompt may take before the spinner shows (a short one never
/// flickers it).
const DELAY: Duration = Duration::from_millis(300);

/// A running spinner; [`Spinner::stop`] (or dropping it) clears it.
pub struct Spinner {
    done: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Spinner {
    /// Starts a spinner where stderr is a terminal; a silent one elsewhere.
    pub fn start() -> Spinner {
        let done = Arc::new(AtomicBool::new(false));
        let thread = std::io::stderr().is_terminal().then(|| {
            let done = done.clone();
            std::thread::spawn(move || spin(&done))
        });
        Spinner { done, thread }
    }

    /// Stops and clears the spinner.
    pub fn stop(mut self) {
        self.finish();
    }

    fn finish(&mut self) {
        self.done.store(true, Ordering::SeqCst);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Drop for Spinner {
    fn drop(&mut self) {
        self.finish();
    }
}

fn spin(done: &AtomicBool) {
    let mut waited = Duration::ZERO;
    let mut shown = false;
    for frame in FRAMES.iter().cycle() {
        if done.load(Ordering::SeqCst) {
            break;
        }
        if waited >= DELAY {
            eprint!("\r{frame} ");
            let _ = std::io::stderr().flush();
            shown = true;
        }
        std::thread::sleep(FRAME_TIME);
        waited += FRAME_TIME;
    }
    if shown {
        eprint!("\r  \r");
        let _ = std::io::stderr().flush();
    }
}
