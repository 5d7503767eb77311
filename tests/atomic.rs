//! Atomic mode (`--atomic`, `SaveMode::Atomic`): the run directories equal the HF-compatible
//! mode's (compare_run_dirs, plus the same checkpoint timeline), a killed run's staging leftover
//! is removed by the next save while a user's folder with a similar name stays, and no staging
//! folder remains after a run. (Kill tests and timings are elsewhere.)
use ckptspec::harness::diff::compare_run_dirs;
use ckptspec::hf::profile::Profile;
use ckptspec::trainer::{self, DiskEvent, SaveMode};
use ckptspec::world::scenario::Scenario;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn scenario(rel: &str) -> Scenario {
    Scenario::load(&root().join("conformance/scenarios").join(rel)).unwrap()
}

/// Every entry under `dir` whose name starts like a staging folder (ours or 4.36-4.38's).
fn staging_leftovers(dir: &Path) -> Vec<PathBuf> {
    let mut found = vec![];
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if name.starts_with(".ckptspec-staging") || name.starts_with("tmp-checkpoint") {
            found.push(e.path());
        }
        if e.file_type().unwrap().is_dir() {
            found.extend(staging_leftovers(&e.path()));
        }
    }
    found
}

fn checkpoints(out: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(out)
        .map(|rd| rd.flatten().map(|e| e.file_name().to_string_lossy().into_owned()).filter(|n| n.starts_with("checkpoint-")).collect())
        .unwrap_or_default();
    v.sort();
    v
}

fn saves(events: &[DiskEvent]) -> Vec<String> {
    events.iter().filter_map(|e| if let DiskEvent::Saved { folder, .. } = e { Some(folder.clone()) } else { None }).collect()
}

/// (a) + (c): for each scenario and release, the atomic run directory equals the HF-compatible
/// one, the executor saved and deleted the same folders, and no staging folder is left.
#[test]
fn atomic_run_dirs_equal_hf_compatible_ones() {
    let cases: &[(&str, &[&str])] = &[
        // plain saves; 4.36-4.38 stage in tmp-checkpoint-N in the HF-compatible mode
        ("save/final-step-not-multiple.json", &["4.31.0", "4.37.2", "5.24.0"]),
        // rotation (mtime order in 4.31.0) and the best kept by rotation
        ("rotation/rotation-limit-2.json", &["4.31.0", "4.37.2", "4.44.2", "5.24.0"]),
        ("rotation/rotation-limit-2-best-older.json", &["4.31.0", "4.38.2", "4.44.2", "5.24.0"]),
        // load_best_model_at_end + save_total_limit=1 end-of-train cleanup
        ("rotation/rotation-limit-1-load-best.json", &["4.31.0", "4.36.2", "4.44.2", "5.24.0"]),
        ("best/best-final-step-eval.json", &["4.36.2", "4.44.2", "5.24.0"]),
        // epoch strategy: 4.44.2 saves the last step twice
        ("save/save-strategy-epoch.json", &["4.41.2", "4.44.2", "5.24.0"]),
        ("rotation/rotation-epoch-limit-1.json", &["4.44.2", "5.24.0"]),
    ];
    let tmp = tempfile::tempdir().unwrap();
    let mut double_save_seen = false;
    for (rel, versions) in cases {
        let sc = scenario(rel);
        for v in *versions {
            let p = Profile::get(v).unwrap();
            let hf = tmp.path().join(format!("{v}-{}-hf", sc.name));
            let at = tmp.path().join(format!("{v}-{}-atomic", sc.name));
            for d in [&hf, &at] {
                std::fs::create_dir_all(d).unwrap();
            }
            let ev_hf = trainer::run_traced_with(&sc, &p, &hf, SaveMode::HfCompatible).unwrap();
            let ev_at = trainer::run_traced_with(&sc, &p, &at, SaveMode::Atomic).unwrap();
            let what = format!("{} @ {v}", sc.name);
            assert_eq!(ev_hf, ev_at, "{what}: the executor's saves and deletions differ");
            assert!(!saves(&ev_at).is_empty(), "{what}: the scenario saves nothing");
            let rep = compare_run_dirs(&hf, &at).unwrap();
            assert!(rep.is_clean(), "{what}:\n{}", rep.render(&hf, &at, 20));
            // Byte for byte: every file but torch zips (random .data/serialization_id) and
            // trainer_state.json (eval speeds differ between any two runs); compare_run_dirs
            // judged those above.
            for ck in checkpoints(&hf.join("output")) {
                for e in std::fs::read_dir(hf.join("output").join(&ck)).unwrap().flatten() {
                    let a = std::fs::read(e.path()).unwrap();
                    let b = std::fs::read(at.join("output").join(&ck).join(e.file_name())).unwrap();
                    if !a.starts_with(b"PK") && e.file_name() != "trainer_state.json" {
                        assert!(a == b, "{what}: {ck}/{:?} differs", e.file_name());
                    }
                }
            }
            assert_eq!(staging_leftovers(&at), Vec::<PathBuf>::new(), "{what}: staging folder left");
            let s = saves(&ev_at);
            if *v == "4.44.2" && sc.name == "save-strategy-epoch" {
                // The re-save of the same step went through publish's replace path.
                assert!(s.iter().enumerate().any(|(i, f)| s[..i].contains(f)), "{what}: no double save: {s:?}");
                double_save_seen = true;
            }
        }
    }
    assert!(double_save_seen);
}

/// (b): a leftover staging folder of a killed run goes at the next save; user folders with
/// similar names (and a leftover when nothing is saved) stay.
#[test]
fn leftover_staging_removed_on_next_save_user_folders_kept() {
    let ours = [".ckptspec-staging-checkpoint-7", ".ckptspec-staging-old-checkpoint-3", ".ckptspec-staging-checkpoint-2"];
    let users = ["ckptspec-staging-checkpoint-7", ".ckptspec-staging-notes", ".ckptspec-staging-checkpoint-7.bak", "x.ckptspec-staging-checkpoint-7"];
    let plant = |run_dir: &Path| {
        let out = run_dir.join("output");
        for n in ours.iter().chain(&users) {
            std::fs::create_dir_all(out.join(n)).unwrap();
            std::fs::write(out.join(n).join("model.safetensors"), b"partial").unwrap();
        }
        // A file with our name is not a folder: left alone.
        std::fs::write(out.join(".ckptspec-staging-checkpoint-9"), b"a user's file").unwrap();
    };
    let p = Profile::get("5.24.0").unwrap();
    let tmp = tempfile::tempdir().unwrap();

    let saving = scenario("save/final-step-not-multiple.json");
    let run_dir = tmp.path().join("saving");
    plant(&run_dir);
    let events = trainer::run_traced_with(&saving, &p, &run_dir, SaveMode::Atomic).unwrap();
    assert!(!saves(&events).is_empty());
    let out = run_dir.join("output");
    for n in ours {
        assert!(!out.join(n).exists(), "{n} not removed");
    }
    for n in users {
        assert_eq!(std::fs::read(out.join(n).join("model.safetensors")).unwrap(), b"partial", "{n} touched");
    }
    assert!(out.join(".ckptspec-staging-checkpoint-9").is_file());
    assert!(!checkpoints(&out).is_empty());

    // The same in the HF-compatible mode: nothing of ours is touched.
    let run_dir = tmp.path().join("hf");
    plant(&run_dir);
    trainer::run_traced_with(&saving, &p, &run_dir, SaveMode::HfCompatible).unwrap();
    for n in ours.iter().chain(&users) {
        assert!(run_dir.join("output").join(n).is_dir(), "HF-compatible mode removed {n}");
    }

    // No save, no cleanup.
    let run_dir = tmp.path().join("nosave");
    plant(&run_dir);
    let events = trainer::run_traced_with(&scenario("save/save-strategy-no.json"), &p, &run_dir, SaveMode::Atomic).unwrap();
    assert!(saves(&events).is_empty());
    assert!(run_dir.join("output").join(ours[0]).is_dir());
}

/// (c) through the command line: `ckptspec run --atomic` on a folder of scenarios leaves no
/// staging folder and writes what `ckptspec run` writes.
#[test]
fn cli_run_atomic() {
    let tmp = tempfile::tempdir().unwrap();
    let bin = env!("CARGO_BIN_EXE_ckptspec");
    let scen = root().join("conformance/scenarios/rotation");
    for (out, extra) in [("hf", None), ("atomic", Some("--atomic"))] {
        let mut cmd = std::process::Command::new(bin);
        cmd.args(["run"]).arg(&scen).args(["--hf", "4.37.2", "--out"]).arg(tmp.path().join(out));
        cmd.args(extra);
        let o = cmd.output().unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    }
    assert_eq!(staging_leftovers(&tmp.path().join("atomic")), Vec::<PathBuf>::new());
    for e in std::fs::read_dir(tmp.path().join("hf")).unwrap().flatten() {
        let (a, b) = (e.path(), tmp.path().join("atomic").join(e.file_name()));
        let rep = compare_run_dirs(&a, &b).unwrap();
        assert!(rep.is_clean(), "{:?}:\n{}", e.file_name(), rep.render(&a, &b, 20));
    }
}

/// Where HF raises in the middle of a save (KeyError for a missing metric, 4.31-4.46), it leaves
/// a partial `checkpoint-N` (4.36-4.38: `tmp-checkpoint-N`) without trainer_state.json, which
/// `get_last_checkpoint` would pick. Atomic mode never publishes it: the partial folder stays
/// under the staging name (removed by the next save). This is the one place the run directories
/// of the two modes differ (the 37 such cells of `ckptspec conformance --atomic`).
#[test]
fn failed_save_is_not_published() {
    let sc = scenario("best/best-missing-metric.json");
    let tmp = tempfile::tempdir().unwrap();
    for (v, hf_partial) in [("4.44.2", "checkpoint-2"), ("4.37.2", "tmp-checkpoint-2")] {
        let p = Profile::get(v).unwrap();
        let (hf, at) = (tmp.path().join(format!("{v}-hf")), tmp.path().join(format!("{v}-at")));
        trainer::run_traced_with(&sc, &p, &hf, SaveMode::HfCompatible).unwrap();
        trainer::run_traced_with(&sc, &p, &at, SaveMode::Atomic).unwrap();
        let partial = hf.join("output").join(hf_partial);
        assert!(partial.is_dir() && !partial.join("trainer_state.json").exists(), "{v}: HF-compatible mode changed");
        assert_eq!(checkpoints(&at.join("output")), Vec::<String>::new(), "{v}: a partial checkpoint was published");
        assert!(at.join("output/.ckptspec-staging-checkpoint-2").is_dir(), "{v}");
        assert!(!at.join("output").join(hf_partial).exists(), "{v}");
        // result.json's error (the KeyError) is the same.
        let err = |d: &Path| {
            let j: serde_json::Value = serde_json::from_slice(&std::fs::read(d.join("result.json")).unwrap()).unwrap();
            j["error"].clone()
        };
        assert!(err(&hf)["type"] == "KeyError", "{v}");
        assert_eq!(err(&hf), err(&at), "{v}");
    }
}
