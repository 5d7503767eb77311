//! The executor: the only place that runs training and touches disk (burn-train's shape: the
//! policies decide, this applies). It follows HF's `Trainer` method by method, one module per
//! part of trainer.py, so that a reader can put the two side by side:
//!
//! | module | HF |
//! |---|---|
//! | this file | `Trainer.__init__`, and the runner's calls: `train()`, the `finally` calls, result.json |
//! | [`train_loop`] | `_inner_training_loop`: the epochs, micro-batches and optimizer steps, `_maybe_log_save_evaluate`, the end of training (`_load_best_model`, the save_total_limit=1 cleanup) |
//! | [`evaluate`] | `evaluate()` / `evaluation_loop`, `_determine_best_metric`, the ReduceLROnPlateau step |
//! | [`callbacks`] | `EarlyStoppingCallback`, `stateful_callbacks` |
//! | [`inputs`] | `label_names`' default, `_set_signature_columns_if_needed` / `remove_unused_columns`, `_prepare_inputs`' empty-batch error |
//! | [`optimizer`] | `create_optimizer_and_scheduler` (the optimizer and scheduler HF builds) |
//! | [`checkpoint`] | `_save_checkpoint`, `_save`, `_rotate_checkpoints`, `save_model()`, `save_state()` |
//! | [`resume`] | `train(resume_from_checkpoint=...)`: `_load_from_checkpoint`, `_load_optimizer_and_scheduler`, `_load_rng_state` |
//! | [`damaged`] | the exceptions HF raises for a checkpoint file cut short |
//! | [`plan`] | plan mode: the same executor without tensor math, its evaluations fed given or assumed metrics |
//!
//! Every version difference comes from the [`Profile`].
//!
//! Invariant: uses every layer below ([`crate::save`] for the files, [`crate::policy`] for the
//! decisions, [`crate::world`] for what it trains) and none above: the harness and the answers
//! drive it through the entry points here.

mod callbacks;
mod checkpoint;
mod damaged;
mod evaluate;
mod inputs;
mod optimizer;
mod plan;
mod resume;
mod train_loop;

pub use plan::{plan, plan_resumed, PlanMetrics, PlanTrace, ResumeTrace};
pub use resume::ResumeFrom;

use crate::formats::pyjson::{DumpOptions, PyJson};
use crate::hf::args::{self, Args, Interval};
use crate::hf::behaviors::{CallbackRefresh, GaKwargs, WithoutUseCpu};
use crate::hf::error::HfError;
use crate::hf::profile::Profile;
use crate::hf::state::{Best, Control, Intervals, TrainerState};
use crate::numerics::lr::{Schedule, ScheduleKind};
use crate::numerics::optim;
use crate::numerics::sampler::TrainRngTracker;
use crate::world::data::DataSet;
use crate::world::launch::{Disks, LaunchSpec, Rank};
use crate::world::model::Model;
use crate::world::scenario::{FinallyCall, Scenario, ScenarioError};
use optimizer::{Optim, Scheduler};
use plan::PlanFeed;
use resume::Resumed;
use std::fmt;
use std::path::{Path, PathBuf};

/// The tool's own failures (never an HF outcome: those are recorded in result.json).
#[derive(Debug)]
pub enum RunError {
    Scenario(ScenarioError),
    Io { path: PathBuf, source: std::io::Error },
    /// A part of the trainer that does not exist yet: reported as "not yet implemented".
    NotImplemented(String),
}

impl fmt::Display for RunError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RunError::Scenario(e) => write!(f, "{e}"),
            RunError::Io { path, source } => write!(f, "{}: {source}", path.display()),
            RunError::NotImplemented(what) => write!(f, "not yet implemented: {what}"),
        }
    }
}

impl std::error::Error for RunError {}

impl From<ScenarioError> for RunError {
    fn from(e: ScenarioError) -> Self {
        RunError::Scenario(e)
    }
}

/// HF's `Trainer` during one `train()` call and the calls after it: its arguments, model, data,
/// optimizer and scheduler, `TrainerState` and `TrainerControl`, and the loop's own counters
/// (`tr_loss`, `_globalstep_last_logged`, ...). Its methods live in the modules named above,
/// each beside the HF method it reproduces.
struct Trainer<'a> {
    profile: &'a Profile,
    sc: &'a Scenario,
    args: Args,
    run_dir: PathBuf,
    model: Model,
    train: DataSet,
    evals: Vec<DataSet>,
    opt: Optim,
    sched: Scheduler,
    sched_steps: i64,
    state: TrainerState,
    control: Control,
    rng: TrainRngTracker,
    iv: Intervals,
    /// `tr_loss` of each process of the launch (rank order; one for a run of one process).
    tr_loss: Vec<f32>,
    total_loss_scalar: f64,
    last_logged: u64,
    metric_calls: Vec<usize>,
    early_counter: i64,
    early_counter_saved: i64,
    /// enable_jit_checkpoint's `is_checkpoint_requested`: set once the scenario's signal has
    /// been handled, cleared when the handler's callback saves.
    jit_requested: bool,
    /// `train()` has begun: it aligned the model config's special tokens with the tokenizer
    /// (where the release does); a Trainer that never trained writes the config as built.
    train_called: bool,
    /// EarlyStoppingCallback's (patience, threshold) when `_load_callback_state` rebuilt it from
    /// a checkpoint's stored arguments (None: the scenario's).
    early_restored: Option<(i64, f64)>,
    current_lr: f64,
    /// `Trainer.current_flos`: the int 0 until a batch adds its (float) estimate.
    current_flos: args::Num,
    events: Vec<DiskEvent>,
    mode: SaveMode,
    /// `false` in a plan: no tensor math (the weights stay the initial ones, losses are 0);
    /// every decision is taken as in a trained run.
    numerics: bool,
    /// A plan's evaluation results (None: a trained run computes them).
    plan: Option<PlanFeed>,
    /// `train(resume_from_checkpoint=...)`: what was read from the checkpoint before the loop.
    resume: Option<Resumed>,
    /// `_initial_global_step`: the global step this `train()` call started from.
    initial_global_step: u64,
    /// `self._train_batch_size` from a resumed checkpoint's trainer_state.json (`train()`: "in
    /// case of repeating the find_executable_batch_size"): where the release does so
    /// (`batch_size_from_state`), the resumed run batches as the first did, whatever
    /// per_device_train_batch_size now says.
    state_batch_size: Option<usize>,
    /// The processes and disks of this run (contract v3 part 2). `run_dir` is global rank 0's
    /// working directory (`node-0/` with per-node disks); `root_dir` the run directory.
    launch: LaunchSpec,
    root_dir: PathBuf,
    /// Each process's gradients accumulated since the last optimizer step (a launch of several
    /// processes: DDP's `no_sync` micro-batches), reduced at the step.
    rank_grads: Vec<Vec<tch::Tensor>>,
    /// DDP all-reduced the processes' gradients at the last micro-batch (its backward ran
    /// outside `no_sync`): the optimizer step then sees their mean. Otherwise each process
    /// steps with its own gradients and the processes' parameters part ways.
    reduced_at_last_micro: bool,
    /// The processes' parameters have parted ways (a step without an all-reduce before it,
    /// 4.46): the main process's are the model's; training on from there is not modelled.
    ranks_diverged: bool,
    /// The process whose `_save_checkpoint` is being written (the main one but while another
    /// node's first process writes its own checkpoint).
    writer: Rank,
    /// The second process's generator tracker where a resume left it different from the main
    /// process's (one of their rng files missing); it follows the same draws from then on.
    other_rng: Option<TrainRngTracker>,
    /// accelerate's own gradient accumulation where its `num_steps` is not the Trainer's
    /// (`accelerator_config`'s gradient_accumulation_kwargs, 4.40-4.45: `GaKwargs::Plugin`):
    /// `backward` divides the loss by it and the optimizer steps only at every `num_steps`-th
    /// batch `accumulate` has counted (`accel_batches`). The count starts at 0 with every
    /// Trainer, a resumed one included: the new Accelerator counts from the first batch it trains
    /// (golden: args-accelerator-config-grad-acc-num-steps-resume, resumed at an odd step).
    accel_num_steps: Option<usize>,
    accel_batches: u64,
}

/// How the executor puts a checkpoint folder on disk. The folder's files are the same in both.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SaveMode {
    /// As HF does it: files written straight into `checkpoint-N` (or, for 4.36-4.38, into
    /// `tmp-checkpoint-N` renamed at the end, as those releases do), nothing fsynced.
    #[default]
    HfCompatible,
    /// Written into a staging folder HF never matches, every file and the folder fsynced, then
    /// published by one rename and the parent fsynced; rotation after the publish; a staging
    /// leftover of a killed run removed on the next save ([`crate::save::atomic`]).
    Atomic,
}

/// What the executor did to checkpoint folders, in order (the snapshots' timeline).
#[derive(Debug, Clone, PartialEq)]
pub enum DiskEvent {
    /// `checkpoint-<step>` written; `best` as it stands right after.
    Saved { step: u64, folder: String, best: Best },
    /// A folder deleted at `step`, and by which rule.
    Deleted { step: u64, folder: String, why: DeleteRule },
    /// Contract v2: the first run ended (and the scenario's damage was applied); the events after
    /// this are the second Trainer's, `train(resume_from_checkpoint=...)`.
    Resumed,
}

/// Why the executor deleted a checkpoint folder.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeleteRule {
    /// `_rotate_checkpoints` after a save.
    SaveTotalLimit,
    /// `save_total_limit=1` with a best checkpoint: at the end of train(), every other folder.
    EndOfTrainCleanup,
}

impl fmt::Display for DeleteRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            DeleteRule::SaveTotalLimit => "save_total_limit",
            DeleteRule::EndOfTrainCleanup => "save_total_limit=1 end-of-train cleanup",
        })
    }
}

/// Runs a scenario; HF's outcome (including its errors) goes to result.json.
pub fn run(sc: &Scenario, profile: &Profile, run_dir: &Path) -> Result<(), RunError> {
    run_traced(sc, profile, run_dir).map(|_| ())
}

/// [`run`] with the given [`SaveMode`].
pub fn run_with(sc: &Scenario, profile: &Profile, run_dir: &Path, mode: SaveMode) -> Result<(), RunError> {
    run_traced_with(sc, profile, run_dir, mode).map(|_| ())
}

/// [`run`], returning what happened to checkpoint folders.
pub fn run_traced(sc: &Scenario, profile: &Profile, run_dir: &Path) -> Result<Vec<DiskEvent>, RunError> {
    run_traced_with(sc, profile, run_dir, SaveMode::HfCompatible)
}

/// [`run_traced`] with the given [`SaveMode`].
pub fn run_traced_with(sc: &Scenario, profile: &Profile, run_dir: &Path, mode: SaveMode) -> Result<Vec<DiskEvent>, RunError> {
    run_phase(sc, profile, run_dir, mode, Phase::All)
}

/// Which part of a scenario to run (contract v2). A scenario without `resume` has one run: every
/// phase but [`Phase::Second`] is all of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// The first run, the damage, the resumed second run; result.json with `first`.
    All,
    /// The first run and the damage only; result.json is the first run's (as v1 writes it).
    /// Cross-resume tests hand such a run directory to the other implementation.
    First,
    /// The second run in a run directory [`Phase::First`] left (by either implementation); the
    /// first run's outcome is read from its result.json.
    Second,
}

/// [`run_traced_with`] for one [`Phase`]; the events of both runs, in order.
pub fn run_phase(sc: &Scenario, profile: &Profile, run_dir: &Path, mode: SaveMode, phase: Phase) -> Result<Vec<DiskEvent>, RunError> {
    run_scenario(sc, profile, run_dir, mode, phase, None)
}

/// A scenario's runs, trained ([`run_phase`]) or planned ([`plan()`], `plan` the feed of its
/// evaluations): the first run, the damage and the resumed second run are the same code for
/// both, so a plan resumes exactly as a trained run does.
fn run_scenario(sc: &Scenario, profile: &Profile, run_dir: &Path, mode: SaveMode, phase: Phase, mut plan: Option<&mut PlanFeed>) -> Result<Vec<DiskEvent>, RunError> {
    let mut events = vec![];
    let first = if phase == Phase::Second {
        let path = run_dir.join("result.json");
        let r = crate::formats::pyjson::read_file(&path).map_err(|e| RunError::Io { path: path.clone(), source: std::io::Error::other(e.to_string()) })?;
        let (error, state) = (r.get("error").cloned().unwrap_or(PyJson::Null), r.get("final_state").cloned().unwrap_or(PyJson::Null));
        if sc.resume.is_none() || error != PyJson::Null {
            return Err(RunError::NotImplemented(format!("{}: the second phase needs a resume scenario whose first run succeeded", sc.name)));
        }
        (error, state, r.get("ranks").cloned())
    } else {
        // `earlier` (contract v3 part 3 a): what the output folder holds before the Trainer.
        crate::world::scenario::Earlier::apply_all(&sc.earlier, run_dir).map_err(|source| RunError::Io { path: run_dir.join("output"), source })?;
        let mut state_out: Option<PyJson> = None;
        let outcome = run_inner(sc, profile, run_dir, mode, plan.as_deref_mut(), None, &mut state_out, &mut events);
        let error = error_json(outcome)?;
        let first = (ranks_json(profile, &sc.first_launch(), &error), error, state_out.unwrap_or(PyJson::Null));
        let first = (first.1, first.2, first.0);
        match &sc.resume {
            Some(r) if first.0 == PyJson::Null => {
                for d in &r.damage {
                    let path = run_dir.join(d.path());
                    match d {
                        crate::world::scenario::Damage::Reshard { max_shard_size, .. } => crate::save::shards::reshard(&path, *max_shard_size, profile)
                            .map_err(|e| RunError::Io { path: path.clone(), source: std::io::Error::other(e) })?,
                        _ => d.apply(run_dir).map_err(|source| RunError::Io { path, source })?,
                    }
                }
                if phase == Phase::First {
                    write_result(profile, run_dir, first, None)?;
                    return Ok(events);
                }
                first
            }
            _ => {
                write_result(profile, run_dir, first, None)?;
                return Ok(events);
            }
        }
    };
    let r = sc.resume.as_ref().expect("checked above");
    let second = Scenario {
        args: r.args_over(&sc.args),
        model: r.model.clone().unwrap_or_else(|| sc.model.clone()),
        early_stopping: r.early_stopping.clone().unwrap_or_else(|| sc.early_stopping.clone()),
        ..sc.clone()
    };
    let from = if r.from == "last" { ResumeFrom::Last } else { ResumeFrom::Checkpoint(r.from.clone()) };
    let mut state_out: Option<PyJson> = None;
    events.push(DiskEvent::Resumed);
    if let Some(feed) = plan.as_deref_mut() {
        feed.begin_second_run();
    }
    let outcome = run_inner(&second, profile, run_dir, mode, plan, Some(&from), &mut state_out, &mut events);
    let error = error_json(outcome)?;
    let ranks = ranks_json(profile, &sc.second_launch(), &error);
    write_result(profile, run_dir, (error, state_out.unwrap_or(PyJson::Null), ranks), Some(first))?;
    Ok(events)
}

/// A second `train(resume_from_checkpoint=...)` in `run_dir`, by a fresh Trainer built as for
/// [`run`] (same scenario, same arguments), after a first run left its checkpoints in
/// `run_dir/output`; rewrites `result.json` with this run's outcome (HF's error for a missing
/// or damaged checkpoint included).
///
/// It follows each release's `train` / `_inner_training_loop` resume path (where they differ,
/// `ResumeBehaviors`) and is checked against the real HF of every profile (tests/resume.rs):
/// weights from the checkpoint, trainer_state.json, optimizer and scheduler (AdamW, SGD,
/// LambdaLR, ReduceLROnPlateau, GreedyLR) when both files exist, the pass over the epochs
/// already trained, the rng state when `rng_state.pth` exists (at the epoch's start, or at the
/// first batch after fast-forwarding), callback states not restored
/// (`restore_callback_states_from_checkpoint` defaults to False), and HF's exceptions for
/// missing or truncated files.
pub fn resume(sc: &Scenario, profile: &Profile, run_dir: &Path, mode: SaveMode, from: &ResumeFrom) -> Result<Vec<DiskEvent>, RunError> {
    let mut state_out: Option<PyJson> = None;
    let mut events = vec![];
    let outcome = run_inner(sc, profile, run_dir, mode, None, Some(from), &mut state_out, &mut events);
    let error = error_json(outcome)?;
    let ranks = ranks_json(profile, &sc.second_launch(), &error);
    write_result(profile, run_dir, (error, state_out.unwrap_or(PyJson::Null), ranks), None)?;
    Ok(events)
}

/// HF's outcome as result.json's `error` (an error HF raised is a result; a gap in the model is
/// the tool's "not implemented").
fn error_json(outcome: Result<(), HfError>) -> Result<PyJson, RunError> {
    match outcome {
        Ok(()) => Ok(PyJson::Null),
        Err(HfError::NotModelled(what)) => Err(RunError::NotImplemented(what)),
        Err(HfError::Raised { type_, message }) => Ok(PyJson::Dict(vec![
            ("type".into(), PyJson::Str(type_)),
            ("message".into(), PyJson::Str(message)),
        ])),
    }
}

/// `result.json`: (error, final_state) of the run, and of the first run of a resume scenario.
/// One phase's outcome for result.json: (error, final_state, the `ranks` of a launch of several
/// processes).
type PhaseOutcome = (PyJson, PyJson, Option<PyJson>);

/// result.json's `ranks` for a phase of several processes: every process's outcome, by rank.
/// The simulated processes run in lockstep, so each ends with the main process's error.
fn ranks_json(profile: &Profile, launch: &LaunchSpec, error: &PyJson) -> Option<PyJson> {
    (launch.world_size() > 1).then(|| {
        PyJson::List(
            launch
                .ranks()
                .iter()
                .map(|r| {
                    PyJson::Dict(vec![
                        ("rank".into(), PyJson::Int(r.rank as i128)),
                        ("node".into(), PyJson::Int(r.node as i128)),
                        ("local_rank".into(), PyJson::Int(r.local_rank as i128)),
                        ("error".into(), if profile.launch_rules().map_location_device_per_process { rank_error(error, r.local_rank) } else { error.clone() }),
                    ])
                })
                .collect(),
        )
    })
}

/// The main process's error as process `local_rank` raises it: torch's storage-location error
/// names the process's own device (`cpu:<local rank>`); every other error reads the same.
fn rank_error(error: &PyJson, local_rank: usize) -> PyJson {
    const TAG: &str = "(tagged with cpu:0)";
    match error {
        PyJson::Dict(d) => PyJson::Dict(
            d.iter()
                .map(|(k, v)| match v {
                    PyJson::Str(m) if k == "message" && m.ends_with(TAG) => {
                        (k.clone(), PyJson::Str(format!("{}(tagged with cpu:{local_rank})", &m[..m.len() - TAG.len()])))
                    }
                    _ => (k.clone(), v.clone()),
                })
                .collect(),
        ),
        other => other.clone(),
    }
}

fn write_result(profile: &Profile, run_dir: &Path, run: PhaseOutcome, first: Option<PhaseOutcome>) -> Result<(), RunError> {
    let mut result = vec![
        ("hf_version".into(), PyJson::Str(profile.version.into())),
        ("error".into(), run.0),
        ("final_state".into(), run.1),
    ];
    if let Some(ranks) = run.2 {
        result.push(("ranks".into(), ranks));
    }
    if let Some((error, state, ranks)) = first {
        let mut f = vec![("error".into(), error), ("final_state".into(), state)];
        if let Some(ranks) = ranks {
            f.push(("ranks".into(), ranks));
        }
        result.push(("first".into(), PyJson::Dict(f)));
    }
    let text = crate::formats::pyjson::dumps(&PyJson::Dict(result), &DumpOptions { indent: Some(2), ..DumpOptions::default() })
        .map_err(|e| RunError::NotImplemented(format!("result.json: {e}")))?;
    let path = run_dir.join("result.json");
    std::fs::write(&path, text + "\n").map_err(|source| RunError::Io { path, source })
}

fn run_inner(
    sc: &Scenario,
    profile: &Profile,
    run_dir: &Path,
    mode: SaveMode,
    mut plan: Option<&mut PlanFeed>,
    resume: Option<&ResumeFrom>,
    state_out: &mut Option<PyJson>,
    events: &mut Vec<DiskEvent>,
) -> Result<(), HfError> {
    let launch = if resume.is_some() { sc.second_launch() } else { sc.first_launch() };
    let args = args::resolve_in(&sc.args, profile, run_dir)?;
    if let Some((k, v)) = sc.args.iter().find(|(k, v)| !args::runs(k, v, profile)) {
        return Err(HfError::not_modelled(match crate::hf::arguments::status(k) {
            crate::hf::arguments::Status::Refused(r) => format!("argument {k}={v}: refused, it {}", r.text()),
            _ => format!("argument {k}={v}"),
        }));
    }
    // Without use_cpu on this machine (no GPU) the world is accelerate's choice
    // (`LaunchBehaviors::without_use_cpu`, found by the differential test).
    let launch = match profile.launch_rules().without_use_cpu {
        _ if launch.world_size() == 1 || args.use_cpu => launch,
        WithoutUseCpu::Gloo => launch,
        // Every process trains alone as process 0 and writes one process's files: on one disk
        // they write the same bytes to the same paths, which is one process's run; result.json
        // still lists every process (ranks_json takes the scenario's launch).
        WithoutUseCpu::EveryProcessAlone if launch.nnodes == 1 || launch.disks == Disks::Shared => LaunchSpec::default(),
        WithoutUseCpu::EveryProcessAlone => {
            return Err(HfError::not_modelled(format!(
                "a launch of {} nodes with per-node disks without use_cpu=True: this release trains every process alone as process 0 (accelerate 1.13+ forms no gloo world without cpu=True), and what another node's process then writes to its own disk (save_pretrained's main-process checks read torch's unused process group) is not modelled; set \"use_cpu\": true",
                launch.nnodes
            )));
        }
    };
    if let Some(ac) = args.accelerator_config.as_ref().filter(|_| launch.world_size() > 1) {
        let set = ac.sharding_set();
        if !set.is_empty() {
            return Err(HfError::not_modelled(format!(
                "argument accelerator_config with {} in a launch of {} processes (they change how accelerate shards and orders the batches of several processes; one process is modelled)",
                set.join(", "),
                launch.world_size()
            )));
        }
        if profile.gradient_accumulation_kwargs == GaKwargs::Plugin && ac.gradient_accumulation_kwargs().is_some_and(|g| g.iter().any(|(k, _)| k == "num_steps")) {
            return Err(HfError::not_modelled(format!(
                "argument accelerator_config with gradient_accumulation_kwargs' num_steps in a launch of {} processes (accelerate's own accumulation decides where DDP reduces; one process is modelled)",
                launch.world_size()
            )));
        }
    }
    let mut t = Trainer::new(sc, profile, args, run_dir, launch)?;
    t.mode = mode;
    if let Some(feed) = plan.as_deref_mut() {
        t.numerics = false;
        t.plan = Some(std::mem::take(feed));
    }
    if profile.stateful_callbacks != CallbackRefresh::Absent {
        // Trainer.__init__ builds its TrainerState with the exportable callbacks' states.
        t.init_stateful_callbacks();
    }
    let res = match resume {
        Some(from) => t.activate_neftune().and_then(|()| t.begin_resume(from)).and_then(|()| t.train()),
        // `"train": false` (contract v3 part 3 f): only the `finally` calls.
        None if !sc.train => Ok(()),
        None => t.activate_neftune().and_then(|()| t.train()),
    };
    let res = res.and_then(|()| {
        for call in &sc.finally_calls {
            match call {
                FinallyCall::SaveModel => t.save_model()?,
                FinallyCall::SaveState => t.save_state()?,
            }
        }
        Ok(())
    });
    *state_out = Some(t.state.to_json(profile));
    events.append(&mut t.events);
    if let (Some(feed), Some(done)) = (plan, t.plan.take()) {
        *feed = done;
    }
    res
}

/// `Trainer.create_accelerator_and_postprocess`'s part in `accelerator_config`: 4.38's kept dict
/// becomes an `AcceleratorConfig` here (its TypeError), and `gradient_accumulation_kwargs` does
/// what the release's `GaKwargs` says: the ValueError for `num_steps` beside
/// `gradient_accumulation_steps > 1`, `num_steps` into the arguments, the dict completed as the
/// release writes into it (training_args.bin pickles it), the plugin's TypeError for a key it
/// lacks. Returns accelerate's own accumulation steps where they are not the Trainer's.
fn create_accelerator(args: &mut Args, profile: &Profile) -> Result<Option<usize>, HfError> {
    let Some(ac) = args.accelerator_config.as_ref() else { return Ok(None) };
    if let Some(e) = &ac.trainer_error {
        return Err(e.clone());
    }
    let Some(mut gak) = ac.gradient_accumulation_kwargs() else { return Ok(None) };
    let ga = args.gradient_accumulation_steps;
    let num_steps = gak.iter().find(|(k, _)| k == "num_steps").map(|(_, v)| match v {
        PyJson::Int(n) => *n as usize,
        _ => unreachable!("accelerator::resolve models an int num_steps only"),
    });
    if num_steps.is_some() && ga > 1 {
        return Err(HfError::value(
            "The `AcceleratorConfig`'s `num_steps` is set but `gradient_accumulation_steps` is greater than 1 in the passed `TrainingArguments`If using the passed `AcceleratorConfig` is desired, do not set the `TrainingArguments` `gradient_accumulation_steps`.",
        ));
    }
    let set = |gak: &mut Vec<(String, PyJson)>, key: &str, v: PyJson| match gak.iter_mut().find(|(k, _)| k == key) {
        Some(slot) => slot.1 = v,
        None => gak.push((key.to_string(), v)),
    };
    let mode = profile.gradient_accumulation_kwargs;
    if mode != GaKwargs::Plugin {
        if let Some(n) = num_steps {
            args.gradient_accumulation_steps = n;
            args.set_field("gradient_accumulation_steps", PyJson::Int(n as i128));
        }
    }
    let plugin = match mode {
        GaKwargs::Plugin => {
            if num_steps.is_none() {
                set(&mut gak, "num_steps", PyJson::Int(ga as i128));
            }
            set(&mut gak, "sync_with_dataloader", PyJson::Bool(false));
            true
        }
        GaKwargs::IntoArgs => false,
        GaKwargs::IntoArgsAndPlugin => {
            if num_steps.is_none() {
                set(&mut gak, "num_steps", PyJson::Int(ga as i128));
            }
            true
        }
        GaKwargs::IntoArgsAndPluginOfOne => {
            set(&mut gak, "num_steps", PyJson::Int(1));
            true
        }
    };
    let unknown = gak.iter().find(|(k, _)| !crate::hf::accelerator::PLUGIN_KEYS.contains(&k.as_str())).map(|(k, _)| k.clone());
    if let Some(ac) = args.accelerator_config.as_mut() {
        ac.set_gradient_accumulation_kwargs(gak);
    }
    if plugin {
        if let Some(k) = unknown {
            return Err(HfError::new("TypeError", format!("GradientAccumulationPlugin.__init__() got an unexpected keyword argument '{k}'")));
        }
    }
    Ok(match (mode, num_steps) {
        (GaKwargs::Plugin, Some(n)) if n != ga => Some(n),
        _ => None,
    })
}

fn io_err(path: &Path, e: impl fmt::Display) -> HfError {
    HfError::not_modelled(format!("I/O on {}: {e}", path.display()))
}

impl<'a> Trainer<'a> {
    /// `Trainer.__init__`: model, data, the version's init-time checks.
    fn new(sc: &'a Scenario, profile: &'a Profile, mut args: Args, run_dir: &Path, launch: LaunchSpec) -> Result<Trainer<'a>, HfError> {
        tch::set_num_threads(1);
        // `if (args.fp16 or args.bf16) and args.half_precision_backend == "auto"` on the CPU
        // device: bf16 gets "cpu_amp" (fp16 raised earlier where torch lacks CPU fp16).
        if profile.bf16_sets_cpu_amp && args.bf16 && args.field("half_precision_backend") == Some(&PyJson::Str("auto".into())) {
            args.set_field("half_precision_backend", PyJson::Str("cpu_amp".into()));
        }
        let evals: Vec<DataSet> =
            sc.data.eval.sets().into_iter().map(|(name, n, off)| DataSet::new(name, n, off)).collect();
        // `create_accelerator_and_postprocess`: before the argument checks from 5.2 (their
        // `_validate_args`), after them before.
        let mut accel_num_steps = None;
        if profile.accelerator_before_init_checks {
            accel_num_steps = create_accelerator(&mut args, profile)?;
        }
        // batch_eval_metrics (4.41+, the first argument check of every release that has it):
        // compute_metrics must take `compute_result`, which the world's scripted one does not (a
        // user's ordinary compute_metrics neither). Without a compute_metrics it changes nothing
        // here: the loss is still gathered for eval_loss.
        if args.is_true("batch_eval_metrics") && sc.metrics.is_some() {
            return Err(HfError::value(
                "When using `batch_eval_metrics`, your `compute_metrics` function must take a `compute_result` boolean argument which will be triggered after the last batch of the eval set to signal that the summary statistics should be returned by the function.",
            ));
        }
        if profile.init_checks_eval_dataset && args.eval_strategy != Interval::No && evals.is_empty() {
            return Err(HfError::value(format!(
                "You have set `args.eval_strategy` to IntervalStrategy.{} but you didn't pass an `eval_dataset` to `Trainer`. Either set `args.eval_strategy` to `no` or pass an `eval_dataset`. ",
                args.eval_strategy.value().to_uppercase()
            )));
        }
        if profile.init_checks_best_metric
            && (args.save_strategy == Interval::Best || args.load_best_model_at_end)
            && args.metric_for_best_model.is_none()
        {
            return Err(HfError::value(
                "`args.metric_for_best_model` must be provided when using 'best' save_strategy or if `args.load_best_model_at_end` is set to `True`.",
            ));
        }
        if !profile.accelerator_before_init_checks {
            accel_num_steps = create_accelerator(&mut args, profile)?;
        }
        // `if self.args.should_save: os.makedirs(self.args.output_dir, exist_ok=True)` (every
        // release): an empty output_dir is not part of a run directory's structure, but a later
        // `resume_from_checkpoint=True` lists it.
        // Every process that should save makes its disk's output_dir (node K's own with per-node
        // disks and save_on_each_node).
        for r in launch.ranks() {
            if args.should_save(r.rank, r.local_rank) {
                let out = launch.node_dir(run_dir, r.node).join("output");
                std::fs::create_dir_all(&out).map_err(|e| io_err(&out, e))?;
            }
        }
        let seed = args.seed as u64;
        let data_seed = args.data_seed.filter(|_| profile.sampler_uses_data_seed).map(|s| s as u64);
        let mut rng = TrainRngTracker::new(profile.sampler, seed, data_seed);
        rng.sequential = args.train_sampling_strategy.as_deref() == Some("sequential");
        // `use_seedable_sampler=False`: accelerate leaves the Trainer's torch `RandomSampler` in
        // place, which draws each epoch's seed from the global generator (data_seed unused).
        if args.accelerator_config.as_ref().is_some_and(|ac| !ac.use_seedable_sampler()) {
            rng.kind = crate::hf::behaviors::SamplerKind::GlobalDrawnSeed;
        }
        if launch.world_size() > 1 {
            use crate::hf::behaviors::{LaunchSampler, SamplerKind};
            match profile.launch_rules().sampler {
                LaunchSampler::AsOneProcess => {}
                LaunchSampler::OwnGenerator => {
                    rng.kind = SamplerKind::GlobalDrawnSeed;
                    rng.own = Some(crate::numerics::rng::TorchGenerator::new(crate::numerics::sampler::TORCH_DEFAULT_SEED));
                }
                LaunchSampler::EpochZeroSeed => rng.fixed_seed = Some(0),
                LaunchSampler::GlobalDrawnSeed => rng.kind = SamplerKind::GlobalDrawnSeed,
            }
        }
        let lr = args.learning_rate;
        let model = Model::new(&sc.model);
        let decay = optim::hf_decay_mask(&model.trainable_names(), profile.decay_norm_patterns);
        let shapes: Vec<Vec<i64>> = model.params().into_iter().map(|p| p.shape).collect();
        let opt = Optim::build(&args, profile, &decay, &shapes)?;
        Ok(Trainer {
            profile,
            sc,
            model,
            train: DataSet::new(None, sc.data.train, 0),
            evals,
            opt,
            sched: Scheduler::Lambda(Schedule { kind: ScheduleKind::Constant, warmup: 0.0, num_training_steps: 0 }),
            sched_steps: 0,
            state: TrainerState::new(profile),
            control: Control::default(),
            rng,
            iv: Intervals::resolve(&args, 0),
            tr_loss: vec![0.0; launch.world_size()],
            total_loss_scalar: 0.0,
            last_logged: 0,
            metric_calls: vec![],
            early_counter: 0,
            early_counter_saved: 0,
            jit_requested: false,
            train_called: false,
            early_restored: None,
            current_lr: lr,
            current_flos: args::Num::Int(0),
            events: vec![],
            mode: SaveMode::HfCompatible,
            numerics: true,
            plan: None,
            resume: None,
            initial_global_step: 0,
            state_batch_size: None,
            run_dir: launch.node_dir(run_dir, 0),
            root_dir: run_dir.to_path_buf(),
            launch,
            rank_grads: vec![],
            reduced_at_last_micro: true,
            ranks_diverged: false,
            writer: launch.ranks()[0],
            other_rng: None,
            accel_num_steps,
            accel_batches: 0,
            args,
        })
    }


    /// `output_dir` as the runner passes it: relative, so every path HF records is relative to
    /// the run directory (conformance/README.md).
    fn output_rel(&self) -> &'static str {
        "output"
    }

    fn output_abs(&self) -> PathBuf {
        self.run_dir.join(self.output_rel())
    }

}
