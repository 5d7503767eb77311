//! The main job: every scenario through the Rust trainer for every HF profile, diffed with the
//! golden run directories, printed as a matrix (scenario x version) and a summary line.
use crate::harness::diff;
use crate::harness::runner;
use crate::hf::profile::{self, Profile};
use crate::trainer::{RunError, SaveMode};
use crate::world::scenario::Scenario;
use std::path::{Path, PathBuf};

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
    crate::harness::par::map(scenarios.len() * versions.len(), jobs, |k| {
        let (i, j) = (k / versions.len(), k % versions.len());
        judge_with(scenarios[i], &versions[j], golden, work, mode)
    })
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

/// What atomic mode is judged on: the folders HF publishes. A save during which HF raised left a
/// checkpoint folder without `trainer_state.json` (4.36-4.38: `tmp-checkpoint-N`); atomic mode
/// never publishes such a save, it stays under its staging name, which HF never reads. So the
/// golden without those folders is compared with the run directory without ckptspec's staging
/// folders (both views are built beside the run directory, only where they differ from it).
///
/// A folder without trainer_state.json because the scenario's `resume.damage` removed it is
/// not a save HF left behind: both sides hold it, and it stays in the view.
fn atomic_view(sc: &Scenario, golden: &Path, run_dir: &Path, mode: SaveMode) -> Result<(PathBuf, PathBuf), String> {
    let keep = (golden.to_path_buf(), run_dir.to_path_buf());
    if mode != SaveMode::Atomic {
        return Ok(keep);
    }
    let folders = |root: &Path| -> Vec<(String, PathBuf)> {
        std::fs::read_dir(root.join("output"))
            .map(|rd| rd.flatten().filter(|e| e.path().is_dir()).map(|e| (e.file_name().to_string_lossy().into_owned(), e.path())).collect())
            .unwrap_or_default()
    };
    let partial: Vec<String> = folders(golden)
        .into_iter()
        .filter(|(n, p)| (n.starts_with("checkpoint-") || n.starts_with("tmp-checkpoint-")) && !p.join("trainer_state.json").is_file())
        .filter(|(n, _)| {
            let damaged = format!("output/{n}/trainer_state.json");
            !sc.resume.iter().flat_map(|r| &r.damage).any(|d| d.path() == damaged)
        })
        .map(|(n, _)| n)
        .collect();
    let staging: Vec<PathBuf> =
        folders(run_dir).into_iter().filter(|(n, _)| crate::save::atomic::is_staging_name(n)).map(|(_, p)| p).collect();
    if partial.is_empty() && staging.is_empty() {
        return Ok(keep);
    }
    let e = |x: std::io::Error| x.to_string();
    let view = run_dir.with_extension("golden-published");
    copy_tree(golden, &view, &|rel: &Path| partial.iter().any(|n| rel == Path::new("output").join(n))).map_err(e)?;
    let aside = run_dir.with_extension("staging");
    std::fs::create_dir_all(&aside).map_err(e)?;
    for s in staging {
        std::fs::rename(&s, aside.join(s.file_name().unwrap())).map_err(e)?;
    }
    Ok((view, run_dir.to_path_buf()))
}

/// Copies `from` to `to`, leaving out the paths (relative to `from`) that `skip` names.
fn copy_tree(from: &Path, to: &Path, skip: &dyn Fn(&Path) -> bool) -> std::io::Result<()> {
    fn go(root: &Path, dir: &Path, to: &Path, skip: &dyn Fn(&Path) -> bool) -> std::io::Result<()> {
        for e in std::fs::read_dir(dir)?.flatten() {
            let p = e.path();
            let rel = p.strip_prefix(root).unwrap_or(&p);
            if skip(rel) {
                continue;
            }
            let dst = to.join(rel);
            if p.is_dir() {
                std::fs::create_dir_all(&dst)?;
                go(root, &p, to, skip)?;
            } else {
                std::fs::copy(&p, &dst)?;
            }
        }
        Ok(())
    }
    std::fs::create_dir_all(to)?;
    go(from, from, to, skip)
}

/// Runs one scenario for one profile and judges it against its golden run directory.
pub fn judge(sc: &Scenario, profile: &Profile, golden: &Path, work: &Path) -> Cell {
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
        Ok(()) => match atomic_view(sc, &expected, &run_dir, mode).and_then(|(e, a)| diff::compare_run_dirs(&e, &a).map_err(|x| x.to_string())) {
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
    let work = runner::scratch_root().join(format!("ckptspec-conformance-{}", std::process::id()));
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
