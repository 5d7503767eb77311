//! Crash safety proven by `kill -9` (issue 11): a child `ckptspec run tests/kill/many-saves.json`
//! (a checkpoint at every one of 120 steps) is killed, with SIGKILL, at seeded random moments
//! and at failpoints ([`ckptspec::save::failpoint`]: before the k-th file or fsync/rename of the
//! process, or with half of the k-th file written), in both save modes. After each kill:
//!
//! * atomic mode (`--atomic`): every `checkpoint-N` left is complete (the files of a complete
//!   save, each loading: torch files through `torch_format` with their CRC32s, safetensors,
//!   JSON; the deterministic files byte-equal to the uninterrupted run's), exactly the
//!   checkpoints whose publishing rename happened are there (failpoint kills), every other entry
//!   is a staging folder that neither `get_last_checkpoint` nor rotation matches; then
//!   `ckptspec inspect`'s library call finds no problem (exit status 0) and warns of each staging
//!   leftover (issue 18: a leftover no resume or rotation matches breaks nothing); then
//!   `trainer::resume(.., ResumeFrom::Last)` completes the run, and its final checkpoint equals
//!   the uninterrupted run's (`diff::compare_run_dirs` on the two `checkpoint-120` folders:
//!   weights, optimizer, scheduler, rng state, trainer_state.json in the contract's classes, and
//!   besides every file of the two folders whose bytes are deterministic, byte for byte; after a
//!   random quarter of the kills, every folder of `output/`), with no staging folder left.
//! * HF-compatible mode: `ckptspec inspect`'s library call (`inspect::inspect`) calls incomplete
//!   exactly the checkpoints the test knows to be incomplete: for a failpoint kill, those whose
//!   last file event is not before the kill (from the uninterrupted run's event trace); for a
//!   timed kill, those that do not hold the files of a complete save that load and match.
//!
//! Runs in `./dev test`, so it is bounded (200 kills, about 70 s in release on 2 cores). Longer:
//! `CKPTSPEC_KILL_SEED=7 CKPTSPEC_KILL_FAILPOINTS=500 CKPTSPEC_KILL_TIMED=500 CKPTSPEC_KILL_JOBS=4
//! cargo test --release --test kill -- --nocapture` (counts per mode; `CKPTSPEC_KILL_DIR` puts
//! the run directories elsewhere than /dev/shm).
//!
//! The run directories live on tmpfs by default: a kill -9 (unlike a power cut) leaves the page
//! cache to the next process, so what a killed process left on tmpfs is what it leaves on a disk
//! file system; the fsyncs only cost time there.

mod common;

use ckptspec::answers::inspect::{self, checkpoint::hf_step};
use ckptspec::hf::profile::Profile;
use ckptspec::save::failpoint;
use ckptspec::trainer::{self, ResumeFrom, SaveMode};
use ckptspec::world::scenario::Scenario;
use common::Rng;
use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_ckptspec");
const SCENARIO: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/kill/many-saves.json");
const HF: &str = "5.24.0";
/// Defaults: per mode, kills at failpoints and kills at random moments (200 kills in all).
const FAILPOINTS: usize = 50;
const TIMED: usize = 50;
/// The share of atomic-mode resumes after which every folder of output/ is compared with the
/// uninterrupted run's (the final checkpoint is compared after every one).
const WHOLE_COMPARE: f64 = 0.25;

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// One event of the uninterrupted run's trace.
#[derive(Debug, Clone, PartialEq)]
struct Ev {
    kind: String,
    /// The path, relative to the run directory.
    rel: String,
    /// The step of the save it belongs to.
    step: u64,
}

/// The events of one save, by 1-based event index.
#[derive(Debug, Clone, Default)]
struct Save {
    first: u64,
    last_file: u64,
    /// Atomic mode: the publishing rename.
    rename: Option<u64>,
}

/// The uninterrupted run of a mode: its run directory, its event trace, and how long it trains.
struct Reference {
    atomic: bool,
    _tmp: tempfile::TempDir,
    dir: PathBuf,
    events: Vec<Ev>,
    saves: BTreeMap<u64, Save>,
    /// The files of a complete checkpoint, sorted.
    files: Vec<String>,
    last_step: u64,
    /// From the moment `output/` appears (the first save starts) to the child's exit.
    window: Duration,
}

fn step_in(rel: &str) -> Option<u64> {
    rel.split('/').find_map(|c| {
        let c = c.strip_prefix(ckptspec::save::atomic::STAGING_PREFIX).map(|c| c.strip_prefix("old-").unwrap_or(c)).unwrap_or(c);
        hf_step(c)
    })
}

fn parse_trace(text: &str, run_dir: &Path) -> Result<Vec<Ev>, String> {
    let prefix = format!("{}/", run_dir.display());
    let mut out: Vec<Ev> = vec![];
    for line in text.lines().filter(|l| l.starts_with(failpoint::TRACE_PREFIX)) {
        let mut it = line.splitn(4, ' ');
        let (_, n, kind, path) = (it.next(), it.next(), it.next(), it.next());
        let n: usize = n.and_then(|n| n.parse().ok()).ok_or(format!("bad trace line {line:?}"))?;
        if n != out.len() + 1 {
            return Err(format!("trace line {line:?}: expected event {}", out.len() + 1));
        }
        let path = path.ok_or(format!("bad trace line {line:?}"))?;
        let rel = path.strip_prefix(&prefix).ok_or(format!("trace path {path} is not under {}", run_dir.display()))?.to_string();
        let step = match step_in(&rel) {
            Some(s) => s,
            None => out.last().map(|e| e.step).ok_or(format!("first event {line:?} names no checkpoint"))?,
        };
        out.push(Ev { kind: kind.unwrap_or("").to_string(), rel, step });
    }
    Ok(out)
}

fn command(run_dir: &Path, atomic: bool) -> Command {
    let mut c = Command::new(BIN);
    c.args(["run", SCENARIO, "--hf", HF, "--out"]).arg(run_dir);
    if atomic {
        c.arg("--atomic");
    }
    c.env_remove(failpoint::ENV).env_remove(failpoint::TRACE_ENV).stdin(Stdio::null()).stdout(Stdio::null());
    c
}

/// Polls until `p` exists or the child exits; false when it exited first.
fn wait_for(p: &Path, child: &mut Child) -> bool {
    loop {
        if p.exists() {
            return true;
        }
        if let Ok(Some(_)) = child.try_wait() {
            return p.exists();
        }
        std::thread::sleep(Duration::from_micros(200));
    }
}

fn reference(base: &Path, atomic: bool) -> Reference {
    let tmp = tempfile::tempdir_in(base).unwrap();
    let dir = tmp.path().join("run");
    let trace = tmp.path().join("trace");
    let mut c = command(&dir, atomic);
    c.env(failpoint::TRACE_ENV, "1").stderr(std::fs::File::create(&trace).unwrap());
    let st = c.status().unwrap();
    let text = std::fs::read_to_string(&trace).unwrap();
    assert!(st.success(), "uninterrupted run ({}) failed: {st}\n{text}", mode_name(atomic));
    // The training window of a run without the trace (which slows it), for the timed kills.
    let timing = tmp.path().join("timing");
    let mut child = command(&timing, atomic).stderr(Stdio::null()).spawn().unwrap();
    assert!(wait_for(&timing.join("output"), &mut child), "the uninterrupted run wrote no output/");
    let t0 = Instant::now();
    assert!(child.wait().unwrap().success());
    let window = t0.elapsed();
    std::fs::remove_dir_all(&timing).unwrap();
    let events = parse_trace(&text, &dir).unwrap();
    let mut saves: BTreeMap<u64, Save> = BTreeMap::new();
    for (i, e) in events.iter().enumerate() {
        let n = i as u64 + 1;
        let s = saves.entry(e.step).or_insert(Save { first: n, ..Default::default() });
        if e.kind == "file" {
            s.last_file = n;
        }
        if e.kind == "rename" {
            s.rename = Some(n);
        }
    }
    let last_step = *saves.keys().last().expect("the run saved nothing");
    let final_dir = dir.join(format!("output/checkpoint-{last_step}"));
    let files = list(&final_dir);
    // The trace covers every file of every checkpoint: each file event names one.
    let file_events = events.iter().filter(|e| e.kind == "file").count();
    assert_eq!(file_events, saves.len() * files.len(), "file events vs checkpoints x files");
    assert!(saves.values().all(|s| s.rename.is_some() == atomic), "a publishing rename per save in atomic mode only");
    Reference { atomic, _tmp: tmp, dir, events, saves, files, last_step, window }
}

fn mode_name(atomic: bool) -> &'static str {
    if atomic {
        "atomic"
    } else {
        "hf-compatible"
    }
}

fn list(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = match std::fs::read_dir(dir) {
        Ok(rd) => rd.flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect(),
        Err(_) => vec![],
    };
    v.sort();
    v
}

/// The test's own verdict on a folder left by a killed run: the files of a complete save, each
/// loading, the deterministic ones (JSON, safetensors) byte-equal to the uninterrupted run's.
fn complete_like_reference(r: &Reference, folder: &Path, step: u64) -> Result<(), String> {
    let names = list(folder);
    if names != r.files {
        return Err(format!("files {names:?}, a complete save has {:?}", r.files));
    }
    let ref_folder = r.dir.join(format!("output/checkpoint-{step}"));
    for f in &names {
        let p = folder.join(f);
        let same_bytes = || -> Result<(), String> {
            let (a, b) = (std::fs::read(&p).map_err(|e| e.to_string())?, std::fs::read(ref_folder.join(f)).map_err(|e| e.to_string())?);
            if a != b {
                return Err(format!("{f}: {} bytes, differ from the uninterrupted run's {}", a.len(), b.len()));
            }
            Ok(())
        };
        if f.ends_with(".json") {
            ckptspec::formats::pyjson::read_file(&p).map_err(|e| format!("{f}: {e}"))?;
            same_bytes()?;
        } else if f.ends_with(".safetensors") {
            ckptspec::formats::safetensors::load(&p).map_err(|e| format!("{f}: {e}"))?;
            same_bytes()?;
        } else {
            ckptspec::formats::torch_format::load(&p).map_err(|e| format!("{f}: {e}"))?;
        }
    }
    Ok(())
}

/// A failpoint kill at a file event: before it, the file does not exist; inside it, the file
/// holds exactly the first half of the complete file's bytes, and its loader refuses it.
fn check_failpoint_file(r: &Reference, dir: &Path, n: u64, mid: bool) -> Result<(), String> {
    let ev = &r.events[n as usize - 1];
    if ev.kind != "file" {
        return Ok(());
    }
    let p = dir.join(&ev.rel);
    let published = ev.rel.replace(&format!("{}checkpoint-", ckptspec::save::atomic::STAGING_PREFIX), "checkpoint-");
    let full = std::fs::read(r.dir.join(&published)).map_err(|e| format!("{published}: {e}"))?;
    if !mid {
        return match p.exists() {
            true => Err(format!("{} exists, though the kill came before it was created", ev.rel)),
            false => Ok(()),
        };
    }
    let got = std::fs::read(&p).map_err(|e| format!("{}: the torn file is not there: {e}", ev.rel))?;
    if got.len() != full.len() / 2 {
        return Err(format!("{}: torn at {} bytes, expected half of {}", ev.rel, got.len(), full.len()));
    }
    let loads = if p.extension().is_some_and(|e| e == "json") {
        ckptspec::formats::pyjson::read_file(&p).is_ok()
    } else if p.extension().is_some_and(|e| e == "safetensors") {
        ckptspec::formats::safetensors::load(&p).is_ok()
    } else {
        ckptspec::formats::torch_format::load(&p).is_ok()
    };
    if loads {
        return Err(format!("{}: half of the file loads", ev.rel));
    }
    if !full.starts_with(&got) && (published.ends_with(".json") || published.ends_with(".safetensors")) {
        return Err(format!("{}: the torn file is not the first half of the complete one", ev.rel));
    }
    Ok(())
}

#[derive(Debug, Clone, Copy)]
enum How {
    Failpoint { n: u64, mid: bool },
    Timed { delay: Duration },
}

#[derive(Debug, Default, Clone)]
struct Tally {
    kills: usize,
    inside_save: usize,
    failpoint_kills: usize,
    torn_files: usize,
    timed_kills: usize,
    timed_inside: usize,
    timed_misses: usize,
    resumed: usize,
    resumed_from_scratch: usize,
    whole_compared: usize,
    inspect_fallbacks: usize,
    incomplete_flagged: usize,
    /// Atomic mode: inspections without a problem, and the staging leftovers they warned of.
    inspect_clean: usize,
    leftovers_warned: usize,
    checkpoints_checked: usize,
    mismatches: Vec<String>,
    /// Seconds spent: in the killed children, judging what they left, in inspect, resuming.
    secs: [f64; 4],
}

impl Tally {
    fn add(&mut self, o: Tally) {
        self.kills += o.kills;
        self.inside_save += o.inside_save;
        self.failpoint_kills += o.failpoint_kills;
        self.torn_files += o.torn_files;
        self.timed_kills += o.timed_kills;
        self.timed_inside += o.timed_inside;
        self.timed_misses += o.timed_misses;
        self.resumed += o.resumed;
        self.resumed_from_scratch += o.resumed_from_scratch;
        self.whole_compared += o.whole_compared;
        self.inspect_fallbacks += o.inspect_fallbacks;
        self.incomplete_flagged += o.incomplete_flagged;
        self.inspect_clean += o.inspect_clean;
        self.leftovers_warned += o.leftovers_warned;
        self.checkpoints_checked += o.checkpoints_checked;
        self.mismatches.extend(o.mismatches);
        for i in 0..4 {
            self.secs[i] += o.secs[i];
        }
    }
}

/// Runs a child and kills it as `how` says. Ok(false): a timed kill that came after the child
/// had finished (a miss, redrawn by the caller).
fn kill_child(r: &Reference, dir: &Path, how: How) -> Result<bool, String> {
    let mut c = command(dir, r.atomic);
    match how {
        How::Failpoint { n, mid } => {
            let trace = dir.with_extension("trace");
            c.env(failpoint::ENV, if mid { format!("{n}:mid") } else { n.to_string() })
                .env(failpoint::TRACE_ENV, "1")
                .stderr(std::fs::File::create(&trace).map_err(|e| e.to_string())?);
            let st = c.status().map_err(|e| e.to_string())?;
            let text = std::fs::read_to_string(&trace).map_err(|e| e.to_string())?;
            if st.signal() != Some(libc::SIGKILL) {
                return Err(format!("the child was not killed at its failpoint ({st}):\n{}", text.lines().rev().take(5).collect::<Vec<_>>().join("\n")));
            }
            // It died at event n, having met exactly the uninterrupted run's first n events.
            let evs = parse_trace(&text, dir)?;
            if evs.len() as u64 != n || evs[..] != r.events[..n as usize] {
                return Err(format!("the killed child met {} events (expected {n}, the uninterrupted run's first {n})", evs.len()));
            }
            Ok(true)
        }
        How::Timed { delay } => {
            let mut child = c.stderr(Stdio::null()).spawn().map_err(|e| e.to_string())?;
            if wait_for(&dir.join("output"), &mut child) {
                std::thread::sleep(delay);
            }
            let _ = child.kill();
            let st = child.wait().map_err(|e| e.to_string())?;
            match st.signal() {
                Some(libc::SIGKILL) => Ok(true),
                _ if st.success() => Ok(false),
                _ => Err(format!("the child failed on its own: {st}")),
            }
        }
    }
}

/// One kill and everything checked after it.
fn one_case(r: &Reference, sc: &Scenario, profile: &Profile, base: &Path, how: How, rng: &mut Rng) -> Tally {
    let mut t = Tally::default();
    let tmp = tempfile::tempdir_in(base).unwrap();
    let mut how = how;
    let mut attempt = 0;
    let t0 = Instant::now();
    let dir = loop {
        let dir = tmp.path().join(format!("run{attempt}"));
        match kill_child(r, &dir, how) {
            Ok(true) => break dir,
            Ok(false) => {
                t.timed_misses += 1;
                attempt += 1;
                if attempt > 8 {
                    t.mismatches.push(format!("{}: {how:?}: the child finished before every kill", mode_name(r.atomic)));
                    return t;
                }
                if let How::Timed { delay } = how {
                    how = How::Timed { delay: delay.mul_f64(rng.below(1000) as f64 / 1000.0) };
                }
            }
            Err(m) => {
                t.mismatches.push(format!("{}: {how:?}: {m}", mode_name(r.atomic)));
                return t;
            }
        }
    };
    t.kills = 1;
    t.secs[0] = t0.elapsed().as_secs_f64();
    let t0 = Instant::now();
    let ctx = format!("{} {how:?}", mode_name(r.atomic));
    if let How::Failpoint { n, mid } = how {
        if let Err(m) = check_failpoint_file(r, &dir, n, mid) {
            t.mismatches.push(format!("{ctx}: {m}"));
            return t;
        }
    }
    let res = if r.atomic { check_atomic(r, &dir, how, &mut t) } else { check_hf(r, &dir, how, &mut t) };
    match res {
        Ok(inside) => {
            if inside {
                t.inside_save = 1;
            }
            match how {
                How::Failpoint { mid, n } => {
                    t.failpoint_kills = 1;
                    if mid && r.events[n as usize - 1].kind == "file" {
                        t.torn_files = 1;
                    }
                }
                How::Timed { .. } => {
                    t.timed_kills = 1;
                    t.timed_inside = inside as usize;
                }
            }
        }
        Err(m) => t.mismatches.push(format!("{ctx}: {m}")),
    }
    t.secs[1] = t0.elapsed().as_secs_f64() - t.secs[2];
    if r.atomic && t.mismatches.is_empty() {
        let t0 = Instant::now();
        let whole = rng.chance(WHOLE_COMPARE);
        let res = resume_and_compare(r, sc, profile, &dir, whole);
        t.whole_compared = (whole && res.is_ok()) as usize;
        t.secs[3] = t0.elapsed().as_secs_f64();
        match res {
            Ok(true) => t.resumed = 1,
            Ok(false) => t.resumed_from_scratch = 1,
            Err(m) => t.mismatches.push(format!("{ctx}: resume: {m}")),
        }
    }
    t
}

/// Atomic mode after a kill. Returns whether the kill was inside a save.
fn check_atomic(r: &Reference, dir: &Path, how: How, t: &mut Tally) -> Result<bool, String> {
    let out = dir.join("output");
    let entries = list(&out);
    let mut present = BTreeSet::new();
    let mut staging = BTreeSet::new();
    for name in &entries {
        if let Some(step) = hf_step(name) {
            let folder = out.join(name);
            complete_like_reference(r, &folder, step).map_err(|m| format!("{name} is published but not complete: {m}"))?;
            t.checkpoints_checked += 1;
            present.insert(step);
        } else if ckptspec::save::atomic::is_staging_name(name) {
            // A leftover: never matched as a checkpoint by HF's resume (`^checkpoint\-(\d+)$`)
            // nor by its rotation (`checkpoint-*`).
            if name.starts_with("checkpoint-") {
                return Err(format!("staging folder {name} matches HF's checkpoint-* glob"));
            }
            staging.insert(step_in(name).ok_or(format!("staging folder {name} names no step"))?);
        } else {
            return Err(format!("unexpected entry output/{name}"));
        }
    }
    let names: Vec<(&str, bool)> = entries.iter().map(|n| (n.as_str(), out.join(n).is_dir())).collect();
    let pick = inspect::resume::last_checkpoint(names).map(str::to_string);
    let want_pick = present.iter().last().map(|s| format!("checkpoint-{s}"));
    if pick != want_pick {
        return Err(format!("get_last_checkpoint picks {pick:?}, the newest published checkpoint is {want_pick:?}"));
    }
    let leftovers: Vec<&String> = entries.iter().filter(|n| ckptspec::save::atomic::is_staging_name(n)).collect();
    inspect_atomic(dir, &leftovers, !present.is_empty(), t)?;
    if let How::Failpoint { n, .. } = how {
        // Published: exactly the saves whose rename came before the kill; a staging folder:
        // exactly the save that was under way.
        let want: BTreeSet<u64> = r.saves.iter().filter(|(_, s)| s.rename.unwrap() < n).map(|(k, _)| *k).collect();
        if present != want {
            return Err(format!("published {:?}, expected {:?} (kill at event {n})", tail(&present), tail(&want)));
        }
        let want_st: BTreeSet<u64> = r.saves.iter().filter(|(_, s)| s.first <= n && n <= s.rename.unwrap()).map(|(k, _)| *k).collect();
        if staging != want_st {
            return Err(format!("staging folders {staging:?}, expected {want_st:?} (kill at event {n})"));
        }
        return Ok(true);
    }
    if staging.len() > 1 {
        return Err(format!("more than one staging folder: {staging:?}"));
    }
    Ok(!staging.is_empty())
}

/// Atomic mode after a kill: every published checkpoint loads and the resume pick works, so
/// `inspect` finds no problem (exit status 0), and it names each staging leftover as a warning.
fn inspect_atomic(dir: &Path, leftovers: &[&String], published: bool, t: &mut Tally) -> Result<(), String> {
    let t0 = Instant::now();
    let report = inspect::inspect(dir);
    t.secs[2] += t0.elapsed().as_secs_f64();
    match report {
        Ok(rep) => {
            if !rep.problems.is_empty() {
                let msgs: Vec<&str> = rep.problems.iter().map(|p| p.message.as_str()).collect();
                return Err(format!("inspect lists {} problem(s) (exit 1): {msgs:#?}", msgs.len()));
            }
            for l in leftovers {
                if !rep.warnings.iter().any(|w| w.starts_with(&format!("{l}: "))) {
                    return Err(format!("inspect does not warn of the leftover {l}: {:#?}", rep.warnings));
                }
            }
            t.inspect_clean += 1;
            t.leftovers_warned += leftovers.len();
            Ok(())
        }
        // Killed before any file named the version (no config.json or training_args.bin yet):
        // the tool's own error, as for a folder without a checkpoint.
        Err(_) if !published => {
            t.inspect_fallbacks += 1;
            Ok(())
        }
        Err(e) => Err(format!("inspect: {e}")),
    }
}

fn tail(s: &BTreeSet<u64>) -> String {
    let v: Vec<u64> = s.iter().copied().collect();
    if v.len() <= 4 {
        format!("{v:?}")
    } else {
        format!("{} folders, {}..{}", v.len(), v[0], v[v.len() - 1])
    }
}

/// HF-compatible mode after a kill: `inspect` must call incomplete exactly the folders the test
/// knows to be incomplete. Returns whether the kill was inside a save.
fn check_hf(r: &Reference, dir: &Path, how: How, t: &mut Tally) -> Result<bool, String> {
    let out = dir.join("output");
    let entries = list(&out);
    let mut incomplete = BTreeSet::new();
    let mut folders = BTreeSet::new();
    for name in &entries {
        let step = hf_step(name).ok_or(format!("unexpected entry output/{name}"))?;
        folders.insert(name.clone());
        let by_files = complete_like_reference(r, &out.join(name), step);
        let complete = match how {
            How::Failpoint { n, .. } => {
                // Complete iff the save's last file event came before the kill.
                let s = &r.saves[&step];
                let by_index = s.last_file < n;
                if by_index != by_files.is_ok() {
                    return Err(format!("{name}: the kill at event {n} says complete={by_index}, its files say {by_files:?}"));
                }
                by_index
            }
            How::Timed { .. } => by_files.is_ok(),
        };
        if !complete {
            incomplete.insert(name.clone());
        }
    }
    if let How::Failpoint { n, .. } = how {
        let want: BTreeSet<String> = r.saves.iter().filter(|(_, s)| s.first <= n).map(|(k, _)| format!("checkpoint-{k}")).collect();
        if folders != want {
            return Err(format!("folders {} present, expected {} (kill at event {n})", folders.len(), want.len()));
        }
    }
    let t0 = Instant::now();
    let report = inspect::inspect(dir);
    t.secs[2] = t0.elapsed().as_secs_f64();
    let flagged: BTreeSet<String> = match report {
        Ok(rep) => {
            let seen: BTreeSet<String> = rep.checkpoints.iter().map(|c| c.name.clone()).collect();
            if seen != folders {
                return Err(format!("inspect looked at {} checkpoints, {} are there", seen.len(), folders.len()));
            }
            rep.checkpoints.iter().filter(|c| !c.complete).map(|c| c.name.clone()).collect()
        }
        // No file left names the version (the kill came before the first save's config.json
        // and training_args.bin): judge each folder with the profile the run used.
        Err(e) => {
            if entries.iter().any(|n| out.join(n).join("config.json").is_file()) {
                return Err(format!("inspect: {e}"));
            }
            t.inspect_fallbacks += 1;
            let profile = Profile::get(HF).unwrap();
            let expect = inspect::checkpoint::Expect { config: true, ..Default::default() };
            entries.iter().filter(|n| !inspect::checkpoint::check(&out.join(n), &profile, expect).complete).cloned().collect()
        }
    };
    if flagged != incomplete {
        return Err(format!("inspect calls incomplete {flagged:?}, the test knows {incomplete:?}"));
    }
    t.incomplete_flagged += flagged.len();
    t.checkpoints_checked += folders.len();
    Ok(matches!(how, How::Failpoint { .. }) || !incomplete.is_empty())
}

/// `train(resume_from_checkpoint=True)` in the killed run's directory must complete the run,
/// with the uninterrupted run's final checkpoint. Ok(false): nothing was published before the
/// kill, HF's resume raises its ValueError, and a fresh run into the same folder completes it.
/// With `whole`, every folder of output/ is compared, not only the final checkpoint.
fn resume_and_compare(r: &Reference, sc: &Scenario, profile: &Profile, dir: &Path, whole: bool) -> Result<bool, String> {
    let out = dir.join("output");
    let had_checkpoint = list(&out).iter().any(|n| hf_step(n).is_some());
    trainer::resume(sc, profile, dir, SaveMode::Atomic, &ResumeFrom::Last).map_err(|e| e.to_string())?;
    let result = ckptspec::formats::pyjson::read_file(dir.join("result.json")).map_err(|e| e.to_string())?;
    let error = result.get("error").cloned();
    if !had_checkpoint {
        let msg = match &error {
            Some(e @ ckptspec::formats::pyjson::PyJson::Dict(_)) => format!("{:?} {:?}", e.get("type"), e.get("message")),
            other => return Err(format!("no checkpoint to resume from, yet the resume's error is {other:?}")),
        };
        if !msg.contains("ValueError") || !msg.contains("No valid checkpoint found in output directory") {
            return Err(format!("no checkpoint to resume from: expected HF's ValueError, got {msg}"));
        }
        trainer::run_with(sc, profile, dir, SaveMode::Atomic).map_err(|e| e.to_string())?;
    } else if error != Some(ckptspec::formats::pyjson::PyJson::Null) {
        return Err(format!("the resume ended with an error: {error:?}"));
    }
    let last = format!("output/checkpoint-{}", r.last_step);
    let (want, got) = (r.dir.join(&last), dir.join(&last));
    let rep = ckptspec::harness::diff::compare_run_dirs(&want, &got).map_err(|e| e.to_string())?;
    if !rep.is_clean() {
        return Err(format!("final checkpoint differs from the uninterrupted run's:\n{}", rep.render(&want, &got, 5)));
    }
    for f in &r.files {
        if f.ends_with(".json") || f.ends_with(".safetensors") {
            let (a, b) = (std::fs::read(want.join(f)).map_err(|e| e.to_string())?, std::fs::read(got.join(f)).map_err(|e| e.to_string())?);
            if a != b {
                return Err(format!("{last}/{f}: bytes differ from the uninterrupted run's"));
            }
        }
    }
    if whole {
        // Every folder of the resumed run equals the uninterrupted run's (result.json differs
        // by design: HF's train_loss covers the resumed call's steps only).
        let rep = ckptspec::harness::diff::compare_run_dirs(&r.dir.join("output"), &out).map_err(|e| e.to_string())?;
        if !rep.is_clean() {
            return Err(format!("output/ differs from the uninterrupted run's:\n{}", rep.render(&r.dir.join("output"), &out, 5)));
        }
    }
    let left: Vec<String> = list(&out).into_iter().filter(|n| hf_step(n).is_none()).collect();
    if !left.is_empty() {
        return Err(format!("after the resume, output/ still holds {left:?}"));
    }
    Ok(had_checkpoint)
}

#[test]
fn kill_minus_nine_at_random_moments_and_failpoints() {
    let t_start = Instant::now();
    let seed = env_usize("CKPTSPEC_KILL_SEED", 1) as u64;
    let n_fail = env_usize("CKPTSPEC_KILL_FAILPOINTS", FAILPOINTS);
    let n_timed = env_usize("CKPTSPEC_KILL_TIMED", TIMED);
    let jobs = env_usize("CKPTSPEC_KILL_JOBS", 2).max(1);
    let base = match std::env::var("CKPTSPEC_KILL_DIR") {
        Ok(d) => PathBuf::from(d),
        Err(_) if Path::new("/dev/shm").is_dir() => PathBuf::from("/dev/shm"),
        Err(_) => std::env::temp_dir(),
    };
    let base = tempfile::Builder::new().prefix("ckptspec-kill-").tempdir_in(&base).unwrap();
    let sc = Scenario::load(Path::new(SCENARIO)).unwrap();
    let profile = Profile::get(HF).unwrap();
    let refs = [reference(base.path(), false), reference(base.path(), true)];
    let mut rng = Rng(seed);
    let mut cases: Vec<(usize, How, u64)> = vec![];
    for (m, r) in refs.iter().enumerate() {
        for _ in 0..n_fail {
            let n = 1 + rng.below(r.events.len()) as u64;
            let mid = r.events[n as usize - 1].kind == "file" && rng.chance(0.5);
            cases.push((m, How::Failpoint { n, mid }, rng.next()));
        }
        for _ in 0..n_timed {
            let delay = r.window.mul_f64(1.1 * rng.below(1_000_000) as f64 / 1e6);
            cases.push((m, How::Timed { delay }, rng.next()));
        }
    }
    // Interleave the modes and kinds so that both threads meet all of them.
    let mut order: Vec<usize> = (0..cases.len()).collect();
    for i in (1..order.len()).rev() {
        order.swap(i, rng.below(i + 1));
    }
    let next = AtomicUsize::new(0);
    let totals: [Mutex<Tally>; 2] = [Mutex::new(Tally::default()), Mutex::new(Tally::default())];
    std::thread::scope(|s| {
        for _ in 0..jobs {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(&k) = order.get(i) else { break };
                let (m, how, case_seed) = cases[k];
                let mut case_rng = Rng(case_seed);
                let t = one_case(&refs[m], &sc, &profile, base.path(), how, &mut case_rng);
                totals[m].lock().unwrap().add(t);
            });
        }
    });
    let mut all = Tally::default();
    for (m, tot) in totals.iter().enumerate() {
        let t = tot.lock().unwrap();
        let atomic = m == 1;
        println!(
            "kill -9, {} mode: {} kills, {} inside a save: {} at failpoints ({} tearing a file), {} at random moments ({} inside a save; {} redrawn because the run had already finished); {} checkpoint folders judged",
            mode_name(atomic),
            t.kills,
            t.inside_save,
            t.failpoint_kills,
            t.torn_files,
            t.timed_kills,
            t.timed_inside,
            t.timed_misses,
            t.checkpoints_checked,
        );
        if atomic {
            println!(
                "  resumes: {} succeeded ({} compared folder by folder with the uninterrupted run, the others by the final checkpoint){}",
                t.resumed,
                t.whole_compared,
                if t.resumed_from_scratch > 0 { format!(", {} reruns from scratch (killed before the first publish: HF's resume raises)", t.resumed_from_scratch) } else { String::new() },
            );
            println!(
                "  inspect: {} runs without a problem (exit 0), {} staging leftovers named as warnings{}",
                t.inspect_clean,
                t.leftovers_warned,
                if t.inspect_fallbacks > 0 { format!(" ({} runs killed before any file named the version)", t.inspect_fallbacks) } else { String::new() },
            );
        } else {
            println!(
                "  inspect flagged {} incomplete checkpoints, as the test judged them{}",
                t.incomplete_flagged,
                if t.inspect_fallbacks > 0 { format!(" ({} runs judged folder by folder: no file left named the version)", t.inspect_fallbacks) } else { String::new() },
            );
        }
        println!(
            "  mismatches: {}; time (summed over jobs): children {:.1} s, judging {:.1} s, inspect {:.1} s, resume {:.1} s",
            t.mismatches.len(),
            t.secs[0],
            t.secs[1],
            t.secs[2],
            t.secs[3]
        );
        all.add(t.clone());
    }
    println!(
        "kill -9 total: {} kills, {} inside a save, {} resumes succeeded, {} mismatches (seed {seed}, {jobs} jobs, {:.1} s; events per run: {} hf-compatible, {} atomic)",
        all.kills,
        all.inside_save,
        all.resumed,
        all.mismatches.len(),
        t_start.elapsed().as_secs_f64(),
        refs[0].events.len(),
        refs[1].events.len()
    );
    for m in all.mismatches.iter().take(20) {
        println!("MISMATCH {m}");
    }
    assert!(all.mismatches.is_empty(), "{} mismatches (first: {})", all.mismatches.len(), all.mismatches[0]);
    assert_eq!(all.kills, 2 * (n_fail + n_timed), "every case ends in a kill");
    if n_fail == FAILPOINTS && n_timed == TIMED {
        assert!(all.kills >= 200 && all.inside_save >= 50, "{} kills, {} inside a save", all.kills, all.inside_save);
    }
}
