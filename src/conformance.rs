//! The main job: every scenario through the Rust trainer for every HF profile, diffed with the
//! golden run directories, printed as a matrix (scenario x version) and a summary line.
use crate::diff;
use crate::profile::{self, Profile};
use crate::runner::{self, RunError};
use crate::scenario::Scenario;
use crate::trainer::SaveMode;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

pub struct Options {
    pub versions: Vec<String>,
    pub only: Vec<String>,
    pub scenarios: PathBuf,
    pub golden: PathBuf,
    /// Cells judged at once (default: the machine's cores).
    pub jobs: usize,
    /// How the Rust trainer writes checkpoints (`--atomic`: [`SaveMode::Atomic`]).
    pub mode: SaveMode,
}

impl Default for Options {
    fn default() -> Self {
        let jobs = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
        Options { versions: vec![], only: vec![], scenarios: "conformance/scenarios".into(), golden: "golden".into(), jobs, mode: SaveMode::HfCompatible }
    }
}

/// Judges every (scenario, profile) cell on `jobs` threads; cells in row-major order.
pub fn judge_all(scenarios: &[&Scenario], versions: &[Profile], golden: &Path, work: &Path, jobs: usize) -> Vec<Cell> {
    judge_all_with(scenarios, versions, golden, work, jobs, SaveMode::HfCompatible)
}

/// [`judge_all`] with the Rust trainer in the given [`SaveMode`].
pub fn judge_all_with(
    scenarios: &[&Scenario],
    versions: &[Profile],
    golden: &Path,
    work: &Path,
    jobs: usize,
    mode: SaveMode,
) -> Vec<Cell> {
    let n = scenarios.len() * versions.len();
    let next = AtomicUsize::new(0);
    let cells: Mutex<Vec<Option<Cell>>> = Mutex::new(vec![None; n]);
    std::thread::scope(|s| {
        for _ in 0..jobs.max(1) {
            s.spawn(|| loop {
                let k = next.fetch_add(1, Ordering::Relaxed);
                if k >= n {
                    break;
                }
                let (i, j) = (k / versions.len(), k % versions.len());
                let cell = judge_with(scenarios[i], &versions[j], golden, work, mode);
                cells.lock().expect("no poisoned cell")[k] = Some(cell);
            });
        }
    });
    cells.into_inner().expect("no poisoned cell").into_iter().map(|c| c.expect("every cell judged")).collect()
}

#[derive(Debug, Clone, PartialEq)]
pub enum Cell {
    Pass,
    Fail(String),
    NotImplemented(String),
    NoGolden,
}

#[derive(Debug, Default)]
pub struct Summary {
    pub passed: usize,
    pub failed: usize,
    pub not_implemented: usize,
    pub no_golden: usize,
}

/// Runs one scenario for one profile and judges it against its golden run directory.
pub fn judge(sc: &Scenario, profile: &Profile, golden: &std::path::Path, work: &std::path::Path) -> Cell {
    judge_with(sc, profile, golden, work, SaveMode::HfCompatible)
}

/// [`judge`] with the Rust trainer in the given [`SaveMode`].
pub fn judge_with(sc: &Scenario, profile: &Profile, golden: &Path, work: &Path, mode: SaveMode) -> Cell {
    let expected = golden.join(format!("hf-{}", profile.version)).join(&sc.name);
    if !expected.is_dir() {
        return Cell::NoGolden;
    }
    let run_dir = work.join(profile.version).join(&sc.name);
    match runner::run_scenario_with(sc, profile, &run_dir, mode) {
        Err(RunError::NotImplemented(what)) => Cell::NotImplemented(what),
        Err(e) => Cell::Fail(format!("tool error: {e}")),
        Ok(()) => match diff::compare_run_dirs(&expected, &run_dir) {
            Err(e) => Cell::Fail(format!("diff error: {e}")),
            Ok(rep) => match rep.first() {
                None => Cell::Pass,
                Some(d) => Cell::Fail(format!("{d} ({} difference(s))", rep.differences.len())),
            },
        },
    }
}

pub fn run(opts: &Options) -> Result<Summary, Box<dyn std::error::Error>> {
    let versions: Vec<Profile> = if opts.versions.is_empty() {
        profile::supported().iter().map(|v| Profile::get(v).unwrap()).collect()
    } else {
        opts.versions.iter().map(|v| Profile::get(v)).collect::<Result<_, _>>()?
    };
    let mut scenarios = Scenario::load_dir(&opts.scenarios)?;
    if !opts.only.is_empty() {
        for o in &opts.only {
            if !scenarios.iter().any(|(_, s)| &s.name == o) {
                return Err(format!("--only {o}: no such scenario under {}", opts.scenarios.display()).into());
            }
        }
        scenarios.retain(|(_, s)| opts.only.contains(&s.name));
    }
    let work = std::env::temp_dir().join(format!("ckptspec-conformance-{}", std::process::id()));
    // Every cell, on every core: cells share nothing but the golden folders they read.
    let cells = judge_all_with(&scenarios.iter().map(|(_, s)| s).collect::<Vec<_>>(), &versions, &opts.golden, &work, opts.jobs, opts.mode);
    let width = scenarios.iter().map(|(_, s)| s.name.len()).max().unwrap_or(8).max(8);
    // Up to 6 versions: one word per cell; more: one character per cell under vertical labels.
    let compact = versions.len() > 6;
    if compact {
        let labels: Vec<Vec<char>> = versions.iter().map(|p| p.version.chars().collect()).collect();
        let rows = labels.iter().map(Vec::len).max().unwrap_or(0);
        for r in 0..rows {
            let line: String = labels.iter().map(|l| format!(" {}", l.get(r).copied().unwrap_or(' '))).collect();
            println!("{:width$}{line}", if r == 0 { "scenario" } else { "" });
        }
    } else {
        print!("{:width$}", "scenario");
        for p in &versions {
            print!("  {:<10}", p.version);
        }
        println!();
    }
    let mut sum = Summary::default();
    let mut details = Vec::new();
    for (i, (_, sc)) in scenarios.iter().enumerate() {
        print!("{:width$}", sc.name);
        for (j, p) in versions.iter().enumerate() {
            let cell = &cells[i * versions.len() + j];
            let (tag, short) = match cell {
                Cell::Pass => {
                    sum.passed += 1;
                    ("pass", '.')
                }
                Cell::Fail(d) => {
                    sum.failed += 1;
                    details.push(format!("{} @ {}: {d}", sc.name, p.version));
                    ("FAIL", 'F')
                }
                Cell::NotImplemented(_) => {
                    sum.not_implemented += 1;
                    ("n/i", 'n')
                }
                Cell::NoGolden => {
                    sum.no_golden += 1;
                    ("no-golden", '-')
                }
            };
            if compact {
                print!(" {short}");
            } else {
                print!("  {tag:<10}");
            }
        }
        println!();
    }
    if compact {
        println!("(. pass, F FAIL, n not yet implemented, - no golden)");
    }
    let _ = std::fs::remove_dir_all(&work);
    if !details.is_empty() {
        println!("\nfirst difference of each failure:");
        for d in &details {
            println!("  {d}");
        }
    }
    println!(
        "\nconformance: {} passed, {} failed, {} not yet implemented, {} without golden ({} scenarios x {} versions)",
        sum.passed, sum.failed, sum.not_implemented, sum.no_golden, scenarios.len(), versions.len()
    );
    Ok(sum)
}
