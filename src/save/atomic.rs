//! Atomic mode's disk steps (`ckptspec run --atomic`, `ckptspec conformance --atomic`): a
//! checkpoint is written into a staging folder that HF never looks at, made durable, and
//! published by one rename. Only the executor ([`crate::trainer`]) calls these.
//!
//! The staging folder is `output_dir/.ckptspec-staging-checkpoint-N`: HF's `get_last_checkpoint`
//! (`^checkpoint\-(\d+)$`), its rotation (`checkpoint-*` glob) and the Rust trainer's rotation
//! (names starting with `checkpoint-`) never match it. The published folder holds the same files
//! as the HF-compatible mode writes (the staging folder's name never enters a file).
//!
//! Guarantee: after a crash at any point, every `checkpoint-*` folder in `output_dir` is a
//! complete checkpoint whose files are on disk (each file, the folder and the parent fsynced
//! before and after the rename). Cost: one fsync per file, one per folder and two of the parent
//! per save (the HF-compatible mode, like HF, fsyncs nothing). tests/kill.rs kills runs with
//! SIGKILL at random moments and at [`crate::save::failpoint`]s (every fsync and rename here is one)
//! and checks it. Rotation's deletions are not made here: a folder the executor removes with a
//! plain `remove_dir_all` can be left partial by a kill ([`remove_checkpoint`] cannot).

use crate::save::failpoint;
use std::fs::{self, File};
use std::io;
use std::path::{Path, PathBuf};

/// Every name atomic mode creates in `output_dir` starts with this; nothing else does.
pub const STAGING_PREFIX: &str = ".ckptspec-staging-";
/// Where the old `checkpoint-N` goes aside when a re-save cannot swap folders atomically.
const OLD_INFIX: &str = "old-";

/// `output_dir/.ckptspec-staging-<folder>`: where `folder` (`checkpoint-N`) is written.
pub fn staging_dir(out: &Path, folder: &str) -> PathBuf {
    out.join(format!("{STAGING_PREFIX}{folder}"))
}

fn aside_dir(out: &Path, folder: &str) -> PathBuf {
    out.join(format!("{STAGING_PREFIX}{OLD_INFIX}{folder}"))
}

/// Whether `name` is one of the names atomic mode itself creates: exactly
/// `.ckptspec-staging-checkpoint-<digits>` or `.ckptspec-staging-old-checkpoint-<digits>`.
/// A user's folder with a similar name (another prefix, another tail) is not.
pub fn is_staging_name(name: &str) -> bool {
    let Some(rest) = name.strip_prefix(STAGING_PREFIX) else { return false };
    let rest = rest.strip_prefix(OLD_INFIX).unwrap_or(rest);
    match rest.strip_prefix("checkpoint-") {
        Some(step) => !step.is_empty() && step.bytes().all(|b| b.is_ascii_digit()),
        None => false,
    }
}

/// Removes what a killed run left: every folder of `out` (not a symlink, not a file) whose
/// name [`is_staging_name`]. Returns the names removed.
pub fn remove_leftovers(out: &Path) -> io::Result<Vec<String>> {
    let mut removed = vec![];
    let rd = match fs::read_dir(out) {
        Ok(rd) => rd,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(removed),
        Err(e) => return Err(e),
    };
    for e in rd {
        let e = e?;
        let name = e.file_name().to_string_lossy().into_owned();
        if is_staging_name(&name) && e.file_type()?.is_dir() {
            failpoint::step("remove-leftover", &e.path());
            fs::remove_dir_all(e.path())?;
            removed.push(name);
        }
    }
    if !removed.is_empty() {
        sync_dir(out)?;
    }
    removed.sort();
    Ok(removed)
}

pub fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

/// fsyncs every file under `dir` (recursively), then each folder after its contents, `dir` last.
pub fn sync_tree(dir: &Path) -> io::Result<()> {
    for e in fs::read_dir(dir)? {
        let e = e?;
        let ft = e.file_type()?;
        if ft.is_dir() {
            sync_tree(&e.path())?;
        } else if ft.is_file() {
            failpoint::step("fsync", &e.path());
            File::open(e.path())?.sync_all()?;
        }
    }
    failpoint::step("fsync-dir", dir);
    sync_dir(dir)
}

/// Swaps two existing paths in one step (`renameat2(RENAME_EXCHANGE)`); `Ok(false)` when the
/// system or file system cannot.
#[cfg(target_os = "linux")]
fn exchange(a: &Path, b: &Path) -> io::Result<bool> {
    use std::ffi::CString;
    use std::os::unix::ffi::OsStrExt;
    let c = |p: &Path| CString::new(p.as_os_str().as_bytes()).map_err(io::Error::other);
    let (ca, cb) = (c(a)?, c(b)?);
    // SAFETY: two valid NUL-terminated paths, relative to the current directory.
    let r = unsafe { libc::renameat2(libc::AT_FDCWD, ca.as_ptr(), libc::AT_FDCWD, cb.as_ptr(), libc::RENAME_EXCHANGE) };
    if r == 0 {
        return Ok(true);
    }
    let err = io::Error::last_os_error();
    match err.raw_os_error() {
        Some(libc::EINVAL) | Some(libc::ENOSYS) | Some(libc::EOPNOTSUPP) => Ok(false),
        _ => Err(err),
    }
}

#[cfg(not(target_os = "linux"))]
fn exchange(_: &Path, _: &Path) -> io::Result<bool> {
    Ok(false)
}

/// Publishes the complete, fsynced `staging` folder as `out/folder` and fsyncs `out`.
///
/// `out/folder` absent (the usual case): one `rename(staging, folder)`. A crash before it
/// leaves no `folder` and a staging leftover (removed by the next save's
/// [`remove_leftovers`]); after it, the complete new `folder`.
///
/// `out/folder` present (a re-save of the same step: HF 4.42-4.49 save the last step twice with
/// `save_strategy="epoch"`), where the file system can swap (Linux `RENAME_EXCHANGE`: ext4, xfs,
/// btrfs, tmpfs): one exchange, after which `folder` is the new checkpoint and the staging name
/// holds the old one, then the staging name is removed. A crash before the exchange leaves the
/// old complete `folder` (and a leftover); after it, the new complete `folder` (and a leftover
/// holding the old one). `folder` is never missing and never partial.
///
/// `out/folder` present, no swap: `rename(folder, .ckptspec-staging-old-folder)`, then
/// `rename(staging, folder)`, fsync `out`, remove the old one. A crash between the two renames
/// leaves no `folder`, only the two staging names (both removed by the next save: resuming
/// starts from the checkpoint before); before the first or after the second, as above.
pub fn publish(out: &Path, staging: &Path, folder: &str) -> io::Result<()> {
    publish_with(out, staging, folder, true)
}

fn publish_with(out: &Path, staging: &Path, folder: &str, try_exchange: bool) -> io::Result<()> {
    let target = out.join(folder);
    match fs::symlink_metadata(&target) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            failpoint::step("rename", &target);
            fs::rename(staging, &target)?;
            failpoint::step("fsync-parent", out);
            return sync_dir(out);
        }
        Err(e) => return Err(e),
        Ok(_) => {}
    }
    failpoint::step("exchange", &target);
    if try_exchange && exchange(staging, &target)? {
        failpoint::step("fsync-parent", out);
        sync_dir(out)?;
        failpoint::step("remove-old", staging);
        fs::remove_dir_all(staging)?;
        return sync_dir(out);
    }
    let aside = aside_dir(out, folder);
    if aside.exists() {
        fs::remove_dir_all(&aside)?;
    }
    failpoint::step("rename-aside", &target);
    fs::rename(&target, &aside)?;
    failpoint::step("rename", &target);
    fs::rename(staging, &target)?;
    failpoint::step("fsync-parent", out);
    sync_dir(out)?;
    failpoint::step("remove-old", &aside);
    fs::remove_dir_all(&aside)?;
    sync_dir(out)
}

/// Deletes `out/folder` (a checkpoint rotation removes) so that a crash never leaves it partial:
/// one rename to `.ckptspec-staging-old-<folder>` (a name [`remove_leftovers`] removes, and
/// that neither HF's `get_last_checkpoint` nor its rotation matches), then the removal of that
/// folder's files. A crash before the rename leaves the complete folder, after it a leftover.
/// (A plain `remove_dir_all` of `checkpoint-N` leaves, when killed, a `checkpoint-N` that has
/// lost some of its files: HF-named and incomplete.)
pub fn remove_checkpoint(out: &Path, folder: &str) -> io::Result<()> {
    let target = out.join(folder);
    let aside = aside_dir(out, folder);
    if aside.exists() {
        fs::remove_dir_all(&aside)?;
    }
    failpoint::step("remove-rename", &target);
    fs::rename(&target, &aside)?;
    failpoint::step("remove", &aside);
    fs::remove_dir_all(&aside)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn staging_names() {
        assert!(is_staging_name(".ckptspec-staging-checkpoint-12"));
        assert!(is_staging_name(".ckptspec-staging-old-checkpoint-3"));
        for n in [
            "checkpoint-12",
            "tmp-checkpoint-12",
            "ckptspec-staging-checkpoint-12",
            ".ckptspec-staging-checkpoint-",
            ".ckptspec-staging-checkpoint-12x",
            ".ckptspec-staging-notes",
            ".ckptspec-stagingcheckpoint-1",
        ] {
            assert!(!is_staging_name(n), "{n}");
        }
    }

    #[test]
    fn remove_checkpoint_leaves_no_partial_folder() {
        let tmp = tempfile::tempdir().unwrap();
        let out = tmp.path();
        fs::create_dir_all(out.join("checkpoint-2")).unwrap();
        fs::write(out.join("checkpoint-2/f"), "x").unwrap();
        fs::create_dir_all(out.join("checkpoint-4")).unwrap();
        // A leftover of an earlier killed removal goes too.
        fs::create_dir_all(aside_dir(out, "checkpoint-2")).unwrap();
        remove_checkpoint(out, "checkpoint-2").unwrap();
        let names: Vec<_> = fs::read_dir(out).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(names, ["checkpoint-4"]);
        assert!(remove_checkpoint(out, "checkpoint-9").is_err());
        assert!(is_staging_name(&aside_dir(out, "checkpoint-2").file_name().unwrap().to_string_lossy()));
    }

    #[test]
    fn publish_replaces_an_existing_folder() {
        let tmp = tempfile::tempdir().unwrap();
        let out = tmp.path();
        for (content, existing, swap) in [("one", false, true), ("two", true, true), ("three", true, false)] {
            let st = staging_dir(out, "checkpoint-4");
            fs::create_dir_all(&st).unwrap();
            fs::write(st.join("f"), content).unwrap();
            sync_tree(&st).unwrap();
            assert_eq!(out.join("checkpoint-4").exists(), existing);
            publish_with(out, &st, "checkpoint-4", swap).unwrap();
            assert_eq!(fs::read_to_string(out.join("checkpoint-4/f")).unwrap(), content);
            let names: Vec<_> = fs::read_dir(out).unwrap().map(|e| e.unwrap().file_name()).collect();
            assert_eq!(names, ["checkpoint-4"]);
        }
    }
}
