//! The Rust adapter of the runner contract (conformance/README.md): a scenario in, a run
//! directory out.
use crate::hf::profile::Profile;
use crate::trainer::{self, RunError, SaveMode};
use crate::world::scenario::Scenario;
use std::path::{Path, PathBuf};

/// Runs one scenario into `run_dir` (which is emptied first).
pub fn run_scenario(sc: &Scenario, profile: &Profile, run_dir: &Path) -> Result<(), RunError> {
    run_scenario_with(sc, profile, run_dir, SaveMode::HfCompatible)
}

/// [`run_scenario`] with the given [`SaveMode`].
pub fn run_scenario_with(sc: &Scenario, profile: &Profile, run_dir: &Path, mode: SaveMode) -> Result<(), RunError> {
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| RunError::Io { path, source }
    };
    if run_dir.exists() {
        std::fs::remove_dir_all(run_dir).map_err(io(run_dir))?;
    }
    std::fs::create_dir_all(run_dir).map_err(io(run_dir))?;
    trainer::run_with(sc, profile, run_dir, mode)
}

/// A scenario of a folder that could not be run: its name and why (the tool's own failure:
/// not implemented, or I/O). Its run directory is not left behind: a folder of run directories
/// holds complete ones only (each with its result.json).
#[derive(Debug)]
pub struct NotRun {
    pub name: String,
    pub error: RunError,
}

/// `ckptspec run PATH`: a file runs into `out`; a folder runs each scenario into `out/<name>`.
/// For a folder, a scenario that cannot be run does not stop the others: every scenario is run,
/// and those that could not be are returned, in order. A broken scenario file stops everything
/// before anything is written (the folder is loaded and checked first).
pub fn run_path(path: &Path, profile: &Profile, out: &Path) -> Result<Vec<NotRun>, RunError> {
    run_path_with(path, profile, out, SaveMode::HfCompatible)
}

/// [`run_path`] with the given [`SaveMode`].
pub fn run_path_with(path: &Path, profile: &Profile, out: &Path, mode: SaveMode) -> Result<Vec<NotRun>, RunError> {
    if !path.is_dir() {
        let sc = Scenario::load(path)?;
        return run_scenario_with(&sc, profile, out, mode).map(|()| vec![]);
    }
    let mut not_run = vec![];
    for (_, sc) in Scenario::load_dir(path)? {
        let dir = out.join(&sc.name);
        if let Err(error) = run_scenario_with(&sc, profile, &dir, mode) {
            // A partial run directory (no result.json) is no run directory of the contract.
            let _ = std::fs::remove_dir_all(&dir);
            not_run.push(NotRun { name: sc.name.clone(), error });
        }
    }
    Ok(not_run)
}

/// Where temporary run directories go (the conformance matrix, plans, inspect's replays):
/// `$TMPDIR` when set, else `/dev/shm` (tmpfs) when it is a writable folder, else the system's
/// temp folder. A run writes a few small files per checkpoint and deletes them soon after; on
/// ext4, creating files among many just-deleted inodes costs most of the time (measured: 98 s
/// for inspect's golden sweep in /tmp, 10 s in /dev/shm; the matrix 34-56 s in /tmp).
pub fn scratch_root() -> PathBuf {
    static BASE: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    BASE.get_or_init(|| {
        if std::env::var_os("TMPDIR").is_some() {
            return std::env::temp_dir();
        }
        let shm = Path::new("/dev/shm");
        let probe = shm.join(format!("ckptspec-probe-{}", std::process::id()));
        if shm.is_dir() && std::fs::create_dir(&probe).is_ok() {
            let _ = std::fs::remove_dir(&probe);
            shm.to_path_buf()
        } else {
            std::env::temp_dir()
        }
    })
    .clone()
}
