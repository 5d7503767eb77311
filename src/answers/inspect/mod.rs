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
//! * [`launch`]: a launch of several processes: the rng files a checkpoint needs for the world
//!   size its `training_args.bin` records, which disk holds which (a ckptspec run directory
//!   with per-node disks, `node-K/output`, is read node by node), and what a resume with one
//!   number of processes or another does with them.
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
pub mod launch;
pub mod lineage;
mod render;
pub mod replay;
pub mod resume;
pub mod training_args;

pub use training_args::{read_training_args, TrainingArgsFile};

use checkpoint::{Checkpoint, Expect};
use launch::DiskRole;
use training_args::LaunchRecord;
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
    /// The launch of several processes that wrote the folder, when one did.
    pub launch: Option<launch::LaunchView>,
    /// What a resume from the picked checkpoint does with its rng files, with the number of
    /// processes that wrote it and with others.
    pub resume_worlds: Vec<launch::ResumeWith>,
    /// Why a resume of the run fails where that is what HF leaves with these arguments, not
    /// damage (a node that does not save the weights; 4.40-5.17's CPU launches): said, with the
    /// verdict, not counted. Other nodes' are named by their node.
    pub resume_by_design: Vec<String>,
    /// The node whose disk this is (a per-node run directory).
    pub node: Option<usize>,
    /// The other nodes' disks of a per-node run directory; their problems and warnings are
    /// also in this report's, each named by its node.
    pub nodes: Vec<NodeDisk>,
}

/// Another node's disk of a per-node run directory.
#[derive(Debug, Clone)]
pub struct NodeDisk {
    pub node: usize,
    pub output_dir: PathBuf,
    /// What the disk holds, in words.
    pub holds: String,
    /// Its inspection (None: it holds nothing).
    pub report: Option<Box<Report>>,
}

fn io(p: &Path, e: impl std::fmt::Display) -> String {
    format!("{}: {e}", p.display())
}

/// What result.json of a ckptspec run directory says about the run.
#[derive(Debug, Clone, Default)]
struct RunResult {
    final_state: Option<PyJson>,
    error: Option<String>,
    hf_version: Option<String>,
    /// `ranks` of each phase (`first.ranks`, then `ranks`): `(rank, node)` of every process.
    ranks: Vec<Vec<(usize, usize)>>,
}

/// Reads result.json; errors name the file.
fn read_result(path: &Path) -> Result<RunResult, String> {
    let r = crate::formats::pyjson::read_file(path).map_err(|e| e.to_string())?;
    let PyJson::Dict(_) = &r else { return Err(format!("{}: not a JSON object", path.display())) };
    let mut out = RunResult::default();
    match r.get("final_state") {
        Some(s @ PyJson::Dict(_)) => out.final_state = Some(s.clone()),
        Some(PyJson::Null) | None => {}
        Some(_) => return Err(format!("{}: final_state is neither an object nor null", path.display())),
    }
    match r.get("error") {
        Some(PyJson::Dict(e)) => {
            let g = |k: &str| e.iter().find(|(kk, _)| kk == k).and_then(|(_, v)| if let PyJson::Str(s) = v { Some(s.clone()) } else { None });
            out.error = Some(format!("{}: {}", g("type").ok_or_else(|| format!("{}: error.type is not a string", path.display()))?, g("message").unwrap_or_default()));
        }
        Some(PyJson::Null) | None => {}
        Some(_) => return Err(format!("{}: error is neither an object nor null", path.display())),
    }
    if let Some(PyJson::Str(v)) = r.get("hf_version") {
        out.hf_version = Some(v.clone());
    }
    let ranks_of = |v: Option<&PyJson>, key: &str| -> Result<Option<Vec<(usize, usize)>>, String> {
        let Some(v) = v else { return Ok(None) };
        let PyJson::List(l) = v else { return Err(format!("{}: {key} is not a list", path.display())) };
        l.iter()
            .map(|e| {
                let n = |k: &str| e.get(k).and_then(checkpoint::int).and_then(|i| usize::try_from(i).ok());
                match (n("rank"), n("node")) {
                    (Some(r), Some(k)) => Ok((r, k)),
                    _ => Err(format!("{}: an entry of {key} has no int rank and node", path.display())),
                }
            })
            .collect::<Result<Vec<_>, String>>()
            .map(Some)
    };
    if let Some(f) = ranks_of(r.get("first").and_then(|f| f.get("ranks")), "first.ranks")? {
        out.ranks.push(f);
    }
    if let Some(f) = ranks_of(r.get("ranks"), "ranks")? {
        out.ranks.push(f);
    }
    Ok(out)
}

/// Inspects an HF output folder, a run directory's `output/`, or a run directory of a launch
/// with per-node disks (`node-K/output`; or one node's folder of it): see [`launch::locate`].
pub fn inspect(dir: &Path) -> Result<Report, String> {
    if !dir.is_dir() {
        return Err(format!("{}: not a folder", dir.display()));
    }
    match launch::locate(dir) {
        launch::Layout::Single => inspect_single(dir),
        launch::Layout::PerNode { root, nodes, primary } => inspect_nodes(dir, &root, &nodes, primary),
    }
}

fn inspect_single(dir: &Path) -> Result<Report, String> {
    let result_path = dir.join("result.json");
    let run_directory = dir.join("output").is_dir() && (result_path.is_file() || !has_checkpoints(dir));
    if !run_directory && result_path.is_file() && !has_checkpoints(dir) {
        return Err(format!("{}: a run directory without output/ (the run wrote nothing to inspect)", dir.display()));
    }
    let out = if run_directory { dir.join("output") } else { dir.to_path_buf() };
    // result.json of a run directory: the run's final state and error.
    let result = if run_directory && result_path.is_file() { Some(read_result(&result_path)?) } else { None };
    let found = discover(&out, result.as_ref().and_then(|r| r.hf_version.as_deref()))?;
    // A ckptspec run directory's output/ is every process's disk (contract v3 part 2: with
    // per-node disks the outputs are node-K/output); a bare folder could be one node's.
    let ranks = if run_directory { launch::Ranks::All } else { launch::Ranks::Unknown };
    inspect_disk(&DiskCtx { dir, out: &out, run_directory, node: None, result: result.as_ref(), ranks, fallback: None }, found)
}

/// A run directory with per-node disks: every node's `output/` is inspected with what the
/// others tell (the version and the launch's arguments, for a node whose disk holds neither);
/// the report is the `primary` node's, with the others in [`Report::nodes`] and their problems
/// and warnings counted, each named by its node.
fn inspect_nodes(dir: &Path, root: &Path, nodes: &[usize], primary: usize) -> Result<Report, String> {
    let result_path = root.join("result.json");
    let result = if result_path.is_file() { Some(read_result(&result_path)?) } else { None };
    let result_version = result.as_ref().and_then(|r| r.hf_version.clone());
    // Each disk's findings first: the version and arguments one node's disk lacks come from another's.
    let mut founds: Vec<(usize, PathBuf, Option<Found>)> = vec![];
    for &k in nodes {
        let out = root.join(format!("node-{k}")).join("output");
        let f = if out.is_dir() { Some(discover(&out, result_version.as_deref())?) } else { None };
        founds.push((k, out, f));
    }
    let mut order: Vec<usize> = (0..founds.len()).collect();
    order.sort_by_key(|&i| (founds[i].0 != primary, founds[i].0));
    let fallback = founds.iter().filter_map(|(k, _, f)| f.as_ref().map(|f| (k, f))).find_map(|(k, f)| {
        let args = f.args_files.iter().find_map(|(s, r)| r.as_ref().ok().map(|a| (format!("node-{k}/output/{s}"), a.clone())));
        let version = f.version.clone().map(|(v, s)| (v, format!("node {k}'s {s}")));
        (args.is_some() || version.is_some()).then_some(Fallback { version, args })
    });
    let ranks_for = |k: usize| -> launch::Ranks {
        // result.json's ranks of the launch whose size the arguments record (the first phase's,
        // or the resumed one's).
        let world = fallback.as_ref().and_then(|f| f.args.as_ref()).and_then(|(_, a)| a.launch.clone().ok().flatten()).map(|l| l.num_processes);
        result
            .as_ref()
            .and_then(|r| r.ranks.iter().rev().find(|rs| Some(rs.len()) == world).or(r.ranks.last()))
            .map(|rs| launch::ranks_of_node(rs, k))
            .unwrap_or_default()
    };
    let mut primary_report: Option<Report> = None;
    let mut others: Vec<NodeDisk> = vec![];
    for i in order {
        let (k, out, found) = &founds[i];
        let (k, out) = (*k, out.clone());
        let holds_nothing = found.as_ref().is_none_or(|f| f.entries.is_empty());
        let report = match found.clone() {
            Some(f) if !f.entries.is_empty() => Some(inspect_disk(
                &DiskCtx {
                    dir: if k == primary { dir } else { &out },
                    out: &out,
                    run_directory: true,
                    node: Some(k),
                    // result.json is the main process's (global rank 0, node 0).
                    result: if k == 0 { result.as_ref() } else { None },
                    ranks: ranks_for(k),
                    fallback: fallback.as_ref(),
                },
                f,
            )?),
            _ => None,
        };
        if k == primary {
            match report {
                Some(r) => primary_report = Some(r),
                None => return Err(format!("{}: node {k}'s disk holds nothing to inspect{}", out.display(), nothing_why(fallback.as_ref(), k))),
            }
        } else {
            let holds = match &report {
                _ if holds_nothing => format!("nothing{}", nothing_why(fallback.as_ref(), k)),
                Some(r) => r.holds(),
                None => "nothing".into(),
            };
            others.push(NodeDisk { node: k, output_dir: out, holds, report: report.map(Box::new) });
        }
    }
    let mut r = primary_report.ok_or_else(|| format!("{}: no node-{primary}/output", root.display()))?;
    let prim_pick = r.resume_pick.clone();
    let save_on_each_node = fallback.as_ref().and_then(|f| f.args.as_ref()).and_then(|(_, a)| a.flag("save_on_each_node"));
    // A node whose disk has no checkpoint-N while another's has: its processes'
    // resume_from_checkpoint=True raises ValueError in train(). With save_on_each_node=False
    // (4.37 leaves tmp-checkpoint-N there, 4.38 deletes it) that is what HF leaves; a node
    // whose first process saves should have its checkpoints.
    let picks: Vec<(usize, bool)> =
        std::iter::once((r.node.unwrap_or(primary), prim_pick.is_some())).chain(others.iter().map(|n| (n.node, n.report.as_ref().is_some_and(|o| o.resume_pick.is_some())))).collect();
    if picks.iter().any(|(_, p)| *p) {
        for (k, _) in picks.iter().filter(|(_, p)| !*p) {
            let why = format!(
                "node {k}'s disk has no checkpoint-N folder: resume_from_checkpoint=True raises ValueError(\"No valid checkpoint found in output directory (...)\") in its processes, and the launch fails with them"
            );
            match save_on_each_node {
                Some(false) if *k > 0 => r.resume_by_design.push(why),
                _ => r.problems.push(Problem {
                    folder: Some(if *k == r.node.unwrap_or(primary) { ".".into() } else { format!("node-{k}/output") }),
                    file: None,
                    message: format!("{why}; its first process saves, so its checkpoints are gone"),
                }),
            }
        }
    }
    for n in &others {
        let Some(o) = &n.report else { continue };
        let rel = format!("node-{}/output", n.node);
        for p in &o.problems {
            r.problems.push(Problem {
                folder: Some(p.folder.as_ref().map_or(rel.clone(), |f| format!("{rel}/{f}"))),
                file: p.file.clone(),
                message: format!("node {}: {}", n.node, p.message),
            });
        }
        for w in &o.warnings {
            r.warnings.push(format!("node {}: {w}", n.node));
        }
        for w in &o.resume_by_design {
            r.resume_by_design.push(format!("node {}: {w}", n.node));
        }
        if o.resume_pick.is_some() && prim_pick.is_some() && o.resume_pick != prim_pick {
            r.warnings.push(format!(
                "resume_from_checkpoint=True: each process picks on its own disk: node {}'s {}, node {}'s {}: the processes would not resume from the same step",
                r.node.unwrap_or(primary),
                prim_pick.as_deref().unwrap_or("nothing"),
                n.node,
                o.resume_pick.as_deref().unwrap_or("nothing")
            ));
        }
    }
    r.nodes = others;
    Ok(r)
}

/// Why a node's disk holds nothing, where the arguments and the release explain it.
fn nothing_why(fallback: Option<&Fallback>, k: usize) -> String {
    let Some((_, a)) = fallback.and_then(|f| f.args.as_ref()) else { return String::new() };
    let v = fallback.and_then(|f| f.version.as_ref()).map(|(v, _)| v.clone());
    let Some(profile) = v.and_then(|v| crate::hf::profile::resolve(&v).ok()).and_then(|r| training_args::cached_profile(r.profile())) else { return String::new() };
    if k > 0 && !a.flag("save_on_each_node").unwrap_or(false) && profile.launch_rules().staging_elsewhere == crate::hf::behaviors::StagingElsewhere::Removed {
        format!(
            ": {} stages each save in tmp-checkpoint-N and a process that does not save deletes its node's staging folder, its rng file with it (save_on_each_node=False), so this disk keeps nothing; a resume of node {k}'s processes finds no checkpoint (ValueError: No valid checkpoint found in output directory)",
            profile.version
        )
    } else {
        String::new()
    }
}

/// Another disk's version and arguments, for a disk that holds neither.
#[derive(Debug, Clone)]
struct Fallback {
    version: Option<(String, String)>,
    args: Option<(String, TrainingArgsFile)>,
}

/// What an inspection of one disk gets from around it.
struct DiskCtx<'a> {
    /// What the user pointed at.
    dir: &'a Path,
    out: &'a Path,
    run_directory: bool,
    /// Its node, on a per-node disk.
    node: Option<usize>,
    /// result.json, where it describes this disk's run (the main process's).
    result: Option<&'a RunResult>,
    ranks: launch::Ranks,
    fallback: Option<&'a Fallback>,
}

/// One disk's folder as listed, before anything in it is judged.
#[derive(Debug, Clone)]
struct Found {
    entries: Vec<(String, bool)>,
    notes: Vec<String>,
    leftovers: Vec<Leftover>,
    /// `checkpoint-N` folders, newest first.
    ck_dirs: Vec<(String, u64)>,
    version: Option<(String, String)>,
    args_files: Vec<(String, Result<TrainingArgsFile, String>)>,
}

/// Lists an output folder: its entries, leftovers, checkpoint folders, the version that wrote
/// it and the run's arguments.
fn discover(out: &Path, result_version: Option<&str>) -> Result<Found, String> {
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
        if let Some(v) = result_version {
            version = Some((v.to_string(), format!("result.json (hf_version {v})")));
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
    Ok(Found { entries, notes, leftovers, ck_dirs, version, args_files })
}

/// Inspects one disk's output folder (see [`inspect`]).
fn inspect_disk(ctx: &DiskCtx, found: Found) -> Result<Report, String> {
    let out = ctx.out;
    let Found { entries, mut notes, mut leftovers, ck_dirs, version, args_files } = found;
    let final_state = ctx.result.and_then(|r| r.final_state.clone());
    let run_error = ctx.result.and_then(|r| r.error.clone());
    let mut warnings: Vec<String> = vec![];
    let (hf_version, version_source) = match version.or_else(|| ctx.fallback.and_then(|f| f.version.clone())) {
        Some(v) => v,
        None => {
            // A folder of rng files only is the disk of a node that does not save: nothing on it
            // names the version (no config.json, no training_args.bin).
            let rng_only = !ck_dirs.is_empty()
                && ck_dirs.iter().all(|(n, _)| {
                    std::fs::read_dir(out.join(n)).into_iter().flatten().flatten().all(|e| launch::rank_of(&e.file_name().to_string_lossy()).is_some())
                });
            return Err(if rng_only {
                format!(
                    "{}: its checkpoint folders hold rng_state_<rank>.pth files only, the disk of a node whose processes do not save (save_on_each_node=False), and nothing here names the HF version; inspect the run directory holding every node's output (node-K/output), or the main node's output folder",
                    out.display()
                )
            } else {
                format!("{}: no config.json, result.json or readable training_args.bin names the HF version that wrote it", out.display())
            });
        }
    };
    let resolved = crate::hf::profile::resolve(&hf_version).map_err(|e| format!("{}: written by transformers {hf_version}: {}", out.display(), e.replace("--hf version", "version")))?;
    let profile: &'static Profile = training_args::cached_profile(resolved.profile()).expect("resolve returns profiled versions");

    // Arguments: the newest checkpoint's training_args.bin, else the folder's.
    let run_args = args_files.iter().find_map(|(s, r)| r.as_ref().ok().map(|a| (s.clone(), a.clone())));
    for (s, r) in &args_files {
        if let Err(e) = r {
            notes.push(format!("{s}: {e}"));
        }
    }
    // The launch: this disk's own record, else another node's (a node that does not save
    // holds no training_args.bin).
    let launch_args: Option<(String, TrainingArgsFile)> = run_args.clone().or_else(|| ctx.fallback.and_then(|f| f.args.clone()));
    let record: Option<LaunchRecord> = launch_args.as_ref().and_then(|(_, a)| a.launch.clone().ok().flatten());
    if let Some((_, a)) = &launch_args {
        if let Err(e) = &a.launch {
            notes.push(format!("{e}: the world size of the launch is unknown"));
        }
    }
    let save_on_each_node = launch_args.as_ref().and_then(|(_, a)| a.flag("save_on_each_node")).unwrap_or(false);
    let not_main_node = match ctx.node {
        Some(k) => k > 0,
        // A bare folder: its own record says whether another node's first process wrote it.
        None => run_args.as_ref().and_then(|(_, a)| a.launch.clone().ok().flatten()).is_some_and(|l| l.writer_on_other_node()),
    };
    let only_rng_files = !ck_dirs.is_empty()
        && ck_dirs.iter().all(|(n, _)| std::fs::read_dir(out.join(n)).into_iter().flatten().flatten().all(|e| launch::rank_of(&e.file_name().to_string_lossy()).is_some()));
    let role = if !not_main_node {
        DiskRole::Saving
    } else if launch_args.is_some() && !save_on_each_node || launch_args.is_none() && only_rng_files {
        DiskRole::RngOnly
    } else if profile.launch_rules().save_pretrained_main_only {
        DiskRole::SavingWithoutWeights
    } else {
        DiskRole::Saving
    };
    let has_config = ck_dirs.iter().any(|(n, _)| out.join(n).join("config.json").is_file()) || out.join("config.json").is_file();
    let run_expect = Expect {
        world: record.as_ref().map(|l| l.num_processes),
        ranks: ctx.ranks,
        role,
        ..match &run_args {
            Some((_, a)) => Expect::from_args(a, profile, has_config),
            None => Expect { config: has_config, ..Expect::default() },
        }
    };
    if let Some(why) = role.why_no_weights(profile) {
        notes.push(format!("this disk's checkpoint folders hold no weights, as HF writes them here: {why}"));
    }
    // 4.37 leaves the staging folder of a process that does not save on its node's disk.
    if role == DiskRole::RngOnly && profile.launch_rules().staging_elsewhere == crate::hf::behaviors::StagingElsewhere::Left {
        for l in &mut leftovers {
            if let Some(step) = l.name.strip_prefix("tmp-checkpoint-") {
                l.what = format!(
                    "what {} leaves of the save of step {step} on the disk of a node that does not save (save_on_each_node=False): its processes' rng files in the staging folder, which only a saving process renames. \
                     Not an interrupted save; no release's get_last_checkpoint (^checkpoint-(\\d+)$) or rotation (checkpoint-*) matches it",
                    profile.version
                );
            }
        }
    }

    // Checkpoints, oldest first.
    let mut checkpoints: Vec<Checkpoint> = ck_dirs.iter().rev().map(|(n, _)| checkpoint::check(&out.join(n), profile, run_expect)).collect();
    checkpoints.sort_by_key(|c| c.step);
    // The rng files of ranks whose disk is not known from the layout: every rank that any
    // checkpoint of the same world size on this disk shows (its file, or its own record as the
    // writer) belongs here.
    let mut ranks_here: Option<Vec<usize>> = record.as_ref().and_then(|l| ctx.ranks.for_world(l.num_processes));
    let mut ranks_how = match ctx.ranks {
        launch::Ranks::All => "a ckptspec run directory's output/: every process's disk (shared)".to_string(),
        launch::Ranks::Range(..) => format!("node {}'s own disk (per-node disks; result.json lists each rank's node)", ctx.node.unwrap_or(0)),
        launch::Ranks::Unknown => String::new(),
    };
    if ctx.ranks == launch::Ranks::Unknown {
        let mut worlds: Vec<usize> = checkpoints.iter().filter_map(|c| c.world).filter(|w| *w > 1).collect();
        worlds.sort();
        worlds.dedup();
        for w in worlds {
            let mut here: Vec<usize> = vec![];
            for c in checkpoints.iter().filter(|c| c.world == Some(w)) {
                here.extend(c.rng_ranks.iter().copied().filter(|r| *r < w));
                if let Some(l) = c.launch.as_ref().filter(|l| l.num_processes == w) {
                    here.push(l.process_index);
                }
            }
            here.sort();
            here.dedup();
            if !run_expect.save_only_model {
                for c in checkpoints.iter_mut().filter(|c| c.world == Some(w)) {
                    c.require_rank_files(&here);
                }
            }
            if record.as_ref().is_some_and(|l| l.num_processes == w) {
                ranks_how = if here.len() == w {
                    "every rank's files appear on this disk: shared by the whole launch".into()
                } else if ctx.node.is_some() {
                    format!("node {}'s own disk (per-node disks): the ranks its checkpoints show", ctx.node.unwrap_or(0))
                } else {
                    format!("only ranks {} of {w} appear on this disk", launch::ranks_text(&here))
                };
                if here.len() < w && ctx.node.is_none() && !run_expect.save_only_model && !here.is_empty() {
                    let others: Vec<usize> = (0..w).filter(|r| !here.contains(r)).collect();
                    warnings.push(format!(
                        "every checkpoint of the launch of {w} here holds the rng files of rank(s) {} only (training_args.bin: num_processes {w}): on one node's own disk (per-node disks) that is what HF writes, the other ranks' files are on their nodes' disks; on a disk the whole launch shares, {} {} missing from every checkpoint, and a resume with {w} processes goes on without {}: {}",
                        launch::ranks_text(&here),
                        others.iter().map(|r| launch::rng_file(w, *r)).collect::<Vec<_>>().join(", "),
                        if others.len() == 1 { "is" } else { "are" },
                        if others.len() == 1 { "it" } else { "them" },
                        launch::missing_rng_consequence(Some(others[0]))
                    ));
                }
                ranks_here = Some(here);
            }
        }
    }
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
    let mut deviations: Vec<replay::Deviation> = vec![];

    // Checkpoint problems.
    for c in &checkpoints {
        for f in &c.missing {
            let who = match (launch::rank_of(f), c.world) {
                (Some(r), Some(w)) => format!("process {r} of the launch of {w} that wrote the folder (training_args.bin) writes it on this disk"),
                _ => format!("a save of {} writes it", profile.version),
            };
            problems.push(Problem { folder: Some(c.name.clone()), file: Some(f.clone()), message: format!("{}/{f} is missing ({who})", c.name) });
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
                    if !c.weights_fails.is_empty() {
                        Err(c.weights_fails.join("; "))
                    } else if let Some(why) = role.why_no_weights(profile) {
                        Err(format!("no weights on this disk ({why}): _load_best_model warns \"Could not locate the best model at ...\" and this node's processes keep their last weights"))
                    } else {
                        Ok(())
                    }
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
            if role != DiskRole::Saving {
                // What HF writes on this disk; said where load_best_model_at_end would look.
                if load_best {
                    warnings.push(format!("the best checkpoint {}: {why}", b.folder));
                }
            } else {
                problems.push(Problem { folder: Some(b.folder.clone()), file: None, message: format!("the best checkpoint {} does not load: {why} (load_best_model_at_end raises)", b.folder) });
            }
        }
    }

    // Resume.
    let pick = resume::last_checkpoint(entries.iter().map(|(n, d)| (n.as_str(), *d))).map(str::to_string);
    let mut resume_reasons = vec![];
    let mut resume_runs_code = vec![];
    let mut resume_ok = false;
    let mut resume_worlds: Vec<launch::ResumeWith> = vec![];
    let mut resume_by_design: Vec<String> = vec![];
    match pick.as_ref().and_then(|p| checkpoints.iter().find(|c| c.name == *p)) {
        Some(c) => {
            resume_reasons.extend(c.resume_fails.iter().cloned());
            for why in &c.resume_by_design {
                resume_reasons.push(why.clone());
                resume_by_design.push(format!("resume_from_checkpoint=True picks {} on this disk: {why}", c.name));
                warnings.push(format!(
                    "resume_from_checkpoint=True on this disk picks {} and fails: {why}; that is what HF leaves on this disk with these arguments (a disk every node shares, or save_on_each_node=True{}, gives every node a checkpoint it can resume from)",
                    c.name,
                    if profile.launch_rules().save_pretrained_main_only { " before 5.15" } else { "" }
                ));
            }
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
            let counted: Vec<&String> = resume_reasons.iter().filter(|r| !c.resume_by_design.contains(r)).collect();
            // What a resume with each number of processes does with the folder's rng files.
            let world = c.world.unwrap_or(1);
            let cpu = record.as_ref().is_some_and(|l| l.multi_cpu) || launch_args.as_ref().is_some_and(|(_, a)| a.flag("use_cpu") == Some(true) || a.flag("no_cuda") == Some(true));
            // The ranks that resume from this disk, where they are not every rank (a node's disk).
            let here = ranks_here.as_deref().filter(|h| h.len() < world && record.as_ref().is_some_and(|l| l.num_processes == world));
            let both = c.files.iter().any(|(f, s)| f == "optimizer.pt" && *s != checkpoint::FileState::Missing) && c.files.iter().any(|(f, s)| f == "scheduler.pt" && *s != checkpoint::FileState::Missing);
            if c.resume_by_design.is_empty() {
                resume_worlds = launch::resume_with(profile, &c.name, world, &c.rng_ranks, c.single_rng, here, cpu, both);
                if world > 1 && cpu && both && profile.launch_rules().map_location_fails {
                    resume_by_design.push(format!("{}'s resume of a CPU launch of {world} from {} raises RuntimeError in _load_optimizer_and_scheduler (map_location=cpu:<local rank>)", profile.version, c.name));
                    warnings.push(format!(
                        "a resume of this launch ({world} processes on CPUs) from {} fails in {}: _load_optimizer_and_scheduler's torch.load(optimizer.pt, map_location=args.device) raises RuntimeError: don't know how to restore data location of torch.storage.UntypedStorage (tagged with cpu:0) in every process (args.device is cpu:<local rank>); a resume with 1 process loads it",
                        c.name, profile.version
                    ));
                }
            }
            if !counted.is_empty() {
                problems.push(Problem {
                    folder: Some(c.name.clone()),
                    file: None,
                    message: format!("resume_from_checkpoint=True picks {} and fails: {}", c.name, counted.iter().map(|s| s.as_str()).collect::<Vec<_>>().join("; ")),
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

    // The launch, where the run had several processes (or its files say so).
    let launch = record.as_ref().filter(|l| l.num_processes > 1 || checkpoints.iter().any(|c| !c.rng_ranks.is_empty())).map(|l| launch::LaunchView {
        source: launch_args.as_ref().map(|(s, _)| s.clone()).unwrap_or_default(),
        record: l.clone(),
        save_on_each_node,
        node: ctx.node,
        role,
        ranks_here: ranks_here.clone(),
        ranks_how: ranks_how.clone(),
    });
    Ok(Report {
        dir: ctx.dir.to_path_buf(),
        output_dir: out.to_path_buf(),
        run_directory: ctx.run_directory,
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
        launch,
        resume_worlds,
        resume_by_design,
        node: ctx.node,
        nodes: vec![],
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
