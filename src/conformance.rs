//! The main job: every scenario through the Rust trainer for every HF profile, diffed with the
//! golden run directories, printed as a matrix (scenario x version) and a summary line.
use crate::diff;
use crate::profile::{Profile, SUPPORTED};
use crate::runner::{self, RunError};
use crate::scenario::Scenario;
use std::path::PathBuf;

pub struct Options {
    pub versions: Vec<String>,
    pub only: Vec<String>,
    pub scenarios: PathBuf,
    pub golden: PathBuf,
}

impl Default for Options {
    fn default() -> Self {
        Options { versions: vec![], only: vec![], scenarios: "conformance/scenarios".into(), golden: "golden".into() }
    }
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
    let expected = golden.join(format!("hf-{}", profile.version)).join(&sc.name);
    if !expected.is_dir() {
        return Cell::NoGolden;
    }
    let run_dir = work.join(profile.version).join(&sc.name);
    match runner::run_scenario(sc, profile, &run_dir) {
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
        SUPPORTED.iter().map(|v| Profile::get(v).unwrap()).collect()
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
    let width = scenarios.iter().map(|(_, s)| s.name.len()).max().unwrap_or(8).max(8);
    print!("{:width$}", "scenario");
    for p in &versions {
        print!("  {:<10}", p.version);
    }
    println!();
    let mut sum = Summary::default();
    let mut details = Vec::new();
    for (_, sc) in &scenarios {
        print!("{:width$}", sc.name);
        for p in &versions {
            let cell = judge(sc, p, &opts.golden, &work);
            let tag = match &cell {
                Cell::Pass => {
                    sum.passed += 1;
                    "pass"
                }
                Cell::Fail(d) => {
                    sum.failed += 1;
                    details.push(format!("{} @ {}: {d}", sc.name, p.version));
                    "FAIL"
                }
                Cell::NotImplemented(_) => {
                    sum.not_implemented += 1;
                    "n/i"
                }
                Cell::NoGolden => {
                    sum.no_golden += 1;
                    "no-golden"
                }
            };
            print!("  {tag:<10}");
        }
        println!();
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
