//! `conformance/CHANGES.md`: the history of HF's checkpoint behavior, built from the golden
//! folders alone (what the real HF of each release wrote), never from the profile table.
//!
//! For each scenario, adjacent releases are compared by their *outcome*: the files and folders
//! the run left ([`crate::harness::diff`]'s structure stage), HF's error, and every JSON value of
//! `result.json` and of each `trainer_state.json` (the JSON stage, with its tolerance classes).
//! Not part of the outcome: `config.json`'s `transformers_version` and `result.json`'s
//! `hf_version` (they name the writing release), and the bytes inside torch and safetensors files (their layout follows the torch
//! line, and `training_args.bin` gains fields in almost every release); the values HF computes
//! there also show in the logged losses and learning rates of `trainer_state.json`.

use crate::harness::diff::{self, Difference, Stage};
use crate::harness::par;
use crate::hf::version::Version;
use crate::world::scenario::Scenario;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

pub struct Options {
    pub golden: PathBuf,
    pub scenarios: PathBuf,
    pub out: PathBuf,
    pub check: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            golden: PathBuf::from("golden"),
            scenarios: PathBuf::from("conformance/scenarios"),
            out: PathBuf::from("conformance/CHANGES.md"),
            check: false,
        }
    }
}

/// The releases that have a golden folder, oldest first.
pub fn golden_releases(golden: &Path) -> std::io::Result<Vec<String>> {
    let mut vs: Vec<(Version, String)> = std::fs::read_dir(golden)?
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let v = name.strip_prefix("hf-")?.to_string();
            Some((Version::parse(&v)?, v))
        })
        .collect();
    vs.sort();
    Ok(vs.into_iter().map(|(_, v)| v).collect())
}

/// The differences of outcome between two run directories of one scenario.
pub fn outcome_differences(older: &Path, newer: &Path) -> Result<Vec<Difference>, diff::DiffError> {
    let rep = diff::compare_run_dirs(older, newer)?;
    Ok(rep
        .differences
        .into_iter()
        .filter(|d| match d.stage {
            Stage::Structure | Stage::Error => true,
            Stage::Json => !d.place.starts_with("result.json hf_version") && !is_config_version(&d.place),
            Stage::Tensor => false,
        })
        .collect())
}

/// `config.json`'s `transformers_version` (the diff only notes it, but a missing key is a
/// difference): the release that wrote the file, not a behavior.
fn is_config_version(place: &str) -> bool {
    let file = place.split(' ').next().unwrap_or(place);
    (file == "config.json" || file.ends_with("/config.json")) && place.ends_with("transformers_version")
}

/// One line for a difference between release `a` (older) and `b`, in the words of the diff
/// (expected = `a`, actual = `b`) turned into release names.
fn describe(d: &Difference, a: &str, b: &str) -> String {
    let w = &d.what;
    let what = if let Some(rest) = w.strip_prefix("missing (expected, not written):") {
        format!("gone in {b}:{rest}")
    } else if let Some(rest) = w.strip_prefix("unexpected (written, not expected):") {
        format!("new in {b}:{rest}")
    } else if let Some(k) = w.strip_prefix("unexpected key ") {
        format!("key {k} new in {b}")
    } else if let Some(k) = w.strip_suffix(" missing").and_then(|k| k.strip_prefix("key ")) {
        format!("key {k} gone in {b}")
    } else if let Some(rest) = w.strip_prefix("expected ") {
        match rest.split_once(", got ") {
            Some((x, y)) => format!("{a}: {x}; {b}: {y}"),
            None => format!("{a}: {rest}"),
        }
    } else {
        w.clone()
    };
    format!("[{}] {}: {what}", d.stage.label(), d.place).replace('\n', " ")
}

/// A scenario's history: runs of releases with one outcome, and at each boundary the first
/// difference (and how many there are).
#[derive(Debug, Clone)]
pub struct History {
    pub name: String,
    pub area: String,
    pub summary: String,
    /// (first release, last release) of each run, oldest first.
    pub runs: Vec<(String, String)>,
    /// At the start of every run but the first: the first difference and the count.
    pub boundaries: Vec<(String, usize)>,
}

/// Every scenario's history across the golden releases, the scenarios spread over the cores
/// (each compares its ~50 adjacent pairs of golden folders: the whole page reads every golden file).
pub fn histories(golden: &Path, scenarios: &Path) -> Result<Vec<History>, String> {
    let releases = golden_releases(golden).map_err(|e| format!("{}: {e}", golden.display()))?;
    let scs = Scenario::load_dir(scenarios).map_err(|e| e.to_string())?;
    let one = |(path, sc): &(PathBuf, Scenario)| -> Result<Option<History>, String> {
        let area = path
            .parent()
            .and_then(|p| p.file_name())
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let present: Vec<&String> = releases.iter().filter(|v| golden.join(format!("hf-{v}")).join(&sc.name).is_dir()).collect();
        let Some(first) = present.first() else { return Ok(None) };
        let mut h = History {
            name: sc.name.clone(),
            area,
            summary: sc.summary.clone(),
            runs: vec![((*first).clone(), (*first).clone())],
            boundaries: vec![],
        };
        for w in present.windows(2) {
            let (a, b) = (w[0], w[1]);
            let d = outcome_differences(
                &golden.join(format!("hf-{a}")).join(&sc.name),
                &golden.join(format!("hf-{b}")).join(&sc.name),
            )
            .map_err(|e| e.to_string())?;
            if d.is_empty() {
                h.runs.last_mut().expect("a run").1 = b.clone();
            } else {
                h.boundaries.push((describe(&d[0], a, b), d.len()));
                h.runs.push((b.clone(), b.clone()));
            }
        }
        Ok(Some(h))
    };
    let all = par::map(scs.len(), par::cores(), |k| one(&scs[k]));
    let mut out = vec![];
    for h in all {
        out.extend(h?);
    }
    Ok(out)
}

/// The page.
pub fn render(golden: &Path, scenarios: &Path) -> Result<String, String> {
    let releases = golden_releases(golden).map_err(|e| format!("{}: {e}", golden.display()))?;
    Ok(render_histories(&releases, &histories(golden, scenarios)?))
}

/// The page of histories already computed (the test that also checks them reads the goldens once).
pub fn render_histories(releases: &[String], hs: &[History]) -> String {
    let points: usize = hs.iter().map(|h| h.boundaries.len()).sum();
    let mut s = String::new();
    s.push_str("# HF Trainer checkpoint behavior, release by release\n\n");
    s.push_str("Generated by `ckptspec changes` from the golden folders alone (what the real HF Trainer of each\n");
    s.push_str("release wrote); do not edit. `./dev golden all` rewrites it, `./dev golden all --check` and\n");
    s.push_str("`cargo test` fail when it is stale. The outcome of a scenario is the files and folders it left,\n");
    s.push_str("HF's error, and every JSON value of `result.json`, each `trainer_state.json` and `config.json` (float\n");
    s.push_str("class for computed floats); the release names (`hf_version`, `transformers_version`) and the bytes of\n");
    s.push_str("torch and safetensors files are not part of it (src/harness/changes.rs).\n\n");
    s.push_str(&format!(
        "{} releases ({} to {}), {} scenarios, **{points} change points** (a scenario whose outcome differs\nbetween two adjacent releases).\n\n",
        releases.len(),
        releases.first().map(String::as_str).unwrap_or("-"),
        releases.last().map(String::as_str).unwrap_or("-"),
        hs.len()
    ));
    s.push_str("## Change points by release\n\n");
    for (i, v) in releases.iter().enumerate().skip(1) {
        let prev = &releases[i - 1];
        let names: Vec<&str> = hs
            .iter()
            .filter(|h| h.runs.iter().skip(1).any(|(start, _)| start == v))
            .map(|h| h.name.as_str())
            .collect();
        if !names.is_empty() {
            s.push_str(&format!("- **{v}** (from {prev}): {} scenario(s): {}\n", names.len(), names.join(", ")));
        }
    }
    s.push_str("\n## Scenarios\n");
    let mut area = String::new();
    for h in hs {
        if h.area != area {
            area = h.area.clone();
            s.push_str(&format!("\n### {area}\n"));
        }
        s.push_str(&format!("\n**{}**: {}\n", h.name, h.summary));
        if h.boundaries.is_empty() {
            s.push_str(&format!("- {} to {}: one outcome\n", h.runs[0].0, h.runs[0].1));
            continue;
        }
        for (k, (from, to)) in h.runs.iter().enumerate() {
            let span = if from == to { from.clone() } else { format!("{from} to {to}") };
            if k == 0 {
                s.push_str(&format!("- {span}\n"));
            } else {
                let (first, n) = &h.boundaries[k - 1];
                let more = if *n > 1 { format!(" (+{} more)", n - 1) } else { String::new() };
                s.push_str(&format!("- {span}: {first}{more}\n"));
            }
        }
    }
    s
}

/// `ckptspec changes [--check]`.
pub fn main(opts: &Options) -> Result<ExitCode, String> {
    let page = render(&opts.golden, &opts.scenarios)?;
    if opts.check {
        let current = std::fs::read_to_string(&opts.out).unwrap_or_default();
        if current != page {
            eprintln!("{} is stale: run `cargo run --release -- changes` (or `./dev golden all`) and commit it", opts.out.display());
            return Ok(ExitCode::from(1));
        }
        println!("{} is current", opts.out.display());
        return Ok(ExitCode::SUCCESS);
    }
    std::fs::write(&opts.out, &page).map_err(|e| format!("{}: {e}", opts.out.display()))?;
    let points = page.lines().find(|l| l.contains("change points")).unwrap_or("").to_string();
    println!("wrote {}: {points}", opts.out.display());
    Ok(ExitCode::SUCCESS)
}
