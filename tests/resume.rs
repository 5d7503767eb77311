//! `train(resume_from_checkpoint=...)` against the real HF Trainer of each profile, and
//! cross-resume both ways: each case's first run and its resume run by HF, by the Rust trainer,
//! by HF then Rust (HF's checkpoint resumed by Rust) and by Rust then HF (our checkpoint resumed
//! by HF). All four run directories must be equal (`diff::compare_run_dirs`: structure, JSON,
//! tensors in the float class, error): the last one is the proof that our checkpoint files are
//! real to HF.
//!
//! Needs the newest profile's venv (`.venv`, which `./dev test` creates); skipped, saying so,
//! when `CKPTSPEC_REAL_PROFILES` names neither the newest profile nor `all` and it is set.

use ckptspec::harness::diff;
use ckptspec::hf::profile::{self, Profile};
use ckptspec::trainer::{self, ResumeFrom, SaveMode};
use ckptspec::world::scenario::Scenario;
use std::path::Path;

mod common;

/// A case: a scenario's first run, damage applied to its run directory, then the resume.
struct Case {
    scenario: &'static str,
    resume: &'static str,
    /// Paths relative to the run directory: removed (file or folder), or truncated to N bytes.
    damage: &'static [(&'static str, Option<u64>)],
}

const BASE: &str = r#""max_steps": 10, "save_steps": 3, "logging_steps": 1, "per_device_train_batch_size": 8"#;

/// The cases a profile runs: every release's, plus those of what only some releases have
/// (pytorch_model.bin where `save_safetensors` exists, GreedyLR where `SchedulerType` lists it).
fn cases(profile: &Profile) -> Vec<(String, Case)> {
    let sc = |name: &str, args: &str, extra: &str| -> String {
        format!(r#"{{"name": "{name}", "summary": "resume test", "args": {{{args}}}{extra}}}"#)
    };
    let plain = sc("plain", BASE, "");
    let ga = sc(
        "ga",
        r#""max_steps": 10, "save_steps": 2, "logging_steps": 1, "per_device_train_batch_size": 8, "gradient_accumulation_steps": 2"#,
        r#", "data": {"train": 60, "eval": 16}"#,
    );
    // 8 batches per epoch and GA 3: a last partial window in every epoch (4.52+ count it as an
    // update of its own, before they floor); resumes inside it and across epochs.
    let ga3 = sc(
        "ga3",
        r#""num_train_epochs": 2, "save_steps": 1, "logging_steps": 1, "per_device_train_batch_size": 8, "gradient_accumulation_steps": 3"#,
        r#", "data": {"train": 60, "eval": 16}"#,
    );
    let best = sc(
        "best",
        r#""max_steps": 10, "save_steps": 2, "eval_strategy": "steps", "eval_steps": 2, "logging_steps": 2, "load_best_model_at_end": true, "metric_for_best_model": "f1", "save_total_limit": 2"#,
        r#", "metrics": [{"f1": 0.5}, {"f1": 0.9}, {"f1": 0.6}, {"f1": 0.7}, {"f1": 0.65}]"#,
    );
    let early = sc(
        "early",
        r#""max_steps": 16, "save_steps": 2, "eval_strategy": "steps", "eval_steps": 2, "logging_steps": 2, "load_best_model_at_end": true, "metric_for_best_model": "f1""#,
        r#", "metrics": [{"f1": 0.5}, {"f1": 0.9}, {"f1": 0.6}, {"f1": 0.7}, {"f1": 0.65}, {"f1": 0.6}, {"f1": 0.6}, {"f1": 0.6}], "early_stopping": {"patience": 3}"#,
    );
    let epochs = sc("epochs", r#""num_train_epochs": 3, "save_strategy": "epoch", "logging_steps": 4, "per_device_train_batch_size": 16"#, "");
    // Three epochs of 8 steps with evaluations between (each one a draw from the global
    // generator): resumes inside epochs 1 and 2 and at the boundary of epoch 1.
    let epochs_mid = sc(
        "epochs-mid",
        r#""num_train_epochs": 3, "save_steps": 4, "eval_strategy": "steps", "eval_steps": 3, "logging_steps": 2, "per_device_train_batch_size": 8"#,
        "",
    );
    let nosave = sc("nosave", r#""max_steps": 4, "save_strategy": "no""#, "");
    let sgd = sc("sgd", r#""max_steps": 12, "save_steps": 5, "logging_steps": 1, "per_device_train_batch_size": 8, "optim": "sgd", "learning_rate": 0.05"#, "");
    // ReduceLROnPlateau with its defaults (patience 10, mode min) and a flat metric: the lr is
    // cut at the 11th evaluation, after the resume point, from the restored bad-epoch count.
    let flat: Vec<String> = (0..24).map(|_| r#"{"f1": 0.5}"#.to_string()).collect();
    let plateau_extra = format!(r#", "metrics": [{}]"#, flat.join(", "));
    let plateau = sc(
        "plateau",
        r#""max_steps": 16, "save_steps": 4, "eval_strategy": "steps", "eval_steps": 1, "logging_steps": 1, "lr_scheduler_type": "reduce_lr_on_plateau", "metric_for_best_model": "f1", "learning_rate": 0.01"#,
        &plateau_extra,
    );
    let bin = sc("bin", r#""max_steps": 6, "save_steps": 3, "logging_steps": 1, "per_device_train_batch_size": 8, "save_safetensors": false"#, "");
    let mut out = vec![
        (plain.clone(), Case { scenario: "plain", resume: "checkpoint-3", damage: &[] }),
        (plain.clone(), Case { scenario: "plain", resume: "checkpoint-9", damage: &[] }),
        (plain.clone(), Case { scenario: "plain", resume: "last", damage: &[] }),
        (plain.clone(), Case { scenario: "plain", resume: "last", damage: &[("output/checkpoint-10", None)] }),
        (plain.clone(), Case { scenario: "plain", resume: "checkpoint-6", damage: &[("output/checkpoint-6/trainer_state.json", None)] }),
        (plain.clone(), Case { scenario: "plain", resume: "checkpoint-6", damage: &[("output/checkpoint-6/model.safetensors", None)] }),
        (plain.clone(), Case { scenario: "plain", resume: "checkpoint-6", damage: &[("output/checkpoint-6/rng_state.pth", None)] }),
        (plain.clone(), Case { scenario: "plain", resume: "checkpoint-6", damage: &[("output/checkpoint-6/optimizer.pt", None)] }),
        (plain.clone(), Case { scenario: "plain", resume: "checkpoint-7", damage: &[] }),
        // Files cut short, as a run killed while writing them leaves them.
        (plain.clone(), Case { scenario: "plain", resume: "checkpoint-6", damage: &[("output/checkpoint-6/optimizer.pt", Some(100))] }),
        (plain.clone(), Case { scenario: "plain", resume: "checkpoint-6", damage: &[("output/checkpoint-6/optimizer.pt", Some(0))] }),
        (plain.clone(), Case { scenario: "plain", resume: "checkpoint-6", damage: &[("output/checkpoint-6/scheduler.pt", Some(100))] }),
        (plain.clone(), Case { scenario: "plain", resume: "checkpoint-6", damage: &[("output/checkpoint-6/rng_state.pth", Some(100))] }),
        (plain.clone(), Case { scenario: "plain", resume: "checkpoint-3", damage: &[("output/checkpoint-3/rng_state.pth", Some(0))] }),
        // Around the zip format's fixed records (damaged.rs, `eocd_search`): shorter than the
        // 22-byte end-of-central-directory record, exactly it, past one 4 KiB read back (a seek
        // before the file's start), and exactly one read back (the search reaches offset 0).
        (plain.clone(), Case { scenario: "plain", resume: "checkpoint-6", damage: &[("output/checkpoint-6/scheduler.pt", Some(10))] }),
        (plain.clone(), Case { scenario: "plain", resume: "checkpoint-6", damage: &[("output/checkpoint-6/optimizer.pt", Some(21))] }),
        (plain.clone(), Case { scenario: "plain", resume: "checkpoint-6", damage: &[("output/checkpoint-6/optimizer.pt", Some(22))] }),
        (plain.clone(), Case { scenario: "plain", resume: "checkpoint-3", damage: &[("output/checkpoint-3/rng_state.pth", Some(4097))] }),
        (plain.clone(), Case { scenario: "plain", resume: "checkpoint-3", damage: &[("output/checkpoint-3/rng_state.pth", Some(7000))] }),
        (plain.clone(), Case { scenario: "plain", resume: "checkpoint-3", damage: &[("output/checkpoint-3/rng_state.pth", Some(8189))] }),
        (plain.clone(), Case { scenario: "plain", resume: "checkpoint-6", damage: &[("output/checkpoint-6/model.safetensors", Some(100))] }),
        (plain.clone(), Case { scenario: "plain", resume: "checkpoint-6", damage: &[("output/checkpoint-6/model.safetensors", Some(4))] }),
        (plain.clone(), Case { scenario: "plain", resume: "checkpoint-6", damage: &[("output/checkpoint-6/trainer_state.json", Some(100))] }),
        (plain.clone(), Case { scenario: "plain", resume: "checkpoint-6", damage: &[("output/checkpoint-6/trainer_state.json", Some(0))] }),
        (ga.clone(), Case { scenario: "ga", resume: "checkpoint-4", damage: &[] }),
        (ga.clone(), Case { scenario: "ga", resume: "checkpoint-6", damage: &[] }),
        (ga3.clone(), Case { scenario: "ga3", resume: "checkpoint-1", damage: &[] }),
        (ga3.clone(), Case { scenario: "ga3", resume: "checkpoint-2", damage: &[] }),
        (ga3.clone(), Case { scenario: "ga3", resume: "checkpoint-4", damage: &[] }),
        (best.clone(), Case { scenario: "best", resume: "checkpoint-6", damage: &[] }),
        (best.clone(), Case { scenario: "best", resume: "last", damage: &[("output/checkpoint-4", None)] }),
        (early.clone(), Case { scenario: "early", resume: "checkpoint-8", damage: &[] }),
        (epochs.clone(), Case { scenario: "epochs", resume: "checkpoint-4", damage: &[] }),
        (epochs_mid.clone(), Case { scenario: "epochs-mid", resume: "checkpoint-12", damage: &[] }),
        (epochs_mid.clone(), Case { scenario: "epochs-mid", resume: "checkpoint-8", damage: &[] }),
        (epochs_mid.clone(), Case { scenario: "epochs-mid", resume: "checkpoint-20", damage: &[] }),
        (nosave.clone(), Case { scenario: "nosave", resume: "last", damage: &[] }),
        (sgd.clone(), Case { scenario: "sgd", resume: "checkpoint-5", damage: &[] }),
        (sgd.clone(), Case { scenario: "sgd", resume: "checkpoint-10", damage: &[] }),
        (plateau.clone(), Case { scenario: "plateau", resume: "checkpoint-8", damage: &[] }),
        (plateau.clone(), Case { scenario: "plateau", resume: "checkpoint-12", damage: &[] }),
    ];
    if profile.has_field("save_safetensors") {
        out.push((bin.clone(), Case { scenario: "bin", resume: "checkpoint-3", damage: &[] }));
        out.push((bin.clone(), Case { scenario: "bin", resume: "checkpoint-3", damage: &[("output/checkpoint-3/pytorch_model.bin", Some(100))] }));
        out.push((bin.clone(), Case { scenario: "bin", resume: "checkpoint-3", damage: &[("output/checkpoint-3/pytorch_model.bin", Some(0))] }));
    }
    if scheduler_types(profile.version).iter().any(|t| t == "greedy") {
        let greedy = sc(
            "greedy",
            r#""max_steps": 16, "save_steps": 4, "eval_strategy": "steps", "eval_steps": 1, "logging_steps": 1, "lr_scheduler_type": "greedy", "lr_scheduler_kwargs": {"patience": 1, "smooth": true, "window_size": 3}, "learning_rate": 0.01"#,
            "",
        );
        out.push((greedy.clone(), Case { scenario: "greedy", resume: "checkpoint-8", damage: &[] }));
    }
    out
}

/// The release's `SchedulerType` values, as its real HF listed them (golden/hf-V/TRAINING_ARGS.json).
fn scheduler_types(v: &str) -> Vec<String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(root.join(format!("golden/hf-{v}/TRAINING_ARGS.json"))).unwrap();
    let j: serde_json::Value = serde_json::from_str(&text).unwrap();
    j["enums"]["SchedulerType"].as_array().unwrap().iter().map(|x| x.as_str().unwrap().to_string()).collect()
}

fn damage(run_dir: &Path, d: &[(&str, Option<u64>)]) {
    for (rel, trunc) in d {
        let p = run_dir.join(rel);
        match trunc {
            // A file this release does not write (model.safetensors before 4.35's default) stays
            // absent.
            Some(n) if p.is_file() => std::fs::OpenOptions::new().write(true).open(&p).unwrap().set_len(*n).unwrap(),
            Some(_) => {}
            None if p.is_dir() => std::fs::remove_dir_all(&p).unwrap(),
            None if p.exists() => std::fs::remove_file(&p).unwrap(),
            None => {}
        }
    }
}

/// One python process runs every job (scenario, run dir, resume or null) in order.
fn hf(py: &Path, root: &Path, jobs: &[(String, std::path::PathBuf, Option<&str>)]) {
    let list: Vec<serde_json::Value> = jobs
        .iter()
        .map(|(sc, dir, resume)| serde_json::json!({"sc": serde_json::from_str::<serde_json::Value>(sc).unwrap(), "dir": dir, "resume": resume}))
        .collect();
    common::run_hf_jobs(py, root, &list, &jobs[0].1.parent().unwrap().join(format!("jobs-{}.json", jobs.len())));
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap().flatten() {
        let (src, dst) = (e.path(), to.join(e.file_name()));
        if src.is_dir() {
            copy_dir(&src, &dst);
        } else {
            std::fs::copy(&src, &dst).unwrap();
        }
    }
}

#[test]
fn resume_and_cross_resume_agree_with_real_hf() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    // CKPTSPEC_RESUME_HF=v1,v2 (or `all`); else `CKPTSPEC_REAL_PROFILES=all` (./dev test-full)
    // means all; else the newest profile.
    let chosen = std::env::var("CKPTSPEC_RESUME_HF")
        .ok()
        .filter(|c| !c.is_empty())
        .or_else(|| std::env::var("CKPTSPEC_REAL_PROFILES").ok().filter(|c| c == "all"))
        .unwrap_or_default();
    let versions: Vec<&str> = match chosen.as_str() {
        "" => vec![profile::newest()],
        "all" => profile::supported(),
        list => list.split(',').map(|v| profile::resolve(v.trim()).unwrap().profile()).collect(),
    };
    let start = std::time::Instant::now();
    for v in &versions {
        check_profile(root, v);
    }
    println!("{} profiles checked in {:.0} s", versions.len(), start.elapsed().as_secs_f64());
}

fn check_profile(root: &Path, v: &str) {
    let py = common::hf_python(root, v);
    let profile = Profile::get(v).unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let cases = cases(&profile);
    let dir = |k: usize, who: &str| tmp.path().join(format!("{k:02}-{}-{who}", cases[k].1.scenario));
    // First runs: HF's and ours.
    let first: Vec<_> = (0..cases.len()).map(|k| (cases[k].0.clone(), dir(k, "hf"), None)).collect();
    hf(&py, root, &first);
    for (k, (json, _)) in cases.iter().enumerate() {
        let sc: Scenario = serde_json::from_str(json).unwrap();
        ckptspec::harness::runner::run_scenario(&sc, &profile, &dir(k, "rs")).unwrap();
    }
    // Cross copies, then damage everywhere.
    for (k, (_, c)) in cases.iter().enumerate() {
        copy_dir(&dir(k, "hf"), &dir(k, "hf-rs"));
        copy_dir(&dir(k, "rs"), &dir(k, "rs-hf"));
        for who in ["hf", "rs", "hf-rs", "rs-hf"] {
            damage(&dir(k, who), c.damage);
        }
    }
    // Resumes: HF on its own and on ours; Rust on its own and on HF's.
    let second: Vec<_> = (0..cases.len())
        .flat_map(|k| [(cases[k].0.clone(), dir(k, "hf"), Some(cases[k].1.resume)), (cases[k].0.clone(), dir(k, "rs-hf"), Some(cases[k].1.resume))])
        .collect();
    hf(&py, root, &second);
    let mut bad = vec![];
    for (k, (json, c)) in cases.iter().enumerate() {
        let sc: Scenario = serde_json::from_str(json).unwrap();
        let from = match c.resume {
            "last" => ResumeFrom::Last,
            name => ResumeFrom::Checkpoint(name.to_string()),
        };
        for who in ["rs", "hf-rs"] {
            trainer::resume(&sc, &profile, &dir(k, who), SaveMode::HfCompatible, &from).unwrap_or_else(|e| panic!("{v} case {k}: {e}"));
        }
        let expected = dir(k, "hf");
        let err = ckptspec::formats::pyjson::read_file(expected.join("result.json")).unwrap();
        println!("{} resume {} damage {:?}: HF error {}", c.scenario, c.resume, c.damage, err.get("error").map(|e| format!("{e:?}")).unwrap_or_default());
        for who in ["rs", "hf-rs", "rs-hf"] {
            let rep = diff::compare_run_dirs(&expected, &dir(k, who)).unwrap();
            if !rep.is_clean() {
                bad.push(format!("case {k} ({} from {}), {who}:\n{}", c.scenario, c.resume, rep.render(&expected, &dir(k, who), 5)));
            }
        }
    }
    println!("{v}: resume cases: {}, run directories compared: {}, disagreeing: {}", cases.len(), 3 * cases.len(), bad.len());
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}
