//! Cross-resume of every contract-v2 resume scenario (conformance/scenarios, field `resume`),
//! against the golden run directory of the profile (the real HF's first run, damage and resume):
//!
//! * **HF → Rust:** the real HF runs the first run and the damage (generator phase "first"),
//!   the Rust trainer resumes from HF's checkpoint (`trainer::Phase::Second`);
//! * **Rust → HF:** the Rust trainer runs the first run and the damage (`Phase::First`), the real
//!   HF resumes from our checkpoint (generator phase "second"): the proof that our checkpoint
//!   files are real to HF.
//!
//! A scenario whose first run or resume has a launch of several processes (contract v3 part 2)
//! crosses the same way, its HF side run as the generator runs it (`run_distributed` with a
//! phase: one torchrun per launch shape and phase, a phase of one process in the generator's own
//! process), result.json's `ranks` carried into `first`.
//!
//! Both must equal the golden folder (`diff::compare_run_dirs`: structure, JSON, tensors in the
//! float class, error). Profiles: `CKPTSPEC_REAL_PROFILES` (a comma list, or `all`; `./dev test`
//! passes the oldest and the newest, `./dev test-full` all); unset, the oldest and the newest.
//! Each needs its venv (`./dev venvs` makes them all).

use ckptspec::harness::diff;
use ckptspec::hf::profile::{self, Profile};
use ckptspec::trainer::{self, Phase, SaveMode};
use ckptspec::world::scenario::Scenario;
use std::path::{Path, PathBuf};
use std::time::Instant;

mod common;

fn profiles() -> Vec<&'static str> {
    match std::env::var("CKPTSPEC_REAL_PROFILES").ok().filter(|s| !s.trim().is_empty()) {
        None => vec![profile::oldest(), profile::newest()],
        Some(s) if s == "all" => profile::supported(),
        Some(s) => s.split(',').map(|v| profile::resolve(v.trim()).unwrap().profile()).collect(),
    }
}

/// Whether a phase of the scenario runs several processes (the generator's `is_distributed`).
fn launched(s: &Scenario) -> bool {
    s.first_launch().world_size() > 1 || s.second_launch().world_size() > 1
}

/// One python process runs, in order, every one-process job (scenario file, run dir, phase),
/// then the launched scenarios of the same phase together (run directories `<target>/<name>`),
/// as the generator runs its distributed scenarios after the others.
fn hf(py: &Path, root: &Path, jobs: &[(PathBuf, PathBuf, &str)], launches: &[PathBuf], target: &Path, phase: &str, work: &Path) {
    let mut list: Vec<serde_json::Value> =
        jobs.iter().map(|(sc, dir, phase)| serde_json::json!({"sc": sc, "dir": dir, "phase": phase})).collect();
    if !launches.is_empty() {
        list.push(serde_json::json!({"launch": launches, "target": target, "phase": phase}));
    }
    if !list.is_empty() {
        common::run_hf_jobs(py, root, &list, &work.join(format!("jobs-{phase}.json")));
    }
}

/// The `error` of a run directory's result.json (Null when it has none).
fn first_error(dir: &Path) -> serde_json::Value {
    let text = std::fs::read_to_string(dir.join("result.json")).unwrap();
    serde_json::from_str::<serde_json::Value>(&text).unwrap()["error"].clone()
}

#[test]
fn every_resume_scenario_cross_resumes_both_ways_for_the_real_profiles() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let all = Scenario::load_dir(&root.join("conformance/scenarios")).unwrap();
    let resumes: Vec<&(PathBuf, Scenario)> = all.iter().filter(|(_, s)| s.resume.is_some()).collect();
    let (launches, ones): (Vec<&(PathBuf, Scenario)>, Vec<&(PathBuf, Scenario)>) = resumes.iter().copied().partition(|(_, s)| launched(s));
    assert!(ones.len() >= 40, "the catalogue has {} resume scenarios of one process", ones.len());
    assert!(launches.len() >= 3, "the catalogue has {} resume scenarios with a launch of several processes", launches.len());
    // The profiles side by side (each mostly one python process and one Rust thread at a time).
    let one_profile = |v: &str| -> (Vec<String>, Vec<String>) {
        let mut bad = vec![];
        let mut said = vec![];
        let t0 = Instant::now();
        let py = common::hf_python(root, v);
        let profile = Profile::get(v).unwrap();
        let golden = root.join("golden").join(format!("hf-{v}"));
        let work = tempfile::tempdir_in(ckptspec::harness::runner::scratch_root()).unwrap();
        // `<work>/<who>/<name>`: the launched scenarios' HF side writes `<target>/<name>`.
        let side = |who: &str| work.path().join(who);
        let dir = |name: &str, who: &str| side(who).join(name);
        for who in ["hf-rs", "rs-hf"] {
            std::fs::create_dir_all(side(who)).unwrap();
        }
        // A launched scenario added to the catalogue before its golden exists is not crossed yet
        // (its count is printed); a one-process one must have its golden.
        let (with_golden, no_golden): (Vec<_>, Vec<_>) = launches.iter().copied().partition(|(_, s)| golden.join(&s.name).is_dir());
        // The runs whose first run fails end there (no resume): nothing to cross.
        let crossing: Vec<&(PathBuf, Scenario)> = ones
            .iter()
            .copied()
            .chain(with_golden.iter().copied())
            .filter(|(_, s)| {
                let r = ckptspec::formats::pyjson::read_file(golden.join(&s.name).join("result.json")).unwrap();
                r.get("first").is_some()
            })
            .collect();
        // HF's first runs; our first runs.
        let firsts: Vec<_> = crossing.iter().filter(|(_, s)| !launched(s)).map(|(p, s)| (p.clone(), dir(&s.name, "hf-rs"), "first")).collect();
        let firsts_l: Vec<PathBuf> = crossing.iter().filter(|(_, s)| launched(s)).map(|(p, _)| p.clone()).collect();
        let t = Instant::now();
        hf(&py, root, &firsts, &firsts_l, &side("hf-rs"), "first", work.path());
        let hf_first_s = t.elapsed().as_secs_f64();
        let t = Instant::now();
        let (mut ours, mut ours_l) = (vec![], vec![]);
        for (p, s) in &crossing {
            let d = dir(&s.name, "rs-hf");
            match trainer::run_phase(s, &profile, &d, SaveMode::HfCompatible, Phase::First) {
                // A first run that fails here, where HF's did not, leaves HF nothing to resume
                // (its diff with the golden is listed below).
                Ok(_) if first_error(&d) != serde_json::Value::Null => {}
                Ok(_) if launched(s) => ours_l.push(p.clone()),
                Ok(_) => ours.push((p.clone(), d, "second")),
                Err(e) => bad.push(format!("{v} {} Rust first run: {e}", s.name)),
            }
        }
        let rs_first_s = t.elapsed().as_secs_f64();
        // The other side resumes.
        let t = Instant::now();
        hf(&py, root, &ours, &ours_l, &side("rs-hf"), "second", work.path());
        let hf_second_s = t.elapsed().as_secs_f64();
        let t = Instant::now();
        for (_, s) in &crossing {
            if let Err(e) = trainer::run_phase(s, &profile, &dir(&s.name, "hf-rs"), SaveMode::HfCompatible, Phase::Second) {
                bad.push(format!("{v} {} HF->Rust: {e}", s.name));
            }
        }
        let rs_second_s = t.elapsed().as_secs_f64();
        let (mut agree, mut agree_l) = (0, 0);
        for (_, s) in &crossing {
            for who in ["hf-rs", "rs-hf"] {
                let (e, a) = (golden.join(&s.name), dir(&s.name, who));
                if !a.join("result.json").is_file() {
                    continue; // its failure is already listed
                }
                let rep = diff::compare_run_dirs(&e, &a).unwrap();
                if rep.is_clean() {
                    if launched(s) {
                        agree_l += 1;
                    } else {
                        agree += 1;
                    }
                } else {
                    bad.push(format!("{v} {} {who}:\n{}", s.name, rep.render(&e, &a, 5)));
                }
            }
        }
        let n_l = crossing.iter().filter(|(_, s)| launched(s)).count();
        let n_one = crossing.len() - n_l;
        said.push(format!(
            "{v}: {} resume scenarios of one process, {n_one} crossed (the others' first run fails), {agree} of {} cross-resumed run directories equal the golden",
            ones.len(),
            2 * n_one
        ));
        said.push(format!(
            "{v}: {} resume scenarios with a launch of several processes ({} without a golden folder yet: not crossed), {n_l} crossed, {agree_l} of {} cross-resumed run directories equal the golden",
            launches.len(),
            no_golden.len(),
            2 * n_l
        ));
        said.push(format!(
            "{v}: {:.0} s (HF first runs {hf_first_s:.0} s, Rust first runs {rs_first_s:.0} s, HF resumes {hf_second_s:.0} s, Rust resumes {rs_second_s:.0} s)",
            t0.elapsed().as_secs_f64()
        ));
        (bad, said)
    };
    let vs = profiles();
    let results: Vec<(Vec<String>, Vec<String>)> = std::thread::scope(|sc| {
        let handles: Vec<_> = vs.iter().map(|v| sc.spawn(|| one_profile(v))).collect();
        handles.into_iter().map(|h| h.join().expect("a profile's cross-resume thread")).collect()
    });
    let mut bad = vec![];
    for (b, said) in results {
        for line in said {
            println!("{line}");
        }
        bad.extend(b);
    }
    assert!(bad.is_empty(), "{} disagreeing:\n{}", bad.len(), bad.join("\n"));
}
