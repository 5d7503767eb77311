//! Failpoints: a process that kills itself with SIGKILL at a chosen point of its checkpoint
//! writing, so a test can stop a save exactly between two files or inside one, as `kill -9`
//! would (no destructor, no flush, no `atexit`: the process is gone at once, all threads).
//!
//! `CKPTSPEC_FAILPOINT=<n>` kills the process just before its n-th write event (1-based, counted
//! over the whole process); `CKPTSPEC_FAILPOINT=<n>:mid` kills it inside the n-th event when that
//! event is a file: the file's first half (`len / 2` bytes) is written with `write(2)`, then the
//! process kills itself, leaving a torn file. (A `mid` on an event that is not a file kills just
//! before it, as without `mid`.) `CKPTSPEC_FAILPOINT_TRACE=1` prints every event to stderr as
//! `ckptspec-failpoint <n> <kind> <path>`, with or without a kill, so a test learns which event
//! is which from an uninterrupted run. Both variables are read once, on the first event.
//!
//! The events, in the order a save meets them:
//! * `file`: a file about to be created, through the one place each kind goes through:
//!   [`crate::save::fastsave::FileSink::create`] (every `write_torch` / `write_safetensors`, hence
//!   `optimizer.pt`, `scheduler.pt`, `rng_state.pth`, `training_args.bin` and the weights),
//!   [`write_file`] (`store::write_text`: `trainer_state.json`, `config.json`; fastsave's
//!   small byte files);
//! * atomic mode ([`crate::save::atomic`]): `fsync` before each file's fsync of the staging folder,
//!   `fsync-dir` before the staging folder's own, `rename` (after the last fsync, before the
//!   publishing rename; `exchange` for a re-save that swaps folders, `rename-aside` / `remove-old`
//!   for one that cannot), `fsync-parent` (after the rename, before the parent's fsync), and
//!   `remove-leftover` before a killed run's staging folder is removed.
//!
//! Cost when the variable is unset: one atomic load (`OnceLock::get`) per file or step, nothing
//! per chunk: a torn file is decided when it is created, and its sink then only checks a bool.
//! A process with several writer threads numbers its events in the order the threads reach them
//! (the executor writes its files one after the other, so its numbering is deterministic).

use std::io::Write;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

/// The environment variable that arms a failpoint (`<n>` or `<n>:mid`).
pub const ENV: &str = "CKPTSPEC_FAILPOINT";
/// The environment variable that prints every event to stderr (any non-empty value but `0`).
pub const TRACE_ENV: &str = "CKPTSPEC_FAILPOINT_TRACE";
/// The prefix of each trace line on stderr.
pub const TRACE_PREFIX: &str = "ckptspec-failpoint";

/// Where to die.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Spec {
    /// The 1-based index of the event.
    pub n: u64,
    /// Inside the event (a torn file) rather than before it.
    pub mid: bool,
}

impl Spec {
    /// Parses `<n>` or `<n>:mid` (n >= 1).
    pub fn parse(s: &str) -> Result<Spec, String> {
        let s = s.trim();
        let (num, mid) = match s.split_once(':') {
            Some((num, "mid")) => (num, true),
            Some((_, other)) => return Err(format!("{ENV}={s}: unknown qualifier {other:?} (expected <n> or <n>:mid)")),
            None => (s, false),
        };
        match num.parse::<u64>() {
            Ok(n) if n >= 1 => Ok(Spec { n, mid }),
            _ => Err(format!("{ENV}={s}: expected a positive event number, <n> or <n>:mid")),
        }
    }
}

#[derive(Debug)]
struct Config {
    kill: Option<Spec>,
    trace: bool,
}

static CONFIG: OnceLock<Option<Config>> = OnceLock::new();
static COUNT: AtomicU64 = AtomicU64::new(0);

fn config() -> Option<&'static Config> {
    CONFIG
        .get_or_init(|| {
            let kill = match std::env::var(ENV) {
                Ok(s) if !s.trim().is_empty() => match Spec::parse(&s) {
                    Ok(spec) => Some(spec),
                    // A mistyped failpoint must not let a kill test pass without killing.
                    Err(m) => {
                        eprintln!("{m}");
                        std::process::abort();
                    }
                },
                _ => None,
            };
            let trace = std::env::var(TRACE_ENV).is_ok_and(|v| !v.is_empty() && v != "0");
            (kill.is_some() || trace).then_some(Config { kill, trace })
        })
        .as_ref()
}

/// Whether any failpoint or trace is active in this process.
pub fn active() -> bool {
    config().is_some()
}

/// What an event's caller does next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Next {
    /// Go on as usual.
    Go,
    /// Write the file's first half, then call [`die`] (a torn file).
    Tear,
}

fn event(kind: &str, path: &Path, is_file: bool) -> Next {
    let Some(c) = config() else { return Next::Go };
    let n = COUNT.fetch_add(1, Ordering::Relaxed) + 1;
    if c.trace {
        // One write(2) per line, so lines of two threads do not mix.
        let line = format!("{TRACE_PREFIX} {n} {kind} {}\n", path.display());
        let _ = std::io::stderr().lock().write_all(line.as_bytes());
    }
    match c.kill {
        Some(s) if s.n == n && s.mid && is_file => Next::Tear,
        Some(s) if s.n == n => die(),
        _ => Next::Go,
    }
}

/// A file is about to be created at `path`. [`Next::Tear`]: write its first half, then [`die`].
#[inline]
pub fn file(path: &Path) -> Next {
    if CONFIG.get().is_some_and(|c| c.is_none()) {
        return Next::Go;
    }
    event("file", path, true)
}

/// A step that is not a file write (an fsync, a rename), about to happen to `path`.
#[inline]
pub fn step(kind: &'static str, path: &Path) {
    if CONFIG.get().is_some_and(|c| c.is_none()) {
        return;
    }
    event(kind, path, false);
}

/// `std::fs::write` with a [`file`] event: the one writer of whole small files.
pub fn write_file(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    match file(path) {
        Next::Go => std::fs::write(path, bytes),
        Next::Tear => {
            let mut f = std::fs::File::create(path)?;
            f.write_all(&bytes[..bytes.len() / 2])?;
            die()
        }
    }
}

/// Kills this process with SIGKILL, as `kill -9` does.
pub fn die() -> ! {
    // SAFETY: plain syscalls; SIGKILL cannot be caught, so nothing runs after it.
    unsafe {
        libc::kill(libc::getpid(), libc::SIGKILL);
    }
    loop {
        std::thread::sleep(std::time::Duration::from_secs(1));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_specs() {
        assert_eq!(Spec::parse("7"), Ok(Spec { n: 7, mid: false }));
        assert_eq!(Spec::parse(" 12:mid "), Ok(Spec { n: 12, mid: true }));
        for bad in ["0", "-1", "x", "3:end", "3:", ":mid", ""] {
            assert!(Spec::parse(bad).is_err(), "{bad}");
        }
    }
}
