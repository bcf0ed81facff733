//! Building the index in the background, following the trace while it grows, and reading lines
//! back by offset.
//!
//! A plain file is followed with [`jets_read::Reader::follow`]: complete lines are indexed as they
//! arrive, a torn last line is waited for, and following stops at the footer. A compressed trace
//! (or a pipe) cannot be read at an offset, so its lines are copied to a *spool* file (unlinked at
//! once, so it disappears with the process) and read back from there.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use anyhow::{Context, Result};
use jets_read::{Chunk, Compression, LineError, Reader};

use super::index::{Index, Parsed};

/// Lines longer than this are not read back (the details panel says so).
const MAX_LINE: usize = 64 << 20;
/// Bytes read and parsed at a time. The parsed lines of a chunk are the indexer's scratch memory
/// (about twice the chunk), so a small chunk keeps the server's peak close to the index itself.
const CHUNK: usize = 1 << 20;

/// Where the lines of the trace are read back from.
#[derive(Debug)]
pub struct Store {
    file: File,
}

impl Store {
    /// The line starting at `offset`, without its newline.
    pub fn line(&self, offset: u64) -> io::Result<Vec<u8>> {
        let mut out = Vec::new();
        let mut buf = vec![0u8; 4096];
        let mut at = offset;
        loop {
            let n = self.file.read_at(&mut buf, at)?;
            if n == 0 {
                return Ok(out);
            }
            if let Some(i) = memchr::memchr(b'\n', &buf[..n]) {
                out.extend_from_slice(&buf[..i]);
                return Ok(out);
            }
            out.extend_from_slice(&buf[..n]);
            at += n as u64;
            if out.len() > MAX_LINE {
                return Err(io::Error::other(format!(
                    "the line at byte {offset} is longer than {MAX_LINE} bytes"
                )));
            }
            if buf.len() < (1 << 20) {
                buf.resize(buf.len() * 4, 0);
            }
        }
    }
}

/// How the background build is going.
#[derive(Clone, Debug, Default)]
pub struct BuildState {
    /// Still waiting for the file to grow.
    pub following: bool,
    /// The whole trace has been read (or following stopped).
    pub done: bool,
    /// Reading failed: the index holds what was read before.
    pub error: Option<String>,
    /// Something the user should know (e.g. a compressed trace cannot be followed).
    pub note: Option<String>,
}

/// The index, the line store and the build state, shared by the builder and the server.
#[derive(Debug)]
pub struct Shared {
    /// The trace's path as given.
    pub path: PathBuf,
    /// The index.
    pub index: RwLock<Index>,
    /// The line store.
    pub store: Store,
    /// The build state.
    pub state: Mutex<BuildState>,
    /// Set to stop following.
    pub stop: Arc<AtomicBool>,
}

impl Shared {
    /// A copy of the build state.
    pub fn state(&self) -> BuildState {
        self.state.lock().map(|s| s.clone()).unwrap_or_default()
    }

    fn set_state(&self, f: impl FnOnce(&mut BuildState)) {
        if let Ok(mut s) = self.state.lock() {
            f(&mut s);
        }
    }
}

/// Opens the trace and starts indexing it on a background thread; with `follow`, a plain file is
/// followed until its footer or until [`Shared::stop`] is set.
pub fn start(path: &Path, follow: bool) -> Result<Arc<Shared>> {
    // Standard input (`-`) can be read only once: it is never probed, and always spooled.
    let plain = path.as_os_str() != "-" && {
        let probe = Reader::open(path).with_context(|| format!("opening {}", path.display()))?;
        probe.compression() == Compression::None
            && std::fs::metadata(path).map(|m| m.is_file()).unwrap_or(false)
    };
    let stop = Arc::new(AtomicBool::new(false));
    let mut note = None;
    let (reader, store, spool) = if plain {
        let reader = if follow { Reader::follow(path, stop.clone()) } else { Reader::open(path) }
            .with_context(|| format!("opening {}", path.display()))?
            .with_chunk_size(CHUNK);
        let file = File::open(path).with_context(|| format!("opening {}", path.display()))?;
        (reader, Store { file }, None)
    } else {
        if follow {
            note = Some(
                "a compressed trace is read to its end, not followed; follow the uncompressed \
                 file to watch it grow"
                    .to_owned(),
            );
        }
        let reader = Reader::open(path)
            .with_context(|| format!("opening {}", path.display()))?
            .with_chunk_size(CHUNK);
        let (write, read) = spool_file()?;
        (reader, Store { file: read }, Some(BufWriter::with_capacity(1 << 20, write)))
    };
    let shared = Arc::new(Shared {
        path: path.to_owned(),
        index: RwLock::new(Index::new()),
        store,
        state: Mutex::new(BuildState { following: follow && plain, note, ..BuildState::default() }),
        stop,
    });
    let s = shared.clone();
    std::thread::Builder::new()
        .name("jets-view-index".into())
        .spawn(move || {
            let result = run(reader, spool, &s);
            s.set_state(|st| {
                st.following = false;
                st.done = true;
                if let Err(e) = result {
                    st.error = Some(format!("{e:#}"));
                }
            });
        })
        .context("starting the indexing thread")?;
    Ok(shared)
}

/// Builds the whole index of a trace on this thread (for `jets gantt`, tests and benches).
pub fn build_now(path: &Path) -> Result<Arc<Shared>> {
    let shared = start(path, false)?;
    loop {
        let st = shared.state();
        if st.done {
            if let Some(e) = st.error {
                anyhow::bail!(e);
            }
            return Ok(shared);
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
}

/// A temporary file, unlinked right away: a write handle and a read handle.
fn spool_file() -> Result<(File, File)> {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let path = std::env::temp_dir().join(format!("jets-view-{}-{nanos}.spool", std::process::id()));
    let write = File::options()
        .create_new(true)
        .write(true)
        .open(&path)
        .with_context(|| format!("creating the spool file {}", path.display()))?;
    let read = File::open(&path).with_context(|| format!("opening {}", path.display()));
    let _ = std::fs::remove_file(&path);
    Ok((write, read?))
}

type ParsedLine = (Result<Parsed, LineError>, u64, u64);

fn parse_chunk(chunk: &Chunk<'_>) -> Vec<ParsedLine> {
    let parse = |c: &Chunk<'_>| -> Vec<ParsedLine> {
        c.lines()
            .filter(|l| !l.bytes.iter().all(u8::is_ascii_whitespace))
            .map(|l| (Parsed::from_raw(&l), l.number, l.offset))
            .collect()
    };
    if chunk.bytes.len() < (256 << 10) {
        return parse(chunk);
    }
    let parts = chunk.split(2);
    std::thread::scope(|s| {
        let handles: Vec<_> = parts[1..].iter().map(|p| s.spawn(move || parse(p))).collect();
        let mut out = parse(&parts[0]);
        for h in handles {
            out.extend(h.join().unwrap_or_default());
        }
        out
    })
}

fn run(mut reader: Reader, mut spool: Option<BufWriter<File>>, shared: &Shared) -> Result<()> {
    while let Some(chunk) = reader.next_chunk()? {
        if let Some(w) = spool.as_mut() {
            w.write_all(chunk.bytes).context("writing the spool file")?;
            w.flush().context("writing the spool file")?;
        }
        let parsed = parse_chunk(&chunk);
        let mut footer = false;
        {
            let mut index = shared.index.write().map_err(|_| anyhow::anyhow!("index poisoned"))?;
            for (p, line, offset) in parsed {
                match p {
                    Ok(p) => {
                        footer |= matches!(p, Parsed::Footer(_));
                        index.apply(p, line, offset);
                    }
                    Err(e) => index.bad_line(line, &e),
                }
            }
        }
        if footer {
            // A footer is the last line: nothing more will come.
            shared.stop.store(true, Ordering::Relaxed);
        }
    }
    if let Ok(mut index) = shared.index.write() {
        index.shrink();
    }
    // Give the parsing scratch freed above back to the system: glibc keeps freed heap memory
    // (in every thread's arena) for reuse, and nothing will use it now.
    // SAFETY: malloc_trim only releases free memory of the allocator; it has no preconditions.
    #[cfg(target_env = "gnu")]
    unsafe {
        libc::malloc_trim(0);
    }
    if let Some(t) = reader.truncated() {
        shared.set_state(|s| s.note = Some(format!("the compressed stream is truncated: {t}")));
    }
    Ok(())
}
