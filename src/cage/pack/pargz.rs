//! gzip on every core, the way pigz does it: the input is cut into blocks,
//! each block is deflated on a worker thread as a raw deflate stream that
//! ends on a byte boundary (a sync flush, the empty stored block of RFC 1951
//! section 3.2.4) and, but for the last, without the "final block" bit; the
//! pieces are written in order between one gzip header and one trailer
//! whose CRC-32 is the blocks' CRCs combined. The result is one ordinary
//! gzip member (RFC 1952): `gzip -d`, `tar xzf` and every single-member
//! decoder read it.
//!
//! Blocks go to the workers in turn (block k to worker k mod n), so each
//! worker's answers come back in the order the blocks must be written, and
//! at most two blocks per worker wait: memory stays at a few blocks
//! whatever the input's size.
//!
//! Unlike pigz, a block does not start with the previous block's last
//! 32 KiB as its dictionary; with blocks of 1 MiB that costs well under one
//! per cent of the output.

use std::collections::VecDeque;
use std::io::{self, Write};
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::thread::JoinHandle;

use flate2::{Compress, Compression, Crc, FlushCompress, Status};

/// The input is deflated in blocks of this many bytes.
pub const BLOCK: usize = 1024 * 1024;

/// A block to deflate, and whether it ends the stream.
type Job = (Vec<u8>, bool);
/// A block deflated: the raw deflate bytes and the CRC of its input.
type Done = io::Result<(Vec<u8>, Crc)>;

struct Worker {
    jobs: Option<SyncSender<Job>>,
    done: Receiver<Done>,
    /// Returns how many blocks this thread deflated.
    thread: Option<JoinHandle<usize>>,
}

/// A writer that gzips what is written to it on `threads` threads, into
/// `inner`. Call [`ParGz::finish`] to end the stream; dropped without it,
/// the threads are stopped and the output is not a whole gzip stream.
pub struct ParGz<W: Write> {
    /// Taken by `finish`.
    inner: Option<W>,
    workers: Vec<Worker>,
    block: usize,
    buf: Vec<u8>,
    /// Blocks handed out and not yet written, by worker index, oldest first.
    pending: VecDeque<usize>,
    next: usize,
    crc: Crc,
}

impl<W: Write> ParGz<W> {
    /// `threads` workers (at least one), blocks of `block` bytes.
    pub fn new(mut inner: W, threads: usize, block: usize, level: Compression) -> io::Result<Self> {
        // ID1 ID2, CM = deflate, no flags, no mtime, XFL 0, OS = Unix.
        inner.write_all(&[0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 3])?;
        let mut workers = Vec::new();
        for _ in 0..threads.max(1) {
            let (jobs, job_rx) = sync_channel::<Job>(2);
            let (done_tx, done) = sync_channel::<Done>(2);
            let thread = std::thread::Builder::new()
                .name("pack-gzip".into())
                .spawn(move || {
                    let mut n = 0;
                    while let Ok((data, last)) = job_rx.recv() {
                        let mut crc = Crc::new();
                        crc.update(&data);
                        let out = deflate(&data, last, level).map(|d| (d, crc));
                        n += 1;
                        if done_tx.send(out).is_err() {
                            break;
                        }
                    }
                    n
                })?;
            workers.push(Worker {
                jobs: Some(jobs),
                done,
                thread: Some(thread),
            });
        }
        Ok(ParGz {
            inner: Some(inner),
            workers,
            block: block.max(1),
            buf: Vec::with_capacity(block.max(1)),
            pending: VecDeque::new(),
            next: 0,
            crc: Crc::new(),
        })
    }

    /// Hand the buffered block to the next worker, writing out the oldest
    /// blocks first while every worker has two waiting.
    fn send(&mut self, last: bool) -> io::Result<()> {
        while self.pending.len() >= 2 * self.workers.len() {
            self.write_oldest()?;
        }
        let data = std::mem::replace(&mut self.buf, Vec::with_capacity(self.block));
        let w = self.next % self.workers.len();
        self.next += 1;
        let sent = match &self.workers[w].jobs {
            Some(jobs) => jobs.send((data, last)).is_ok(),
            None => false,
        };
        if !sent {
            return Err(stopped());
        }
        self.pending.push_back(w);
        Ok(())
    }

    fn write_oldest(&mut self) -> io::Result<()> {
        let Some(w) = self.pending.pop_front() else {
            return Ok(());
        };
        let (bytes, crc) = self.workers[w].done.recv().map_err(|_| stopped())??;
        self.crc.combine(&crc);
        self.inner.as_mut().ok_or_else(stopped)?.write_all(&bytes)
    }

    /// End the stream (the last block, then the trailer) and give back the
    /// writer, with how many blocks each thread deflated.
    pub fn finish_counted(mut self) -> io::Result<(W, Vec<usize>)> {
        self.send(true)?;
        while !self.pending.is_empty() {
            self.write_oldest()?;
        }
        let mut inner = self.inner.take().ok_or_else(stopped)?;
        inner.write_all(&self.crc.sum().to_le_bytes())?;
        inner.write_all(&self.crc.amount().to_le_bytes())?;
        let counts = self.stop();
        if counts.len() != self.workers.len() {
            return Err(stopped());
        }
        Ok((inner, counts))
    }

    /// End the stream and give back the writer.
    pub fn finish(self) -> io::Result<W> {
        self.finish_counted().map(|(w, _)| w)
    }

    /// Close every worker's queue and wait for it; the counts of those that
    /// ended well.
    fn stop(&mut self) -> Vec<usize> {
        for w in &mut self.workers {
            w.jobs = None;
        }
        let mut counts = Vec::new();
        for w in &mut self.workers {
            // Drain what it may still send, so that it is not blocked.
            while w.done.try_recv().is_ok() {}
            if let Some(t) = w.thread.take()
                && let Ok(n) = t.join()
            {
                counts.push(n);
            }
        }
        counts
    }
}

impl<W: Write> Write for ParGz<W> {
    fn write(&mut self, mut data: &[u8]) -> io::Result<usize> {
        let total = data.len();
        while !data.is_empty() {
            let room = self.block - self.buf.len();
            let n = room.min(data.len());
            self.buf.extend_from_slice(&data[..n]);
            data = &data[n..];
            if self.buf.len() == self.block {
                self.send(false)?;
            }
        }
        Ok(total)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl<W: Write> Drop for ParGz<W> {
    fn drop(&mut self) {
        self.stop();
    }
}

fn stopped() -> io::Error {
    io::Error::other("a gzip thread of the packer stopped")
}

/// `data` as raw deflate: ended by a sync flush (byte-aligned, not final),
/// or, for the `last` block, as the end of the stream.
fn deflate(data: &[u8], last: bool, level: Compression) -> io::Result<Vec<u8>> {
    let mut c = Compress::new(level, false);
    let mut out = Vec::with_capacity(data.len() / 2 + 1024);
    let flush = if last {
        FlushCompress::Finish
    } else {
        FlushCompress::Sync
    };
    loop {
        if out.capacity() - out.len() < 64 {
            out.reserve(out.capacity().max(4096));
        }
        let used = c.total_in() as usize;
        let status = c
            .compress_vec(&data[used..], &mut out, flush)
            .map_err(io::Error::other)?;
        let all_in = c.total_in() as usize == data.len();
        match status {
            Status::StreamEnd => return Ok(out),
            // zlib's rule: a flush is complete when it left output room.
            Status::Ok | Status::BufError if !last && all_in && out.len() < out.capacity() => {
                return Ok(out);
            }
            Status::Ok | Status::BufError => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    /// Bytes that deflate does not shrink much (xorshift), with runs of
    /// text between them that it does.
    fn data(len: usize) -> Vec<u8> {
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut v = Vec::with_capacity(len);
        while v.len() < len {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            if x.is_multiple_of(5) {
                v.extend_from_slice(b"the same words again and again ");
            } else {
                v.extend_from_slice(&x.to_le_bytes());
            }
        }
        v.truncate(len);
        v
    }

    fn gzip(input: &[u8], threads: usize, block: usize) -> (Vec<u8>, Vec<usize>) {
        let mut gz = ParGz::new(Vec::new(), threads, block, Compression::default()).unwrap();
        // In uneven pieces, as tar writes.
        for piece in input.chunks(777) {
            gz.write_all(piece).unwrap();
        }
        gz.finish_counted().unwrap()
    }

    /// A single-member decoder (flate2's GzDecoder stops at the end of the
    /// first member and checks its CRC and length) reads all of it back.
    fn gunzip(gz: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        flate2::read::GzDecoder::new(gz)
            .read_to_end(&mut out)
            .unwrap();
        out
    }

    #[test]
    fn one_gzip_member_whatever_the_blocks() {
        for (len, threads, block) in [
            (0, 1, 1000),
            (0, 4, 1000),
            (999, 3, 1000),
            (1000, 3, 1000),
            (1001, 3, 1000),
            (5_500, 3, 1000),
            (64_000, 2, 4096),
            (300_000, 7, 10_000),
        ] {
            let input = data(len);
            let (gz, _) = gzip(&input, threads, block);
            assert_eq!(gunzip(&gz), input, "{len} bytes, {threads} threads");
            // The trailer: CRC-32 and length of the whole input.
            let mut crc = Crc::new();
            crc.update(&input);
            let n = gz.len();
            assert_eq!(gz[n - 8..n - 4], crc.sum().to_le_bytes());
            assert_eq!(gz[n - 4..], (len as u32).to_le_bytes());
        }
    }

    /// A large input is deflated by every thread, in turn: 9 blocks and a
    /// last partial one on 4 threads are 3, 3, 2 and 2 blocks, each counted
    /// by the thread that deflated it.
    #[test]
    fn a_large_input_is_spread_over_the_threads() {
        let input = data(9 * 4096 + 100);
        let (gz, counts) = gzip(&input, 4, 4096);
        assert_eq!(counts, [3, 3, 2, 2]);
        assert_eq!(gunzip(&gz), input);
        // What pack uses: blocks of 1 MiB; 5 MiB on 2 threads.
        let input = data(5 * BLOCK);
        let (gz, counts) = gzip(&input, 2, BLOCK);
        assert_eq!(counts, [3, 3]); // 5 full blocks and an empty last one
        assert_eq!(gunzip(&gz), input);
        assert!(gz.len() < input.len(), "{} of {}", gz.len(), input.len());
    }

    /// Dropped without `finish`, the threads stop and nothing hangs.
    #[test]
    fn dropped_unfinished_it_stops() {
        let mut gz = ParGz::new(Vec::new(), 3, 1000, Compression::default()).unwrap();
        gz.write_all(&data(10_500)).unwrap();
        drop(gz);
    }
}
