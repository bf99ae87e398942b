//! Reads of what a cage or another machine controls, each within a bound:
//! a file a cage can write (its hosts file, a project's git config), a
//! line a far process sends (`--on`'s key lender), a program's output.
//! Read whole, any of them could hold this process's memory hostage (a
//! cage appended 309 MB to its hosts file; a far process sent 400 MiB
//! without a line's end).

use std::fs::File;
use std::io::{self, BufRead, Read, Seek, SeekFrom};
use std::path::Path;

/// What [`read_file`] read: at most its bound, and whether that was all.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Head {
    pub bytes: Vec<u8>,
    /// The file held more than the bound: `bytes` is its beginning.
    pub cut: bool,
}

/// The first `max` bytes of the file at `path` (read through one open
/// file, so a file that grows meanwhile is still read within the bound).
pub fn read_file(path: &Path, max: u64) -> io::Result<Head> {
    read_head(File::open(path)?, max)
}

/// The first `max` bytes of `r`, and whether there was more.
pub fn read_head(r: impl Read, max: u64) -> io::Result<Head> {
    let mut bytes = Vec::new();
    r.take(max.saturating_add(1)).read_to_end(&mut bytes)?;
    let cut = bytes.len() as u64 > max;
    bytes.truncate(max as usize);
    Ok(Head { bytes, cut })
}

/// The last `max` bytes of the file at `path` (a log, whose last line says
/// why).
pub fn read_tail(path: &Path, max: u64) -> io::Result<Vec<u8>> {
    let mut f = File::open(path)?;
    let len = f.metadata()?.len();
    if len > max {
        f.seek(SeekFrom::Start(len - max))?;
    }
    let mut bytes = Vec::new();
    f.take(max).read_to_end(&mut bytes)?;
    Ok(bytes)
}

/// One line of `r`, without its `\n`: at most `max` bytes, or an error
/// (`InvalidData`) as soon as more than that came without a line's end;
/// None at the end of the input. The last line may lack its `\n`.
pub fn read_line(r: &mut impl BufRead, max: usize) -> io::Result<Option<Vec<u8>>> {
    let mut line = Vec::new();
    let n = r
        .by_ref()
        .take(max as u64 + 1)
        .read_until(b'\n', &mut line)?;
    if n == 0 {
        return Ok(None);
    }
    if line.last() == Some(&b'\n') {
        line.pop();
    } else if line.len() > max {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("a line longer than {max} bytes"),
        ));
    }
    Ok(Some(line))
}

impl Head {
    /// What was read, without the line left half by the bound: all of it
    /// when nothing was cut, else up to its last `\n` (kept).
    pub fn whole_lines(&self) -> &[u8] {
        if !self.cut {
            return &self.bytes;
        }
        match self.bytes.iter().rposition(|&b| b == b'\n') {
            Some(i) => &self.bytes[..=i],
            None => &[],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_head_says_whether_it_was_all() {
        assert_eq!(
            read_head(&b"hello"[..], 5).unwrap(),
            Head {
                bytes: b"hello".to_vec(),
                cut: false
            }
        );
        assert_eq!(
            read_head(&b"hello!"[..], 5).unwrap(),
            Head {
                bytes: b"hello".to_vec(),
                cut: true
            }
        );
        // An endless input is read no further than the bound.
        let head = read_head(std::io::repeat(b'x'), 1000).unwrap();
        assert_eq!((head.bytes.len(), head.cut), (1000, true));
    }

    #[test]
    fn lines_within_a_bound() {
        let mut r = std::io::BufReader::new(&b"key\nhold\nexit 3"[..]);
        assert_eq!(read_line(&mut r, 8).unwrap(), Some(b"key".to_vec()));
        assert_eq!(read_line(&mut r, 8).unwrap(), Some(b"hold".to_vec()));
        assert_eq!(read_line(&mut r, 8).unwrap(), Some(b"exit 3".to_vec()));
        assert_eq!(read_line(&mut r, 8).unwrap(), None);
        // A line of exactly the bound passes; one byte more does not, and
        // an endless one is not read past the bound.
        let mut r = std::io::BufReader::new(&b"12345678\n123456789\n"[..]);
        assert_eq!(read_line(&mut r, 8).unwrap(), Some(b"12345678".to_vec()));
        assert_eq!(
            read_line(&mut r, 8).unwrap_err().kind(),
            io::ErrorKind::InvalidData
        );
        let mut endless = std::io::BufReader::new(std::io::repeat(b'x'));
        assert!(read_line(&mut endless, 1 << 16).is_err());
    }

    #[test]
    fn whole_lines_are_kept() {
        let text = b"a b\nc d\ne f\n";
        let head = |max| read_head(&text[..], max).unwrap();
        assert_eq!(head(100).whole_lines(), text);
        assert_eq!(head(12).whole_lines(), text);
        assert_eq!(head(11).whole_lines(), b"a b\nc d\n");
        assert_eq!(head(8).whole_lines(), b"a b\nc d\n");
        assert_eq!(head(7).whole_lines(), b"a b\n");
        assert_eq!(read_head(&b"abcdef"[..], 3).unwrap().whole_lines(), b"");
    }

    #[test]
    fn a_tail_is_the_end() {
        let scratch = tempfile::tempdir().unwrap();
        let p = scratch.path().join("file");
        std::fs::write(&p, "first\nsecond\nlast\n").unwrap();
        assert_eq!(read_tail(&p, 5).unwrap(), b"last\n");
        assert_eq!(read_tail(&p, 100).unwrap(), b"first\nsecond\nlast\n");
        let head = read_file(&p, 5).unwrap();
        assert_eq!((head.bytes, head.cut), (b"first".to_vec(), true));
        std::fs::remove_file(&p).unwrap();
    }
}
