//! `ckptspec inspect`: no false alarm on any golden output folder of any profile, and every kind
//! of damage reported (naming the folder and file) with exit status 1.
//!
//! The golden folders are only read; damage is done to copies in temporary folders.
//! `CKPTSPEC_INSPECT_LIST=1 cargo test --release --test inspect -- --nocapture` lists every
//! golden folder the sweep did not replay, with the reason.

use ckptspec::answers::inspect;
use ckptspec::hf::profile;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

fn golden() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("golden")
}

fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_ckptspec")
}

/// What the golden run's own files say inspect must report when HF raised an error
/// (result.json) and the run stopped inside a save: the folder that save left behind. A
/// `checkpoint-N` without its `trainer_state.json` (the file a save writes last but for the RNG
/// state) is flagged (a problem: the resume picks it); 4.36-4.38's `tmp-checkpoint-N` is a
/// warning (no resume or rotation matches it). (flagged, warned); nothing otherwise.
fn expected_flags(run: &Path) -> (BTreeSet<String>, BTreeSet<String>) {
    // result.json is Python's JSON (NaN and Infinity appear): read it as Python does.
    let result = ckptspec::formats::pyjson::read_file(run.join("result.json")).unwrap();
    let (mut flagged, mut warned) = (BTreeSet::new(), BTreeSet::new());
    if matches!(result.get("error"), None | Some(ckptspec::formats::pyjson::PyJson::Null)) {
        return (flagged, warned);
    }
    for e in std::fs::read_dir(run.join("output")).unwrap().flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if !e.path().is_dir() {
            continue;
        }
        if name.starts_with("tmp-checkpoint-") {
            warned.insert(name);
        } else if name.starts_with("checkpoint-") && !e.path().join("trainer_state.json").exists() {
            flagged.insert(name);
        }
    }
    (flagged, warned)
}

#[derive(Default)]
struct Tally {
    folders: usize,
    checkpoints: usize,
    replayed: usize,
    crashed: usize,
    /// Of those, the runs whose save left a `tmp-checkpoint-N` (warned of, not flagged).
    crashed_warned: usize,
    /// Contract-v2 resume folders, and the damaged checkpoints in them checked as flagged.
    resumed: usize,
    damaged: usize,
    skipped: Vec<String>,
    /// Folders with no training_args.bin anywhere (HF raised before its first save, or only
    /// save_state ran): no replay can know their arguments.
    without_args: usize,
    failures: Vec<String>,
}

/// Whether a training_args.bin lies anywhere under `dir`.
fn holds_training_args(dir: &Path) -> bool {
    std::fs::read_dir(dir).into_iter().flatten().flatten().any(|e| {
        let p = e.path();
        if p.is_dir() {
            holds_training_args(&p)
        } else {
            p.file_name().is_some_and(|n| n == "training_args.bin")
        }
    })
}

/// Every scenario by name (the golden folders' scenarios).
fn scenarios() -> &'static std::collections::HashMap<String, ckptspec::world::scenario::Scenario> {
    static S: std::sync::OnceLock<std::collections::HashMap<String, ckptspec::world::scenario::Scenario>> = std::sync::OnceLock::new();
    S.get_or_init(|| {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("conformance/scenarios");
        ckptspec::world::scenario::Scenario::load_dir(&dir).unwrap().into_iter().map(|(_, s)| (s.name.clone(), s)).collect()
    })
}

/// A contract-v2 resume scenario's golden folder holds two Trainers' runs and the damage the
/// scenario did between them: the checkpoints whose damage is still there (a removed file
/// still missing, a truncated one still cut) must be flagged.
fn still_damaged(run: &Path, sc: &ckptspec::world::scenario::Scenario) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for d in sc.resume.iter().flat_map(|r| &r.damage) {
        let parts: Vec<&str> = d.path().split('/').collect();
        let [_, ck, _file] = parts[..] else { continue };
        let (p, folder) = (run.join(d.path()), run.join("output").join(ck));
        let still = match d {
            ckptspec::world::scenario::Damage::Remove { .. } => !p.exists(),
            ckptspec::world::scenario::Damage::Truncate { bytes, .. } => std::fs::metadata(&p).is_ok_and(|m| m.len() == *bytes),
        };
        if folder.is_dir() && still {
            out.insert(ck.to_string());
        }
    }
    out
}

fn sweep_profile(version: &str, t: &mut Tally) {
    let root = golden().join(format!("hf-{version}"));
    let mut runs: Vec<PathBuf> = std::fs::read_dir(&root).unwrap().flatten().map(|e| e.path()).filter(|p| p.join("output").is_dir()).collect();
    runs.sort();
    for run in runs {
        let name = format!("hf-{version}/{}", run.file_name().unwrap().to_string_lossy());
        let r = match inspect::inspect(&run) {
            Ok(r) => r,
            Err(e) => {
                t.failures.push(format!("{name}: tool error: {e}"));
                continue;
            }
        };
        if let Some(sc) = scenarios().get(&*run.file_name().unwrap().to_string_lossy()).filter(|s| s.resume.is_some()) {
            // Not a single run's folder: what must hold is that the damage left is reported.
            t.resumed += 1;
            let flagged: BTreeSet<String> = r.flagged_folders().into_iter().collect();
            let damaged = still_damaged(&run, sc);
            t.damaged += damaged.len();
            if !damaged.is_subset(&flagged) {
                t.failures.push(format!("{name}: damaged {damaged:?} not all flagged (flagged {flagged:?})"));
            }
            continue;
        }
        t.folders += 1;
        t.checkpoints += r.checkpoints.len();
        if !holds_training_args(&run) {
            t.without_args += 1;
        }
        if r.replay.compared {
            t.replayed += 1;
        } else {
            t.skipped.push(format!("{name}: {}", r.replay.skipped.clone().unwrap_or_default()));
        }
        if r.hf_version != version {
            t.failures.push(format!("{name}: version {} (from {})", r.hf_version, r.version_source));
        }
        let (expected, warned) = expected_flags(&run);
        if !expected.is_empty() || !warned.is_empty() {
            t.crashed += 1;
        }
        if !warned.is_empty() {
            t.crashed_warned += 1;
        }
        let leftovers: BTreeSet<String> = r.leftovers.iter().map(|l| l.name.clone()).collect();
        let warned_of = warned.iter().all(|n| r.warnings.iter().any(|w| w.starts_with(&format!("{n}: "))));
        if leftovers != warned || !warned_of {
            t.failures.push(format!("{name}: leftovers {leftovers:?}, expected {warned:?} each with a warning: {:#?}", r.warnings));
        }
        let flagged: BTreeSet<String> = r.flagged_folders().into_iter().collect();
        let unattached: Vec<&str> = r.problems.iter().filter(|p| p.folder.is_none()).map(|p| p.message.as_str()).collect();
        // On a folder a save left behind, the deviations are crash signs and leftovers only (the
        // replay, fed the run's own metrics, stops in the same error).
        let other_kinds: Vec<&str> = r.deviations.iter().filter(|d| d.kind != "crash" && d.kind != inspect::LEFTOVER).map(|d| d.message.as_str()).collect();
        if flagged != expected || !unattached.is_empty() || !other_kinds.is_empty() {
            let msgs: Vec<&str> = r.problems.iter().map(|p| p.message.as_str()).collect();
            t.failures.push(format!("{name}: flagged {flagged:?}, expected {expected:?}: {msgs:#?}"));
        }
    }
}

#[test]
fn no_false_alarms_on_any_golden_folder() {
    let start = std::time::Instant::now();
    let versions = profile::supported();
    let jobs = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(2).min(8);
    let chunks: Vec<Vec<&str>> = (0..jobs).map(|j| versions.iter().copied().skip(j).step_by(jobs).collect()).collect();
    let tallies: Vec<Tally> = std::thread::scope(|s| {
        let hs: Vec<_> = chunks
            .iter()
            .map(|vs| {
                s.spawn(move || {
                    let mut t = Tally::default();
                    for v in vs {
                        sweep_profile(v, &mut t);
                    }
                    t
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let mut all = Tally::default();
    for t in tallies {
        all.folders += t.folders;
        all.checkpoints += t.checkpoints;
        all.replayed += t.replayed;
        all.crashed += t.crashed;
        all.crashed_warned += t.crashed_warned;
        all.resumed += t.resumed;
        all.damaged += t.damaged;
        all.skipped.extend(t.skipped);
        all.without_args += t.without_args;
        all.failures.extend(t.failures);
    }
    println!(
        "inspect: {} golden output folders of {} profiles ({} checkpoints; {} stopped inside a save: {} flagged at the partial checkpoint-N, {} warned of the tmp-checkpoint-N; {} replayed and compared, {} not replayed) in {:.1?}",
        all.folders,
        versions.len(),
        all.checkpoints,
        all.crashed,
        all.crashed - all.crashed_warned,
        all.crashed_warned,
        all.replayed,
        all.skipped.len(),
        start.elapsed()
    );
    println!("  resume scenarios (two runs and the damage between them): {} folders, {} checkpoints still damaged, each checked as flagged", all.resumed, all.damaged);
    assert!(all.damaged > 0, "no damaged checkpoint survives in a resume golden: the damage check is never exercised");
    // Why folders were not replayed, by reason (the text before its first specific detail).
    let mut why: std::collections::BTreeMap<String, usize> = Default::default();
    for s in &all.skipped {
        let reason = s.split_once(": ").map(|(_, r)| r).unwrap_or(s);
        let key: String = reason.split([',', '(']).next().unwrap_or(reason).chars().filter(|c| !c.is_ascii_digit()).collect();
        *why.entry(key).or_default() += 1;
    }
    for (k, n) in &why {
        println!("  not replayed ({n}): {k}");
    }
    if std::env::var_os("CKPTSPEC_INSPECT_LIST").is_some() {
        for s in &all.skipped {
            println!("    {s}");
        }
    }
    assert!(all.folders > 3000, "only {} golden output folders found", all.folders);
    assert!(all.crashed > all.crashed_warned, "no golden run that stopped inside a save under checkpoint-N: the expectation is never exercised");
    assert!(all.crashed_warned > 0, "no golden run that left a tmp-checkpoint-N: the warning is never exercised");
    // The replay's comparison is part of "no false alarm" only where it ran: it must run on
    // nearly all folders that hold a training_args.bin (3840 of 3997 folders when written; the
    // rest lack a training_args.bin or log a NaN). The error scenarios of the arguments area
    // raise before any save: their folders hold no training_args.bin and are not counted.
    let replayable = all.folders - all.without_args;
    println!("  folders without any training_args.bin: {}", all.without_args);
    assert!(all.replayed * 100 >= replayable * 95, "only {} of {} folders with a training_args.bin replayed", all.replayed, replayable);
    assert!(all.failures.is_empty(), "{} of {} folders:\n{}", all.failures.len(), all.folders, all.failures.iter().take(30).cloned().collect::<Vec<_>>().join("\n"));
}

// ---------------------------------------------------------------------------------------------
// Damaged copies.

fn copy_dir(src: &Path, dst: &Path) {
    std::fs::create_dir_all(dst).unwrap();
    for e in std::fs::read_dir(src).unwrap().flatten() {
        let to = dst.join(e.file_name());
        if e.path().is_dir() {
            copy_dir(&e.path(), &to);
        } else {
            std::fs::copy(e.path(), &to).unwrap();
        }
    }
}

/// A copy of a golden run directory (result.json + output/) in a fresh temporary folder.
fn copy_run(version: &str, scenario: &str) -> (tempfile::TempDir, PathBuf) {
    let t = tempfile::tempdir().unwrap();
    let run = t.path().join(scenario);
    copy_dir(&golden().join(format!("hf-{version}")).join(scenario), &run);
    (t, run)
}

/// A copy of a golden run's output/ alone: a bare HF output folder.
fn copy_output(version: &str, scenario: &str) -> (tempfile::TempDir, PathBuf) {
    let t = tempfile::tempdir().unwrap();
    let out = t.path().join("output");
    copy_dir(&golden().join(format!("hf-{version}")).join(scenario).join("output"), &out);
    (t, out)
}

fn checkpoint_steps(out: &Path) -> Vec<u64> {
    let mut v: Vec<u64> = std::fs::read_dir(out)
        .unwrap()
        .flatten()
        .filter(|e| e.path().is_dir())
        .filter_map(|e| e.file_name().to_string_lossy().strip_prefix("checkpoint-").and_then(|s| s.parse().ok()))
        .collect();
    v.sort();
    v
}

/// `ckptspec inspect DIR --json`: (exit status, parsed report).
fn run_bin(dir: &Path) -> (i32, serde_json::Value) {
    let o = std::process::Command::new(bin()).args(["inspect", dir.to_str().unwrap(), "--json"]).output().unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout);
    let v = serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("not JSON ({e}): {stdout}\n{}", String::from_utf8_lossy(&o.stderr)));
    (o.status.code().unwrap_or(-1), v)
}

/// The library and the binary agree that `dir` has a problem naming `folder` (and `file`, when
/// given, in the same message); the binary exits 1. Returns the library's report.
fn assert_flagged(dir: &Path, folder: &str, file: Option<&str>) -> Report {
    let r = inspect::inspect(dir).unwrap();
    let hit = r.problems.iter().any(|p| p.folder.as_deref() == Some(folder) && file.is_none_or(|f| p.message.contains(f)));
    assert!(hit, "no problem naming {folder} {file:?}:\n{}", r.render());
    assert!(r.render().contains(folder), "{}", r.render());
    let (code, j) = run_bin(dir);
    assert_eq!(code, 1, "exit status for {}: {j:#}", dir.display());
    assert_eq!(j["ok"], false);
    let named = j["problems"].as_array().unwrap().iter().any(|p| p["folder"] == folder && file.is_none_or(|f| p["message"].as_str().unwrap().contains(f)));
    assert!(named, "{j:#}");
    r
}

use ckptspec::answers::inspect::Report;

#[test]
fn the_golden_copy_itself_is_clean() {
    // The damage tests start from these copies: undamaged, they pass (exit 0).
    for (v, s) in [("5.24.0", "rotation-limit-2"), ("4.31.0", "rotation-limit-2"), ("4.46.3", "rotation-limit-2-best-older")] {
        let (_t, run) = copy_run(v, s);
        let r = inspect::inspect(&run).unwrap();
        assert!(r.problems.is_empty(), "{}", r.render());
        assert!(r.replay.compared, "{}", r.render());
        let (code, j) = run_bin(&run);
        assert_eq!(code, 0, "{j:#}");
        for key in ["hf_version", "checkpoints", "best_checkpoint", "best_exists", "resume_pick", "resume_ok", "deviations"] {
            assert!(j.get(key).is_some(), "--json lacks {key}: {j:#}");
        }
        assert_eq!(j["hf_version"], v);
        let (_t, out) = copy_output(v, s);
        let r = inspect::inspect(&out).unwrap();
        assert!(r.problems.is_empty(), "bare copy: {}", r.render());
    }
}

#[test]
fn a_missing_trainer_state_is_reported_and_its_resume_differs_by_release() {
    for (v, fails) in [("5.24.0", true), ("4.36.2", true), ("4.35.2", false), ("4.31.0", false)] {
        let (_t, run) = copy_run(v, "rotation-limit-2");
        let out = run.join("output");
        let steps = checkpoint_steps(&out);
        let newest = format!("checkpoint-{}", steps.last().unwrap());
        std::fs::remove_file(out.join(&newest).join("trainer_state.json")).unwrap();
        let r = assert_flagged(&run, &newest, Some("trainer_state.json"));
        let c = r.checkpoints.iter().find(|c| c.name == newest).unwrap();
        assert!(!c.complete);
        assert_eq!(c.missing, vec!["trainer_state.json".to_string()]);
        assert_eq!(r.resume_pick.as_deref(), Some(newest.as_str()));
        // 4.36+ read trainer_state.json unconditionally on resume; before, a resume restarts at
        // step 0 (the resume table's requires_trainer_state).
        assert_eq!(!c.resume_fails.is_empty(), fails, "{v}: {}", r.render());
        assert_eq!(!r.resume_ok, fails, "{v}: {}", r.render());
        assert_eq!(c.resume_degraded.iter().any(|d| d.contains("step 0")), !fails, "{v}: {}", r.render());
    }
}

#[test]
fn a_truncated_optimizer_is_reported_and_breaks_the_resume() {
    let (_t, run) = copy_run("5.24.0", "rotation-limit-2");
    let out = run.join("output");
    let newest = format!("checkpoint-{}", checkpoint_steps(&out).last().unwrap());
    let f = std::fs::OpenOptions::new().write(true).open(out.join(&newest).join("optimizer.pt")).unwrap();
    f.set_len(100).unwrap();
    let r = assert_flagged(&run, &newest, Some("optimizer.pt"));
    assert!(!r.resume_ok);
    assert!(r.resume_reasons.iter().any(|x| x.contains("optimizer.pt")), "{:?}", r.resume_reasons);
}

/// Flips one bit in the middle of the record of `path` that `pick` chooses.
fn flip_bit_in_record(path: &Path, pick: impl Fn(&ckptspec::formats::torch_format::zip::ZipEntry) -> bool) -> String {
    let entries = ckptspec::formats::torch_format::zip::read_directory(&mut std::fs::File::open(path).unwrap()).unwrap();
    let rec = entries.iter().filter(|e| e.crc != 0 && e.size > 0 && pick(e)).max_by_key(|e| e.size).expect("a stored record with a CRC");
    let mut bytes = std::fs::read(path).unwrap();
    bytes[(rec.data_offset + rec.size / 2) as usize] ^= 0x10;
    std::fs::write(path, bytes).unwrap();
    rec.name.clone()
}

#[test]
fn a_flipped_bit_in_a_stored_record_is_a_crc_mismatch() {
    // In the pickle record of scheduler.pt, and in a tensor storage of optimizer.pt (whose
    // values would still look like floats).
    for (file, storage) in [("scheduler.pt", false), ("optimizer.pt", true)] {
        let (_t, run) = copy_run("4.46.3", "rotation-limit-2");
        let out = run.join("output");
        let first = format!("checkpoint-{}", checkpoint_steps(&out)[0]);
        let rec = flip_bit_in_record(&out.join(&first).join(file), |e| e.name.contains("/data/") == storage);
        let r = assert_flagged(&run, &first, Some(file));
        let c = r.checkpoints.iter().find(|c| c.name == first).unwrap();
        assert!(c.corrupt.iter().any(|(f, why)| f == file && why.contains("CRC32") && why.contains(&rec)), "{rec}: {:?}", c.corrupt);
        assert!(!c.resume_fails.is_empty());
    }
}

/// The first 5.24.0 golden run whose final best_model_checkpoint is (or is not) its newest
/// checkpoint, with at least two checkpoints.
fn run_with_best(newest: bool) -> (String, String, String) {
    let root = golden().join("hf-5.24.0");
    let mut runs: Vec<PathBuf> = std::fs::read_dir(&root).unwrap().flatten().map(|e| e.path()).filter(|p| p.join("output").is_dir()).collect();
    runs.sort();
    for run in runs {
        let r = ckptspec::formats::pyjson::read_file(run.join("result.json")).unwrap();
        // One train() call: a resume scenario's final best (the second run's, after
        // load_best_model_at_end) need not be the one its newest checkpoint recorded.
        if r.get("first").is_some() {
            continue;
        }
        let Some(ckptspec::formats::pyjson::PyJson::Str(b)) = r.get("final_state").and_then(|s| s.get("best_model_checkpoint")) else { continue };
        let best = b.rsplit('/').next().unwrap().to_string();
        let steps = checkpoint_steps(&run.join("output"));
        if steps.len() < 2 || !run.join("output").join(&best).is_dir() {
            continue;
        }
        let last = format!("checkpoint-{}", steps.last().unwrap());
        if (best == last) == newest {
            return (run.file_name().unwrap().to_string_lossy().into_owned(), best, last);
        }
    }
    panic!("no such golden run");
}

#[test]
fn removing_the_newest_checkpoint_that_the_state_references_is_reported() {
    let (scenario, best, newest) = run_with_best(true);
    assert_eq!(best, newest);
    let (_t, run) = copy_run("5.24.0", &scenario);
    std::fs::remove_dir_all(run.join("output").join(&newest)).unwrap();
    let r = assert_flagged(&run, &newest, None);
    assert_eq!(r.best_exists, Some(false), "{}", r.render());
    assert!(r.deviations.iter().any(|d| d.kind == "missing" && d.folder.as_deref() == Some(newest.as_str())), "{}", r.render());
    assert_ne!(r.resume_pick.as_deref(), Some(newest.as_str()));
}

#[test]
fn deleting_the_best_checkpoint_is_reported() {
    let (scenario, best, newest) = run_with_best(false);
    assert_ne!(best, newest);
    for bare in [false, true] {
        let (_t, dir) = if bare { copy_output("5.24.0", &scenario) } else { copy_run("5.24.0", &scenario) };
        let out = if bare { dir.clone() } else { dir.join("output") };
        std::fs::remove_dir_all(out.join(&best)).unwrap();
        let r = assert_flagged(&dir, &best, None);
        assert_eq!(r.best_checkpoint.as_deref(), Some(best.as_str()));
        assert_eq!(r.best_exists, Some(false));
        assert!(r.problems.iter().any(|p| p.message.contains("best_model_checkpoint")), "{}", r.render());
    }
}

#[test]
fn a_foreign_checkpoint_with_a_newer_mtime_is_reported() {
    // rotation-limit-2 keeps two checkpoints; a checkpoint of another scenario's run, at a step
    // this run never saves, is copied in and dated an hour later.
    let (_t, out) = copy_output("5.24.0", "rotation-limit-2");
    let ours = checkpoint_steps(&out);
    let donor_root = golden().join("hf-5.24.0");
    let mut donors: Vec<PathBuf> = std::fs::read_dir(&donor_root).unwrap().flatten().map(|e| e.path()).filter(|p| p.join("output").is_dir()).collect();
    donors.sort();
    for higher in [false, true] {
        let (donor, step) = donors
            .iter()
            .filter(|d| !d.ends_with("rotation-limit-2"))
            .find_map(|d| {
                checkpoint_steps(&d.join("output")).into_iter().find(|s| !ours.contains(s) && (*s > *ours.last().unwrap()) == higher && *s > 0).map(|s| (d.clone(), s))
            })
            .expect("a donor checkpoint");
        let (_t2, out2) = copy_output("5.24.0", "rotation-limit-2");
        let name = format!("checkpoint-{step}");
        copy_dir(&donor.join("output").join(&name), &out2.join(&name));
        let later = std::time::SystemTime::now() + std::time::Duration::from_secs(3600);
        std::fs::File::open(out2.join(&name)).unwrap().set_modified(later).unwrap();
        let r = assert_flagged(&out2, &name, None);
        assert!(r.deviations.iter().any(|d| d.kind == "two-runs" && d.folder.as_deref() == Some(name.as_str())), "{}", r.render());
        // The run's own arguments (not the foreign folder's) drive the replay.
        assert!(r.replay.compared, "{}", r.render());
        assert_eq!(r.args_source.as_deref(), Some(format!("checkpoint-{}/training_args.bin", ours.last().unwrap()).as_str()));
        if higher {
            // HF's resume picks the highest number: the foreign folder.
            assert_eq!(r.resume_pick.as_deref(), Some(name.as_str()));
            assert!(r.warnings.iter().any(|w| w.contains("another run")), "{}", r.render());
        }
    }
}

#[test]
fn a_crash_leftover_is_a_warning_and_a_partial_checkpoint_a_problem() {
    // A ckptspec staging folder (what a kill -9 in --atomic mode leaves) and HF 4.36-4.38's
    // tmp-checkpoint-N: no release's get_last_checkpoint or rotation matches either name, so
    // they break nothing: listed (deviations, warnings), exit 0.
    for (v, leftover) in [("5.24.0", ".ckptspec-staging-checkpoint-10"), ("5.24.0", ".ckptspec-staging-old-checkpoint-4"), ("4.37.2", "tmp-checkpoint-10")] {
        let (_t, out) = copy_output(v, "rotation-limit-2");
        let newest = format!("checkpoint-{}", checkpoint_steps(&out).last().unwrap());
        copy_dir(&out.join(&newest), &out.join(leftover));
        let r = inspect::inspect(&out).unwrap();
        assert!(r.problems.is_empty(), "{v} {leftover}: {}", r.render());
        assert!(r.leftovers.iter().any(|l| l.name == leftover), "{}", r.render());
        assert!(r.deviations.iter().any(|d| d.kind == inspect::LEFTOVER && d.folder.as_deref() == Some(leftover)), "{}", r.render());
        assert!(r.warnings.iter().any(|w| w.starts_with(leftover) && w.contains("breaks nothing")), "{}", r.render());
        assert_eq!(r.resume_pick.as_deref(), Some(newest.as_str()));
        assert!(r.render().contains("verdict: nothing here breaks"), "{}", r.render());
        let (code, j) = run_bin(&out);
        assert_eq!(code, 0, "{v} {leftover}: {j:#}");
        assert!(j["warnings"].as_array().unwrap().iter().any(|w| w.as_str().unwrap().starts_with(leftover)), "{j:#}");
    }
    // The same save cut short under its published name: a partial checkpoint-N is what the
    // resume picks, so it stays a problem.
    let (_t, out) = copy_output("5.24.0", "rotation-limit-2");
    let newest = format!("checkpoint-{}", checkpoint_steps(&out).last().unwrap());
    copy_dir(&out.join(&newest), &out.join(".ckptspec-staging-checkpoint-10"));
    copy_dir(&out.join(&newest), &out.join("checkpoint-10"));
    std::fs::remove_file(out.join("checkpoint-10").join("trainer_state.json")).unwrap();
    std::fs::remove_file(out.join("checkpoint-10").join("rng_state.pth")).unwrap();
    let r = assert_flagged(&out, "checkpoint-10", Some("trainer_state.json"));
    assert!(r.deviations.iter().any(|d| d.kind == "crash" && d.folder.as_deref() == Some("checkpoint-10")), "{}", r.render());
    assert!(!r.problems.iter().any(|p| p.folder.as_deref() == Some(".ckptspec-staging-checkpoint-10")), "{}", r.render());
    // HF 5.x's incomplete-checkpoint sentinel.
    let (_t, out) = copy_output("5.24.0", "rotation-limit-2");
    std::fs::write(out.join(&newest).join("checkpoint-is-incomplete.txt"), "").unwrap();
    assert_flagged(&out, &newest, Some("checkpoint-is-incomplete.txt"));
}

/// A torch file whose pickle is `posix.system("true")`: what `torch.save` writes for an object
/// whose `__reduce__` returns `(os.system, ("true",))` (GLOBAL `posix system`, REDUCE). The
/// restricted reader refuses the global; nothing runs, here or in the test.
fn write_code_pickle(path: &Path) {
    use ckptspec::formats::torch_format::{self, Construct, Global, Object, Value};
    let v = Value::Object(Box::new(Object {
        class: Global::new("posix", "system"),
        construct: Construct::Reduce,
        args: vec![Value::Str("true".into())],
        state: None,
        list_items: vec![],
        dict_items: vec![],
    }));
    torch_format::save(path, &v).unwrap();
}

#[test]
fn a_file_that_calls_code_is_a_problem_with_what_the_release_does_with_it() {
    // (profile, scenario, file replaced in the newest checkpoint, words the problem must hold,
    // whether that release's resume runs it (else it refuses it and the resume fails, or does
    // not read the file at all)).
    #[derive(PartialEq, Debug)]
    enum Resume {
        Runs,
        Fails,
        Unread,
    }
    let cases: &[(&str, &str, &str, &[&str], Resume)] = &[
        // The case: 4.51+ pass weights_only=True for optimizer.pt and scheduler.pt.
        ("4.52.4", "rotation-limit-2", "scheduler.pt", &["torch.load(scheduler.pt, weights_only=True)", "refuses it"], Resume::Fails),
        // 4.31-4.47 run on torch before 2.6, and pass no weights_only: pickle runs the global.
        ("4.46.3", "rotation-limit-2", "scheduler.pt", &["without weights_only", "torch 2.5.1", "defaults to False", "runs that code"], Resume::Runs),
        ("4.46.3", "rotation-limit-2", "optimizer.pt", &["_load_optimizer_and_scheduler", "runs that code"], Resume::Runs),
        // 4.48-4.50 pass none either, but torch 2.6 made weights_only=True the default.
        ("4.48.3", "rotation-limit-2", "optimizer.pt", &["without weights_only", "torch 2.6.0", "defaults to True", "refuses it"], Resume::Fails),
        // rng_state.pth: weights_only=True in 4.51 only, dropped in 4.52 (torch 2.7's default
        // refuses it all the same), back in 5.0.
        ("4.51.3", "rotation-limit-2", "rng_state.pth", &["_load_rng_state calls torch.load(rng_state.pth, weights_only=True)"], Resume::Fails),
        ("4.57.6", "rotation-limit-2", "rng_state.pth", &["_load_rng_state calls torch.load(rng_state.pth) without weights_only", "defaults to True"], Resume::Fails),
        ("4.31.0", "rotation-limit-2", "rng_state.pth", &["torch 2.1.2", "defaults to False", "runs that code"], Resume::Runs),
        ("5.24.0", "rotation-limit-2", "rng_state.pth", &["weights_only=True", "refuses it"], Resume::Fails),
        // 4.31's weights are pytorch_model.bin (save_safetensors off by default), loaded
        // without weights_only until 4.37.
        ("4.31.0", "rotation-limit-2", "pytorch_model.bin", &["_load_from_checkpoint", "defaults to False", "runs that code"], Resume::Runs),
        // training_args.bin: a resume never reads it; whoever loads it back runs it.
        ("5.24.0", "rotation-limit-2", "training_args.bin", &["a resume never reads training_args.bin", "weights_only=False"], Resume::Unread),
    ];
    for (v, scenario, file, words, resume) in cases {
        let (_t, run) = copy_run(v, scenario);
        let out = run.join("output");
        let newest = format!("checkpoint-{}", checkpoint_steps(&out).last().unwrap());
        let path = out.join(&newest).join(file);
        assert!(path.is_file(), "{v}: {newest} has no {file}");
        write_code_pickle(&path);
        let ctx = format!("{v} {newest}/{file}");
        let r = assert_flagged(&run, &newest, Some(file));
        let p = r.problems.iter().find(|p| p.file.as_deref() == Some(*file)).unwrap_or_else(|| panic!("{ctx}: {}", r.render()));
        assert!(
            p.message.contains("calls posix.system") && p.message.contains("code that would run when the file is loaded"),
            "{ctx}: {}",
            p.message
        );
        for w in *words {
            assert!(p.message.contains(w), "{ctx}: no {w:?} in {}", p.message);
        }
        let c = r.checkpoints.iter().find(|c| c.name == newest).unwrap();
        assert!(!c.complete, "{ctx}");
        assert_eq!(c.code.len(), 1, "{ctx}");
        assert_eq!(c.code[0].code.global, "posix.system");
        assert!(r.render().contains(&format!("{newest}: CALLS CODE ({file})")), "{ctx}: {}", r.render());
        match resume {
            Resume::Runs => {
                assert!(!r.resume_ok && r.resume_reasons.is_empty() && !r.resume_runs_code.is_empty(), "{ctx}: {}", r.render());
                assert!(r.problems.iter().any(|p| p.message.contains("and loading it runs code")), "{ctx}: {}", r.render());
                assert!(r.render().contains("a resume from it RUNS CODE"), "{ctx}: {}", r.render());
            }
            Resume::Fails => {
                assert!(!r.resume_ok && r.resume_reasons.iter().any(|x| x.contains("posix.system")), "{ctx}: {}", r.render());
                assert!(r.resume_runs_code.is_empty(), "{ctx}");
            }
            Resume::Unread => assert!(r.resume_ok, "{ctx}: {}", r.render()),
        }
        let (_, j) = run_bin(&run);
        let jc = j["checkpoints"].as_array().unwrap().iter().find(|c| c["name"] == newest.as_str()).unwrap();
        assert_eq!(jc["code"][0]["global"], "posix.system", "{ctx}: {jc:#}");
        assert_eq!(jc["code"][0]["on_resume"], match resume { Resume::Runs => "runs", Resume::Fails => "refused", Resume::Unread => "not loaded" }, "{ctx}");
    }
}

#[test]
fn code_in_one_state_file_alone_is_not_loaded() {
    // HF loads optimizer.pt and scheduler.pt only when both exist: with scheduler.pt gone, the
    // resume never unpickles the code in optimizer.pt (still a problem: the file is code).
    let (_t, run) = copy_run("4.46.3", "rotation-limit-2");
    let out = run.join("output");
    let newest = format!("checkpoint-{}", checkpoint_steps(&out).last().unwrap());
    write_code_pickle(&out.join(&newest).join("optimizer.pt"));
    std::fs::remove_file(out.join(&newest).join("scheduler.pt")).unwrap();
    let r = assert_flagged(&run, &newest, Some("optimizer.pt"));
    let p = r.problems.iter().find(|p| p.file.as_deref() == Some("optimizer.pt")).unwrap();
    assert!(p.message.contains("only when both exist"), "{}", p.message);
    assert!(r.resume_runs_code.is_empty(), "{}", r.render());
}

#[test]
fn training_args_bin_reads_as_the_scenario_arguments() {
    // read_training_args gives the keyword arguments a scenario passed (format v1 spelling) and
    // the profiles whose argument list the file has.
    let sc = ckptspec::world::scenario::Scenario::load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("conformance/scenarios/best/best-step-never-saved.json")).unwrap();
    for v in ["4.31.0", "4.40.2", "4.46.3", "5.24.0"] {
        let out = golden().join(format!("hf-{v}/best-step-never-saved/output"));
        let newest = format!("checkpoint-{}", checkpoint_steps(&out).last().unwrap());
        let a = inspect::read_training_args(&out.join(newest).join("training_args.bin")).unwrap();
        assert!(a.profiles.contains(&v), "{v}: fits {:?}", a.profiles);
        let p = profile::Profile::get(v).unwrap();
        let kw = a.kwargs(&p);
        for (k, want) in &sc.args {
            let got = kw.get(k).unwrap_or_else(|| panic!("{v}: {k} missing from {kw:?}"));
            assert_eq!(got.as_f64().map(|x| x.to_string()).unwrap_or(got.to_string()), want.as_f64().map(|x| x.to_string()).unwrap_or(want.to_string()), "{v}: {k}");
        }
        assert!(!kw.contains_key("output_dir") && !kw.contains_key("evaluation_strategy"), "{v}: {kw:?}");
    }
}

#[test]
fn without_config_json_the_version_comes_from_the_argument_list() {
    let (_t, out) = copy_output("4.46.3", "rotation-limit-2");
    for s in checkpoint_steps(&out) {
        std::fs::remove_file(out.join(format!("checkpoint-{s}")).join("config.json")).unwrap();
    }
    let r = inspect::inspect(&out).unwrap();
    assert!(r.version_source.contains("field set"), "{}", r.version_source);
    let a = inspect::read_training_args(&out.join(format!("checkpoint-{}", checkpoint_steps(&out)[0])).join("training_args.bin")).unwrap();
    assert!(a.profiles.contains(&"4.46.3") && a.profiles.contains(&r.profile), "{:?} {}", a.profiles, r.profile);
    // Every checkpoint lacks the config.json its save wrote? No: with none anywhere the model is
    // taken as not a PreTrainedModel, so nothing is missing.
    assert!(r.problems.is_empty(), "{}", r.render());
}

#[test]
fn a_folder_without_a_version_is_the_tools_own_error() {
    let t = tempfile::tempdir().unwrap();
    std::fs::create_dir(t.path().join("checkpoint-2")).unwrap();
    let e = inspect::inspect(t.path()).unwrap_err();
    assert!(e.contains("HF version"), "{e}");
    let o = std::process::Command::new(bin()).args(["inspect", t.path().to_str().unwrap()]).output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    let e = inspect::inspect(&t.path().join("nope")).unwrap_err();
    assert!(e.contains("not a folder"), "{e}");
}
