//! The pipe protocol between supervisor and worker. The supervisor writes one
//! input at a time (a little-endian `u32` length, then the bytes); the worker
//! writes `Ready` once its target is set up, then one reply per input (a tag
//! byte, a `u32` length, the payload). Nothing else goes over the pipes, so a
//! target that prints cannot garble them: the worker's stdout is its own.

use std::io::{self, Read, Write};

const TAG_READY: u8 = b'R';
const TAG_FINISHED: u8 = b'F';
const TAG_PANICKED: u8 = b'P';

/// Largest frame accepted; far above any input the mutator makes, so only a
/// garbled pipe reaches it.
const MAX_FRAME: u32 = 1 << 30;

/// What the worker says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    /// The target is set up and waits for inputs.
    Ready,
    /// The target returned; the signature names the outcome.
    Finished { signature: String },
    /// A panic, caught by `catch_unwind` or swallowed by a runtime (tokio
    /// turns a panicking task into an error); `location` is `file:line:col`.
    Panicked { location: String, report: String },
}

pub fn write_input(out: &mut impl Write, input: &[u8]) -> io::Result<()> {
    write_frame_len(out, input.len())?;
    out.write_all(input)?;
    out.flush()
}

/// The next input, or `None` when the supervisor closed the pipe.
pub fn read_input(input: &mut impl Read) -> io::Result<Option<Vec<u8>>> {
    let mut len = [0u8; 4];
    match input.read_exact(&mut len) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(e),
    }
    read_payload(input, u32::from_le_bytes(len)).map(Some)
}

pub fn write_reply(out: &mut impl Write, reply: &Reply) -> io::Result<()> {
    let (tag, payload) = match reply {
        Reply::Ready => (TAG_READY, String::new()),
        Reply::Finished { signature } => (TAG_FINISHED, signature.clone()),
        Reply::Panicked { location, report } => (TAG_PANICKED, format!("{location}\n{report}")),
    };
    out.write_all(&[tag])?;
    write_frame_len(out, payload.len())?;
    out.write_all(payload.as_bytes())?;
    out.flush()
}

pub fn read_reply(input: &mut impl Read) -> io::Result<Reply> {
    let mut head = [0u8; 5];
    input.read_exact(&mut head)?;
    let len = u32::from_le_bytes([head[1], head[2], head[3], head[4]]);
    let payload = String::from_utf8_lossy(&read_payload(input, len)?).into_owned();
    match head[0] {
        TAG_READY => Ok(Reply::Ready),
        TAG_FINISHED => Ok(Reply::Finished { signature: payload }),
        TAG_PANICKED => {
            let (location, report) = payload.split_once('\n').unwrap_or((&payload, ""));
            Ok(Reply::Panicked {
                location: location.to_owned(),
                report: report.to_owned(),
            })
        }
        other => Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("unknown reply tag {other:#04x}"),
        )),
    }
}

fn write_frame_len(out: &mut impl Write, len: usize) -> io::Result<()> {
    let len = u32::try_from(len)
        .ok()
        .filter(|&len| len <= MAX_FRAME)
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "frame too large"))?;
    out.write_all(&len.to_le_bytes())
}

fn read_payload(input: &mut impl Read, len: u32) -> io::Result<Vec<u8>> {
    if len > MAX_FRAME {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("frame of {len} bytes"),
        ));
    }
    let mut payload = vec![0u8; len as usize];
    input.read_exact(&mut payload)?;
    Ok(payload)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inputs_and_replies_round_trip() {
        let mut pipe = Vec::new();
        write_input(&mut pipe, b"abc").unwrap();
        let mut reader = pipe.as_slice();
        assert_eq!(read_input(&mut reader).unwrap(), Some(b"abc".to_vec()));
        assert_eq!(read_input(&mut reader).unwrap(), None);

        let replies = [
            Reply::Ready,
            Reply::Finished {
                signature: "ok".into(),
            },
            Reply::Panicked {
                location: "a.rs:1:2".into(),
                report: "boom\nat frame".into(),
            },
        ];
        let mut pipe = Vec::new();
        for reply in &replies {
            write_reply(&mut pipe, reply).unwrap();
        }
        let mut reader = pipe.as_slice();
        for reply in &replies {
            assert_eq!(&read_reply(&mut reader).unwrap(), reply);
        }
    }
}
