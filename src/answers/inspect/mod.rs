//! `ckptspec inspect OUTPUT_DIR [--json]`: what a real HF output folder holds, whether a resume
//! or `load_best_model_at_end` would work on it, and how it deviates from its own plan.
//!
//! The folder is read, never written; nothing in it is executed (torch files go through the
//! restricted unpickler). A ckptspec run directory (`result.json` + `output/`) is inspected
//! through its `output/`, and its `result.json` adds the run's final state and error.
//!
//! * [`training_args`]: `training_args.bin` field by field ([`read_training_args`], public for
//!   `ckptspec plan`).
//! * [`checkpoint`]: each `checkpoint-N`: complete for its version, and what a resume from it
//!   does (HF's loaders, read per release).
//! * [`lineage`]: which checkpoints belong to one run; the run's newest state.
//! * [`resume`]: `get_last_checkpoint`, the resume verdict, a missing best folder's
//!   consequences (the resume table in `src/hf/behaviors.rs`).
//! * [`replay`]: the plan replayed from the run's arguments and logged metrics, compared
//!   folder by folder.
//!
//! A *problem* is something that is not as HF of that version leaves an output folder, or that
//! breaks a resume or `load_best_model_at_end`: a missing or unreadable file, a file whose pickle
//! calls code, a partial `checkpoint-N`, a folder of another run, a deviation from the replayed
//! plan, a best folder that is gone, a resume pick that fails. Exit status 1 when there is any,
//! 0 otherwise. What HF itself does with these arguments (a best pointer to a step that release
//! never saves, which the replay reproduces) is a *warning*: said, not counted. So is a leftover
//! of an interrupted save that no resume or rotation ever matches (`tmp-checkpoint-N`, a
//! ckptspec staging folder): it shows that a save was cut short, but breaks nothing.

pub mod checkpoint;
pub mod lineage;
mod render;
pub mod replay;
pub mod resume;
pub mod training_args;

pub use training_args::{read_training_args, TrainingArgsFile};

use checkpoint::{Checkpoint, Expect};
use crate::formats::pyjson::PyJson;
use crate::hf::profile::Profile;
use serde_json::{json, Map, Value as J};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// The command line of `ckptspec inspect`.
#[derive(Debug, Clone, Default)]
pub struct Options {
    pub dir: PathBuf,
    pub json: bool,
}

/// Runs `ckptspec inspect`: exit 0 when nothing would break a resume or load_best_model_at_end,
/// 1 when something would; Err is the tool's own error (exit 2).
pub fn main(opts: &Options) -> Result<ExitCode, String> {
    let r = inspect(&opts.dir)?;
    if opts.json {
        println!("{}", serde_json::to_string_pretty(&r.to_json()).map_err(|e| e.to_string())?);
    } else {
        print!("{}", r.render());
    }
    Ok(if r.problems.is_empty() { ExitCode::SUCCESS } else { ExitCode::from(1) })
}

/// One thing that is wrong.
#[derive(Debug, Clone, PartialEq)]
pub struct Problem {
    /// The folder it concerns (a name in the output folder), if one.
    pub folder: Option<String>,
    /// The file inside it, if one.
    pub file: Option<String>,
    pub message: String,
}

/// A folder an interrupted save left that HF's resume never picks: a `tmp-checkpoint-N` (the
/// staging folder of 4.36-4.38) or a ckptspec atomic-mode staging folder. A *warning*, not a
/// problem: `get_last_checkpoint` (`^checkpoint\-(\d+)$`) and rotation (the glob
/// `checkpoint-*`) match neither name in any release 4.31-5.24, so a resume, rotation and
/// `load_best_model_at_end` work as if it were not there; what the interrupted save did leave
/// under a `checkpoint-N` name (a partial folder) is a problem of its own. (A `checkpoint-*` name
/// that is not `checkpoint-<digits>` is a note: mtime rotation counts it.)
#[derive(Debug, Clone)]
pub struct Leftover {
    pub name: String,
    pub what: String,
}

/// A `best_model_checkpoint` as one state records it.
#[derive(Debug, Clone)]
pub struct BestPointer {
    /// Which state (`checkpoint-8/trainer_state.json`, `result.json final_state`, ...).
    pub source: String,
    /// As recorded.
    pub recorded: String,
    /// The folder name it points to.
    pub folder: String,
    pub exists: bool,
    /// When it exists: whether its weights load (the file `_load_best_model` reads).
    pub loadable: Option<Result<(), String>>,
}

/// Everything `inspect` found.
#[derive(Debug, Clone)]
pub struct Report {
    pub dir: PathBuf,
    /// The HF output folder inspected (`dir`, or `dir/output` for a run directory).
    pub output_dir: PathBuf,
    pub run_directory: bool,
    /// The version that wrote the folder, as recorded.
    pub hf_version: String,
    pub version_source: String,
    /// The profile it maps to, and the line said when another patch maps to it.
    pub profile: &'static str,
    pub profile_note: Option<String>,
    /// Where the arguments come from, and their non-default keyword arguments (v1 spelling).
    pub args_source: Option<String>,
    pub args: Map<String, J>,
    pub checkpoints: Vec<Checkpoint>,
    pub leftovers: Vec<Leftover>,
    /// The run's newest state, and where it comes from.
    pub state_source: Option<String>,
    pub state: Option<PyJson>,
    pub best: Vec<BestPointer>,
    pub best_checkpoint: Option<String>,
    pub best_exists: Option<bool>,
    pub resume_pick: Option<String>,
    pub resume_ok: bool,
    pub resume_reasons: Vec<String>,
    /// What the picked resume runs: the code its `torch.load` calls execute (in words).
    pub resume_runs_code: Vec<String>,
    pub replay: replay::Outcome,
    pub deviations: Vec<replay::Deviation>,
    pub problems: Vec<Problem>,
    pub warnings: Vec<String>,
    pub notes: Vec<String>,
}

fn io(p: &Path, e: impl std::fmt::Display) -> String {
    format!("{}: {e}", p.display())
}

/// Inspects an HF output folder (or a run directory's `output/`).
pub fn inspect(dir: &Path) -> Result<Report, String> {
    if !dir.is_dir() {
        return Err(format!("{}: not a folder", dir.display()));
    }
    let result_path = dir.join("result.json");
    let run_directory = dir.join("output").is_dir() && (result_path.is_file() || !has_checkpoints(dir));
    if !run_directory && result_path.is_file() && !has_checkpoints(dir) {
        return Err(format!("{}: a run directory without output/ (the run wrote nothing to inspect)", dir.display()));
    }
    let out = if run_directory { dir.join("output") } else { dir.to_path_buf() };

    // result.json of a run directory: the run's final state and error.
    let (mut final_state, mut run_error, mut result_version) = (None, None, None);
    if run_directory && result_path.is_file() {
        let r = crate::formats::pyjson::read_file(&result_path).map_err(|e| e.to_string())?;
        let PyJson::Dict(_) = &r else { return Err(format!("{}: not a JSON object", result_path.display())) };
        match r.get("final_state") {
            Some(s @ PyJson::Dict(_)) => final_state = Some(s.clone()),
            Some(PyJson::Null) | None => {}
            Some(_) => return Err(format!("{}: final_state is neither an object nor null", result_path.display())),
        }
        match r.get("error") {
            Some(PyJson::Dict(e)) => {
                let g = |k: &str| e.iter().find(|(kk, _)| kk == k).and_then(|(_, v)| if let PyJson::Str(s) = v { Some(s.clone()) } else { None });
                run_error = Some(format!("{}: {}", g("type").ok_or_else(|| format!("{}: error.type is not a string", result_path.display()))?, g("message").unwrap_or_default()));
            }
            Some(PyJson::Null) | None => {}
            Some(_) => return Err(format!("{}: error is neither an object nor null", result_path.display())),
        }
        if let Some(PyJson::Str(v)) = r.get("hf_version") {
            result_version = Some(v.clone());
        }
    }

    // The output folder's entries.
    let mut entries: Vec<(String, bool)> = vec![];
    for e in std::fs::read_dir(&out).map_err(|e| io(&out, e))? {
        let e = e.map_err(|e| io(&out, e))?;
        let name = e.file_name().to_string_lossy().into_owned();
        entries.push((name, e.path().is_dir()));
    }
    entries.sort_by(|a, b| natural(&a.0).cmp(&natural(&b.0)));
    let mut notes = vec![];
    let mut leftovers = vec![];
    for (name, is_dir) in &entries {
        if !is_dir {
            continue;
        }
        if let Some(rest) = name.strip_prefix("tmp-checkpoint-") {
            // HF 4.36-4.38's _save_checkpoint writes into tmp-checkpoint-N whenever checkpoint-N
            // is absent or empty (an existing one is reused) and renames it at the end.
            leftovers.push(Leftover {
                name: name.clone(),
                what: format!(
                    "the staging folder of a save of step {rest} that never reached its rename (4.36-4.38 write tmp-checkpoint-N, then rename it): a save was interrupted. \
                     It breaks nothing: no release's get_last_checkpoint (^checkpoint-(\\d+)$) or rotation (checkpoint-*) matches it; 4.36-4.38's next save of step {rest} writes into it and renames it, otherwise it stays until removed by hand"
                ),
            });
        } else if crate::save::atomic::is_staging_name(name) {
            leftovers.push(Leftover {
                name: name.clone(),
                what: "a ckptspec atomic-mode staging folder: a save or a rotation's deletion was interrupted before its rename. \
                       It breaks nothing: HF's get_last_checkpoint and rotation never match the name, and the next atomic-mode save or resume removes it"
                    .into(),
            });
        } else if name.starts_with("checkpoint-") && checkpoint::hf_step(name).is_none() {
            notes.push(format!("{name}: not checkpoint-<digits>, so resume never picks it; HF's rotation globs checkpoint-* and, in mtime order, counts it"));
        }
    }

    // Version.
    let config_version_of = |p: &Path| -> Option<String> {
        match crate::formats::pyjson::read_file(p.join("config.json")).ok()?.get("transformers_version") {
            Some(PyJson::Str(s)) => Some(s.clone()),
            _ => None,
        }
    };
    let mut ck_dirs: Vec<(String, u64)> =
        entries.iter().filter(|(_, d)| *d).filter_map(|(n, _)| checkpoint::hf_step(n).map(|s| (n.clone(), s))).collect();
    ck_dirs.sort_by_key(|(_, s)| std::cmp::Reverse(*s));
    let mut version: Option<(String, String)> = None;
    for (n, _) in &ck_dirs {
        if let Some(v) = config_version_of(&out.join(n)) {
            version = Some((v.clone(), format!("config.json of {n} (transformers_version {v})")));
            break;
        }
    }
    for l in &leftovers {
        if version.is_none() {
            if let Some(v) = config_version_of(&out.join(&l.name)) {
                version = Some((v.clone(), format!("config.json of {} (transformers_version {v})", l.name)));
            }
        }
    }
    if version.is_none() {
        if let Some(v) = config_version_of(&out) {
            version = Some((v.clone(), format!("the output folder's config.json (transformers_version {v})")));
        }
    }
    if version.is_none() {
        if let Some(v) = &result_version {
            version = Some((v.clone(), format!("result.json (hf_version {v})")));
        }
    }
    // The run's arguments: the newest readable training_args.bin of its checkpoints (newest
    // first), of a leftover staging folder, or of the folder itself (save_model).
    let mut args_files: Vec<(String, Result<TrainingArgsFile, String>)> = vec![];
    let places: Vec<String> = ck_dirs.iter().map(|(n, _)| n.clone()).chain(leftovers.iter().map(|l| l.name.clone())).chain(std::iter::once(String::new())).collect();
    for n in &places {
        let p = if n.is_empty() { out.join("training_args.bin") } else { out.join(n).join("training_args.bin") };
        if p.is_file() {
            let r = read_training_args(&p);
            let ok = r.is_ok();
            args_files.push((if n.is_empty() { "training_args.bin".into() } else { format!("{n}/training_args.bin") }, r));
            if ok {
                break;
            }
        }
    }
    if version.is_none() {
        if let Some((src, a)) = args_files.iter().find_map(|(s, r)| r.as_ref().ok().map(|a| (s, a))) {
            let v = a.profiles.last().ok_or_else(|| {
                format!("{}: its fields fit no profiled release's TrainingArguments, and no config.json names the version", a.path.display())
            })?;
            let range = if a.profiles.len() > 1 {
                format!("{}..{} share this argument list; taken as the newest", a.profiles[0], v)
            } else {
                format!("only {v} has this argument list")
            };
            version = Some((v.to_string(), format!("the field set of {src} ({range})")));
        }
    }
    let (hf_version, version_source) = version.ok_or_else(|| {
        format!("{}: no config.json, result.json or readable training_args.bin names the HF version that wrote it", out.display())
    })?;
    let resolved = crate::hf::profile::resolve(&hf_version).map_err(|e| format!("{}: written by transformers {hf_version}: {}", out.display(), e.replace("--hf version", "version")))?;
    let profile: &'static Profile = training_args::cached_profile(resolved.profile()).expect("resolve returns profiled versions");

    // Arguments: the newest checkpoint's training_args.bin, else the folder's.
    let run_args = args_files.iter().find_map(|(s, r)| r.as_ref().ok().map(|a| (s.clone(), a.clone())));
    for (s, r) in &args_files {
        if let Err(e) = r {
            notes.push(format!("{s}: {e}"));
        }
    }
    let has_config = ck_dirs.iter().any(|(n, _)| out.join(n).join("config.json").is_file()) || out.join("config.json").is_file();
    let run_expect = match &run_args {
        Some((_, a)) => Expect::from_args(a, profile, has_config),
        None => Expect { config: has_config, ..Expect::default() },
    };

    // Checkpoints, oldest first.
    let mut checkpoints: Vec<Checkpoint> = ck_dirs.iter().rev().map(|(n, _)| checkpoint::check(&out.join(n), profile, run_expect)).collect();
    checkpoints.sort_by_key(|c| c.step);
    for c in &checkpoints {
        if let Some(v) = &c.config_version {
            if *v != hf_version {
                notes.push(format!("{}: written by transformers {v}, the folder by {hf_version} (a resume with another release?)", c.name));
            }
        }
    }

    // The run's states.
    let folder_state = match crate::formats::pyjson::read_file(out.join("trainer_state.json")) {
        Ok(s @ PyJson::Dict(_)) => Some(s),
        Ok(_) => {
            notes.push("trainer_state.json of the output folder is not a JSON object".into());
            None
        }
        Err(e) if out.join("trainer_state.json").is_file() => {
            notes.push(format!("{e}"));
            None
        }
        Err(_) => None,
    };
    let lin = lineage::build(&checkpoints, final_state.as_ref(), folder_state.as_ref());
    let state_source = lin.source.as_ref().map(|s| s.describe(&checkpoints));
    // The run's arguments are its newest member's (a foreign folder's are not the run's).
    let run_args = lin
        .members
        .iter()
        .rev()
        .find_map(|&i| checkpoints[i].args.as_ref().map(|a| (format!("{}/training_args.bin", checkpoints[i].name), a.clone())))
        .or_else(|| run_args.filter(|(s, _)| !lin.foreign.iter().any(|(i, _, _)| s.starts_with(&format!("{}/", checkpoints[*i].name)))));
    let kwargs = run_args.as_ref().map(|(_, a)| a.kwargs(profile)).unwrap_or_default();

    let mut problems: Vec<Problem> = vec![];
    let mut warnings: Vec<String> = vec![];
    let mut deviations: Vec<replay::Deviation> = vec![];

    // Checkpoint problems.
    for c in &checkpoints {
        for f in &c.missing {
            problems.push(Problem { folder: Some(c.name.clone()), file: Some(f.clone()), message: format!("{}/{f} is missing (a save of {} writes it)", c.name, profile.version) });
        }
        for (f, why) in &c.corrupt {
            problems.push(Problem { folder: Some(c.name.clone()), file: Some(f.clone()), message: format!("{}/{f} is unreadable: {why}", c.name) });
        }
        for cf in &c.code {
            let consequence = match &cf.on_resume {
                checkpoint::OnResume::Runs(how) | checkpoint::OnResume::Refused(how) => format!("a resume from {}: {how}", c.name),
                checkpoint::OnResume::NotLoaded(why) => why.clone(),
            };
            problems.push(Problem {
                folder: Some(c.name.clone()),
                file: Some(cf.file.clone()),
                message: format!(
                    "{}/{} calls {} when unpickled ({}): code that would run when the file is loaded, not a file a save of {} writes; {consequence}",
                    c.name, cf.file, cf.code.global, cf.code.at, profile.version
                ),
            });
        }
        if c.sentinel {
            problems.push(Problem { folder: Some(c.name.clone()), file: Some("checkpoint-is-incomplete.txt".into()), message: format!("{}/checkpoint-is-incomplete.txt is present (HF 5.x's JIT-checkpoint sentinel): the save did not finish", c.name) });
        }
        if !c.missing.is_empty() && c.corrupt.is_empty() && (c.missing.iter().any(|f| f == "trainer_state.json" || f.starts_with("rng_state"))) {
            deviations.push(replay::Deviation {
                kind: "crash",
                folder: Some(c.name.clone()),
                message: format!("{} is partial ({} missing): a save was interrupted, or files were removed", c.name, c.missing.join(", ")),
            });
        }
    }
    for l in &leftovers {
        deviations.push(replay::Deviation { kind: LEFTOVER, folder: Some(l.name.clone()), message: format!("{}: {}", l.name, l.what) });
    }
    // Folders of another run.
    for (i, why, continues) in &lin.foreign {
        let c = &checkpoints[*i];
        let who = if *continues {
            "another train() call wrote it (its log_history and the run's lead into one another: a resume with other arguments, or a second run)"
        } else {
            "another run wrote it: two runs share this output_dir"
        };
        deviations.push(replay::Deviation {
            kind: "two-runs",
            folder: Some(c.name.clone()),
            message: format!("{} does not belong to the run of {}: {why}; {who}", c.name, state_source.clone().unwrap_or_default()),
        });
    }
    // mtime order against step order.
    let dated: Vec<&Checkpoint> = checkpoints.iter().filter(|c| c.step.is_some() && c.mtime.is_some()).collect();
    for a in &dated {
        if let Some(b) = dated.iter().filter(|b| b.step > a.step && b.mtime.unwrap() + MTIME_SLACK < a.mtime.unwrap()).max_by(|x, y| x.step.cmp(&y.step)) {
            deviations.push(replay::Deviation {
                kind: "two-runs",
                folder: Some(a.name.clone()),
                message: format!(
                    "{} was written {:.0} s after {} although its step is lower (folder mtimes): a later run wrote into this output_dir",
                    a.name,
                    a.mtime.unwrap() - b.mtime.unwrap(),
                    b.name
                ),
            });
        }
    }

    // The replay.
    let members: Vec<&Checkpoint> = lin.members.iter().map(|&i| &checkpoints[i]).collect();
    let finished = final_state.is_some() || folder_state.is_some();
    let horizon = lin
        .state
        .as_ref()
        .and_then(|s| s.get("global_step").and_then(checkpoint::int))
        .map(|g| g.max(0) as u64)
        .unwrap_or(0)
        .max(members.iter().filter_map(|c| c.step).max().unwrap_or(0));
    let replay_out = match (&lin.state, run_args.is_some()) {
        (Some(state), true) => {
            let mut obs: Vec<(u64, f64)> = vec![];
            for s in members.iter().filter_map(|c| c.state.as_ref()).chain(std::iter::once(state)) {
                if let (Some(g), Some(e)) = (s.get("global_step").and_then(checkpoint::int), s.get("epoch").and_then(num)) {
                    obs.push((g.max(0) as u64, e));
                }
            }
            let actual: Vec<(String, u64, Option<f64>)> = members
                .iter()
                .filter_map(|c| c.step.map(|s| (c.name.clone(), s, c.state.as_ref().and_then(|st| st.get("epoch")).and_then(num))))
                .collect();
            replay::replay(&replay::Input { profile, kwargs: &kwargs, state, observations: obs, finished, horizon, actual, run_error: run_error.clone() })
        }
        (None, _) => replay::Outcome { skipped: Some("no readable trainer_state.json: nothing to replay from".into()), ..Default::default() },
        (_, false) => replay::Outcome { skipped: Some("no readable training_args.bin: the run's arguments are unknown".into()), ..Default::default() },
    };
    for d in &replay_out.deviations {
        if !deviations.iter().any(|x| x.folder == d.folder && x.kind == "two-runs") {
            deviations.push(d.clone());
        }
    }
    if let (Some(e), Some(pe)) = (&run_error, &replay_out.error) {
        if e.split(':').next() != pe.split(':').next() {
            notes.push(format!("the run ended in {e}; the replay ends in {pe}"));
        }
    }

    // Best pointers.
    let output_dir_arg = run_args.as_ref().and_then(|(_, a)| a.get("output_dir")).and_then(J::as_str).map(str::to_string);
    let mut best: Vec<BestPointer> = vec![];
    let mut add_best = |source: String, s: &PyJson| {
        if let Some(PyJson::Str(b)) = s.get("best_model_checkpoint") {
            let folder = b.trim_end_matches('/').rsplit('/').next().unwrap_or(b).to_string();
            let dir = out.join(&folder);
            let exists = dir.is_dir() && checkpoint::hf_step(&folder).is_some();
            let loadable = exists.then(|| {
                checkpoints.iter().find(|c| c.name == folder).map_or(Ok(()), |c| {
                    if c.weights_fails.is_empty() { Ok(()) } else { Err(c.weights_fails.join("; ")) }
                })
            });
            best.push(BestPointer { source, recorded: b.clone(), folder, exists, loadable });
        }
    };
    if let Some(s) = &final_state {
        add_best("result.json final_state".into(), s);
    }
    if let Some(s) = &folder_state {
        add_best("the output folder's trainer_state.json".into(), s);
    }
    if let Some(c) = members.iter().rev().find(|c| c.state.is_some()) {
        add_best(format!("{}/trainer_state.json, the newest checkpoint", c.name), c.state.as_ref().unwrap());
    }
    let newest = best.first().cloned();
    let best_checkpoint = newest.as_ref().map(|b| b.folder.clone());
    let best_exists = newest.as_ref().map(|b| b.exists);
    let load_best = kwargs.get("load_best_model_at_end").and_then(J::as_bool).unwrap_or(false);
    // A best folder the replay also points to and never has: HF's own doing with these
    // arguments (4.47-4.49 record the evaluating step's folder whether or not it is saved).
    let hf_own_best = |folder: &str| replay_out.compared && replay_out.best.as_ref().is_some_and(|(f, has)| f == folder && !has);
    let mut seen = vec![];
    for b in &best {
        if seen.contains(&b.folder) {
            continue;
        }
        seen.push(b.folder.clone());
        if let Some(d) = &output_dir_arg {
            let parent = b.recorded.trim_end_matches('/').rsplit_once('/').map(|(p, _)| crate::policy::rotation::normalize(p));
            if parent.as_deref() != Some(crate::policy::rotation::normalize(d).as_str()) {
                notes.push(format!("best_model_checkpoint {} ({}) is not under the run's output_dir {d}: the folder was moved, or another run recorded it", b.recorded, b.source));
            }
        }
        if !b.exists {
            if hf_own_best(&b.folder) {
                warnings.push(format!(
                    "best_model_checkpoint ({}) names {}, which {} never wrote with these arguments (the replay records the same pointer and saves no such folder); load_best_model_at_end found no weights there and kept the last ones",
                    b.source, b.folder, profile.version
                ));
            } else {
                problems.push(Problem {
                    folder: Some(b.folder.clone()),
                    file: None,
                    message: format!("best_model_checkpoint ({}) names {}, which does not exist{}", b.source, b.folder, if load_best { ": load_best_model_at_end finds no weights there and keeps the last ones" } else { "" }),
                });
            }
        } else if let Some(Err(why)) = &b.loadable {
            problems.push(Problem { folder: Some(b.folder.clone()), file: None, message: format!("the best checkpoint {} does not load: {why} (load_best_model_at_end raises)", b.folder) });
        }
    }

    // Resume.
    let pick = resume::last_checkpoint(entries.iter().map(|(n, d)| (n.as_str(), *d))).map(str::to_string);
    let mut resume_reasons = vec![];
    let mut resume_runs_code = vec![];
    let mut resume_ok = false;
    match pick.as_ref().and_then(|p| checkpoints.iter().find(|c| c.name == *p)) {
        Some(c) => {
            resume_reasons.extend(c.resume_fails.iter().cloned());
            if let Some(PyJson::Str(b)) = c.state.as_ref().and_then(|s| s.get("best_model_checkpoint")) {
                let folder = b.trim_end_matches('/').rsplit('/').next().unwrap_or(b).to_string();
                if !out.join(&folder).is_dir() {
                    let limit = kwargs.get("save_total_limit").and_then(J::as_i64);
                    let (fails, warns) = resume::missing_best_consequences(profile, &folder, limit, load_best);
                    if hf_own_best(&folder) {
                        // HF itself left the pointer (see the best section): said, not counted.
                        warnings.extend(fails.into_iter().map(|f| format!("resuming from {} fails: {f} (HF's own pointer; the run itself ended this way)", c.name)));
                    } else {
                        resume_reasons.extend(fails);
                    }
                    warnings.extend(warns.into_iter().map(|w| format!("resuming from {}: {w}", c.name)));
                }
            }
            for d in &c.resume_degraded {
                warnings.push(format!("resuming from {}: {d}", c.name));
            }
            if lin.foreign.iter().any(|(i, _, _)| checkpoints[*i].name == c.name) {
                warnings.push(format!("resume_from_checkpoint=True picks {}, which belongs to another run", c.name));
            }
            resume_runs_code.extend(c.resume_runs_code.iter().cloned());
            resume_ok = resume_reasons.is_empty() && resume_runs_code.is_empty();
            if !resume_reasons.is_empty() {
                problems.push(Problem {
                    folder: Some(c.name.clone()),
                    file: None,
                    message: format!("resume_from_checkpoint=True picks {} and fails: {}", c.name, resume_reasons.join("; ")),
                });
            } else if !resume_runs_code.is_empty() {
                problems.push(Problem {
                    folder: Some(c.name.clone()),
                    file: None,
                    message: format!("resume_from_checkpoint=True picks {}, and loading it runs code: {}", c.name, resume_runs_code.join("; ")),
                });
            }
        }
        None => resume_reasons.push(format!("no checkpoint-N folder: resume_from_checkpoint=True raises ValueError(\"No valid checkpoint found in output directory ({})\")", output_dir_arg.clone().unwrap_or_else(|| out.display().to_string()))),
    }
    for d in &deviations {
        if d.kind == LEFTOVER {
            warnings.push(d.message.clone());
        } else {
            problems.push(Problem { folder: d.folder.clone(), file: None, message: d.message.clone() });
        }
    }
    if let Some(n) = resolved.note() {
        notes.push(n.replace("--hf ", "transformers "));
    }

    Ok(Report {
        dir: dir.to_path_buf(),
        output_dir: out,
        run_directory,
        hf_version,
        version_source,
        profile: profile.version,
        profile_note: resolved.note(),
        args_source: run_args.as_ref().map(|(s, _)| s.clone()),
        args: kwargs,
        checkpoints,
        leftovers,
        state_source,
        state: lin.state.clone(),
        best,
        best_checkpoint,
        best_exists,
        resume_pick: pick,
        resume_ok,
        resume_reasons,
        resume_runs_code,
        replay: replay_out,
        deviations,
        problems,
        warnings,
        notes,
    })
}

/// The deviation kind of a [`Leftover`]: listed with the deviations, counted as a warning.
pub const LEFTOVER: &str = "leftover";

/// Folder mtimes closer than this are not ordered (HF's own rotation treats a span under 1 s as
/// "mtime may not be reliable", 4.52+; a copy or checkout writes folders within milliseconds).
const MTIME_SLACK: f64 = 1.0;

fn has_checkpoints(dir: &Path) -> bool {
    std::fs::read_dir(dir)
        .map(|rd| rd.flatten().any(|e| e.file_name().to_string_lossy().starts_with("checkpoint-") && e.path().is_dir()))
        .unwrap_or(false)
}

fn num(v: &PyJson) -> Option<f64> {
    match v {
        PyJson::Int(i) => Some(*i as f64),
        PyJson::Float(f) => Some(*f),
        _ => None,
    }
}

/// Sort key: names with their digit runs compared as numbers (`checkpoint-9` before `checkpoint-10`).
fn natural(s: &str) -> Vec<(String, u128)> {
    let mut out = vec![];
    let mut text = String::new();
    let mut digits = String::new();
    for ch in s.chars() {
        if ch.is_ascii_digit() {
            digits.push(ch);
        } else {
            if !digits.is_empty() {
                out.push((std::mem::take(&mut text), digits.parse().unwrap_or(u128::MAX)));
                digits.clear();
            }
            text.push(ch);
        }
    }
    out.push((text, digits.parse().unwrap_or(0)));
    out
}

fn steps_with(state: &PyJson, pred: impl Fn(&[(String, PyJson)]) -> bool) -> Vec<u64> {
    let Some(PyJson::List(h)) = state.get("log_history") else { return vec![] };
    let mut v = vec![];
    for e in h {
        if let PyJson::Dict(d) = e {
            if pred(d) {
                if let Some(s) = d.iter().find(|(k, _)| k == "step").and_then(|(_, s)| checkpoint::int(s)) {
                    let s = s.max(0) as u64;
                    if !v.contains(&s) {
                        v.push(s);
                    }
                }
            }
        }
    }
    v
}

fn is_eval(d: &[(String, PyJson)]) -> bool {
    d.iter().any(|(k, _)| k.strip_suffix("_runtime").is_some_and(|p| p == "eval" || p.starts_with("eval_")))
}

fn pyshow(v: &PyJson) -> String {
    crate::formats::pyjson::dumps(v, &crate::formats::pyjson::DumpOptions::default()).unwrap_or_default()
}

fn jshow(v: &J) -> String {
    serde_json::to_string(v).unwrap_or_default()
}
