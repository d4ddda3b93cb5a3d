//! CSV bytes cut into chunks of whole records, for inference: each chunk is read by a CSV
//! reader of its own, so a chunk must never end inside a quoted value. The engine's own
//! splitter knows only `"` quotes and `\` escapes; this one follows the reader's options
//! (quote, escape, comment, terminator) the way the reader itself parses them.

use bytes::{Bytes, BytesMut};
use futures::stream::{BoxStream, StreamExt};

use datafusion::error::Result;

/// The first chunk is small (a header, or a file read without inference, needs no more); the
/// rest are large (each is a reader of its own).
pub(super) const FIRST: usize = 64 << 10;
const CHUNK: usize = 4 << 20;

/// What the reader's options say a record looks like.
#[derive(Debug, Clone, Copy)]
pub(super) struct Syntax {
    pub delimiter: u8,
    pub quote: u8,
    pub escape: Option<u8>,
    pub comment: Option<u8>,
    /// None: `\n`, `\r` or `\r\n`, as the reader takes them.
    pub terminator: Option<u8>,
}

/// Where the parse stands after a byte.
#[derive(Debug, Clone, Copy, PartialEq)]
enum State {
    /// At the start of a field (`record`: and of a record).
    FieldStart { record: bool },
    /// In a value with no quotes around it.
    Unquoted,
    /// In a quoted value.
    Quoted,
    /// In a quoted value, just after its escape character.
    Escaped,
    /// Just after a quote in a quoted value: its end, or the first of two (a literal quote).
    QuoteInQuoted,
    /// In a comment line.
    Comment,
}

/// The record boundaries of a byte stream, scanned once.
struct Cutter {
    syntax: Syntax,
    state: State,
    /// A record (not a comment or blank line) began since the last boundary: a chunk of
    /// comments or blank lines alone would be a reader's record of no fields.
    data: bool,
}

impl Cutter {
    fn is_end(&self, b: u8) -> bool {
        match self.syntax.terminator {
            Some(t) => b == t,
            None => b == b'\n' || b == b'\r',
        }
    }

    /// Steps over `bytes`; the offset after the last record that ends in them, if any. With the
    /// default terminators a chunk is cut only after a `\n` (never between `\r` and `\n`).
    fn scan(&mut self, bytes: &[u8]) -> Option<usize> {
        let s = self.syntax;
        let mut last = None;
        for (i, &b) in bytes.iter().enumerate() {
            let ends = self.is_end(b);
            self.state = match self.state {
                State::FieldStart { record: true } if Some(b) == s.comment => State::Comment,
                State::FieldStart { .. } | State::Unquoted | State::QuoteInQuoted if ends => {
                    State::FieldStart { record: true }
                }
                // The reader ends a comment at a line feed only, whatever the terminator.
                State::Comment if b == b'\n' => State::FieldStart { record: true },
                State::Comment => State::Comment,
                State::FieldStart { .. } if b == s.quote => State::Quoted,
                State::FieldStart { .. } | State::Unquoted | State::QuoteInQuoted
                    if b == s.delimiter =>
                {
                    State::FieldStart { record: false }
                }
                State::QuoteInQuoted if b == s.quote => State::Quoted,
                State::FieldStart { .. } | State::Unquoted | State::QuoteInQuoted => {
                    State::Unquoted
                }
                // The quote first, as the reader tests it: an escape that is the quote itself
                // (`escape => '"'`) is a doubled quote.
                State::Quoted if b == s.quote => State::QuoteInQuoted,
                State::Quoted if Some(b) == s.escape => State::Escaped,
                State::Quoted | State::Escaped => State::Quoted,
            };
            let cut = match s.terminator {
                Some(_) => ends,
                None => b == b'\n',
            };
            if !matches!(
                self.state,
                State::Comment | State::FieldStart { record: true }
            ) {
                self.data = true;
            }
            if cut && self.data && self.state == (State::FieldStart { record: true }) {
                last = Some(i + 1);
                self.data = false;
            }
        }
        last
    }
}

/// `input` as chunks of whole records: a first of about `first` bytes (or the first record,
/// if longer), then about 4 MiB each (a record longer than that is one chunk). What follows
/// the last record boundary (a last record without a terminator, or an unterminated quote the
/// reader will report) is the last chunk.
pub(super) fn whole_records(
    input: BoxStream<'static, Result<Bytes>>,
    syntax: Syntax,
    first: usize,
) -> BoxStream<'static, Result<Bytes>> {
    struct Cut {
        input: Option<BoxStream<'static, Result<Bytes>>>,
        cutter: Cutter,
        pending: BytesMut,
        /// The end of the last whole record in `pending`, and how much of it was scanned.
        boundary: usize,
        scanned: usize,
        size: usize,
    }
    let start = Cut {
        input: Some(input),
        cutter: Cutter {
            syntax,
            state: State::FieldStart { record: true },
            data: false,
        },
        pending: BytesMut::new(),
        boundary: 0,
        scanned: 0,
        size: first,
    };
    futures::stream::try_unfold(start, |mut cut| async move {
        loop {
            if cut.boundary > 0 && cut.pending.len() >= cut.size {
                let chunk = cut.pending.split_to(cut.boundary).freeze();
                cut.scanned -= cut.boundary;
                cut.boundary = 0;
                cut.size = CHUNK;
                return Ok(Some((chunk, cut)));
            }
            let next = match cut.input.as_mut() {
                Some(input) => input.next().await.transpose()?,
                None => None,
            };
            match next {
                Some(bytes) => {
                    cut.pending.extend_from_slice(&bytes);
                    if let Some(end) = cut.cutter.scan(&cut.pending[cut.scanned..]) {
                        cut.boundary = cut.scanned + end;
                    }
                    cut.scanned = cut.pending.len();
                }
                None => {
                    cut.input = None;
                    // Comments and blank lines after the last record are no chunk.
                    if cut.pending.is_empty() || (cut.boundary == 0 && !cut.cutter.data) {
                        return Ok(None);
                    }
                    let rest = std::mem::take(&mut cut.pending).freeze();
                    cut.scanned = 0;
                    cut.boundary = 0;
                    return Ok(Some((rest, cut)));
                }
            }
        }
    })
    .boxed()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn syntax(quote: u8, escape: Option<u8>) -> Syntax {
        Syntax {
            delimiter: b',',
            quote,
            escape,
            comment: Some(b'#'),
            terminator: None,
        }
    }

    /// The chunks `text` is cut into when it arrives `piece` bytes at a time.
    fn cuts(text: &str, syntax: Syntax, piece: usize) -> Vec<String> {
        let pieces: Vec<Result<Bytes>> = text
            .as_bytes()
            .chunks(piece)
            .map(|c| Ok(Bytes::copy_from_slice(c)))
            .collect();
        let stream = whole_records(futures::stream::iter(pieces).boxed(), syntax, FIRST);
        let chunks: Vec<Result<Bytes>> = futures::executor::block_on(stream.collect::<Vec<_>>());
        chunks
            .into_iter()
            .map(|c| String::from_utf8(c.unwrap().to_vec()).unwrap())
            .collect()
    }

    /// Every place a chunk may end in `text`: after each record.
    fn boundaries(text: &str, syntax: Syntax) -> Vec<usize> {
        let mut cutter = Cutter {
            syntax,
            state: State::FieldStart { record: true },
            data: false,
        };
        // One byte at a time: the state carries across calls.
        let mut at = vec![];
        for (i, b) in text.as_bytes().iter().enumerate() {
            if cutter.scan(std::slice::from_ref(b)).is_some() {
                at.push(i + 1);
            }
        }
        at
    }

    #[test]
    fn a_record_ends_only_at_a_line_break_outside_quotes_of_the_readers_quote_character() {
        let text = "a,b\n'x\ny',1\n\"p\nq,2\n";
        // With ' as the quote, the line break inside 'x\ny' is a value's; the " is a letter.
        assert_eq!(boundaries(text, syntax(b'\'', None)), vec![4, 12, 15, 19]);
        // With ", the ' is a letter and "p\nq,2\n runs on to the end, unterminated.
        assert_eq!(boundaries(text, syntax(b'"', None)), vec![4, 7, 12]);
    }

    #[test]
    fn doubled_quotes_escapes_comments_and_carriage_returns_are_read_as_the_reader_reads_them() {
        let q = syntax(b'"', Some(b'\\'));
        // A doubled quote stays inside the value; an escaped quote too.
        assert_eq!(boundaries("\"a\"\"\nb\",1\n", q), vec![10]);
        assert_eq!(boundaries("\"a\\\"\nb\",1\n", q), vec![10]);
        // Without an escape character, a backslash is a letter: the value ends at its quote.
        assert_eq!(boundaries("\"a\\\"\nb\n", syntax(b'"', None)), vec![5, 7]);
        // A quote inside an unquoted value is a letter.
        assert_eq!(boundaries("ab\"c\nd\n", q), vec![5, 7]);
        // A comment line's quote opens nothing; a cut falls after \r\n, not between.
        assert_eq!(
            boundaries("# it's\r\nx,1\r\ny,'\r\n", syntax(b'\'', None)),
            vec![13]
        );
        // An escape that is the quote itself is a doubled quote.
        assert_eq!(
            boundaries("\"a\"\"b\nc\",1\n\"x\",2\n", syntax(b'"', Some(b'"'))),
            vec![11, 17]
        );
        // A comment ends at a line feed only: its bare \r and the quote after it are letters.
        assert_eq!(boundaries("#a\r'b\nx,1\n", syntax(b'\'', None)), vec![10]);
        // Comment and blank lines alone are no record: no cut after them.
        assert_eq!(boundaries("a\n# c\n\nb\n", q), vec![2, 9]);
        // A terminator of its own: line breaks are letters.
        let semi = Syntax {
            terminator: Some(b';'),
            ..q
        };
        assert_eq!(boundaries("a\nb;c;", semi), vec![4, 6]);
    }

    #[test]
    fn chunks_hold_whole_records_whatever_pieces_the_bytes_arrive_in() {
        // Records with a quoted line break, about 100 KiB in all: a first chunk and a rest.
        let record = "1,'one\ntwo',x\n";
        let text = record.repeat(8_000);
        for piece in [1_000, 7, 65_536, 1 << 20] {
            let chunks = cuts(&text, syntax(b'\'', None), piece);
            // All at once, it is one chunk; in pieces, a first chunk and the rest.
            assert_eq!(
                chunks.len() == 1,
                piece > text.len(),
                "{piece}: {}",
                chunks.len()
            );
            assert!(
                chunks[0].len() <= FIRST + piece,
                "{piece}: {}",
                chunks[0].len()
            );
            for c in &chunks {
                assert!(c.len() % record.len() == 0, "{piece}: a chunk cut a record");
            }
            assert_eq!(chunks.concat(), text);
        }
        // Comments and blank lines after the last chunk's records are no chunk of their own.
        let records = "1,2\n".repeat(FIRST / 4);
        assert_eq!(
            cuts(&format!("{records}# end\n\n"), syntax(b'"', None), FIRST),
            vec![records]
        );
        // A last record with no line break is the last chunk.
        assert_eq!(cuts("a\nb", syntax(b'"', None), 1).concat(), "a\nb");
        assert!(cuts("", syntax(b'"', None), 1).is_empty());
    }
}
