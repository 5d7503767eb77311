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

/// The output folders of a golden run directory: `output/`, or each node's `node-K/output`
/// (per-node disks, contract v3 part 2), with the prefix inspect names a folder of that disk
/// by in the run directory's report (node 0's, the report's own disk: none; another node's:
/// `node-K/output/`), and the node.
fn disks(run: &Path) -> Vec<(PathBuf, String, Option<usize>)> {
    if run.join("output").is_dir() {
        return vec![(run.join("output"), String::new(), None)];
    }
    let mut v: Vec<(PathBuf, String, Option<usize>)> = std::fs::read_dir(run)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let k: usize = e.file_name().to_string_lossy().strip_prefix("node-")?.parse().ok()?;
            let out = e.path().join("output");
            out.is_dir().then(|| (out, if k == 0 { String::new() } else { format!("node-{k}/output/") }, Some(k)))
        })
        .collect();
    v.sort_by_key(|(_, _, k)| *k);
    v
}

/// What the golden run's own files say inspect must report when HF raised an error
/// (result.json) and the run stopped inside a save: the folder that save left behind. A
/// `checkpoint-N` without its `trainer_state.json` (the file a save writes last but for the RNG
/// state) is flagged (a problem: the resume picks it); 4.36-4.38's `tmp-checkpoint-N` is a
/// warning (no resume or rotation matches it). (flagged, warned); nothing otherwise. Another
/// node's disk is judged by `every_nodes_disk_is_read_as_hf_writes_it` (a node whose processes
/// do not save holds rng files only, and 4.37 leaves them in tmp-checkpoint-N whatever happens).
fn expected_flags(run: &Path) -> (BTreeSet<String>, BTreeSet<String>) {
    // result.json is Python's JSON (NaN and Infinity appear): read it as Python does.
    let result = ckptspec::formats::pyjson::read_file(run.join("result.json")).unwrap();
    let (mut flagged, mut warned) = (BTreeSet::new(), BTreeSet::new());
    if matches!(result.get("error"), None | Some(ckptspec::formats::pyjson::PyJson::Null)) {
        return (flagged, warned);
    }
    for (out, _, node) in disks(run) {
        if node.is_some_and(|k| k > 0) {
            continue;
        }
        for e in std::fs::read_dir(out).unwrap().flatten() {
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
    /// Run directories with per-node disks (their other nodes' disks read too).
    per_node: usize,
    /// Folders with no training_args.bin anywhere (HF raised before its first save, or only
    /// save_state ran): no replay can know their arguments.
    without_args: usize,
    /// Scenarios whose folders callbacks, a signal or an earlier run shaped beyond the arguments.
    outside: usize,
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
        // `output/<ck>/<file>`, or `node-K/output/<ck>/<file>` on a per-node disk (named
        // `node-K/output/<ck>` in the report but for node 0's, the report's own disk).
        let (disk, ck) = match parts[..] {
            [_, ck, _file] => ("output".to_string(), ck),
            [node, _, ck, _file] => (format!("{node}/output"), ck),
            _ => continue,
        };
        let (p, folder) = (run.join(d.path()), run.join(&disk).join(ck));
        let name = if disk == "output" || disk == "node-0/output" { ck.to_string() } else { format!("{disk}/{ck}") };
        let still = match d {
            ckptspec::world::scenario::Damage::Remove { .. } => !p.exists(),
            ckptspec::world::scenario::Damage::Truncate { bytes, .. } => std::fs::metadata(&p).is_ok_and(|m| m.len() == *bytes),
            // Sharded weights are whole weights: nothing damaged.
            ckptspec::world::scenario::Damage::Reshard { .. } => false,
        };
        if folder.is_dir() && still {
            out.insert(name);
        }
    }
    out
}

fn sweep_profile(version: &str, t: &mut Tally) {
    let root = golden().join(format!("hf-{version}"));
    // Run directories with an output/, and those of launches with per-node disks.
    // (Every golden run directory has its result.json; one without is being written by the
    // generator right now, and is left out.)
    let mut runs: Vec<PathBuf> = std::fs::read_dir(&root).unwrap().flatten().map(|e| e.path()).filter(|p| !disks(p).is_empty() && p.join("result.json").is_file()).collect();
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
        if let Some(sc) = scenarios().get(&*run.file_name().unwrap().to_string_lossy()).filter(|s| !s.control.is_empty() || s.signal.is_some() || !s.earlier.is_empty()) {
            // Not what the arguments alone write: a callback's control flags or a signal saved
            // (contract v3 part 3), or an earlier run's folders were there (rotation counts them).
            // The replay knows the arguments only; what must hold is that each earlier
            // checkpoint-N folder still there is reported as not this run's.
            t.outside += 1;
            let flagged: BTreeSet<String> = r.flagged_folders().into_iter().collect();
            for e in &sc.earlier {
                let Some(folder) = e.path().strip_prefix("output/").and_then(|p| p.split('/').next()) else { continue };
                // Only checkpoint-<digits> is a checkpoint (HF's PREFIX_CHECKPOINT_DIR regex);
                // a checkpoint-best of another run is a folder like any other.
                let numbered = folder.strip_prefix("checkpoint-").is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()));
                if numbered && run.join("output").join(folder).is_dir() && !flagged.contains(folder) {
                    t.failures.push(format!("{name}: the earlier run's {folder} is not flagged (flagged {flagged:?})"));
                }
            }
            continue;
        }
        t.folders += 1;
        t.checkpoints += r.checkpoints.len() + r.nodes.iter().filter_map(|n| n.report.as_ref()).map(|o| o.checkpoints.len()).sum::<usize>();
        if !r.nodes.is_empty() {
            t.per_node += 1;
        }
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
        all.per_node += t.per_node;
        all.outside += t.outside;
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
    println!("  run directories with per-node disks (every node's output/ read): {}", all.per_node);
    println!("  shaped by callbacks, a signal or an earlier run (earlier checkpoints checked as flagged): {}", all.outside);
    assert!(all.per_node > 0, "no golden run directory with per-node disks: the node-by-node reading is never exercised");
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

// ---------------------------------------------------------------------------------------------
// Launches of several processes: the rng files a world size needs, and per-node disks. The
// expectations come from the scenario files (their `launch`), HF's own files in the golden
// folders and the goldens' result.json, never from inspect's own tables.

fn scenario(name: &str) -> &'static ckptspec::world::scenario::Scenario {
    scenarios().get(name).unwrap_or_else(|| panic!("no scenario {name}"))
}

/// The scenario's launch: (world size, processes per node, per-node disks).
fn launch_of(name: &str) -> (usize, usize, bool) {
    let l = scenario(name).launch.unwrap_or_default();
    (l.world_size(), l.nproc_per_node, l.disks == ckptspec::world::launch::Disks::PerNode)
}

fn rng_files_in(dir: &Path) -> BTreeSet<String> {
    std::fs::read_dir(dir).unwrap().flatten().map(|e| e.file_name().to_string_lossy().into_owned()).filter(|f| f.starts_with("rng_state")).collect()
}

/// Every profile's golden run directory of `scenario`, where it exists.
fn goldens_of(scenario: &str) -> Vec<(&'static str, PathBuf)> {
    profile::supported().iter().map(|v| (*v, golden().join(format!("hf-{v}")).join(scenario))).filter(|(_, p)| p.join("result.json").is_file()).collect()
}

#[test]
fn training_args_bin_records_the_launch_its_writer_was_part_of() {
    // distributed_state: the world size, and the writing process (rank 0 on a shared disk, a
    // node's first process with save_on_each_node on its own disk), in every profile.
    let mut read = 0;
    for scenario in ["dist-save-rotate", "dist-nodes-node-local", "dist-nodes-save-on-each-node", "rotation-limit-2"] {
        let (world, nproc, _) = launch_of(scenario);
        let use_cpu = scenario != "rotation-limit-2";
        for (v, run) in goldens_of(scenario) {
            for (out, _, node) in disks(&run) {
                for s in checkpoint_steps(&out) {
                    let p = out.join(format!("checkpoint-{s}")).join("training_args.bin");
                    if !p.is_file() {
                        continue;
                    }
                    let a = inspect::read_training_args(&p).unwrap();
                    let l = a.launch.clone().unwrap_or_else(|e| panic!("{v}: {e}")).unwrap_or_else(|| panic!("{v} {}: no launch record", p.display()));
                    let first_of_node = node.unwrap_or(0) * nproc;
                    assert_eq!((l.num_processes, l.process_index, l.local_process_index), (world, first_of_node, 0), "{v} {}", p.display());
                    assert_eq!(l.multi_cpu, use_cpu, "{v} {}: {:?}", p.display(), l.distributed_type);
                    assert_eq!(l.writer_on_other_node(), node.is_some_and(|k| k > 0), "{v} {}", p.display());
                    read += 1;
                }
            }
        }
    }
    assert!(read > 52 * 4, "only {read} training_args.bin read");
}

#[test]
fn a_broken_distributed_state_is_named_with_its_file() {
    use ckptspec::formats::torch_format::{self, Value};
    let (_t, out) = copy_output("5.24.0", "dist-save-rotate");
    let newest = format!("checkpoint-{}", checkpoint_steps(&out).last().unwrap());
    let p = out.join(&newest).join("training_args.bin");
    let mut v = torch_format::load(&p).unwrap();
    let Value::Object(o) = &mut v else { panic!("not an object") };
    let Some(Value::Dict(state)) = o.state.as_mut() else { panic!("no state") };
    let (_, ds) = state.iter_mut().find(|(k, _)| k.as_str() == Some("distributed_state")).expect("distributed_state");
    let Value::Object(ds) = ds else { panic!("distributed_state is not an object") };
    let Some(Value::Dict(d)) = ds.state.as_mut() else { panic!("no PartialState dict") };
    d.iter_mut().find(|(k, _)| k.as_str() == Some("num_processes")).unwrap().1 = Value::Str("two".into());
    torch_format::save(&p, &v).unwrap();
    let e = inspect::read_training_args(&p).unwrap().launch.unwrap_err();
    assert!(e.contains(&p.display().to_string()) && e.contains("num_processes"), "{e}");
    let r = inspect::inspect(&out).unwrap();
    assert!(r.notes.iter().chain(r.checkpoints.iter().flat_map(|c| &c.notes)).any(|n| n.contains("num_processes") && n.contains("training_args.bin")), "{}", r.render());
}

#[test]
fn a_missing_rank_file_is_reported_with_what_the_resume_does() {
    let scenario = "dist-save-rotate";
    let (world, _, _) = launch_of(scenario);
    assert_eq!(world, 2);
    for v in ["4.31.0", "4.46.3", "5.24.0"] {
        // The run directory (its output/ is every process's disk) and a bare copy of output/
        // (the disk's ranks then come from its other checkpoints and each writer's own rank).
        for bare in [false, true] {
            let (_t, dir) = if bare { copy_output(v, scenario) } else { copy_run(v, scenario) };
            let out = if bare { dir.clone() } else { dir.join("output") };
            let steps = checkpoint_steps(&out);
            assert!(steps.len() >= 2, "{v}: {steps:?}");
            let newest = format!("checkpoint-{}", steps.last().unwrap());
            assert_eq!(rng_files_in(&out.join(&newest)), (0..world).map(|r| format!("rng_state_{r}.pth")).collect(), "{v}: the golden's files");
            std::fs::remove_file(out.join(&newest).join("rng_state_1.pth")).unwrap();
            let ctx = format!("{v} bare={bare}");
            let r = assert_flagged(&dir, &newest, Some("rng_state_1.pth"));
            let c = r.checkpoints.iter().find(|c| c.name == newest).unwrap();
            assert_eq!(c.missing, vec!["rng_state_1.pth".to_string()], "{ctx}");
            assert!(!c.complete, "{ctx}");
            // HF logs it at info level and goes on: the resume does not fail.
            assert!(c.resume_fails.is_empty(), "{ctx}: {:?}", c.resume_fails);
            assert!(
                c.resume_degraded.iter().any(|d| d.contains("Didn't find an RNG file for process 1") && d.contains("info level")),
                "{ctx}: {:?}",
                c.resume_degraded
            );
            assert_eq!(r.resume_pick.as_deref(), Some(newest.as_str()));
            assert!(r.resume_reasons.is_empty(), "{ctx}: {:?}", r.resume_reasons);
            let as_written = r.resume_worlds.iter().find(|x| x.as_written).expect("a line for the launch as written");
            assert_eq!((as_written.processes, as_written.not_found.clone(), as_written.found.clone()), (world, vec!["rng_state_1.pth".to_string()], vec!["rng_state_0.pth".to_string()]), "{ctx}");
            // The other checkpoint is untouched and complete.
            let older = format!("checkpoint-{}", steps[0]);
            assert!(r.checkpoints.iter().find(|c| c.name == older).unwrap().complete, "{ctx}: {}", r.render());
        }
    }
}

#[test]
fn rank_files_missing_from_every_checkpoint_of_a_bare_folder_are_a_warning_of_a_shared_disk_a_problem() {
    // A bare folder holding rank 0's files only, in every checkpoint, is what node 0's own
    // disk holds with per-node disks: said, not counted. In the run directory (output/ is the
    // disk every process shares) the same folder misses rank 1's files: a problem at each.
    let scenario = "dist-save-rotate";
    for bare in [true, false] {
        let (_t, dir) = if bare { copy_output("5.24.0", scenario) } else { copy_run("5.24.0", scenario) };
        let out = if bare { dir.clone() } else { dir.join("output") };
        let steps = checkpoint_steps(&out);
        for s in &steps {
            std::fs::remove_file(out.join(format!("checkpoint-{s}")).join("rng_state_1.pth")).unwrap();
        }
        let r = inspect::inspect(&dir).unwrap();
        if bare {
            assert!(r.problems.is_empty(), "{}", r.render());
            assert!(r.warnings.iter().any(|w| w.contains("rank(s) 0 only") && w.contains("rng_state_1.pth")), "{}", r.render());
            assert_eq!(r.launch.as_ref().unwrap().ranks_here, Some(vec![0]));
        } else {
            for s in &steps {
                assert_flagged(&dir, &format!("checkpoint-{s}"), Some("rng_state_1.pth"));
            }
        }
    }
    // The writer's own rank belongs on its disk: rank 0's file gone from every checkpoint of a
    // bare folder is still missing (training_args.bin: written by process 0).
    let (_t, out) = copy_output("5.24.0", scenario);
    for s in checkpoint_steps(&out) {
        std::fs::remove_file(out.join(format!("checkpoint-{s}")).join("rng_state_0.pth")).unwrap();
    }
    let newest = format!("checkpoint-{}", checkpoint_steps(&out).last().unwrap());
    assert_flagged(&out, &newest, Some("rng_state_0.pth"));
}

#[test]
fn a_corrupt_rank_file_fails_the_resume_of_its_process() {
    let (_t, run) = copy_run("5.24.0", "dist-save-rotate");
    let out = run.join("output");
    let newest = format!("checkpoint-{}", checkpoint_steps(&out).last().unwrap());
    let f = std::fs::OpenOptions::new().write(true).open(out.join(&newest).join("rng_state_1.pth")).unwrap();
    f.set_len(64).unwrap();
    let r = assert_flagged(&run, &newest, Some("rng_state_1.pth"));
    assert!(!r.resume_ok);
    assert!(r.resume_reasons.iter().any(|x| x.contains("rng_state_1.pth") && x.contains("process 1")), "{:?}", r.resume_reasons);
}

#[test]
fn a_rank_file_of_no_process_of_the_world_is_a_note() {
    // rng_state_2.pth in a folder two processes wrote: no process of a resume with 2 reads it.
    let (_t, run) = copy_run("5.24.0", "dist-save-rotate");
    let out = run.join("output");
    let newest = format!("checkpoint-{}", checkpoint_steps(&out).last().unwrap());
    std::fs::copy(out.join(&newest).join("rng_state_1.pth"), out.join(&newest).join("rng_state_2.pth")).unwrap();
    let r = inspect::inspect(&run).unwrap();
    assert!(r.problems.is_empty(), "{}", r.render());
    let c = r.checkpoints.iter().find(|c| c.name == newest).unwrap();
    assert!(c.notes.iter().any(|n| n.contains("rng_state_2.pth") && n.contains("world of 2")), "{:?}", c.notes);
}

#[test]
fn a_resume_with_another_world_size_says_which_file_each_process_looks_for() {
    // (scenario, the first run's checkpoints kept: the second run's removed). The expectations
    // are the files in the golden folder; whether a resume with 2 processes raises first is the
    // golden dist-resume-1-to-2's own outcome in that release (its second run resumed with 2).
    for v in ["4.31.0", "4.46.3", "5.17.0", "5.24.0"] {
        let two_raises = {
            let r = ckptspec::formats::pyjson::read_file(golden().join(format!("hf-{v}/dist-resume-1-to-2/result.json"))).unwrap();
            match r.get("error").and_then(|e| e.get("message")) {
                Some(ckptspec::formats::pyjson::PyJson::Str(m)) => m.contains("restore data location"),
                _ => false,
            }
        };
        for scenario in ["dist-resume-2-to-1", "dist-resume-1-to-2"] {
            let first_world = launch_of(scenario).0;
            let (_t, out) = copy_output(v, scenario);
            // Keep the first run's checkpoints: those whose rng files are the first world's.
            let first_steps: Vec<u64> = checkpoint_steps(&out)
                .into_iter()
                .filter(|s| {
                    let f = rng_files_in(&out.join(format!("checkpoint-{s}")));
                    let keep = (first_world == 1) == f.contains("rng_state.pth");
                    if !keep {
                        std::fs::remove_dir_all(out.join(format!("checkpoint-{s}"))).unwrap();
                    }
                    keep
                })
                .collect();
            assert!(!first_steps.is_empty(), "{v} {scenario}");
            let newest = format!("checkpoint-{}", first_steps.last().unwrap());
            let held = rng_files_in(&out.join(&newest));
            let r = inspect::inspect(&out).unwrap();
            let ctx = format!("{v} {scenario}");
            assert!(r.problems.is_empty(), "{ctx}: {}", r.render());
            assert_eq!(r.resume_pick.as_deref(), Some(newest.as_str()), "{ctx}");
            let with = |m: usize| r.resume_worlds.iter().find(|x| x.processes == m).unwrap_or_else(|| panic!("{ctx}: no line for {m}: {:#?}", r.resume_worlds));
            // One process looks for rng_state.pth; two look for rng_state_0.pth and rng_state_1.pth.
            let one = with(1);
            assert_eq!(one.as_written, first_world == 1, "{ctx}");
            assert_eq!(one.found.iter().chain(&one.not_found).cloned().collect::<Vec<_>>(), vec!["rng_state.pth".to_string()], "{ctx}");
            assert_eq!(one.found.is_empty(), !held.contains("rng_state.pth"), "{ctx}");
            let two = with(2);
            let wanted: Vec<String> = (0..2).map(|r| format!("rng_state_{r}.pth")).collect();
            assert_eq!(two.found.iter().chain(&two.not_found).cloned().collect::<BTreeSet<_>>(), wanted.iter().cloned().collect::<BTreeSet<_>>(), "{ctx}");
            assert_eq!(two.not_found.iter().cloned().collect::<BTreeSet<_>>(), wanted.iter().filter(|f| !held.contains(*f)).cloned().collect::<BTreeSet<_>>(), "{ctx}");
            if !two.not_found.is_empty() {
                assert!(two.text.contains("Didn't find an RNG file for process") && two.text.contains("info level"), "{ctx}: {}", two.text);
            }
            assert_eq!(two.raises.is_some(), two_raises, "{ctx}: {:?}", two.raises);
            assert!(one.raises.is_none(), "{ctx}");
            if first_world == 2 {
                let three = with(3);
                assert_eq!(three.not_found, vec!["rng_state_2.pth".to_string()], "{ctx}");
            }
        }
    }
}

/// Every per-node golden run directory: its nodes' disks.
fn per_node_goldens() -> Vec<(&'static str, String, PathBuf)> {
    let mut v = vec![];
    for version in profile::supported() {
        let root = golden().join(format!("hf-{version}"));
        for e in std::fs::read_dir(&root).unwrap().flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if e.path().join("node-0").is_dir() && e.path().join("result.json").is_file() && scenarios().contains_key(&name) && scenario(&name).resume.is_none() {
                v.push((version, name, e.path()));
            }
        }
    }
    v.sort();
    v
}

#[test]
fn every_nodes_disk_is_read_as_hf_writes_it() {
    // Per-node disks: node 0's disk holds the checkpoints, another node's holds what HF writes
    // there: with save_on_each_node=False its processes' rng files only (4.37 leaves them in
    // tmp-checkpoint-N, 4.38 deletes them), with save_on_each_node=True a checkpoint of its own
    // (from 5.15 without the weights). None of that is a problem; a resume of such a node
    // fails where its checkpoint has no weights, said with the verdict.
    let runs = per_node_goldens();
    assert!(runs.len() >= 2 * 52, "only {} per-node golden runs", runs.len());
    let mut node_disks = 0;
    for (v, name, run) in runs {
        let ctx = format!("hf-{v}/{name}");
        let (world, nproc, per_node) = launch_of(&name);
        assert!(per_node, "{ctx}");
        let save_on_each_node = scenario(&name).args.get("save_on_each_node").and_then(|x| x.as_bool()).unwrap_or(false);
        let result = ckptspec::formats::pyjson::read_file(run.join("result.json")).unwrap();
        let failed = !matches!(result.get("error"), None | Some(ckptspec::formats::pyjson::PyJson::Null));
        // The run directory, node 1's folder, and node 1's output/ folder: each reads every disk.
        for (pointed, primary) in [(run.clone(), 0), (run.join("node-1"), 1), (run.join("node-1").join("output"), 1)] {
            if !pointed.is_dir() {
                continue;
            }
            let empty = std::fs::read_dir(run.join(format!("node-{primary}/output"))).map_or(true, |mut d| d.next().is_none());
            if empty {
                // 4.38 deletes the staging folders of a node that does not save: pointed at,
                // its disk is the tool's error, saying so.
                let e = inspect::inspect(&pointed).unwrap_err();
                assert!(e.contains("holds nothing"), "{ctx}: {e}");
                continue;
            }
            let r = inspect::inspect(&pointed).unwrap_or_else(|e| panic!("{ctx}: {e}"));
            assert_eq!(r.node, Some(primary), "{ctx} {}", pointed.display());
            if !failed {
                assert!(r.problems.is_empty(), "{ctx} {}: {}", pointed.display(), r.render());
            }
            let mut reports: Vec<(usize, &Report)> = vec![(primary, &r)];
            reports.extend(r.nodes.iter().filter_map(|n| n.report.as_deref().map(|o| (n.node, o))));
            let present: BTreeSet<usize> = disks(&run).into_iter().filter_map(|(o, _, k)| (std::fs::read_dir(&o).unwrap().count() > 0).then_some(k.unwrap())).collect();
            assert_eq!(reports.iter().map(|(k, _)| *k).collect::<BTreeSet<_>>(), present, "{ctx}: every node's disk with files is read");
            for (k, o) in reports {
                node_disks += 1;
                let ranks: Vec<usize> = (k * nproc..(k + 1) * nproc).collect();
                let l = o.launch.as_ref().unwrap_or_else(|| panic!("{ctx} node {k}: no launch"));
                assert_eq!((l.record.num_processes, l.ranks_here.clone()), (world, Some(ranks.clone())), "{ctx} node {k}");
                let out = run.join(format!("node-{k}")).join("output");
                for c in &o.checkpoints {
                    let files = rng_files_in(&out.join(&c.name));
                    assert_eq!(files, ranks.iter().map(|r| format!("rng_state_{r}.pth")).collect(), "{ctx} node {k} {}: the golden's files", c.name);
                    if !failed {
                        assert!(c.complete, "{ctx} node {k} {}: {}", c.name, o.render());
                    }
                    // A resume there fails by HF's design exactly where the golden folder has
                    // no weights file.
                    let weights = std::fs::read_dir(out.join(&c.name)).unwrap().flatten().any(|e| {
                        let f = e.file_name().to_string_lossy().into_owned();
                        f.ends_with(".safetensors") || f == "pytorch_model.bin"
                    });
                    assert_eq!(c.resume_by_design.is_empty(), weights, "{ctx} node {k} {}", c.name);
                }
                if k > 0 && !save_on_each_node {
                    // Its folders hold rng files only, and never a resumable checkpoint.
                    for l in &o.leftovers {
                        assert!(l.name.starts_with("tmp-checkpoint-") && l.what.contains("Not an interrupted save"), "{ctx} node {k}: {}", l.what);
                        assert_eq!(rng_files_in(&out.join(&l.name)), ranks.iter().map(|r| format!("rng_state_{r}.pth")).collect(), "{ctx}");
                    }
                    assert!(!o.resume_ok, "{ctx} node {k}");
                }
            }
            // Whatever keeps a node from resuming is said with the verdict.
            let node1 = run.join("node-1").join("output");
            let node1_resumes = checkpoint_steps_if(&node1).last().is_some_and(|s| {
                std::fs::read_dir(node1.join(format!("checkpoint-{s}"))).unwrap().flatten().any(|e| {
                    let f = e.file_name().to_string_lossy().into_owned();
                    f.ends_with(".safetensors") || f == "pytorch_model.bin"
                })
            });
            // git keeps no empty folder: a node-1/output/ the run left empty is absent in a
            // checkout, and there is then no node-1 disk to speak of.
            if !failed && run.join("node-1").is_dir() {
                // Node 1's own failure: said of node 1 ("node 1: ..." from another node's report,
                // unprefixed in its own), for its pick without weights or its missing pick.
                let about_node1 = |x: &String| {
                    x.contains("node 1's disk has no checkpoint-N")
                        || x.contains("no weights file") && (if primary == 1 { !x.starts_with("node ") } else { x.starts_with("node 1: ") })
                };
                assert_eq!(r.resume_by_design.iter().any(about_node1), !node1_resumes, "{ctx} {}: {:#?}", pointed.display(), r.resume_by_design);
                assert_eq!(r.render().contains("a resume fails:"), !r.resume_by_design.is_empty(), "{ctx}");
            }
        }
    }
    assert!(node_disks > 0);
}

fn checkpoint_steps_if(out: &Path) -> Vec<u64> {
    if out.is_dir() { checkpoint_steps(out) } else { vec![] }
}

#[test]
fn damage_on_another_nodes_disk_is_named_by_its_node() {
    // save_on_each_node=False: node 1's folders hold rng_state_1.pth; removed, it is missing.
    let (_t, run) = copy_run("5.24.0", "dist-nodes-node-local");
    let node1 = run.join("node-1").join("output");
    let newest = format!("checkpoint-{}", checkpoint_steps(&node1).last().unwrap());
    std::fs::remove_file(node1.join(&newest).join("rng_state_1.pth")).unwrap();
    let r = assert_flagged(&run, &format!("node-1/output/{newest}"), Some("rng_state_1.pth"));
    assert!(r.problems.iter().any(|p| p.message.starts_with("node 1: ")), "{}", r.render());
    // The same damage seen from node 1's own folder: its own checkpoint.
    assert_flagged(&node1, &newest, Some("rng_state_1.pth"));
    // save_on_each_node=True: node 1's first process saves; its optimizer.pt removed is missing.
    for v in ["4.40.2", "5.24.0"] {
        let (_t, run) = copy_run(v, "dist-nodes-save-on-each-node");
        let node1 = run.join("node-1").join("output");
        let newest = format!("checkpoint-{}", checkpoint_steps(&node1).last().unwrap());
        std::fs::remove_file(node1.join(&newest).join("optimizer.pt")).unwrap();
        assert_flagged(&run, &format!("node-1/output/{newest}"), Some("optimizer.pt"));
    }
}

#[test]
fn a_nodes_disk_copied_out_of_its_run_directory() {
    // Without the run directory, node 1's disk of save_on_each_node=False names no version:
    // the tool's error, naming the folder and what it holds.
    let t = tempfile::tempdir().unwrap();
    let out = t.path().join("output");
    copy_dir(&golden().join("hf-5.24.0/dist-nodes-node-local/node-1/output"), &out);
    let e = inspect::inspect(&out).unwrap_err();
    assert!(e.contains(&out.display().to_string()) && e.contains("rng_state_<rank>.pth files only"), "{e}");
    let o = std::process::Command::new(bin()).args(["inspect", out.to_str().unwrap()]).output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    // With save_on_each_node=True its own training_args.bin says a node's first process other
    // than rank 0 wrote it: from 5.15 without weights (a resume there fails, HF's doing), before
    // with them. The golden folders decide which.
    for v in ["4.40.2", "5.14.1", "5.15.1", "5.24.0"] {
        let t = tempfile::tempdir().unwrap();
        let out = t.path().join("output");
        copy_dir(&golden().join(format!("hf-{v}/dist-nodes-save-on-each-node/node-1/output")), &out);
        let newest = format!("checkpoint-{}", checkpoint_steps(&out).last().unwrap());
        let weights = out.join(&newest).join("model.safetensors").is_file() || out.join(&newest).join("pytorch_model.bin").is_file();
        let r = inspect::inspect(&out).unwrap();
        assert!(r.problems.is_empty(), "{v}: {}", r.render());
        assert_eq!(r.resume_ok, weights, "{v}: {}", r.render());
        let c = r.checkpoints.iter().find(|c| c.name == newest).unwrap();
        assert_eq!(c.resume_by_design.is_empty(), weights, "{v}: {:?}", c.resume_by_design);
        assert_eq!(r.resume_by_design.iter().any(|x| x.contains("no weights file")), !weights, "{v}: {:?}", r.resume_by_design);
        let (code, _) = run_bin(&out);
        assert_eq!(code, 0, "{v}");
    }
    // Node 0's disk alone holds rank 0's files only: as node 0's own disk should; said.
    let t0 = tempfile::tempdir().unwrap();
    let out0 = t0.path().join("output");
    copy_dir(&golden().join("hf-5.24.0/dist-nodes-node-local/node-0/output"), &out0);
    let r = inspect::inspect(&out0).unwrap();
    assert!(r.problems.is_empty(), "{}", r.render());
    assert!(r.warnings.iter().any(|w| w.contains("rank(s) 0 only")), "{}", r.render());
}
