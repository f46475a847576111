//! Writers that count the bytes passing through them: the GGUF writer needs the
//! stream position to insert alignment padding, and must hold each tensor data
//! generator to exactly the size it promised.

use std::io::{self, Read, Write};

/// Counts the bytes written so far, i.e. the position in the output stream.
pub(crate) struct CountingWriter<W> {
    inner: W,
    written: u64,
}

impl<W: Write> CountingWriter<W> {
    pub(crate) fn new(inner: W) -> Self {
        Self { inner, written: 0 }
    }

    pub(crate) fn written(&self) -> u64 {
        self.written
    }

    /// Writes zero bytes up to stream position `position` (nothing if already there).
    pub(crate) fn pad_to(&mut self, position: u64) -> io::Result<()> {
        let padding = position.saturating_sub(self.written);
        io::copy(&mut io::repeat(0).take(padding), self)?;
        Ok(())
    }
}

impl<W: Write> Write for CountingWriter<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.written += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

/// Passes at most `limit` bytes through and refuses more, so a generator that
/// writes too much fails at once instead of shifting every later tensor.
pub(crate) struct LimitedWriter<'a, W> {
    inner: &'a mut W,
    limit: u64,
    written: u64,
}

impl<'a, W: Write> LimitedWriter<'a, W> {
    pub(crate) fn new(inner: &'a mut W, limit: u64) -> Self {
        Self {
            inner,
            limit,
            written: 0,
        }
    }

    pub(crate) fn written(&self) -> u64 {
        self.written
    }
}

impl<W: Write> Write for LimitedWriter<'_, W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let room = self.limit - self.written;
        if buf.len() as u64 > room {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "writes {} bytes more than the {} the tensor holds",
                    buf.len() as u64 - room,
                    self.limit
                ),
            ));
        }
        let n = self.inner.write(buf)?;
        self.written += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}
