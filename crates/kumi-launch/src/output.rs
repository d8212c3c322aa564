//! Line-by-line forwarding of rank output.
//!
//! Every rank writes into its own pipe; the launcher alone writes to its stdout and
//! stderr, and only whole lines, so lines of different ranks never interleave
//! mid-line. A line that never ends is cut into [`MAX_PIECE`]-byte pieces so one
//! rank cannot make the launcher buffer without bound, and whatever is left at
//! end of file is flushed. Each piece and each last unterminated line is written
//! with a newline added: the launcher's output stays made of whole lines, which is
//! what keeps the next line of another rank from being glued to it.

/// Longest piece of a line held before it is forwarded anyway.
pub const MAX_PIECE: usize = 64 * 1024;

/// Splits a byte stream into lines (without their newline).
#[derive(Debug, Default)]
pub struct LineSplitter {
    partial: Vec<u8>,
}

impl LineSplitter {
    /// An empty splitter.
    pub fn new() -> Self {
        Self::default()
    }

    /// Feeds bytes; calls `emit` with every complete line or full piece.
    pub fn push(&mut self, mut bytes: &[u8], emit: &mut impl FnMut(&[u8])) {
        while let Some(i) = bytes.iter().position(|&b| b == b'\n') {
            if self.partial.is_empty() {
                emit(&bytes[..i]);
            } else {
                self.partial.extend_from_slice(&bytes[..i]);
                self.emit_partial_pieces(emit);
                emit(&self.partial);
                self.partial.clear();
            }
            bytes = &bytes[i + 1..];
        }
        self.partial.extend_from_slice(bytes);
        self.emit_partial_pieces(emit);
    }

    /// Emits full pieces of the held partial line, keeping the remainder.
    fn emit_partial_pieces(&mut self, emit: &mut impl FnMut(&[u8])) {
        if self.partial.len() < MAX_PIECE {
            return;
        }
        let mut start = 0;
        while self.partial.len() - start >= MAX_PIECE {
            emit(&self.partial[start..start + MAX_PIECE]);
            start += MAX_PIECE;
        }
        self.partial.drain(..start);
    }

    /// End of stream: emits the unterminated last line, if any.
    pub fn finish(&mut self, emit: &mut impl FnMut(&[u8])) {
        if !self.partial.is_empty() {
            emit(&self.partial);
            self.partial.clear();
        }
    }
}

/// Appends one forwarded line to `out`: the optional `[rank] ` tag, the line, `\n`.
pub fn format_line(out: &mut Vec<u8>, tag: Option<u32>, line: &[u8]) {
    if let Some(rank) = tag {
        out.extend_from_slice(format!("[{rank}] ").as_bytes());
    }
    out.extend_from_slice(line);
    out.push(b'\n');
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split_all(chunks: &[&[u8]]) -> Vec<Vec<u8>> {
        let mut s = LineSplitter::new();
        let mut got = Vec::new();
        for c in chunks {
            s.push(c, &mut |l| got.push(l.to_vec()));
        }
        s.finish(&mut |l| got.push(l.to_vec()));
        got
    }

    #[test]
    fn lines_survive_any_split() {
        let text = b"alpha\nbeta\n\ngamma";
        for i in 0..text.len() {
            let got = split_all(&[&text[..i], &text[i..]]);
            assert_eq!(
                got,
                vec![
                    b"alpha".to_vec(),
                    b"beta".to_vec(),
                    vec![],
                    b"gamma".to_vec()
                ]
            );
        }
    }

    #[test]
    fn endless_line_is_cut_into_pieces() {
        let long = vec![b'x'; MAX_PIECE * 2 + 10];
        let got = split_all(&[&long[..100], &long[100..], b"\n"]);
        assert_eq!(
            got.iter().map(Vec::len).collect::<Vec<_>>(),
            vec![MAX_PIECE, MAX_PIECE, 10]
        );
    }

    #[test]
    fn tags_prefix_lines() {
        let mut out = Vec::new();
        format_line(&mut out, Some(3), b"hi");
        format_line(&mut out, None, b"there");
        assert_eq!(out, b"[3] hi\nthere\n");
    }
}
