//! One `checkpoint-N` folder: is it complete for a resume in its version, and what would
//! `train(resume_from_checkpoint=<it>)` do with it.
//!
//! "Complete" means every file a save of this version writes for these arguments is present and
//! reads fully: torch files through [`crate::formats::torch_format`] (every zip record CRC32-checked),
//! safetensors through [`crate::formats::safetensors`] (offsets, sizes, every tensor read), JSON through
//! [`crate::formats::pyjson`] (Python's `json`, so `NaN` and `Infinity` parse). What a save writes
//! (`_save_checkpoint`, every release 4.31-5.24): the weights (`model.safetensors`, or
//! `pytorch_model.bin` where `save_safetensors` exists and is False), `config.json` (a
//! `PreTrainedModel`), `training_args.bin`, `trainer_state.json`, and unless `save_only_model`
//! `optimizer.pt`, `scheduler.pt` and `rng_state.pth` (`rng_state_<rank>.pth` in a distributed
//! run). `scaler.pt` only comes with fp16 loss scaling and is checked when present. A sharded
//! model's index and every shard it names, or a PEFT model's `adapter_model.*`, stand for the
//! weights file. DeepSpeed and FSDP layouts (their own subfolders) are not modelled.
//!
//! What a resume needs is what HF's loaders do, read in every profiled release:
//! * `_load_from_checkpoint` (4.31-5.24): `ValueError("Can't find a valid checkpoint at ...")`
//!   without any weights file; it parses `config.json` when present
//!   (`PretrainedConfig.from_json_file`); it loads `model.safetensors` when the arguments prefer
//!   it (4.x: `save_safetensors` and the file exists; 5.x, which has no `save_safetensors`:
//!   whenever it exists) and `pytorch_model.bin` otherwise, so a 4.x run with
//!   `save_safetensors=False` and only a safetensors file fails in `torch.load`.
//! * `TrainerState.load_from_json` (4.31-5.24): `TrainerState(**json.loads(text))`, so a file
//!   that is not a JSON object, or has a key the release's `TrainerState` lacks, raises. Whether
//!   `train()` reads it when it is missing is the resume table's `requires_trainer_state`
//!   (from 4.36 unconditionally: `FileNotFoundError`; before, the resumed run starts at step 0
//!   with the checkpoint's weights).
//! * `_load_optimizer_and_scheduler` (4.31-5.24): loads both only when `optimizer.pt` and
//!   `scheduler.pt` both exist; otherwise it skips both without a word, and the resumed run
//!   starts a fresh optimizer and schedule.
//! * `_load_rng_state` (4.31-5.24): each process loads its own file, `rng_state.pth` alone and
//!   `rng_state_{process_index}.pth` in a launch ([`super::launch`]); a missing one is only
//!   logged, at info level, and the process keeps its generators; a present one is
//!   `torch.load`ed and indexed `["python"]`, `["numpy"]`, `["cpu"]`, so a corrupt one raises (in
//!   a launch, in that process, which ends the launch). (HF loads it when the training loop
//!   reaches the resumed epoch: a resume of a run that has nothing left to train never reads
//!   it; a corrupt file is still reported as a failing resume.) Which rank files a folder needs
//!   is the world size of its `training_args.bin` (`distributed_state.num_processes`) and the
//!   ranks that write to this disk ([`Expect::ranks`]); a disk's role ([`DiskRole`]) says which
//!   other files its processes write (a node that does not save: its rng files only).
//! * `training_args.bin` is never read by a resume: missing or corrupt, the checkpoint is
//!   incomplete but resumes.
//!
//! A torch file whose pickle calls a global off the restricted reader's allow-list
//! (`posix.system`) is not a checkpoint file HF wrote: it is code that runs when the file is
//! unpickled. The reader stops at that global (nothing is run) and the file is reported as
//! such, with what this release's resume does with it ([`on_resume`]): `torch.load` with
//! `weights_only` on (HF's argument, or torch 2.6's default) refuses it and the resume fails;
//! without it, the resume runs the code.

use crate::formats::pyjson::PyJson;
use crate::formats::torch_format::{self, FormatError, LoadOptions, Value};
use crate::hf::behaviors::TorchLoad;
use crate::hf::profile::Profile;
use std::path::{Path, PathBuf};
use super::launch::{self, DiskRole, Ranks};
use super::training_args::{self, LaunchRecord, TrainingArgsFile};

/// What one file of the folder turned out to be.
#[derive(Debug, Clone, PartialEq)]
pub enum FileState {
    Ok,
    Missing,
    /// Present but unreadable or not what HF's loader accepts; the reason.
    Corrupt(String),
    /// Its pickle calls a global the restricted reader does not admit: code that runs when the
    /// file is unpickled. Not read further (nothing was run).
    Code(CodeGlobal),
}

/// The global a file's pickle calls, as the restricted reader found it.
#[derive(Debug, Clone, PartialEq)]
pub struct CodeGlobal {
    /// `posix.system`.
    pub global: String,
    /// Where: `data.pkl at byte 2` (`shard <file>, data.pkl at byte 2` for a sharded model).
    pub at: String,
}

/// A file of the folder that calls a global, and what this release's resume does with it.
#[derive(Debug, Clone, PartialEq)]
pub struct CodeFile {
    pub file: String,
    pub code: CodeGlobal,
    pub on_resume: OnResume,
}

/// What `train(resume_from_checkpoint=<the folder>)` of a release does with a file whose pickle
/// calls a global off the allow-list.
#[derive(Debug, Clone, PartialEq)]
pub enum OnResume {
    /// It unpickles the file without weights_only: the code runs. How it loads it, in words.
    Runs(String),
    /// It loads the file weights-only: torch refuses it (`UnpicklingError`), the resume fails.
    Refused(String),
    /// The resume does not load this file (why); loading it elsewhere without weights_only
    /// still runs the code.
    NotLoaded(String),
}

/// The verdict on one folder.
#[derive(Debug, Clone)]
pub struct Checkpoint {
    /// The folder name (`checkpoint-8`).
    pub name: String,
    pub path: PathBuf,
    /// The step HF reads from the name (`^checkpoint\-(\d+)$`); None for other names.
    pub step: Option<u64>,
    /// Folder mtime, seconds since the epoch.
    pub mtime: Option<f64>,
    /// Every file looked at, in a fixed order: the expected ones, then others present.
    pub files: Vec<(String, FileState)>,
    /// Expected files that are absent.
    pub missing: Vec<String>,
    /// Files that are present but unreadable: (file, why).
    pub corrupt: Vec<(String, String)>,
    /// No expected file missing or corrupt, no incomplete-sentinel.
    pub complete: bool,
    /// Why `train(resume_from_checkpoint=<this folder>)` raises (empty: it loads).
    pub resume_fails: Vec<String>,
    /// What such a resume silently does not restore (it runs, but does not continue the run).
    pub resume_degraded: Vec<String>,
    /// The part of `resume_fails` about the weights file (`_load_best_model` reads the same
    /// file the same way, so these also decide whether the folder serves as the best model).
    pub weights_fails: Vec<String>,
    /// What a resume from this folder runs: the files whose code its loads execute (in words).
    pub resume_runs_code: Vec<String>,
    /// Files whose pickle calls a global off the allow-list (code), with the resume's handling.
    pub code: Vec<CodeFile>,
    /// Plain remarks (save_only_model, ...).
    pub notes: Vec<String>,
    /// The parsed trainer_state.json, when it parses.
    pub state: Option<PyJson>,
    pub args: Option<TrainingArgsFile>,
    /// config.json's `transformers_version`.
    pub config_version: Option<String>,
    /// HF 5.x's `checkpoint-is-incomplete.txt` (a JIT checkpoint being written) is present.
    pub sentinel: bool,
    /// What the disk's processes write ([`DiskRole`]): the files expected here.
    pub role: DiskRole,
    /// The launch the folder's own `training_args.bin` records (None: none, or unreadable).
    pub launch: Option<LaunchRecord>,
    /// The world size that wrote the folder: its own record's, else the run's (None: unknown).
    pub world: Option<usize>,
    /// The ranks whose `rng_state_{rank}.pth` the folder holds, and whether it holds
    /// `rng_state.pth`.
    pub rng_ranks: Vec<usize>,
    pub single_rng: bool,
    /// Why a resume from this folder fails where that is what HF writes on this disk (a node
    /// whose processes do not save the weights), not damage: said, not counted.
    pub resume_by_design: Vec<String>,
}

impl Checkpoint {
    /// The state's `global_step`, if any.
    pub fn global_step(&self) -> Option<u64> {
        self.state.as_ref().and_then(|s| int(s.get("global_step")?)).and_then(|i| u64::try_from(i).ok())
    }

    /// The rng files the folder should hold for its world size, decided by the disk after every
    /// folder was read (the disk's ranks were not known from its layout, [`Ranks::Unknown`]):
    /// each one absent becomes a missing file, with what HF's resume does without it.
    pub fn require_rank_files(&mut self, ranks: &[usize]) {
        let Some(world) = self.world.filter(|w| *w > 1) else { return };
        for &r in ranks {
            let f = launch::rng_file(world, r);
            if self.files.iter().any(|(n, _)| *n == f) {
                continue;
            }
            self.files.push((f.clone(), FileState::Missing));
            self.missing.push(f.clone());
            if self.resume_by_design.is_empty() {
                self.resume_degraded.push(missing_rng_text(&f, world, Some(r)));
            }
        }
        self.complete = self.missing.is_empty() && self.corrupt.is_empty() && self.code.is_empty() && !self.sentinel;
    }
}

/// A missing rng file of a folder written by `world` processes, and what a resume with as many
/// does without it.
fn missing_rng_text(file: &str, world: usize, rank: Option<usize>) -> String {
    match rank {
        Some(r) => format!("{file} is missing: process {r} of a resume with {world} processes finds no file of its own; {}", launch::missing_rng_consequence(Some(r))),
        None => format!("{file} is missing: {}", launch::missing_rng_consequence(None)),
    }
}

pub(crate) fn int(v: &PyJson) -> Option<i128> {
    match v {
        PyJson::Int(i) => Some(*i),
        _ => None,
    }
}

/// What decides the expected files: read before the folders are checked (from the run's
/// training_args.bin; each checkpoint's own file overrides where it reads).
#[derive(Debug, Clone, Copy, Default)]
pub struct Expect {
    pub save_only_model: bool,
    /// `save_safetensors` where the version has it (None: it does not, 5.x).
    pub save_safetensors: Option<bool>,
    /// The run's checkpoints hold a config.json (the model is a `PreTrainedModel`).
    pub config: bool,
    /// The world size of the run's launch record (None: unknown; a folder's own record wins).
    pub world: Option<usize>,
    /// Which ranks' rng files this disk holds.
    pub ranks: Ranks,
    /// What this disk's processes write.
    pub role: DiskRole,
}

impl Expect {
    pub fn from_args(a: &TrainingArgsFile, profile: &Profile, config: bool) -> Expect {
        Expect {
            world: a.launch.as_ref().ok().and_then(|l| l.as_ref()).map(|l| l.num_processes),
            ranks: Ranks::Unknown,
            role: DiskRole::Saving,
            save_only_model: a.flag("save_only_model").unwrap_or(false),
            save_safetensors: if profile.has_field("save_safetensors") {
                Some(a.flag("save_safetensors").unwrap_or_else(|| profile.default_of("save_safetensors").and_then(|d| d.as_bool()).unwrap_or(true)))
            } else {
                None
            },
            config,
        }
    }

    /// The weights file a save writes (as [`crate::hf::args::Args::weights_file`]).
    pub fn weights_file(&self) -> &'static str {
        if self.save_safetensors == Some(false) {
            "pytorch_model.bin"
        } else {
            "model.safetensors"
        }
    }
}

pub use crate::policy::rotation::hf_step;

pub(crate) fn mtime_of(p: &Path) -> Option<f64> {
    let m = std::fs::metadata(p).ok()?.modified().ok()?;
    m.duration_since(std::time::UNIX_EPOCH).ok().map(|d| d.as_secs_f64())
}

/// The field names of the version's `TrainerState` (its dataclass, as `asdict` writes it).
pub fn state_fields(profile: &Profile) -> Vec<String> {
    match crate::hf::state::TrainerState::new(profile).to_json(profile) {
        PyJson::Dict(d) => d.into_iter().map(|(k, _)| k).collect(),
        _ => vec![],
    }
}

/// Checks one folder.
pub fn check(dir: &Path, profile: &Profile, run_expect: Expect) -> Checkpoint {
    let resume = profile.resume_rules();
    let name = dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let mut c = Checkpoint {
        step: hf_step(&name),
        name,
        path: dir.to_path_buf(),
        mtime: mtime_of(dir),
        files: vec![],
        missing: vec![],
        corrupt: vec![],
        complete: false,
        resume_fails: vec![],
        resume_degraded: vec![],
        weights_fails: vec![],
        resume_runs_code: vec![],
        code: vec![],
        notes: vec![],
        state: None,
        args: None,
        config_version: None,
        sentinel: false,
        role: run_expect.role,
        launch: None,
        world: None,
        rng_ranks: vec![],
        single_rng: false,
        resume_by_design: vec![],
    };
    let present: Vec<String> = match std::fs::read_dir(dir) {
        Ok(rd) => {
            let mut v: Vec<String> = rd.flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect();
            v.sort();
            v
        }
        Err(e) => {
            c.corrupt.push((".".into(), format!("cannot list the folder: {e}")));
            c.resume_fails.push(format!("the folder cannot be listed: {e}"));
            return c;
        }
    };
    let has = |f: &str| present.iter().any(|p| p == f);

    // training_args.bin first: the checkpoint's own arguments decide its expected files.
    let ta = dir.join("training_args.bin");
    let mut expect = run_expect;
    let ta_state = if has("training_args.bin") {
        match training_args::read_training_args(&ta) {
            Ok(a) => {
                expect = Expect { world: run_expect.world, ranks: run_expect.ranks, role: run_expect.role, ..Expect::from_args(&a, profile, run_expect.config) };
                c.launch = a.launch.clone().ok().flatten();
                if let Err(e) = &a.launch {
                    c.notes.push(format!("{}: the world size that wrote it is unknown", training_args::strip_path(e, &ta)));
                }
                c.args = Some(a);
                FileState::Ok
            }
            Err(e) => classify(&training_args::strip_path(&e, &ta)),
        }
    } else {
        FileState::Missing
    };

    // Weights.
    let preferred = expect.weights_file();
    let index = format!("{preferred}.index.json");
    // A PEFT model's save writes its adapter instead of the full weights.
    let adapter = ["adapter_model.safetensors", "adapter_model.bin"].into_iter().find(|f| has(f));
    let (weights_name, weights_state) = if has(preferred) {
        (preferred.to_string(), check_weights(&dir.join(preferred)))
    } else if has(&index) {
        (index.clone(), check_index(dir, &index))
    } else if let Some(a) = adapter {
        (a.to_string(), check_weights(&dir.join(a)))
    } else {
        (preferred.to_string(), FileState::Missing)
    };
    // A disk whose processes do not save the weights ([`DiskRole`]) holds none by design.
    let model_files = expect.role == DiskRole::Saving;
    let state_files = expect.role != DiskRole::RngOnly;
    if model_files || weights_state != FileState::Missing {
        c.files.push((weights_name.clone(), weights_state.clone()));
    }
    // The other weights file, when present, is read too (a resume may take it).
    let other = if preferred == "model.safetensors" { "pytorch_model.bin" } else { "model.safetensors" };
    let other_state = if has(other) { Some(check_weights(&dir.join(other))) } else { None };
    if let Some(s) = &other_state {
        c.files.push((other.to_string(), s.clone()));
    }

    // config.json.
    let config_state = if has("config.json") {
        match crate::formats::pyjson::read_file(dir.join("config.json")) {
            Ok(PyJson::Dict(d)) => {
                c.config_version = d.iter().rev().find(|(k, _)| k == "transformers_version").and_then(|(_, v)| match v {
                    PyJson::Str(s) => Some(s.clone()),
                    _ => None,
                });
                FileState::Ok
            }
            Ok(_) => FileState::Corrupt("not a JSON object (PretrainedConfig(**config) raises)".into()),
            Err(e) => FileState::Corrupt(e.to_string().trim_start_matches(&format!("{}: ", dir.join("config.json").display())).to_string()),
        }
    } else {
        FileState::Missing
    };
    if (expect.config && model_files) || has("config.json") {
        c.files.push(("config.json".into(), config_state.clone()));
    }
    if state_files || has("training_args.bin") {
        c.files.push(("training_args.bin".into(), ta_state));
    }

    // trainer_state.json.
    let fields = state_fields(profile);
    let ts_state = if has("trainer_state.json") {
        let p = dir.join("trainer_state.json");
        match crate::formats::pyjson::read_file(&p) {
            Ok(v @ PyJson::Dict(_)) => {
                let unknown: Vec<String> = match &v {
                    PyJson::Dict(d) => d.iter().map(|(k, _)| k.clone()).filter(|k| !fields.contains(k)).collect(),
                    _ => vec![],
                };
                let gs_ok = v.get("global_step").is_none_or(|g| int(g).is_some());
                let state = if !unknown.is_empty() {
                    FileState::Corrupt(format!(
                        "key(s) {} unknown to {}'s TrainerState (TrainerState(**json) raises TypeError)",
                        unknown.join(", "),
                        profile.version
                    ))
                } else if !gs_ok {
                    FileState::Corrupt("global_step is not an int".into())
                } else {
                    FileState::Ok
                };
                c.state = Some(v);
                state
            }
            Ok(_) => FileState::Corrupt("not a JSON object (TrainerState(**json) raises TypeError)".into()),
            Err(e) => FileState::Corrupt(training_args::strip_path(&e.to_string(), &p)),
        }
    } else {
        FileState::Missing
    };
    if state_files || has("trainer_state.json") {
        c.files.push(("trainer_state.json".into(), ts_state.clone()));
    }

    // Optimizer, scheduler, RNG.
    let opt = if has("optimizer.pt") { Some(check_torch(&dir.join("optimizer.pt"), Kind::Optimizer)) } else { None };
    let sch = if has("scheduler.pt") { Some(check_torch(&dir.join("scheduler.pt"), Kind::Dict)) } else { None };
    let want_opt = !expect.save_only_model;
    for (f, s) in [("optimizer.pt", &opt), ("scheduler.pt", &sch)] {
        if (want_opt && state_files) || s.is_some() {
            c.files.push((f.to_string(), s.clone().unwrap_or(FileState::Missing)));
        }
    }
    // RNG state: every rng file present is read; the expected ones are those of the world size
    // that wrote the folder (its own training_args.bin, else the run's) and of the ranks on
    // this disk: `rng_state.pth` for one process, `rng_state_{rank}.pth` in a launch.
    c.single_rng = has("rng_state.pth");
    c.rng_ranks = present.iter().filter_map(|f| launch::rank_of(f)).collect();
    c.rng_ranks.sort();
    c.world = c.launch.as_ref().map(|l| l.num_processes).or(expect.world);
    let mut rng_files: Vec<(String, Option<usize>)> = vec![];
    if c.single_rng {
        rng_files.push(("rng_state.pth".into(), None));
    }
    rng_files.extend(c.rng_ranks.iter().map(|r| (launch::rng_file(2, *r), Some(*r))));
    for (f, _) in &rng_files {
        c.files.push((f.clone(), check_torch(&dir.join(f), Kind::Rng)));
    }
    let expected_rng: Vec<(String, Option<usize>)> = if !want_opt {
        vec![]
    } else {
        match c.world {
            Some(1) => vec![("rng_state.pth".into(), None)],
            None if c.rng_ranks.is_empty() && state_files => vec![("rng_state.pth".into(), None)],
            Some(n) => expect.ranks.for_world(n).unwrap_or_default().into_iter().map(|r| (launch::rng_file(n, r), Some(r))).collect(),
            None => vec![],
        }
    };
    for (f, _) in &expected_rng {
        if !rng_files.iter().any(|(g, _)| g == f) {
            c.files.push((f.clone(), FileState::Missing));
        }
    }
    match c.world {
        Some(n) if n > 1 => {
            let outside: Vec<usize> = c.rng_ranks.iter().copied().filter(|r| *r >= n).collect();
            if !outside.is_empty() {
                c.notes.push(format!(
                    "{}: rank(s) {} are no process of the world of {n} that wrote this folder (training_args.bin): no process of a resume with {n} reads them; another launch wrote them",
                    outside.iter().map(|r| launch::rng_file(2, *r)).collect::<Vec<_>>().join(", "),
                    launch::ranks_text(&outside)
                ));
            }
            if c.single_rng {
                c.notes.push(format!("rng_state.pth is a one-process save's file, beside a launch of {n}'s: only a resume with 1 process reads it"));
            }
        }
        Some(1) if !c.rng_ranks.is_empty() => c.notes.push(format!(
            "{} are a launch's files, in a folder one process wrote (training_args.bin: world size 1): only a resume with several processes reads them",
            c.rng_ranks.iter().map(|r| launch::rng_file(2, *r)).collect::<Vec<_>>().join(", ")
        )),
        _ => {}
    }

    if has("scaler.pt") {
        c.files.push(("scaler.pt".into(), check_torch(&dir.join("scaler.pt"), Kind::Dict)));
    }
    if expect.save_only_model {
        c.notes.push("save_only_model: no optimizer, scheduler or RNG state by design; a resume starts them afresh".into());
    }
    // What kind of model the Trainer saved (HF's `_save` branches; contract v3's model kinds).
    if let Some(a) = adapter.filter(|_| !has(preferred) && !has(other)) {
        c.notes.push(format!(
            "a peft adapter checkpoint ({a}{}): the base model is not in it; PeftModel.from_pretrained(base_model, folder) loads it",
            if has("adapter_config.json") { ", adapter_config.json" } else { "" }
        ));
        if !has("adapter_config.json") {
            c.notes.push("no adapter_config.json: the Trainer's resume still loads the adapter into its PeftModel, but PeftModel.from_pretrained(base_model, folder) cannot".into());
        }
    } else if !has("config.json") && (has(preferred) || has(other)) {
        c.notes.push("a state dict only, no config.json: the Trainer's model was not a PreTrainedModel (\"only saving its state dict\"); rebuild the module in code and load_state_dict".into());
    }

    // Anything else: JSON parses, torch files read; not required.
    for f in &present {
        if c.files.iter().any(|(n, _)| n == f) || *f == index {
            continue;
        }
        if f == "checkpoint-is-incomplete.txt" {
            c.sentinel = true;
            continue;
        }
        let p = dir.join(f);
        let st = if p.is_dir() {
            continue;
        } else if f.ends_with(".json") {
            match crate::formats::pyjson::read_file(&p) {
                Ok(_) => FileState::Ok,
                Err(e) => FileState::Corrupt(training_args::strip_path(&e.to_string(), &p)),
            }
        } else if f.ends_with(".pt") || f.ends_with(".pth") || f.ends_with(".bin") {
            check_torch(&p, Kind::Any)
        } else if f.ends_with(".safetensors") {
            check_weights(&p)
        } else {
            continue;
        };
        c.files.push((f.clone(), st));
    }

    for (f, s) in &c.files {
        match s {
            FileState::Missing => c.missing.push(f.clone()),
            FileState::Corrupt(why) => c.corrupt.push((f.clone(), why.clone())),
            FileState::Code(g) => c.code.push(CodeFile { file: f.clone(), code: g.clone(), on_resume: OnResume::NotLoaded(String::new()) }),
            FileState::Ok => {}
        }
    }
    // A file that calls code is not what a save writes: the folder is not complete.
    c.complete = c.missing.is_empty() && c.corrupt.is_empty() && c.code.is_empty() && !c.sentinel;
    if c.sentinel {
        c.notes.push("checkpoint-is-incomplete.txt is present: HF 5.x's JIT checkpoint was still being written".into());
    }

    // The resume verdict.
    let mut weights_loaded: Option<String> = None;
    let any_weights = present.iter().any(|f| {
        ["pytorch_model.bin", "model.safetensors", "pytorch_model.bin.index.json", "model.safetensors.index.json", "adapter_model.bin", "adapter_model.safetensors"]
            .contains(&f.as_str())
    });
    if !any_weights {
        c.weights_fails.push(format!("no weights file: _load_from_checkpoint raises ValueError(\"Can't find a valid checkpoint at {}\")", c.name));
    } else {
        // The file _load_from_checkpoint loads: safetensors when preferred and present.
        let (loaded, state) = if preferred == "model.safetensors" && has("model.safetensors") {
            ("model.safetensors", weights_state.clone())
        } else if has("pytorch_model.bin") {
            ("pytorch_model.bin", if preferred == "pytorch_model.bin" { weights_state.clone() } else { other_state.clone().unwrap_or(FileState::Missing) })
        } else if has(&index) || has("model.safetensors.index.json") || has("pytorch_model.bin.index.json") {
            ("the sharded weights", weights_state.clone())
        } else if let Some(a) = adapter {
            (a, weights_state.clone())
        } else {
            ("pytorch_model.bin", FileState::Missing)
        };
        match state {
            FileState::Missing => c.weights_fails.push(format!(
                "it loads {loaded}, which is absent (save_safetensors=False: torch.load raises FileNotFoundError)"
            )),
            FileState::Corrupt(why) => c.weights_fails.push(format!("{loaded} does not load: {why}")),
            _ => {}
        }
        weights_loaded = Some(if loaded == "the sharded weights" { weights_name.clone() } else { loaded.to_string() });
    }
    c.resume_fails.extend(c.weights_fails.iter().cloned());
    if let FileState::Corrupt(why) = &config_state {
        c.resume_fails.push(format!("config.json does not parse (PretrainedConfig.from_json_file raises): {why}"));
    }
    match &ts_state {
        FileState::Missing if resume.requires_trainer_state => {
            c.resume_fails.push("trainer_state.json is missing: train() reads it unconditionally (FileNotFoundError)".into())
        }
        FileState::Missing => c.resume_degraded.push(
            "trainer_state.json is missing: the resumed run starts at step 0 with this checkpoint's weights (this release reads the state only when the file exists)".into(),
        ),
        FileState::Corrupt(why) => c.resume_fails.push(format!("trainer_state.json does not load: {why}")),
        _ => {}
    }
    match (&opt, &sch) {
        (Some(o), Some(s)) => {
            for (f, st) in [("optimizer.pt", o), ("scheduler.pt", s)] {
                if let FileState::Corrupt(why) = st {
                    c.resume_fails.push(format!("{f} does not load: {why}"));
                }
            }
        }
        _ if !expect.save_only_model => {
            let gone: Vec<&str> = [("optimizer.pt", &opt), ("scheduler.pt", &sch)].iter().filter(|(_, s)| s.is_none()).map(|(f, _)| *f).collect();
            c.resume_degraded.push(format!(
                "{} missing: HF loads optimizer and scheduler only when both exist, so the resumed run silently starts both afresh",
                gone.join(" and ")
            ));
        }
        _ => {}
    }
    for (f, st) in &c.files {
        let rank = launch::rank_of(f);
        if f != "rng_state.pth" && rank.is_none() {
            continue;
        }
        match st {
            FileState::Corrupt(why) => c.resume_fails.push(match rank {
                Some(r) => format!("{f} does not load: {why} (process {r}'s _load_rng_state raises, and the launch fails with it)"),
                None => format!("{f} does not load: {why}"),
            }),
            FileState::Missing => c.resume_degraded.push(missing_rng_text(f, c.world.unwrap_or(1), rank)),
            _ => {}
        }
    }

    // Files that call code: what this release's resume does with each.
    let both_state_files = opt.is_some() && sch.is_some();
    let mut code = std::mem::take(&mut c.code);
    for cf in &mut code {
        cf.on_resume = on_resume(profile, &cf.file, &cf.code, weights_loaded.as_deref(), both_state_files);
        match &cf.on_resume {
            OnResume::Refused(how) => {
                let why = format!("{} calls {}: {how}", cf.file, cf.code.global);
                if Some(cf.file.as_str()) == weights_loaded.as_deref() {
                    c.weights_fails.push(why.clone());
                }
                c.resume_fails.push(why);
            }
            OnResume::Runs(how) => c.resume_runs_code.push(format!("{} calls {}: {how}", cf.file, cf.code.global)),
            OnResume::NotLoaded(_) => {}
        }
    }
    c.code = code;

    // A disk whose processes do not save the weights: a resume from it raises in
    // `_load_from_checkpoint` before anything else is read; that is what HF leaves here.
    if let (Some(why), false) = (expect.role.why_no_weights(profile), any_weights) {
        c.resume_by_design.push(format!(
            "no weights file on this disk ({why}): _load_from_checkpoint raises ValueError(\"Can't find a valid checkpoint at {}\") in this node's processes, and the launch fails with them",
            c.name
        ));
        // Nothing after that is read: damage in the other files is still reported as such.
        c.resume_fails.clear();
        c.resume_runs_code.clear();
        c.weights_fails.clear();
        c.resume_degraded.clear();
    }
    c
}

/// What `train(resume_from_checkpoint=<folder>)` of this release does with `file` when its
/// pickle calls a global off the allow-list: per HF loader, the `torch.load` call of the release
/// (the resume table's `*_load` rows) under the profile's torch default (the torch table's
/// `load_weights_only_default`). `weights_loaded` is the weights file `_load_from_checkpoint`
/// loads; `both_state_files`: optimizer.pt and scheduler.pt are both present (HF loads neither
/// otherwise).
pub fn on_resume(profile: &Profile, file: &str, code: &CodeGlobal, weights_loaded: Option<&str>, both_state_files: bool) -> OnResume {
    let rules = profile.resume_rules();
    let torch_default = profile.torch_layout.load_weights_only_default;
    let v = profile.version;
    let by = |load: TorchLoad, loader: &str| -> OnResume {
        let call = match load {
            TorchLoad::WeightsOnly => format!("{v}'s {loader} calls torch.load({file}, weights_only=True)"),
            TorchLoad::TorchDefault => format!(
                "{v}'s {loader} calls torch.load({file}) without weights_only, which torch {} (this release's torch line) defaults to {}",
                profile.torch,
                if torch_default { "True" } else { "False" }
            ),
        };
        if load.weights_only(torch_default) {
            OnResume::Refused(format!(
                "{call}, which refuses it (UnpicklingError: Weights only load failed ... {}), so the resume fails before running it",
                code.global
            ))
        } else {
            OnResume::Runs(format!("{call}, which imports and calls {} while unpickling: the resume runs that code", code.global))
        }
    };
    match file {
        "optimizer.pt" | "scheduler.pt" if both_state_files => by(rules.optimizer_scheduler_load, "_load_optimizer_and_scheduler"),
        "optimizer.pt" | "scheduler.pt" => OnResume::NotLoaded(format!(
            "{v}'s resume loads optimizer.pt and scheduler.pt only when both exist, so it skips {file}"
        )),
        f if f == "rng_state.pth" || (f.starts_with("rng_state_") && f.ends_with(".pth")) => by(rules.rng_state_load, "_load_rng_state"),
        f if Some(f) == weights_loaded && !f.ends_with(".safetensors") && !f.ends_with(".json") => {
            by(rules.weights_file_load, "_load_from_checkpoint (and _load_best_model)")
        }
        "training_args.bin" => OnResume::NotLoaded(
            "a resume never reads training_args.bin; torch.load(training_args.bin, weights_only=False), which reading a TrainingArguments back needs, runs that code".into(),
        ),
        f if f.ends_with(".index.json") => OnResume::NotLoaded(format!(
            "{v}'s resume loads the shards through load_sharded_checkpoint, whose torch.load this inspection does not model; unpickled without weights_only, the shard runs that code"
        )),
        "scaler.pt" => OnResume::NotLoaded(format!(
            "{v}'s resume reads scaler.pt only with fp16 loss scaling (not modelled here); unpickled without weights_only, it runs that code"
        )),
        _ => OnResume::NotLoaded(format!(
            "{v}'s resume does not load {file}; anything that unpickles it without weights_only runs that code"
        )),
    }
}

/// A reader's error message (training_args.bin's come as text): a refused global is code,
/// everything else corrupt.
fn classify(msg: &str) -> FileState {
    match refused_global(msg) {
        Some(g) => FileState::Code(g),
        None => FileState::Corrupt(msg.to_string()),
    }
}

/// The global and place of a [`FormatError::RefusedGlobal`] message (`data.pkl: refusing global
/// posix.system at byte 2 (not on the allow-list)`), prefixed or not.
fn refused_global(msg: &str) -> Option<CodeGlobal> {
    let (head, rest) = msg.split_once("refusing global ")?;
    let (global, tail) = rest.split_once(" at byte ")?;
    let byte = tail.split(' ').next().unwrap_or(tail);
    let record = head.trim_end().trim_end_matches(':').rsplit(": ").next().unwrap_or("").trim();
    let at = if record.is_empty() { format!("byte {byte}") } else { format!("{record} at byte {byte}") };
    Some(CodeGlobal { global: global.to_string(), at })
}

#[derive(Clone, Copy, PartialEq)]
enum Kind {
    /// `optimizer.load_state_dict` needs `state` and `param_groups`.
    Optimizer,
    /// `rng_state.pth`: `_load_rng_state` indexes `python`, `numpy`, `cpu`.
    Rng,
    /// A state dict (`scheduler.load_state_dict`, `scaler`).
    Dict,
    Any,
}

/// Reads a torch file fully: its pickle and small records (lazily, so tensors stay in the file:
/// shapes, strides and storage bounds are still checked against it), then every zip record once
/// more, one at a time, for its CRC32 (a multi-GB optimizer.pt is never held in memory whole).
fn load_torch(path: &Path) -> Result<Value, FileState> {
    let corrupt = |e: FormatError| FileState::Corrupt(training_args::strip_path(&e.to_string(), path));
    let opts = LoadOptions { lazy: true, verify_crc: true, ..LoadOptions::default() };
    let v = match torch_format::load_with(path, &opts) {
        Ok(l) => l.value,
        Err(FormatError::RefusedGlobal { record, offset, global, .. }) => {
            return Err(FileState::Code(CodeGlobal { global, at: format!("{record} at byte {offset}") }))
        }
        Err(e) => return Err(corrupt(e)),
    };
    let mut f = std::fs::File::open(path).map_err(|e| FileState::Corrupt(format!("open failed: {e}")))?;
    let entries = torch_format::zip::read_directory(&mut f).map_err(corrupt)?;
    for e in &entries {
        torch_format::zip::read_entry(&mut f, e, true).map_err(corrupt)?;
    }
    Ok(v)
}

/// Reads a torch file fully and checks its top-level shape.
fn check_torch(path: &Path, kind: Kind) -> FileState {
    let v = match load_torch(path) {
        Ok(v) => v,
        Err(s) => return s,
    };
    let keys = |need: &[&str]| -> FileState {
        let Some(d) = v.as_dict() else { return FileState::Corrupt("not a dict".into()) };
        let missing: Vec<&&str> = need.iter().filter(|k| !d.iter().any(|(kk, _)| kk.as_str() == Some(**k))).collect();
        if missing.is_empty() {
            FileState::Ok
        } else {
            FileState::Corrupt(format!("no key {} (HF indexes it)", missing.iter().map(|k| format!("'{k}'")).collect::<Vec<_>>().join(", ")))
        }
    };
    match kind {
        Kind::Optimizer => keys(&["state", "param_groups"]),
        Kind::Rng => keys(&["python", "numpy", "cpu"]),
        Kind::Dict => keys(&[]),
        Kind::Any => FileState::Ok,
    }
}

/// A weights file: safetensors (every tensor read) or a torch state dict of tensors.
fn check_weights(path: &Path) -> FileState {
    if path.extension().is_some_and(|e| e == "safetensors") {
        // The header (sizes, dtypes, offsets tiling the data), then each tensor read, one at a time.
        let read = || -> torch_format::Result<()> {
            let st = crate::formats::safetensors::read_header(path)?;
            for t in &st.tensors {
                st.tensor(t)?;
            }
            Ok(())
        };
        return match read() {
            Ok(()) => FileState::Ok,
            Err(e) => FileState::Corrupt(training_args::strip_path(&e.to_string(), path)),
        };
    }
    match load_torch(path) {
        Ok(v) => match v.as_dict() {
            Some(d) if d.iter().all(|(_, t)| t.as_tensor().is_some()) => FileState::Ok,
            _ => FileState::Corrupt("not a state dict of tensors".into()),
        },
        Err(s) => s,
    }
}

/// A sharded checkpoint: the index parses and every shard it names reads.
fn check_index(dir: &Path, index: &str) -> FileState {
    let p = dir.join(index);
    let v = match crate::formats::pyjson::read_file(&p) {
        Ok(v) => v,
        Err(e) => return FileState::Corrupt(training_args::strip_path(&e.to_string(), &p)),
    };
    let Some(PyJson::Dict(map)) = v.get("weight_map") else {
        return FileState::Corrupt("no weight_map".into());
    };
    let mut shards: Vec<String> = map.iter().filter_map(|(_, f)| if let PyJson::Str(s) = f { Some(s.clone()) } else { None }).collect();
    shards.sort();
    shards.dedup();
    for s in shards {
        let sp = dir.join(&s);
        if !sp.is_file() {
            return FileState::Corrupt(format!("shard {s} is missing"));
        }
        match check_weights(&sp) {
            FileState::Corrupt(why) => return FileState::Corrupt(format!("shard {s}: {why}")),
            FileState::Code(g) => return FileState::Code(CodeGlobal { global: g.global, at: format!("shard {s}, {}", g.at) }),
            _ => {}
        }
    }
    FileState::Ok
}
