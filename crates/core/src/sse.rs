//! One Server-Sent Events reader for every client of a stream: the model
//! gateway reading a provider, the CLI following a Session, the tests.
//!
//! Bytes are buffered as bytes and a frame is decoded only once it is whole
//! (up to its blank line), so a multi-byte character split across network
//! chunks arrives intact. Lines end in `\n`, `\r\n` or `\r`; `data:` lines
//! join with `\n`; one space after the colon is dropped; lines starting with
//! `:` are comments. A frame longer than the decoder's limit is an error,
//! so a peer cannot grow the reader without bound.

/// One dispatched event (or a block of comments).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Frame {
    pub id: Option<String>,
    pub event: Option<String>,
    /// The `data:` lines joined with `\n` (empty when there were none).
    pub data: String,
    pub comments: Vec<String>,
    has_data: bool,
}

impl Frame {
    /// Whether the frame had any `data:` line.
    pub fn has_data(&self) -> bool {
        self.has_data
    }
}

/// A frame over the limit, or one that is not UTF-8.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DecodeError {
    TooLarge(usize),
    NotUtf8,
}

impl std::fmt::Display for DecodeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DecodeError::TooLarge(max) => write!(f, "an event stream frame exceeded {max} bytes"),
            DecodeError::NotUtf8 => f.write_str("an event stream frame was not UTF-8"),
        }
    }
}

impl std::error::Error for DecodeError {}

/// An incremental decoder: [`Decoder::push`] bytes as they come, then take
/// [`Decoder::next_frame`] until it says there is no whole frame yet.
#[derive(Debug)]
pub struct Decoder {
    buf: Vec<u8>,
    /// Where the search for the frame's end resumes (bytes before it hold
    /// no blank line).
    scanned: usize,
    max_frame: usize,
}

impl Decoder {
    pub fn new(max_frame: usize) -> Self {
        Decoder { buf: Vec::new(), scanned: 0, max_frame }
    }

    pub fn push(&mut self, chunk: &[u8]) {
        self.buf.extend_from_slice(chunk);
    }

    /// The next whole frame, `Ok(None)` when the buffer holds no whole one.
    pub fn next_frame(&mut self) -> Result<Option<Frame>, DecodeError> {
        let Some(end) = self.frame_end() else {
            if self.buf.len() > self.max_frame {
                return Err(DecodeError::TooLarge(self.max_frame));
            }
            return Ok(None);
        };
        let (frame_len, consumed) = end;
        if frame_len > self.max_frame {
            return Err(DecodeError::TooLarge(self.max_frame));
        }
        let text = std::str::from_utf8(&self.buf[..frame_len]).map_err(|_| DecodeError::NotUtf8)?;
        let frame = parse(text);
        self.buf.drain(..consumed);
        self.scanned = 0;
        Ok(Some(frame))
    }

    /// `(frame length, bytes to consume)` of the first frame ended by a
    /// blank line.
    fn frame_end(&mut self) -> Option<(usize, usize)> {
        let b = &self.buf;
        let mut i = self.scanned.saturating_sub(1);
        while i < b.len() {
            // A line break: \n, \r\n or \r.
            let (is_break, len) = match b[i] {
                b'\n' => (true, 1),
                b'\r' if b.get(i + 1) == Some(&b'\n') => (true, 2),
                b'\r' if i + 1 < b.len() => (true, 1),
                b'\r' => break, // \r at the end: wait to see whether \n follows
                _ => (false, 1),
            };
            if is_break {
                let next = i + len;
                match b.get(next) {
                    Some(b'\n') => return Some((i, next + 1)),
                    Some(b'\r') if b.get(next + 1) == Some(&b'\n') => return Some((i, next + 2)),
                    Some(b'\r') if next + 1 < b.len() => return Some((i, next + 1)),
                    None | Some(b'\r') => break,
                    _ => {}
                }
            }
            i += len;
        }
        self.scanned = i;
        None
    }
}

/// Parses one frame's lines (without its terminating blank line).
fn parse(text: &str) -> Frame {
    let mut f = Frame::default();
    let mut data: Vec<&str> = vec![];
    for line in text.split('\n').flat_map(|l| l.split('\r')) {
        if line.is_empty() {
            continue;
        }
        if let Some(c) = line.strip_prefix(':') {
            f.comments.push(c.strip_prefix(' ').unwrap_or(c).to_string());
            continue;
        }
        let (field, value) = match line.split_once(':') {
            Some((k, v)) => (k, v.strip_prefix(' ').unwrap_or(v)),
            None => (line, ""),
        };
        match field {
            "data" => data.push(value),
            "id" => f.id = Some(value.to_string()),
            "event" => f.event = Some(value.to_string()),
            _ => {}
        }
    }
    f.has_data = !data.is_empty();
    f.data = data.join("\n");
    f
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all(d: &mut Decoder) -> Vec<Frame> {
        let mut out = vec![];
        while let Some(f) = d.next_frame().expect("frame") {
            out.push(f);
        }
        out
    }

    #[test]
    fn a_character_split_across_chunks_arrives_whole() {
        let wire = "id: 7\nevent: agent.message\ndata: {\"text\":\"héllo — 世界 🦀\"}\n\n".as_bytes();
        // Every split point, including inside each multi-byte character.
        for cut in 1..wire.len() {
            let mut d = Decoder::new(1024);
            d.push(&wire[..cut]);
            let mut frames = all(&mut d);
            d.push(&wire[cut..]);
            frames.extend(all(&mut d));
            assert_eq!(frames.len(), 1, "cut at {cut}");
            assert_eq!(frames[0].data, "{\"text\":\"héllo — 世界 🦀\"}", "cut at {cut}");
            assert_eq!((frames[0].id.as_deref(), frames[0].event.as_deref()), (Some("7"), Some("agent.message")));
        }
    }

    #[test]
    fn lines_comments_and_line_endings_follow_the_spec() {
        let mut d = Decoder::new(1024);
        d.push(b": ping\n\ndata: a\r\ndata:b\r\n\r\nevent: x\rdata: c\r\r");
        let mut frames = all(&mut d);
        assert_eq!(frames.len(), 2, "a trailing \\r may still become \\r\\n: wait");
        d.push(b"data: d\n\n");
        frames.extend(all(&mut d));
        assert_eq!(frames.len(), 4);
        assert_eq!(frames[3].data, "d");
        assert_eq!((frames[0].comments.clone(), frames[0].has_data()), (vec!["ping".to_string()], false));
        assert_eq!(frames[1].data, "a\nb");
        assert_eq!((frames[2].event.as_deref(), frames[2].data.as_str()), (Some("x"), "c"));
    }

    #[test]
    fn an_endless_frame_is_refused() {
        let mut d = Decoder::new(16);
        d.push(b"data: 0123456789abcdef");
        assert_eq!(d.next_frame(), Err(DecodeError::TooLarge(16)));
        let mut d = Decoder::new(1024);
        d.push(&[b'd', b'a', b't', b'a', b':', 0xff, b'\n', b'\n']);
        assert_eq!(d.next_frame(), Err(DecodeError::NotUtf8));
    }
}
