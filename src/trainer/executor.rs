//! The executor: the only place that runs training and touches disk. It follows HF's
//! `_inner_training_loop` step by step, asks the pure policies (schedule, best, rotation,
//! plateau) what to do, and applies their answers. Every version difference comes from the
//! [`Profile`].

use crate::args::{self, Args, Interval};
use crate::best;
use crate::hf_error::HfError;
use crate::lr::{Schedule, ScheduleKind};
use crate::optim::{self, AdamW, AdamWKind, Param};
use crate::plateau::Plateau;
use crate::profile::{BestTiming, CallbackRefresh, GaLoss, LoggedLr, Prefetch, Profile, SchedulerCreated};
use crate::pyjson::{DumpOptions, PyJson};
use crate::rotation;
use crate::runner::RunError;
use crate::sampler::TrainRngTracker;
use crate::scenario::{FinallyCall, Scenario};
use crate::schedule::{self, Control, Intervals};
use crate::state::{self, LogEntry, TrainerState};
use crate::store;
use std::path::{Path, PathBuf};
use std::time::Instant;
use tch::{Reduction, Tensor};

/// A data set of the contract: `x = sin(i + o + 1)`, `y = 2x + 3 + 0.1 cos(3 (i + o))`, computed
/// in f64 and stored as f32.
#[derive(Debug, Clone)]
pub struct DataSet {
    pub name: Option<String>,
    pub x: Vec<f32>,
    pub y: Vec<f32>,
}

impl DataSet {
    pub fn new(name: Option<String>, n: usize, offset: usize) -> DataSet {
        let (mut x, mut y) = (Vec::with_capacity(n), Vec::with_capacity(n));
        for k in 0..n {
            let i = (k + offset) as f64;
            let xv = (i + 1.0).sin();
            x.push(xv as f32);
            y.push((2.0 * xv + 3.0 + 0.1 * (3.0 * i).cos()) as f32);
        }
        DataSet { name, x, y }
    }
    fn batch(&self, rows: &[usize]) -> (Tensor, Tensor) {
        let xs: Vec<f32> = rows.iter().map(|&r| self.x[r]).collect();
        let ys: Vec<f32> = rows.iter().map(|&r| self.y[r]).collect();
        (Tensor::from_slice(&xs), Tensor::from_slice(&ys))
    }
}

/// The regression model: two float32 scalars.
pub struct Model {
    pub a: Tensor,
    pub b: Tensor,
}

impl Model {
    fn new(a: f64, b: f64) -> Model {
        Model {
            a: Tensor::from(a as f32).set_requires_grad(true),
            b: Tensor::from(b as f32).set_requires_grad(true),
        }
    }
    fn loss(&self, x: &Tensor, y: &Tensor) -> Tensor {
        let pred = x * &self.a + &self.b;
        pred.mse_loss(y, Reduction::Mean)
    }
    pub fn values(&self) -> (f32, f32) {
        (f32::try_from(&self.a).unwrap(), f32::try_from(&self.b).unwrap())
    }
    fn params(&self) -> Vec<Param> {
        vec![Param::from_tensor(&self.a), Param::from_tensor(&self.b)]
    }
    fn write_back(&mut self, ps: &[Param]) {
        ps[0].write_to(&mut self.a);
        ps[1].write_to(&mut self.b);
    }
    fn zero_grad(&mut self) {
        for t in [&mut self.a, &mut self.b] {
            let mut g = t.grad();
            if g.defined() {
                let _ = g.zero_();
            }
        }
    }
}

/// The learning-rate scheduler HF built.
enum Scheduler {
    Lambda(Schedule),
    Plateau(Plateau),
    /// transformers' GreedyLR (5.4+): stepped after evaluations like ReduceLROnPlateau.
    Greedy(crate::greedy::Greedy),
}

/// The optimizer HF built.
enum Optim {
    AdamW(AdamW),
    Sgd(crate::sgd::Sgd),
}

impl Optim {
    fn set_lr(&mut self, lr: f64) {
        match self {
            Optim::AdamW(o) => o.set_lr(lr),
            Optim::Sgd(o) => o.set_lr(lr),
        }
    }
    fn step(&mut self, ps: &mut [Param]) {
        match self {
            Optim::AdamW(o) => o.step(ps),
            Optim::Sgd(o) => o.step(ps),
        }
    }
    fn set_initial_lr(&mut self, lr: Option<f64>) {
        match self {
            Optim::AdamW(o) => {
                for g in o.groups.iter_mut() {
                    g.initial_lr = lr;
                }
            }
            Optim::Sgd(o) => o.set_initial_lr(lr),
        }
    }
    fn state_dict(&self) -> crate::optim::PyValue {
        match self {
            Optim::AdamW(o) => o.state_dict(),
            Optim::Sgd(o) => o.state_dict(),
        }
    }
}

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
    tr_loss: f32,
    total_loss_scalar: f64,
    last_logged: u64,
    metric_calls: Vec<usize>,
    early_counter: i64,
    early_counter_saved: i64,
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
}

/// Where `train(resume_from_checkpoint=...)` resumes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ResumeFrom {
    /// `resume_from_checkpoint=True`: HF's `get_last_checkpoint(output_dir)`, the
    /// highest-numbered folder named exactly `checkpoint-<digits>` (atomic mode's staging folders
    /// never match it, so it never picks a half-written checkpoint there).
    Last,
    /// A folder of output_dir, passed as the path `output/<name>`.
    Checkpoint(String),
}

/// The checkpoint a resumed run loads, and its trainer_state.json.
#[derive(Debug, Clone)]
struct Resumed {
    /// `output/checkpoint-N`, relative to the run directory, as HF's paths are.
    rel: String,
    /// The text of its trainer_state.json (None: no such file, which only releases before 4.36
    /// accept). Parsed where the release reads it.
    state_text: Option<String>,
}

/// What feeds a plan's evaluations (`ckptspec plan`, `ckptspec inspect`): the executor runs as
/// for a trained scenario, with the same policies and the same files on disk, but without tensor
/// math, and each `evaluate()` call's metrics come from here instead of a model.
#[derive(Debug, Clone, PartialEq)]
pub enum PlanMetrics {
    /// The metrics of each `evaluate()` call (one eval set each), in order, as HF logs them
    /// (`eval_loss`, `eval_f1`, ...; `epoch`, `step`, runtimes and throughputs are ignored).
    /// Calls past the end of the list are assumed as below (with unknown metric keys).
    Given(Vec<Vec<(String, PyJson)>>),
    /// None given. The scenario's scripted compute_metrics gives its keys and values; the eval
    /// loss (a model's output) is assumed, and so is the metric for best model when
    /// `metric_keys_unknown` (a user's config: its compute_metrics is not known) and nothing
    /// gives it. An assumed value improves strictly at every evaluation, in the direction
    /// `greater_is_better` says for the metric for best model, downwards for the others.
    Assumed { metric_keys_unknown: bool },
}

/// What a plan did beyond a trained run's [`DiskEvent`]s.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct PlanTrace {
    pub events: Vec<DiskEvent>,
    /// Every assumed metric value, as (global_step of the evaluation, metric key).
    pub assumed: Vec<(u64, String)>,
}

#[derive(Debug, Clone)]
struct PlanFeed {
    given: std::collections::VecDeque<Vec<(String, PyJson)>>,
    metric_keys_unknown: bool,
    /// Assumed values handed out so far, per key (the next value improves on the last).
    counts: Vec<(String, u64)>,
    assumed: Vec<(u64, String)>,
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
    /// leftover of a killed run removed on the next save ([`crate::atomic`]).
    Atomic,
}

/// What the executor did to checkpoint folders, in order (the snapshots' timeline).
#[derive(Debug, Clone, PartialEq)]
pub enum DiskEvent {
    /// `checkpoint-<step>` written; `best` as it stands right after.
    Saved { step: u64, folder: String, best: crate::best::Best },
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

impl std::fmt::Display for DeleteRule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
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
    let mut events = vec![];
    let first = if phase == Phase::Second {
        let path = run_dir.join("result.json");
        let r = crate::pyjson::read_file(&path).map_err(|e| RunError::Io { path: path.clone(), source: std::io::Error::other(e.to_string()) })?;
        let (error, state) = (r.get("error").cloned().unwrap_or(PyJson::Null), r.get("final_state").cloned().unwrap_or(PyJson::Null));
        if sc.resume.is_none() || error != PyJson::Null {
            return Err(RunError::NotImplemented(format!("{}: the second phase needs a resume scenario whose first run succeeded", sc.name)));
        }
        (error, state)
    } else {
        let mut state_out: Option<PyJson> = None;
        let outcome = run_inner(sc, profile, run_dir, mode, None, None, &mut state_out, &mut events);
        let first = (error_json(outcome)?, state_out.unwrap_or(PyJson::Null));
        match &sc.resume {
            Some(r) if first.0 == PyJson::Null => {
                for d in &r.damage {
                    d.apply(run_dir).map_err(|source| RunError::Io { path: run_dir.join(d.path()), source })?;
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
    let second = Scenario { args: r.args_over(&sc.args), ..sc.clone() };
    let from = if r.from == "last" { ResumeFrom::Last } else { ResumeFrom::Checkpoint(r.from.clone()) };
    let mut state_out: Option<PyJson> = None;
    events.push(DiskEvent::Resumed);
    let outcome = run_inner(&second, profile, run_dir, mode, None, Some(&from), &mut state_out, &mut events);
    write_result(profile, run_dir, (error_json(outcome)?, state_out.unwrap_or(PyJson::Null)), Some(first))?;
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
    write_result(profile, run_dir, (error_json(outcome)?, state_out.unwrap_or(PyJson::Null)), None)?;
    Ok(events)
}

/// A plan: the executor run on `sc` into `run_dir` as [`run`] does (`result.json`,
/// `output/checkpoint-N/` with the same files, rotation on the real folders), without tensor
/// math, its evaluations fed by `metrics`. The checkpoints it leaves are the plan's.
pub fn plan(sc: &Scenario, profile: &Profile, run_dir: &Path, metrics: PlanMetrics) -> Result<PlanTrace, RunError> {
    let (given, metric_keys_unknown) = match metrics {
        PlanMetrics::Given(list) => (list.into(), true),
        PlanMetrics::Assumed { metric_keys_unknown } => (Default::default(), metric_keys_unknown),
    };
    let mut feed = PlanFeed { given, metric_keys_unknown, counts: vec![], assumed: vec![] };
    let mut state_out: Option<PyJson> = None;
    let mut events = vec![];
    let outcome = run_inner(sc, profile, run_dir, SaveMode::HfCompatible, Some(&mut feed), None, &mut state_out, &mut events);
    write_result(profile, run_dir, (error_json(outcome)?, state_out.unwrap_or(PyJson::Null)), None)?;
    Ok(PlanTrace { events, assumed: feed.assumed })
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
fn write_result(profile: &Profile, run_dir: &Path, run: (PyJson, PyJson), first: Option<(PyJson, PyJson)>) -> Result<(), RunError> {
    let mut result = vec![
        ("hf_version".into(), PyJson::Str(profile.version.into())),
        ("error".into(), run.0),
        ("final_state".into(), run.1),
    ];
    if let Some((error, state)) = first {
        result.push(("first".into(), PyJson::Dict(vec![("error".into(), error), ("final_state".into(), state)])));
    }
    let text = crate::pyjson::dumps(&PyJson::Dict(result), &DumpOptions { indent: Some(2), ..DumpOptions::default() })
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
    let args = args::resolve(&sc.args, profile)?;
    if let Some((k, v)) = sc.args.iter().find(|(k, v)| !args::is_modelled(k, v)) {
        return Err(HfError::not_modelled(format!("argument {k}={v}")));
    }
    let mut t = Trainer::new(sc, profile, args, run_dir)?;
    t.mode = mode;
    if let Some(feed) = plan.as_deref_mut() {
        t.numerics = false;
        t.plan = Some(std::mem::replace(feed, PlanFeed { given: Default::default(), metric_keys_unknown: false, counts: vec![], assumed: vec![] }));
    }
    if profile.stateful_callbacks != CallbackRefresh::Absent {
        // Trainer.__init__ builds its TrainerState with the exportable callbacks' states.
        t.refresh_stateful_callbacks(CallbackRefresh::All);
    }
    let res = match resume {
        Some(from) => t.begin_resume(from).and_then(|()| t.train()),
        None => t.train(),
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

/// `logging_steps`, `eval_steps`, `save_steps` of a trainer_state.json (4.32+ record them).
fn loaded_intervals(state: &PyJson) -> Option<Intervals> {
    let n = |k: &str| match state.get(k)? {
        PyJson::Int(i) => Some(args::Num::Int(*i as i64)),
        PyJson::Float(f) => Some(args::Num::Float(*f)),
        _ => None,
    };
    Some(Intervals { logging: n("logging_steps")?, eval: Some(n("eval_steps")?), save: n("save_steps")? })
}

fn io_err(path: &Path, e: impl std::fmt::Display) -> HfError {
    HfError::not_modelled(format!("I/O on {}: {e}", path.display()))
}

impl<'a> Trainer<'a> {
    /// `Trainer.__init__`: model, data, the version's init-time checks.
    fn new(sc: &'a Scenario, profile: &'a Profile, args: Args, run_dir: &Path) -> Result<Trainer<'a>, HfError> {
        tch::set_num_threads(1);
        let evals: Vec<DataSet> =
            sc.data.eval.sets().into_iter().map(|(name, n, off)| DataSet::new(name, n, off)).collect();
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
        // `if self.args.should_save: os.makedirs(self.args.output_dir, exist_ok=True)` (every
        // release): an empty output_dir is not part of a run directory's structure, but a later
        // `resume_from_checkpoint=True` lists it.
        let out = run_dir.join("output");
        std::fs::create_dir_all(&out).map_err(|e| io_err(&out, e))?;
        let seed = args.seed as u64;
        let data_seed = args.data_seed.filter(|_| profile.sampler_uses_data_seed).map(|s| s as u64);
        let rng = TrainRngTracker::new(profile.sampler, seed, data_seed);
        let lr = args.learning_rate;
        let decay = optim::hf_decay_mask(&["a", "b"], profile.decay_norm_patterns);
        let opt = if args.optim == "sgd" {
            Optim::Sgd(crate::sgd::Sgd::hf(profile.torch_layout, lr, args.weight_decay, &decay))
        } else {
            Optim::AdamW(AdamW::hf(
                optim_kind(&args)?,
                profile.torch_layout,
                lr,
                (args.adam_beta1, args.adam_beta2),
                args.adam_epsilon,
                args.weight_decay,
                &decay,
            ))
        };
        Ok(Trainer {
            profile,
            sc,
            run_dir: run_dir.to_path_buf(),
            model: Model::new(sc.model.a, sc.model.b),
            train: DataSet::new(None, sc.data.train, 0),
            evals,
            opt,
            sched: Scheduler::Lambda(Schedule { kind: ScheduleKind::Constant, warmup: 0.0, num_training_steps: 0 }),
            sched_steps: 0,
            state: TrainerState::new(profile),
            control: Control::default(),
            rng,
            iv: Intervals::resolve(&args, 0),
            tr_loss: 0.0,
            total_loss_scalar: 0.0,
            last_logged: 0,
            metric_calls: vec![],
            early_counter: 0,
            early_counter_saved: 0,
            current_lr: lr,
            current_flos: args::Num::Int(0),
            events: vec![],
            mode: SaveMode::HfCompatible,
            numerics: true,
            plan: None,
            resume: None,
            initial_global_step: 0,
            state_batch_size: None,
            args,
        })
    }

    /// `train(resume_from_checkpoint=...)` before `_inner_training_loop`: picks the checkpoint,
    /// loads its weights (`_load_from_checkpoint`) and reads its trainer_state.json, with HF's
    /// errors for what is missing.
    fn begin_resume(&mut self, from: &ResumeFrom) -> Result<(), HfError> {
        let out_rel = self.output_rel();
        if self.mode == SaveMode::Atomic {
            // A killed atomic run may have left a staging folder (never matched as a checkpoint).
            let out = self.output_abs();
            crate::atomic::remove_leftovers(&out).map_err(|e| io_err(&out, e))?;
        }
        let rel = match from {
            ResumeFrom::Checkpoint(name) => format!("{out_rel}/{name}"),
            ResumeFrom::Last => {
                let out = self.output_abs();
                let rd = std::fs::read_dir(&out).map_err(|_| {
                    HfError::new("FileNotFoundError", format!("[Errno 2] No such file or directory: {}", crate::hf_error::py_str_repr(out_rel)))
                })?;
                let entries: Vec<(String, bool)> = rd.flatten().map(|e| (e.file_name().to_string_lossy().into_owned(), e.path().is_dir())).collect();
                match rotation::last_checkpoint(entries.iter().map(|(n, d)| (n.as_str(), *d))) {
                    Some(name) => format!("{out_rel}/{name}"),
                    None => return Err(HfError::value(format!("No valid checkpoint found in output directory ({out_rel})"))),
                }
            }
        };
        let dir = self.run_dir.join(&rel);
        let weights = ["model.safetensors", "pytorch_model.bin"].into_iter().find(|f| dir.join(f).is_file());
        let Some(weights) = weights else {
            return Err(HfError::value(format!("Can't find a valid checkpoint at {rel}")));
        };
        let rules = self.resume_rules();
        let weights_path = dir.join(weights);
        let loaded = store::read_weights(&dir, weights).map_err(|e| {
            damaged::weights_load(&weights_path, &rules)
                .unwrap_or_else(|| HfError::not_modelled(format!("HF's error for a damaged {weights} in {rel}: {e}")))
        })?;
        if let Some((a, b)) = loaded {
            self.model.write_back(&[Param::scalar(a), Param::scalar(b)]);
        }
        let sp = dir.join("trainer_state.json");
        let state_text = if sp.is_file() {
            let bytes = std::fs::read(&sp).map_err(|e| io_err(&sp, e))?;
            let text = String::from_utf8(bytes)
                .map_err(|e| HfError::not_modelled(format!("HF's error for a trainer_state.json that is not UTF-8 in {rel}: {e}")))?;
            if rules.requires_trainer_state {
                // train() reads it right after the weights (for the batch size it records).
                let json = damaged::parse_trainer_state(&text)
                    .map_err(|e| e.unwrap_or_else(|| HfError::not_modelled(format!("HF's error for a damaged trainer_state.json in {rel}"))))?;
                if let (true, Some(PyJson::Int(b))) = (rules.batch_size_from_state, json.get("train_batch_size")) {
                    self.state_batch_size = Some(*b as usize);
                }
            }
            Some(text)
        } else if rules.requires_trainer_state {
            return Err(HfError::new(
                "FileNotFoundError",
                format!("[Errno 2] No such file or directory: {}", crate::hf_error::py_str_repr(&format!("{rel}/trainer_state.json"))),
            ));
        } else {
            None
        };
        self.resume = Some(Resumed { rel, state_text });
        Ok(())
    }

    /// The checkpoint's trainer_state.json (`TrainerState.load_from_json`) in place of the fresh
    /// state, then what `_inner_training_loop` sets after it (`max_steps`, `num_train_epochs`).
    /// A file that is not JSON is Python's `JSONDecodeError`.
    fn load_trainer_state(&mut self, r: &Resumed, max_steps: i64, num_train_epochs: i64) -> Result<(), HfError> {
        let rel = &r.rel;
        let Some(text) = &r.state_text else { return Ok(()) };
        let json = damaged::parse_trainer_state(text).map_err(|e| e.unwrap_or_else(|| HfError::not_modelled(format!("HF's error for a damaged trainer_state.json in {rel}"))))?;
        let mut st = TrainerState::from_json(&json, self.profile)
            .map_err(|e| HfError::not_modelled(format!("HF's error for a trainer_state.json it cannot use in {rel}: {e}")))?;
        if let Some(b) = &st.best.best_model_checkpoint {
            if self.resume_rules().drops_missing_best && !self.run_dir.join(b).is_dir() {
                st.best.best_model_checkpoint = None;
            }
        }
        st.max_steps = max_steps;
        st.num_train_epochs = num_train_epochs;
        // HF's resumed run goes by the loaded state: where it records the intervals (4.32+),
        // the checkpoint's logging/eval/save steps, whatever the new arguments say.
        match (self.profile.state_has_intervals, loaded_intervals(&json)) {
            (true, Some(mut iv)) => {
                if self.iv.eval.is_none() && iv.eval == Some(args::Num::Int(500)) {
                    iv.eval = None; // the dataclass default, written for an unset eval_steps
                }
                self.iv = iv;
                st.intervals = Some(iv);
            }
            _ => st.intervals = self.state.intervals,
        }
        self.state = st;
        Ok(())
    }

    /// `_load_optimizer_and_scheduler`: only when both optimizer.pt and scheduler.pt exist (else
    /// both restart from scratch, without a word). The optimizer's groups take the saved lrs;
    /// LambdaLR its step count, ReduceLROnPlateau and GreedyLR their whole saved state.
    fn load_optimizer_and_scheduler(&mut self, r: &Resumed) -> Result<(), HfError> {
        let rel = &r.rel;
        let rules = self.resume_rules();
        let unusable = |what: &str, e: String| HfError::not_modelled(format!("HF's error for a {what} it cannot use in {rel}: {e}"));
        let dir = self.run_dir.join(rel);
        let (opt_p, sched_p) = (dir.join("optimizer.pt"), dir.join("scheduler.pt"));
        if !(opt_p.is_file() && sched_p.is_file()) {
            return Ok(());
        }
        let load = |p: &Path, what: &str| {
            crate::torch_format::load(p).map_err(|e| damaged::torch_load(p, rules.empty_state_file_message, rules.zip_error_suffix).unwrap_or_else(|| unusable(what, e.to_string())))
        };
        let opt = load(&opt_p, "optimizer.pt")?;
        let sched = load(&sched_p, "scheduler.pt")?;
        let lrs: Vec<f64> = match &mut self.opt {
            Optim::AdamW(o) => {
                o.load_state_dict(&opt).map_err(|e| unusable("optimizer.pt", e))?;
                o.groups.iter().map(|g| g.lr).collect()
            }
            Optim::Sgd(o) => {
                o.load_state_dict(&opt).map_err(|e| unusable("optimizer.pt", e))?;
                o.lrs()
            }
        };
        // The saved group lrs with their Python type (a reduction may have stored an int min_lr).
        let saved_lrs: Vec<crate::plateau::PyNum> = opt
            .get("param_groups")
            .and_then(|g| g.as_seq())
            .map(|gs| gs.iter().filter_map(|g| g.get("lr").and_then(crate::plateau::py_num)).collect())
            .unwrap_or_default();
        match &mut self.sched {
            Scheduler::Lambda(_) => {
                let last = sched.get("last_epoch").and_then(|v| v.as_i64()).ok_or_else(|| unusable("scheduler.pt", "no last_epoch".into()))?;
                self.sched_steps = last;
                self.current_lr = lrs.first().copied().unwrap_or(self.current_lr);
            }
            Scheduler::Plateau(pl) => {
                pl.load_state_dict(&sched, saved_lrs).map_err(|e| unusable("scheduler.pt", e))?;
                self.current_lr = pl.lrs_f64()[0];
            }
            Scheduler::Greedy(g) => {
                g.load_state_dict(&sched, saved_lrs).map_err(|e| unusable("scheduler.pt", e))?;
                // GreedyLR sets every group's lr to its `_last_lr`.
                let lr = g.lrs_f64()[0];
                self.current_lr = lr;
                self.opt.set_lr(lr);
            }
        }
        Ok(())
    }

    /// Where a resumed run starts: (epochs trained, batches already trained in the current
    /// epoch), HF's `global_step // num_update_steps_per_epoch` and `(global_step % it) * GA`
    /// (always a whole number of accumulation windows, by this arithmetic).
    fn resume_position(&mut self, nupe: usize) -> (usize, usize) {
        let g = self.state.global_step;
        self.initial_global_step = g;
        self.last_logged = g;
        let epochs_trained = (g / nupe as u64) as usize;
        let steps_in_epoch = (g % nupe as u64) as usize * self.args.gradient_accumulation_steps;
        (epochs_trained, steps_in_epoch)
    }

    fn resume_rules(&self) -> crate::profile::ResumeBehaviors {
        self.profile.resume_rules()
    }

    /// `_load_rng_state`: the global torch generator from `rng_state.pth` (nothing when the file
    /// is absent: HF only logs that).
    fn load_rng_state(&mut self) -> Result<(), HfError> {
        let Some(r) = &self.resume else { return Ok(()) };
        let path = self.run_dir.join(&r.rel).join("rng_state.pth");
        if !path.is_file() {
            return Ok(());
        }
        let damaged = |e: String| HfError::not_modelled(format!("HF's error for a damaged {}: {e}", path.display()));
        let rules = self.resume_rules();
        let v = crate::torch_format::load(&path)
            .map_err(|e| damaged::torch_load(&path, rules.empty_state_file_message, rules.zip_error_suffix).unwrap_or_else(|| damaged(e.to_string())))?;
        let cpu = v.get("cpu").and_then(|t| t.as_tensor()).ok_or_else(|| damaged("no cpu state".into()))?;
        let bytes = cpu.contiguous_bytes().map_err(|e| damaged(e.to_string()))?;
        self.rng.global = crate::rng::TorchGenerator::set_state(&bytes).map_err(damaged)?;
        Ok(())
    }

    /// `output_dir` as the runner passes it: relative, so every path HF records is relative to
    /// the run directory (conformance/README.md).
    fn output_rel(&self) -> &'static str {
        "output"
    }

    fn output_abs(&self) -> PathBuf {
        self.run_dir.join(self.output_rel())
    }

    /// `train()` → `_inner_training_loop`.
    fn train(&mut self) -> Result<(), HfError> {
        let p = self.profile;
        let a = &self.args;
        let bs = self.state_batch_size.unwrap_or(a.per_device_train_batch_size);
        let n = self.train.x.len();
        let len_dl = if a.dataloader_drop_last { n / bs } else { n.div_ceil(bs) };
        let ga = a.gradient_accumulation_steps;
        let nupe = if p.ceil_update_steps {
            (len_dl / ga + usize::from(len_dl % ga > 0)).max(1)
        } else {
            (len_dl / ga).max(1)
        };
        let (max_steps, num_train_epochs) = if len_dl == 0 && p.empty_dataloader_runs_on_max_steps {
            // 4.49+ treat a dataloader of length 0 like one without a length.
            if a.max_steps <= 0 {
                return Err(HfError::value(format!(
                    "args.max_steps must be set to a positive value if dataloader does not have a length, was {}",
                    a.max_steps
                )));
            }
            (a.max_steps, i64::MAX)
        } else if a.max_steps > 0 {
            let ms = a.max_steps;
            (ms, ms / nupe as i64 + i64::from(ms % nupe as i64 > 0))
        } else {
            ((a.num_train_epochs * nupe as f64).ceil() as i64, a.num_train_epochs.ceil() as i64)
        };
        if p.scheduler_created == SchedulerCreated::BeforeState {
            self.create_scheduler(max_steps)?;
        }
        let a = &self.args;
        self.iv = Intervals::resolve(a, max_steps);
        if p.ratio_into_args {
            // 4.31 writes the resolved intervals back into the arguments (and training_args.bin).
            let iv = self.iv;
            let set = |all: &mut Vec<(String, PyJson)>, name: &str, v: args::Num| {
                if let Some(slot) = all.iter_mut().find(|(n, _)| n == name) {
                    slot.1 = v.to_json();
                }
            };
            let a = &mut self.args;
            if a.logging_steps.f() > 0.0 && a.logging_steps.f() < 1.0 {
                set(&mut a.all, "logging_steps", iv.logging);
            }
            if let (Some(e), Some(ie)) = (a.eval_steps, iv.eval) {
                if e.f() > 0.0 && e.f() < 1.0 {
                    set(&mut a.all, "eval_steps", ie);
                }
            }
            if a.save_steps.f() > 0.0 && a.save_steps.f() < 1.0 {
                set(&mut a.all, "save_steps", iv.save);
            }
        }
        self.state.intervals = Some(self.iv);
        self.state.train_batch_size = Some(bs);
        if p.stateful_callbacks != CallbackRefresh::Absent {
            self.refresh_stateful_callbacks(CallbackRefresh::All);
        }
        if p.scheduler_created == SchedulerCreated::AfterIntervals {
            self.create_scheduler(max_steps)?;
        }
        // A resume loads the checkpoint's optimizer/scheduler and trainer_state.json in the
        // release's order (`ResumeBehaviors::state_before_optimizer`): before 5.3 the optimizer
        // first, into the fresh state, then `epoch = 0`, then the state, and `max_steps` after it.
        let resumed = self.resume.clone();
        let state_first = self.resume_rules().state_before_optimizer;
        if let (Some(r), false) = (&resumed, state_first) {
            self.load_optimizer_and_scheduler(r)?;
            self.state.epoch = Some(args::Num::Int(0));
            self.load_trainer_state(r, max_steps, num_train_epochs)?;
        }
        self.state.max_steps = max_steps;
        self.state.num_train_epochs = num_train_epochs;
        if let (Some(r), true) = (&resumed, state_first) {
            // `_init_training_state` (its TrainerState starts at epoch 0).
            self.state.epoch = Some(args::Num::Int(0));
            self.load_trainer_state(r, max_steps, num_train_epochs)?;
        }
        if p.scheduler_created == SchedulerCreated::AfterState {
            self.create_scheduler(max_steps)?;
        }
        if let (Some(r), true) = (&resumed, state_first) {
            self.load_optimizer_and_scheduler(r)?;
        }
        if resumed.is_none() {
            // `self.state.epoch = 0` comes after create_optimizer_and_scheduler.
            self.state.epoch = Some(args::Num::Int(0));
        }
        let (epochs_trained, steps_trained_in_epoch) = match &resumed {
            // `ignore_data_skip`: the epochs already trained are still skipped, the batches
            // already trained in the resumed epoch are not (it trains from its first batch).
            Some(_) if self.args.ignore_data_skip => (self.resume_position(nupe).0, 0),
            Some(_) => self.resume_position(nupe),
            None => (0, 0),
        };
        if resumed.is_some() && !self.args.ignore_data_skip {
            // HF's pass over the epochs already trained ("to get the random state of the
            // dataloader at the right point"); the draws matter to a sampler seeded from the
            // global generator when the resume is inside an epoch.
            let how = self.resume_rules().skip_trained_epochs;
            for _ in 0..epochs_trained {
                self.rng.skip_trained_epoch(n, how);
            }
        }
        if let Some(es) = &self.sc.early_stopping {
            self.early_stopping_checks(es.patience)?;
        }
        let start = Instant::now();
        if self.args.eval_on_start {
            self.evaluate_round(true)?;
        }
        let steps_in_epoch = len_dl;
        let mut total_batched = 0usize;
        let mut grad_norm: Option<f32> = None;
        let mut learning_rate: Option<f64> = None;
        for epoch in epochs_trained..num_train_epochs as usize {
            let resumed_epoch = self.resume.is_some() && epoch == epochs_trained;
            let reordered = resumed_epoch && steps_trained_in_epoch > 0 && self.resume_rules().mid_epoch_resume_reorders;
            if resumed_epoch {
                self.rng.epochs_started = if reordered { 0 } else { epoch };
                if steps_trained_in_epoch == 0 {
                    self.load_rng_state()?;
                }
            }
            let order = self.rng.begin_train_epoch(n);
            if reordered {
                self.rng.epochs_started = epoch + 1;
            }
            let batches: Vec<Vec<usize>> = order
                .chunks(bs)
                .filter(|c| !(self.args.dataloader_drop_last && c.len() < bs))
                .map(|c| c.to_vec())
                .collect();
            let mut step: i64 = -1;
            if let (true, Some(message)) = (batches.is_empty(), self.profile.empty_dataloader_none_error) {
                // accelerate's DataLoaderShard (before 1.3) yields one None from an empty
                // dataloader, and the Trainer's first use of the batch fails on it.
                return Err(HfError::new("TypeError", message));
            }
            // A resumed epoch skips the batches already trained (`skip_first_batches`); before 5.3
            // its updates are then cut from what is left (`resumed_updates_from_skip_point`).
            let skip = if resumed_epoch { steps_trained_in_epoch.min(batches.len()) } else { 0 };
            let rules = self.resume_rules();
            let from_skip_point = skip > 0 && rules.resumed_updates_from_skip_point;
            let source: &[Vec<usize>] = if from_skip_point { &batches[skip..] } else { &batches };
            // HF's own `step` in the sync test restarts after the skip before 4.57.
            let step_offset = if skip > 0 && rules.resumed_step_restarts { skip as i64 } else { 0 };
            // The batches of each optimizer update, as the version fetches them.
            let chunks: Vec<&[Vec<usize>]> = match p.ga_prefetch {
                Prefetch::None => source.chunks(1).collect(),
                Prefetch::ExamplesRemainder | Prefetch::BatchesRemainder => {
                    // 4.46-4.51 size the last chunk by the examples (`num_examples % GA`), 4.52+
                    // by the batches; a chunk past the end of the epoch takes what is left.
                    let basis = if p.ga_prefetch == Prefetch::ExamplesRemainder { n } else { steps_in_epoch };
                    let remainder = if basis % ga == 0 { ga } else { basis % ga };
                    let total_updates = if p.ga_prefetch == Prefetch::ExamplesRemainder {
                        steps_in_epoch / ga + 1
                    } else {
                        steps_in_epoch / ga + usize::from(remainder < ga)
                    };
                    let mut at = 0;
                    (0..total_updates)
                        .map(|u| {
                            let num = if u != total_updates - 1 { ga } else { remainder };
                            let end = (at + num).min(source.len());
                            let c = &source[at..end];
                            at = end;
                            c
                        })
                        .collect()
                }
            };
            // How the loss of a micro-batch is scaled for backward and for the logged loss.
            let (grad_scale, log_scale) = match p.ga_loss {
                GaLoss::Divided => (1.0 / ga as f64, 1.0 / ga as f64),
                GaLoss::Undivided => (1.0, 1.0),
                GaLoss::GradsDivided => (1.0 / ga as f64, 1.0),
                GaLoss::LogDivided => (1.0, 1.0 / ga as f64),
            };
            // 5.3+ drop the updates already trained (`range(steps_trained // GA, ...)`): whole
            // windows, since steps_trained is a multiple of GA. The rng state is restored at the
            // first batch trained (`rng_to_sync`).
            let mut chunks = chunks.into_iter();
            let mut rng_to_sync = false;
            if skip > 0 {
                if !from_skip_point {
                    let mut skipped = 0;
                    while skipped < skip {
                        match chunks.next() {
                            Some(c) => skipped += c.len(),
                            None => break,
                        }
                    }
                }
                step = skip as i64 - 1;
                total_batched += skip;
                rng_to_sync = true;
            }
            'outer: for chunk in chunks {
                for rows in chunk {
                    step += 1;
                    total_batched += 1;
                    if rng_to_sync {
                        self.load_rng_state()?;
                        rng_to_sync = false;
                    }
                    self.micro_step(rows, grad_scale, log_scale);
                    // HF's `step` in its own sync test (restarted at the skip point before 4.57).
                    let hf_step = step - step_offset;
                    let sync = if p.ga_sync_per_epoch {
                        (hf_step + 1) % ga as i64 == 0 || hf_step + 1 == steps_in_epoch as i64
                    } else {
                        // A global batch counter; a partial window carries into the next epoch.
                        total_batched % ga == 0 || (steps_in_epoch <= ga && hf_step + 1 == steps_in_epoch as i64)
                    };
                    if sync {
                        (grad_norm, learning_rate) = self.sync_step(epoch, step, steps_in_epoch)?;
                    }
                    if self.control.should_epoch_stop || self.control.should_training_stop {
                        break 'outer;
                    }
                }
            }
            if step - step_offset < 0 {
                self.control.should_training_stop = true;
            }
            schedule::on_epoch_end(&self.args, self.state.epoch.map(|e| e.f()).unwrap_or(0.0), &mut self.control);
            self.maybe_log_save_evaluate(grad_norm, learning_rate)?;
            if self.control.should_training_stop {
                break;
            }
        }
        self.finalize(start)
    }

    /// One micro-batch: forward, backward (gradients accumulate), training-loss bookkeeping.
    fn micro_step(&mut self, rows: &[usize], grad_scale: f64, log_scale: f64) {
        // floating_point_ops is 0.0 for a model without `input_ids`, but it is a float.
        self.current_flos = args::Num::Float(self.current_flos.f() + 0.0);
        if !self.numerics {
            return;
        }
        let (x, y) = self.train.batch(rows);
        let raw = self.model.loss(&x, &y);
        let scaled = |s: f64| if s != 1.0 { &raw / s.recip() } else { raw.shallow_clone() };
        let loss = scaled(grad_scale);
        loss.backward();
        let l = f32::try_from(&scaled(log_scale).detach()).unwrap();
        if !l.is_finite() {
            // logging_nan_inf_filter: add the average of the losses logged so far.
            let denom = (1 + self.state.global_step - self.last_logged) as f32;
            self.tr_loss += self.tr_loss / denom;
        } else {
            self.tr_loss += l;
        }
    }

    /// Clip, optimizer step, scheduler step. Returns (grad_norm, lr used by the step).
    fn optimizer_step(&mut self) -> Result<(Option<f32>, Option<f64>), HfError> {
        let mut ps = self.model.params();
        let norm = if !self.numerics {
            None
        } else if self.args.max_grad_norm > 0.0 {
            Some(optim::clip_grad_norm(&mut ps, self.args.max_grad_norm))
        } else if self.profile.grad_norm_without_clipping {
            // `_get_grad_norm` measures through clip_grad_norm_(max_norm=inf).
            Some(optim::clip_grad_norm(&mut ps, f64::INFINITY))
        } else {
            None
        };
        if self.numerics {
            self.opt.step(&mut ps);
            self.model.write_back(&ps);
        }
        let used_lr = self.current_lr;
        if let Scheduler::Lambda(s) = &self.sched {
            self.sched_steps += 1;
            self.current_lr = s.lr_after_steps(self.args.learning_rate, self.sched_steps);
            self.opt.set_lr(self.current_lr);
        }
        self.model.zero_grad();
        Ok((norm.filter(|_| self.profile.logs_grad_norm), Some(used_lr)))
    }

    /// An optimizer step and what follows it: the step count, the epoch, the flow callback, and
    /// `_maybe_log_save_evaluate`. Returns the step's (grad_norm, learning rate) for the epoch-end
    /// call.
    fn sync_step(&mut self, epoch: usize, step: i64, steps_in_epoch: usize) -> Result<(Option<f32>, Option<f64>), HfError> {
        let (grad_norm, learning_rate) = self.optimizer_step()?;
        self.state.global_step += 1;
        self.state.epoch = Some(args::Num::Float(epoch as f64 + (step + 1) as f64 / steps_in_epoch as f64));
        schedule::on_step_end(&self.args, &self.iv, self.profile, self.state.global_step, self.state.max_steps, &mut self.control);
        self.maybe_log_save_evaluate(grad_norm, learning_rate)?;
        Ok((grad_norm, learning_rate))
    }

    /// The epoch a log shows: `round(epoch, 2)` in older versions (an int stays an int).
    fn log_epoch(&self, e: args::Num) -> PyJson {
        match e {
            args::Num::Float(x) if self.profile.round_epoch => PyJson::Float(py_round(x, 2)),
            other => other.to_json(),
        }
    }

    fn log(&mut self, mut logs: LogEntry) {
        if let Some(e) = self.state.epoch {
            logs.push(("epoch".into(), self.log_epoch(e)));
        }
        logs.push(("step".into(), PyJson::Int(self.state.global_step as i128)));
        self.state.log_history.push(logs);
    }

    /// `store_flos`: `total_flos += current_flos; current_flos = 0` (Python int/float arithmetic).
    fn store_flos(&mut self) {
        self.state.total_flos = match (self.state.total_flos, self.current_flos) {
            (args::Num::Int(a), args::Num::Int(b)) => args::Num::Int(a + b),
            (a, b) => args::Num::Float(a.f() + b.f()),
        };
        self.current_flos = args::Num::Int(0);
    }

    /// `_maybe_log_save_evaluate`: log, then evaluate, then save.
    fn maybe_log_save_evaluate(&mut self, grad_norm: Option<f32>, learning_rate: Option<f64>) -> Result<(), HfError> {
        let p = self.profile;
        let should_log = self.control.should_log
            && (!self.profile.log_requires_new_step || self.state.global_step > self.last_logged);
        if should_log {
            let steps = (self.state.global_step - self.last_logged) as f64;
            let tr = self.tr_loss as f64;
            self.tr_loss = 0.0;
            let loss = tr / steps;
            let mut logs: LogEntry = vec![("loss".into(), PyJson::Float(if p.round_loss { py_round(loss, 4) } else { loss }))];
            if let Some(g) = grad_norm {
                logs.push(("grad_norm".into(), PyJson::Float(g as f64)));
            }
            let lr = match (p.logged_lr, learning_rate, &self.sched) {
                (_, _, Scheduler::Plateau(_) | Scheduler::Greedy(_)) => self.current_lr,
                (LoggedLr::UsedByStep, Some(lr), _) => lr,
                _ => self.current_lr,
            };
            logs.push(("learning_rate".into(), PyJson::Float(lr)));
            self.total_loss_scalar += tr;
            self.last_logged = self.state.global_step;
            self.store_flos();
            self.log(logs);
            self.control.should_log = false;
        }
        let mut metrics = None;
        if self.control.should_evaluate {
            let m = self.evaluate_round(false)?;
            if p.best_timing != BestTiming::OnSaveWithMetrics {
                let is_new = self.determine_best(&m)?;
                if self.args.save_strategy == Interval::Best {
                    self.control.should_save = is_new;
                }
            }
            metrics = Some(m);
            self.control.should_evaluate = false;
        }
        if self.control.should_save {
            self.save_checkpoint(metrics.as_ref())?;
            self.control.should_save = false;
        }
        Ok(())
    }

    /// `_determine_best_metric` (4.47+): after every training evaluation.
    fn determine_best(&mut self, metrics: &[(String, PyJson)]) -> Result<bool, HfError> {
        let p = self.profile;
        let Some(key) = self.args.metric_to_check() else { return Ok(false) };
        let v = best::lookup(metrics, &key, p.missing_metric_best)?;
        let greater = self.args.greater_is_better.unwrap_or(true);
        let records = p.best_timing == BestTiming::EveryEvalByStep
            && match self.args.save_strategy {
                Interval::Steps | Interval::Epoch => true,
                Interval::Best => p.best_strategy_records_step,
                Interval::No => false,
            };
        let step = self.state.global_step;
        Ok(if p.best_timing == BestTiming::EveryEvalByPath {
            let folder = format!("{}/checkpoint-{step}", self.output_rel());
            self.state.best.after_eval_by_path(&v, greater, &folder)
        } else {
            self.state.best.after_eval(&v, greater, step, records)
        })
    }

    /// One evaluation round (every eval set), with the plateau step and early stopping.
    /// Returns the merged metrics.
    fn evaluate_round(&mut self, on_start: bool) -> Result<Vec<(String, PyJson)>, HfError> {
        if self.evals.is_empty() {
            return Err(HfError::value("Trainer: evaluation requires an eval_dataset."));
        }
        let mut merged: Vec<(String, PyJson)> = vec![];
        for k in 0..self.evals.len() {
            let m = self.evaluate_set(k)?;
            for (key, v) in m {
                if let Some(slot) = merged.iter_mut().find(|(kk, _)| *kk == key) {
                    slot.1 = v;
                } else {
                    merged.push((key, v));
                }
            }
        }
        // on_evaluate callbacks (early stopping) ran inside evaluate_set for each set; HF's
        // ReduceLROnPlateau step follows the whole round.
        if !on_start {
            if matches!(self.sched, Scheduler::Plateau(_) | Scheduler::Greedy(_)) {
                let key = self.args.metric_to_check().unwrap_or_else(|| "eval_loss".into());
                let v = best::lookup(&merged, &key, self.profile.missing_metric_plateau)?;
                let metric = best::as_f64(&v).unwrap_or(f64::NAN);
                let new_lr = match &mut self.sched {
                    Scheduler::Plateau(pl) => {
                        pl.step(metric);
                        pl.lrs_f64()[0]
                    }
                    Scheduler::Greedy(g) => {
                        g.try_step(metric).map_err(|e| HfError::new(&e.type_name, e.message))?;
                        g.lrs_f64()[0]
                    }
                    Scheduler::Lambda(_) => unreachable!("matched above"),
                };
                self.current_lr = new_lr;
                self.opt.set_lr(new_lr);
            }
        }
        Ok(merged)
    }

    /// `evaluate()` of one set: eval loss, scripted metrics, prefixing, speed keys, the log.
    fn evaluate_set(&mut self, k: usize) -> Result<Vec<(String, PyJson)>, HfError> {
        let start = Instant::now();
        self.rng.begin_eval_loop();
        let set = &self.evals[k];
        let prefix = match &set.name {
            Some(n) => format!("eval_{n}"),
            None => "eval".to_string(),
        };
        let bs = self.args.per_device_eval_batch_size;
        let n = set.x.len();
        let given = self.plan.as_mut().and_then(|f| f.given.pop_front());
        let mut metrics = match given {
            Some(entry) => entry.into_iter().filter(|(k, _)| !crate::diff::is_volatile(k) && k != "epoch" && k != "step").collect(),
            None if self.plan.is_some() => self.assumed_metrics(k, &prefix),
            None => self.computed_metrics(k, &prefix),
        };
        // Keys not already prefixed move to the end under the prefix, in order.
        let (mut done, rest): (Vec<_>, Vec<_>) = metrics.drain(..).partition(|(k, _)| k.starts_with(&format!("{prefix}_")));
        for (k, v) in rest {
            done.push((format!("{prefix}_{k}"), v));
        }
        let mut metrics = done;
        let rt = start.elapsed().as_secs_f64();
        let steps = n.div_ceil(bs);
        metrics.push((format!("{prefix}_runtime"), PyJson::Float(py_round(rt, 4))));
        metrics.push((format!("{prefix}_samples_per_second"), PyJson::Float(py_round(n as f64 / rt, 3))));
        metrics.push((format!("{prefix}_steps_per_second"), PyJson::Float(py_round(steps as f64 / rt, 3))));
        self.log(metrics.clone());
        if let Some(e) = self.state.epoch {
            metrics.push(("epoch".into(), self.log_epoch(e)));
        }
        self.early_stopping_on_evaluate(&metrics)?;
        Ok(metrics)
    }

    /// The scripted compute_metrics entry of this call for eval set `k` (its keys as scripted).
    fn scripted_metrics(&mut self, k: usize) -> Vec<(String, PyJson)> {
        let mut metrics = vec![];
        if let Some(script) = &self.sc.metrics {
            if self.metric_calls.len() <= k {
                self.metric_calls.resize(k + 1, 0);
            }
            let call = self.metric_calls[k];
            self.metric_calls[k] += 1;
            if let Some(entry) = script.get(call) {
                let part: Option<&serde_json::Map<String, serde_json::Value>> = match &self.evals[k].name {
                    Some(name) => entry.get(name).and_then(|v| v.as_object()),
                    None => Some(entry),
                };
                if let Some(part) = part {
                    for (mk, mv) in part {
                        metrics.push((mk.clone(), PyJson::from(mv)));
                    }
                }
            }
        }
        metrics
    }

    /// A plan's metrics without given values: the scripted ones, and assumed values for the eval
    /// loss (and for the metric for best model when the config's compute_metrics is unknown).
    fn assumed_metrics(&mut self, k: usize, prefix: &str) -> Vec<(String, PyJson)> {
        let mut metrics = self.scripted_metrics(k);
        let loss_key = format!("{prefix}_loss");
        let mut keys = vec![];
        if !self.evals[k].x.is_empty() {
            keys.push(loss_key);
        }
        let feed = self.plan.as_ref().expect("a plan");
        if let Some(m) = self.args.metric_to_check() {
            let known = keys.contains(&m) || metrics.iter().any(|(mk, _)| *mk == m || format!("{prefix}_{mk}") == m);
            if feed.metric_keys_unknown && !known && m.starts_with(&format!("{prefix}_")) {
                keys.push(m);
            }
        }
        let best_key = self.args.metric_to_check();
        let greater = self.args.greater_is_better.unwrap_or(true);
        let step = self.state.global_step;
        let feed = self.plan.as_mut().expect("a plan");
        for key in keys {
            let c = match feed.counts.iter_mut().find(|(kk, _)| *kk == key) {
                Some((_, c)) => {
                    *c += 1;
                    *c
                }
                None => {
                    feed.counts.push((key.clone(), 1));
                    1
                }
            };
            // Strictly better at every evaluation, by 1 (past any threshold of early stopping
            // or ReduceLROnPlateau's relative test).
            let up = best_key.as_deref() == Some(key.as_str()) && greater;
            let v = if up { c as f64 } else { -(c as f64) };
            feed.assumed.push((step, key.clone()));
            metrics.push((key, PyJson::Float(v)));
        }
        metrics
    }

    /// A trained run's metrics of one eval set: the eval loss of the model and the scripted
    /// metrics.
    fn computed_metrics(&mut self, k: usize, prefix: &str) -> Vec<(String, PyJson)> {
        let set = &self.evals[k];
        let bs = self.args.per_device_eval_batch_size;
        let n = set.x.len();
        let rows: Vec<usize> = (0..n).collect();
        let mut losses: Vec<f32> = vec![];
        let chunks: Vec<&[usize]> = rows.chunks(bs).filter(|c| !(self.args.dataloader_drop_last && c.len() < bs)).collect();
        let nbatches = chunks.len();
        for (bi, c) in chunks.into_iter().enumerate() {
            let (x, y) = set.batch(c);
            let l = tch::no_grad(|| self.model.loss(&x, &y));
            let l = f32::try_from(&l).unwrap();
            // losses.repeat(eval_batch_size), then gather_for_metrics drops the padding of the
            // last batch.
            let keep = if bi + 1 == nbatches { c.len() } else { bs };
            losses.extend(std::iter::repeat_n(l, keep));
        }
        let mut metrics = self.scripted_metrics(k);
        if !losses.is_empty() {
            let finite: Vec<f32> = losses.iter().copied().filter(|l| l.is_finite()).collect();
            let use_ = if self.profile.eval_loss_skips_nonfinite && !finite.is_empty() { finite } else { losses };
            metrics.push((format!("{prefix}_loss"), PyJson::Float(numpy_mean_f32(&use_) as f64)));
        }
        metrics
    }

    fn early_stopping_checks(&self, _patience: i64) -> Result<(), HfError> {
        let a = &self.args;
        if self.profile.early_stopping_requires_load_best && !a.load_best_model_at_end {
            return Err(HfError::new("AssertionError", "EarlyStoppingCallback requires load_best_model_at_end = True"));
        }
        if a.metric_for_best_model.is_none() {
            let text = if self.profile.early_stopping_requires_load_best {
                "EarlyStoppingCallback requires metric_for_best_model is defined"
            } else {
                "EarlyStoppingCallback requires metric_for_best_model to be defined"
            };
            return Err(HfError::new("AssertionError", text));
        }
        if a.eval_strategy == Interval::No {
            return Err(HfError::new("AssertionError", "EarlyStoppingCallback requires IntervalStrategy of steps or epoch"));
        }
        Ok(())
    }

    /// EarlyStoppingCallback.on_evaluate: compares with the best as it stands before this
    /// evaluation's own update.
    fn early_stopping_on_evaluate(&mut self, metrics: &[(String, PyJson)]) -> Result<(), HfError> {
        let Some(es) = &self.sc.early_stopping else { return Ok(()) };
        let Some(key) = self.args.metric_to_check() else { return Ok(()) };
        let Some((_, v)) = metrics.iter().find(|(k, _)| *k == key) else { return Ok(()) };
        let v = best::as_f64(v).unwrap_or(f64::NAN);
        let greater = self.args.greater_is_better.unwrap_or(true);
        let better = match self.state.best.best_metric.as_ref().and_then(best::as_f64) {
            None => true,
            Some(b) => best::is_better(v, b, greater) && (v - b).abs() > es.threshold,
        };
        if self.state.best.best_metric.is_none() || better {
            self.early_counter = 0;
        } else {
            self.early_counter += 1;
        }
        if self.early_counter >= es.patience {
            self.control.should_training_stop = true;
        }
        Ok(())
    }

    fn create_scheduler(&mut self, max_steps: i64) -> Result<(), HfError> {
        let a = &self.args;
        let kind = match a.lr_scheduler_type.as_str() {
            "linear" => ScheduleKind::Linear,
            "cosine" => ScheduleKind::Cosine { num_cycles: 0.5 },
            "constant" => ScheduleKind::Constant,
            "constant_with_warmup" => ScheduleKind::ConstantWithWarmup,
            "reduce_lr_on_plateau" => {
                let kwargs = if self.profile.plateau_kwargs { a.lr_scheduler_kwargs.clone() } else { Default::default() };
                let pl = Plateau::from_kwargs(&serde_json::Value::Object(kwargs), &[a.learning_rate, a.learning_rate], self.profile.torch_layout)
                    .map_err(|e| HfError::new(&e.type_name, e.message))?;
                self.sched = Scheduler::Plateau(pl);
                self.set_initial_lr();
                return Ok(());
            }
            "greedy" => {
                let g = crate::greedy::Greedy::from_kwargs(
                    &serde_json::Value::Object(a.lr_scheduler_kwargs.clone()),
                    &[a.learning_rate, a.learning_rate],
                )
                .map_err(|e| HfError::new(&e.type_name, e.message))?;
                self.sched = Scheduler::Greedy(g);
                self.set_initial_lr();
                return Ok(());
            }
            other => return Err(HfError::not_modelled(format!("lr_scheduler_type {other}"))),
        };
        let kind = self.check_schedule_kwargs(kind)?;
        let a = &self.args;
        let warmup = if self.profile.warmup_steps_ratio {
            crate::lr::warmup_steps_v5(a.warmup_steps.f(), max_steps) as f64
        } else {
            crate::lr::warmup_steps_v4(a.warmup_steps.f(), a.warmup_ratio, max_steps)
        };
        let s = Schedule { kind, warmup, num_training_steps: max_steps };
        self.current_lr = s.lr_after_steps(a.learning_rate, 0);
        self.opt.set_lr(self.current_lr);
        self.sched = Scheduler::Lambda(s);
        self.set_initial_lr();
        Ok(())
    }

    /// `get_scheduler(..., scheduler_specific_kwargs=lr_scheduler_kwargs)`: constant schedules
    /// drop the kwargs; linear and cosine pass them to their schedule function, which takes
    /// `last_epoch` (and cosine `num_cycles`) and raises Python's TypeError for anything else.
    fn check_schedule_kwargs(&self, kind: ScheduleKind) -> Result<ScheduleKind, HfError> {
        if !self.profile.plateau_kwargs {
            return Ok(kind);
        }
        let (func, accepted): (&str, &[&str]) = match kind {
            ScheduleKind::Linear => ("get_linear_schedule_with_warmup", &["last_epoch"]),
            ScheduleKind::Cosine { .. } => ("get_cosine_schedule_with_warmup", &["num_cycles", "last_epoch"]),
            _ => return Ok(kind),
        };
        let mut kind = kind;
        for (k, v) in &self.args.lr_scheduler_kwargs {
            if ["optimizer", "num_warmup_steps", "num_training_steps"].contains(&k.as_str()) {
                return Err(HfError::not_modelled(format!("lr_scheduler_kwargs {k} repeats a positional argument")));
            }
            if !accepted.contains(&k.as_str()) {
                return Err(HfError::new("TypeError", format!("{func}() got an unexpected keyword argument '{k}'")));
            }
            match (k.as_str(), v.as_f64()) {
                ("num_cycles", Some(c)) => kind = ScheduleKind::Cosine { num_cycles: c },
                ("last_epoch", Some(e)) if e == -1.0 => {}
                _ => return Err(HfError::not_modelled(format!("lr_scheduler_kwargs {k}={v}"))),
            }
        }
        Ok(kind)
    }

    /// LambdaLR records `initial_lr` in every group; ReduceLROnPlateau and GreedyLR do not.
    fn set_initial_lr(&mut self) {
        let lr = match self.sched {
            Scheduler::Lambda(_) => Some(self.args.learning_rate),
            Scheduler::Plateau(_) | Scheduler::Greedy(_) => None,
        };
        self.opt.set_initial_lr(lr);
    }

    /// Refreshes `stateful_callbacks`: every exportable callback, or (`ControlOnly`) only
    /// TrainerControl, the others keeping the state they had at the last full refresh.
    fn refresh_stateful_callbacks(&mut self, which: CallbackRefresh) {
        if which == CallbackRefresh::ControlOnly {
            let control = state::control_state(&self.control);
            if let Some(slot) = self.state.stateful_callbacks.iter_mut().find(|(k, _)| k == "TrainerControl") {
                slot.1 = control;
            }
            return;
        }
        let mut v = vec![];
        if let Some(es) = &self.sc.early_stopping {
            v.push((
                "EarlyStoppingCallback".to_string(),
                PyJson::Dict(vec![
                    (
                        "args".into(),
                        PyJson::Dict(vec![
                            ("early_stopping_patience".into(), PyJson::Int(es.patience as i128)),
                            ("early_stopping_threshold".into(), PyJson::Float(es.threshold)),
                        ]),
                    ),
                    (
                        "attributes".into(),
                        PyJson::Dict(vec![("early_stopping_patience_counter".into(), PyJson::Int(self.early_counter as i128))]),
                    ),
                ]),
            ));
        }
        v.push(("TrainerControl".to_string(), state::control_state(&self.control)));
        self.state.stateful_callbacks = v;
        self.early_counter_saved = self.early_counter;
    }

    /// `_save_checkpoint`.
    fn save_checkpoint(&mut self, metrics: Option<&Vec<(String, PyJson)>>) -> Result<(), HfError> {
        let p = self.profile;
        self.store_flos();
        let folder = format!("checkpoint-{}", self.state.global_step);
        let rel = format!("{}/{folder}", self.output_rel());
        let out = self.output_abs();
        let final_dir = out.join(&folder);
        let atomic = self.mode == SaveMode::Atomic;
        // 4.36-4.38 write into tmp-checkpoint-N and rename it at the end, unless checkpoint-N
        // already exists and is not empty (then they write into it).
        let nonempty = std::fs::read_dir(&final_dir).map(|mut d| d.next().is_some()).unwrap_or(false);
        let staged = !atomic && p.staging_dir && !nonempty;
        let dir = if atomic {
            crate::atomic::remove_leftovers(&out).map_err(|e| io_err(&out, e))?;
            crate::atomic::staging_dir(&out, &folder)
        } else if staged {
            out.join(format!("tmp-{folder}"))
        } else {
            final_dir.clone()
        };
        std::fs::create_dir_all(&dir).map_err(|e| io_err(&dir, e))?;
        self.write_model(&dir)?;
        if p.best_timing == BestTiming::EveryEvalByStep
            && matches!(self.args.save_strategy, Interval::Steps | Interval::Epoch | Interval::Best)
        {
            if let Some(bs) = self.state.best.best_global_step.filter(|s| *s != 0) {
                let best_rel = format!("{}/checkpoint-{bs}", self.output_rel());
                // The folder being saved counts as existing, as it does in the HF-compatible
                // mode, which writes it in place (this era has no tmp-checkpoint staging); atomic
                // mode publishes it only at the end.
                let exists = (atomic && bs == self.state.global_step) || self.run_dir.join(&best_rel).exists();
                if exists {
                    self.state.best.best_model_checkpoint = Some(best_rel);
                }
            }
        }
        if !self.args.save_only_model {
            self.write_optimizer_and_scheduler(&dir)?;
            if !p.rng_after_state {
                self.write_rng(&dir)?;
            }
        }
        if p.best_timing == BestTiming::OnSaveWithMetrics {
            if let (Some(m), Some(key)) = (metrics, self.args.metric_to_check()) {
                let v = best::lookup(m, &key, p.missing_metric_best)?;
                self.state.best.on_save_with_metrics(&v, self.args.greater_is_better.unwrap_or(true), &rel);
            }
        }
        if p.stateful_callbacks != CallbackRefresh::Absent {
            self.refresh_stateful_callbacks(p.stateful_callbacks);
        }
        let sp = dir.join("trainer_state.json");
        store::write_text(&sp, &self.state.to_json_string(p)).map_err(|e| io_err(&sp, e))?;
        if !self.args.save_only_model && p.rng_after_state {
            self.write_rng(&dir)?;
        }
        if atomic {
            // The mtime goes on the staging folder before its fsync; the renames keep it.
            keep_mtime_order(&dir).map_err(|e| io_err(&dir, e))?;
            crate::atomic::sync_tree(&dir).map_err(|e| io_err(&dir, e))?;
            crate::atomic::publish(&out, &dir, &folder).map_err(|e| io_err(&final_dir, e))?;
        } else {
            if staged {
                std::fs::rename(&dir, &final_dir).map_err(|e| io_err(&dir, e))?;
            }
            keep_mtime_order(&final_dir).map_err(|e| io_err(&final_dir, e))?;
        }
        self.events.push(DiskEvent::Saved { step: self.state.global_step, folder: folder.clone(), best: self.state.best.clone() });
        self.rotate()?;
        Ok(())
    }

    fn rotate(&mut self) -> Result<(), HfError> {
        let out = self.output_abs();
        let mut folders = vec![];
        if let Ok(rd) = std::fs::read_dir(&out) {
            for e in rd.flatten() {
                let name = e.file_name().to_string_lossy().into_owned();
                if name.starts_with("checkpoint-") && e.path().is_dir() {
                    let mtime = e
                        .metadata()
                        .and_then(|m| m.modified())
                        .map(|t| t.duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs_f64()).unwrap_or(0.0))
                        .unwrap_or(0.0);
                    folders.push(rotation::Folder { path: format!("{}/{name}", self.output_rel()), mtime });
                }
            }
        }
        let sorted = rotation::sort(&folders, self.profile.rotation);
        let del = rotation::plan(
            &sorted,
            self.args.save_total_limit,
            self.state.best.best_model_checkpoint.as_deref(),
            self.profile.rotation_protection,
        )?;
        for d in del {
            let folder = d.rsplit('/').next().unwrap_or(&d).to_string();
            self.delete_checkpoint(&folder);
            self.events.push(DiskEvent::Deleted { step: self.state.global_step, folder, why: DeleteRule::SaveTotalLimit });
        }
        Ok(())
    }

    fn finalize(&mut self, start: Instant) -> Result<(), HfError> {
        let tr = self.tr_loss as f64;
        self.total_loss_scalar += tr;
        let steps = if self.resume_rules().train_loss_per_call { self.state.global_step - self.initial_global_step } else { self.state.global_step } as f64;
        let train_loss = if self.profile.train_loss_zero_division && steps == 0.0 {
            return Err(HfError::new("ZeroDivisionError", "float division by zero"));
        } else {
            self.total_loss_scalar / steps.max(0.001)
        };
        self.store_flos();
        let rt = start.elapsed().as_secs_f64();
        let num_samples = self.state.max_steps as f64 * self.args.per_device_train_batch_size as f64 * self.args.gradient_accumulation_steps as f64;
        let logs: LogEntry = vec![
            ("train_runtime".into(), PyJson::Float(py_round(rt, 4))),
            ("train_samples_per_second".into(), PyJson::Float(py_round(num_samples / rt, 3))),
            ("train_steps_per_second".into(), PyJson::Float(py_round(self.state.max_steps as f64 / rt, 3))),
            ("total_flos".into(), self.state.total_flos.to_json()),
            ("train_loss".into(), PyJson::Float(train_loss)),
        ];
        self.log(logs);
        if self.args.load_best_model_at_end {
            if let Some(best) = self.state.best.best_model_checkpoint.clone() {
                let dir = self.run_dir.join(&best);
                if let Some((a, b)) = store::read_weights(&dir, self.args.weights_file(self.profile)).map_err(|e| io_err(&dir, e))? {
                    self.model.write_back(&[Param::scalar(a), Param::scalar(b)]);
                }
            }
        }
        // `checkpoints_sorted = self._sorted_checkpoints(use_mtime=False, ...)` at the end of
        // every train() (whatever save_total_limit says).
        {
            let mut names: Vec<String> = std::fs::read_dir(self.output_abs())
                .map(|rd| {
                    rd.flatten()
                        .filter(|e| e.path().is_dir())
                        .map(|e| e.file_name().to_string_lossy().into_owned())
                        .filter(|n| n.starts_with("checkpoint-"))
                        .collect()
                })
                .unwrap_or_default();
            names.sort();
            let sorted: Vec<String> = names.iter().map(|n| format!("{}/{n}", self.output_rel())).collect();
            rotation::protect_best(&sorted, self.state.best.best_model_checkpoint.as_deref(), self.profile.rotation_protection)?;
        }
        // The save_total_limit=1 cleanup: every folder but the best goes.
        if let (Some(best), Some(1)) = (self.state.best.best_model_checkpoint.clone(), self.args.save_total_limit) {
            let out = self.output_abs();
            if let Ok(rd) = std::fs::read_dir(&out) {
                let best_abs = self.run_dir.join(&best);
                if !best_abs.exists() && self.profile.cleanup_uses_samefile {
                    return Err(HfError::new(
                        "FileNotFoundError",
                        format!("[Errno 2] No such file or directory: {}", crate::hf_error::py_str_repr(&best)),
                    ));
                }
                let mut entries: Vec<_> = rd.flatten().collect();
                entries.sort_by_key(|e| rotation::step_of(&e.file_name().to_string_lossy()));
                for e in entries {
                    let name = e.file_name().to_string_lossy().into_owned();
                    if name.starts_with("checkpoint-") && e.path().is_dir() && e.path() != best_abs {
                        self.delete_checkpoint(&name);
                        self.events.push(DiskEvent::Deleted {
                            step: self.state.global_step,
                            folder: name,
                            why: DeleteRule::EndOfTrainCleanup,
                        });
                    }
                }
            }
        }
        Ok(())
    }

    /// Deletes `output/<folder>` as HF does (`shutil.rmtree(..., ignore_errors=True)`); in atomic
    /// mode by one rename out of HF's sight first, so that a crash never leaves it partial.
    fn delete_checkpoint(&self, folder: &str) {
        let out = self.output_abs();
        let _ = match self.mode {
            SaveMode::Atomic => crate::atomic::remove_checkpoint(&out, folder),
            SaveMode::HfCompatible => std::fs::remove_dir_all(out.join(folder)),
        };
    }

    fn write_model(&self, dir: &Path) -> Result<(), HfError> {
        let (a, b) = self.model.values();
        store::write_weights(dir, self.profile, self.args.weights_file(self.profile), a, b).map_err(|e| io_err(dir, e))?;
        // `_align_special_tokens` at the start of train() (the scenarios save only after it).
        let pad = self.profile.tokenizer_pad_token_id.filter(|_| self.sc.tokenizer && self.profile.aligns_special_tokens);
        store::write_config(dir, self.profile, self.sc.model.a, self.sc.model.b, pad).map_err(|e| io_err(dir, e))?;
        if self.sc.tokenizer {
            // `_save`: `processing_class.save_pretrained(output_dir)` after the model, before
            // training_args.bin, in every checkpoint and in save_model()'s folder.
            for (name, text) in &self.profile.tokenizer_files {
                let p = dir.join(name);
                store::write_text(&p, text).map_err(|e| io_err(&p, e))?;
            }
        }
        store::write_training_args(dir, self.profile, &self.args).map_err(|e| io_err(dir, e))
    }

    fn write_optimizer_and_scheduler(&self, dir: &Path) -> Result<(), HfError> {
        let opt_sd = self.opt.state_dict();
        store::write_pyvalue(&dir.join("optimizer.pt"), &opt_sd, self.profile).map_err(|e| io_err(dir, e))?;
        let sched_sd = match &self.sched {
            Scheduler::Lambda(s) => crate::lr::LambdaLrState::new(s, self.args.learning_rate, 2, self.sched_steps).to_py(self.profile.torch_layout),
            Scheduler::Plateau(p) => p.state_dict(self.profile.torch_layout),
            Scheduler::Greedy(g) => g.state_dict(),
        };
        store::write_pyvalue(&dir.join("scheduler.pt"), &sched_sd, self.profile).map_err(|e| io_err(dir, e))
    }

    fn write_rng(&self, dir: &Path) -> Result<(), HfError> {
        store::write_rng(dir, self.profile, self.args.seed, &self.rng.torch_state()).map_err(|e| io_err(dir, e))
    }

    /// `trainer.save_model()` after train(): weights, config and training_args.bin in output_dir.
    fn save_model(&mut self) -> Result<(), HfError> {
        let out = self.output_abs();
        std::fs::create_dir_all(&out).map_err(|e| io_err(&out, e))?;
        self.write_model(&out)
    }

    /// `trainer.save_state()`: trainer_state.json in output_dir.
    fn save_state(&mut self) -> Result<(), HfError> {
        let out = self.output_abs();
        std::fs::create_dir_all(&out).map_err(|e| io_err(&out, e))?;
        let sp = out.join("trainer_state.json");
        store::write_text(&sp, &self.state.to_json_string(self.profile)).map_err(|e| io_err(&sp, e))
    }
}

/// Rotation by mtime (4.31, and 5.x when saves span a second) assumes each new checkpoint
/// folder is newer than the others, as it is under HF, whose saves take longer than the file
/// system's timestamp granularity (a few ms). Our saves can be faster than that, so when the
/// new folder's mtime does not exceed every other checkpoint's, it is set 1 ms past the newest.
fn keep_mtime_order(dir: &Path) -> std::io::Result<()> {
    let mtime = |p: &Path| std::fs::metadata(p).and_then(|m| m.modified());
    let mine = mtime(dir)?;
    let mut newest = None;
    if let Some(parent) = dir.parent() {
        for e in std::fs::read_dir(parent)?.flatten() {
            let p = e.path();
            let name = e.file_name();
            if p != dir && p.is_dir() && name.to_string_lossy().starts_with("checkpoint-") {
                let m = mtime(&p)?;
                if newest.is_none_or(|n| m > n) {
                    newest = Some(m);
                }
            }
        }
    }
    if let Some(n) = newest.filter(|n| mine <= *n) {
        let t = n + std::time::Duration::from_millis(1);
        std::fs::File::open(dir)?.set_times(std::fs::FileTimes::new().set_modified(t))?;
    }
    Ok(())
}

fn optim_kind(args: &Args) -> Result<AdamWKind, HfError> {
    match args.optim.as_str() {
        "adamw_torch_fused" => Ok(AdamWKind::TorchFused),
        "adamw_torch" => Ok(AdamWKind::TorchSingleTensor),
        "adamw_hf" => Ok(AdamWKind::HfAdamW),
        other => Err(HfError::not_modelled(format!("optim {other}"))),
    }
}

/// Python's `round(x, n)` for floats.
pub fn py_round(x: f64, n: usize) -> f64 {
    if !x.is_finite() {
        return x;
    }
    format!("{x:.n$}").parse().unwrap_or(x)
}

/// `np.mean` of a float32 array: pairwise summation in float32 (blocks of 8, unrolled by 8
/// below 128 elements), then division.
pub fn numpy_mean_f32(xs: &[f32]) -> f32 {
    fn pairwise(a: &[f32]) -> f32 {
        let n = a.len();
        if n < 8 {
            let mut s = 0.0f32;
            for &x in a {
                s += x;
            }
            s
        } else if n <= 128 {
            let mut r = [0f32; 8];
            r.copy_from_slice(&a[..8]);
            let mut i = 8;
            while i + 8 <= n {
                for j in 0..8 {
                    r[j] += a[i + j];
                }
                i += 8;
            }
            let mut res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
            while i < n {
                res += a[i];
                i += 1;
            }
            res
        } else {
            let mut n2 = n / 2;
            n2 -= n2 % 8;
            pairwise(&a[..n2]) + pairwise(&a[n2..])
        }
    }
    pairwise(xs) / xs.len() as f32
}

/// HF's exceptions for a checkpoint file cut short (a run killed while writing it), as the real
/// HF of each profile raises them when `train(resume_from_checkpoint=...)` reads the file
/// (tests/resume.rs truncates each file of a real checkpoint). Each function says `None` for
/// damage whose exception is not modelled (the caller reports it as not implemented).
mod damaged {
    use crate::hf_error::HfError;
    use crate::profile::ResumeBehaviors;
    use crate::pyjson::PyJson;
    use std::path::Path;

    /// `torch.load` of a file cut short: empty, the unpickler's `EOFError` (its message is the
    /// release's: pickle's "Ran out of input" or the weights-only unpickler's empty one); a zip
    /// archive without its central directory (any cut past the first local header),
    /// `RuntimeError` from `PytorchStreamReader`.
    pub fn torch_load(path: &Path, empty_message: &str, zip_suffix: &str) -> Option<HfError> {
        let bytes = std::fs::read(path).ok()?;
        if bytes.is_empty() {
            return Some(HfError::new("EOFError", empty_message));
        }
        // torch takes a file for a zip archive by its first four bytes; miniz then looks for
        // the end-of-central-directory record in the last 64 KiB + 22 bytes.
        let tail = &bytes[bytes.len().saturating_sub(65_557)..];
        if bytes.starts_with(b"PK\x03\x04") && !tail.windows(4).any(|w| w == b"PK\x05\x06") {
            return Some(HfError::new(
                "RuntimeError",
                format!("PytorchStreamReader failed reading zip archive: failed finding central directory{zip_suffix}"),
            ));
        }
        None
    }

    /// `_load_from_checkpoint`'s read of the weights: `safetensors.torch.load_file` for
    /// model.safetensors (a `SafetensorError` when the 8-byte header length or the header itself
    /// is cut off), `torch.load` for pytorch_model.bin.
    pub fn weights_load(path: &Path, rules: &ResumeBehaviors) -> Option<HfError> {
        if path.file_name().is_some_and(|n| n == "pytorch_model.bin") {
            return torch_load(path, rules.empty_weights_file_message, rules.zip_error_suffix);
        }
        let bytes = std::fs::read(path).ok()?;
        let (too_small, invalid_length) = rules.safetensors_header_errors;
        let which = if bytes.len() < 8 {
            too_small
        } else {
            let n = u64::from_le_bytes(bytes[..8].try_into().unwrap());
            // safetensors refuses a header over 100 MB first (HeaderTooLarge, not modelled).
            if n > 100_000_000 || n.checked_add(8).is_none_or(|end| end <= bytes.len() as u64) {
                return None;
            }
            invalid_length
        };
        Some(HfError::new("SafetensorError", format!("Error while deserializing header: {which}")))
    }

    /// `TrainerState.load_from_json`: `json.loads` of the text; `Err(Some(JSONDecodeError))`
    /// where Python's decoder rejects it, with its message and position.
    pub fn parse_trainer_state(text: &str) -> Result<PyJson, Option<HfError>> {
        if let Some((msg, pos)) = py_json_error(text) {
            let chars: Vec<char> = text.chars().collect();
            let before = &chars[..pos.min(chars.len())];
            let line = before.iter().filter(|c| **c == '\n').count() + 1;
            let column = match before.iter().rposition(|c| *c == '\n') {
                Some(nl) => pos - nl,
                None => pos + 1,
            };
            return Err(Some(HfError::new("JSONDecodeError", format!("{msg}: line {line} column {column} (char {pos})"))));
        }
        crate::pyjson::loads(text).map_err(|_| None)
    }

    /// Where CPython 3.11's `json.loads` fails on `text` (message, character index), or None when
    /// it parses. Follows `json.decoder` / `_json.c`: each error at the index Python reports
    /// (an unterminated string at its opening quote, a missing delimiter where it should be).
    pub fn py_json_error(text: &str) -> Option<(String, usize)> {
        let c: Vec<char> = text.chars().collect();
        let p = JsonScan { c: &c };
        let start = p.ws(0);
        match p.value(start, 0) {
            Err(e) => Some(e),
            Ok(end) => {
                let end = p.ws(end);
                (end != c.len()).then(|| ("Extra data".to_string(), end))
            }
        }
    }

    struct JsonScan<'a> {
        c: &'a [char],
    }

    type Scan = Result<usize, (String, usize)>;

    impl JsonScan<'_> {
        fn at(&self, i: usize) -> Option<char> {
            self.c.get(i).copied()
        }
        fn ws(&self, mut i: usize) -> usize {
            while matches!(self.at(i), Some(' ' | '\t' | '\n' | '\r')) {
                i += 1;
            }
            i
        }
        fn lit(&self, i: usize, word: &str) -> bool {
            word.chars().enumerate().all(|(k, w)| self.at(i + k) == Some(w))
        }
        fn err(msg: &str, pos: usize) -> (String, usize) {
            (msg.to_string(), pos)
        }
        fn value(&self, i: usize, depth: usize) -> Scan {
            if depth > 900 {
                return Err(Self::err("nesting too deep (not modelled)", i));
            }
            match self.at(i) {
                Some('"') => self.string(i + 1),
                Some('{') => self.object(i + 1, depth),
                Some('[') => self.array(i + 1, depth),
                Some('n') if self.lit(i, "null") => Ok(i + 4),
                Some('t') if self.lit(i, "true") => Ok(i + 4),
                Some('f') if self.lit(i, "false") => Ok(i + 5),
                Some('N') if self.lit(i, "NaN") => Ok(i + 3),
                Some('I') if self.lit(i, "Infinity") => Ok(i + 8),
                Some('-') if self.lit(i, "-Infinity") => Ok(i + 9),
                Some(ch) if ch == '-' || ch.is_ascii_digit() => self.number(i),
                _ => Err(Self::err("Expecting value", i)),
            }
        }
        /// `-?(0|[1-9]\d*)(\.\d+)?([eE][-+]?\d+)?`; a fraction or exponent without digits is not
        /// part of the number.
        fn number(&self, i: usize) -> Scan {
            let digit = |k: usize| self.at(k).is_some_and(|ch| ch.is_ascii_digit());
            let mut k = i;
            if self.at(k) == Some('-') {
                k += 1;
            }
            match self.at(k) {
                Some('0') => k += 1,
                Some('1'..='9') => {
                    while digit(k) {
                        k += 1;
                    }
                }
                _ => return Err(Self::err("Expecting value", i)),
            }
            if self.at(k) == Some('.') && digit(k + 1) {
                k += 1;
                while digit(k) {
                    k += 1;
                }
            }
            if matches!(self.at(k), Some('e' | 'E')) {
                let mut e = k + 1;
                if matches!(self.at(e), Some('+' | '-')) {
                    e += 1;
                }
                if digit(e) {
                    while digit(e) {
                        e += 1;
                    }
                    k = e;
                }
            }
            Ok(k)
        }
        /// `i`: just past the opening quote.
        fn string(&self, i: usize) -> Scan {
            let begin = i - 1;
            let mut k = i;
            loop {
                match self.at(k) {
                    None => return Err(Self::err("Unterminated string starting at", begin)),
                    Some('"') => return Ok(k + 1),
                    Some('\\') => match self.at(k + 1) {
                        None => return Err(Self::err("Unterminated string starting at", begin)),
                        Some('u') => {
                            let hex = (2..6).all(|d| self.at(k + d).is_some_and(|ch| ch.is_ascii_hexdigit()));
                            if !hex {
                                return Err(Self::err("Invalid \\uXXXX escape", k + 1));
                            }
                            k += 6;
                        }
                        Some('"' | '\\' | '/' | 'b' | 'f' | 'n' | 'r' | 't') => k += 2,
                        Some(other) => return Err((format!("Invalid \\escape: {}", crate::hf_error::py_str_repr(&other.to_string())), k)),
                    },
                    Some(ch) if (ch as u32) < 0x20 => return Err(Self::err("Invalid control character at", k)),
                    Some(_) => k += 1,
                }
            }
        }
        /// `i`: just past `{`.
        fn object(&self, i: usize, depth: usize) -> Scan {
            let mut k = self.ws(i);
            match self.at(k) {
                Some('}') => return Ok(k + 1),
                Some('"') => {}
                _ => return Err(Self::err("Expecting property name enclosed in double quotes", k)),
            }
            loop {
                k = self.string(k + 1)?;
                k = self.ws(k);
                if self.at(k) != Some(':') {
                    return Err(Self::err("Expecting ':' delimiter", k));
                }
                k = self.ws(k + 1);
                k = self.value(k, depth + 1)?;
                k = self.ws(k);
                match self.at(k) {
                    Some('}') => return Ok(k + 1),
                    Some(',') => {}
                    _ => return Err(Self::err("Expecting ',' delimiter", k)),
                }
                k = self.ws(k + 1);
                if self.at(k) != Some('"') {
                    return Err(Self::err("Expecting property name enclosed in double quotes", k));
                }
            }
        }
        /// `i`: just past `[`.
        fn array(&self, i: usize, depth: usize) -> Scan {
            let mut k = self.ws(i);
            if self.at(k) == Some(']') {
                return Ok(k + 1);
            }
            loop {
                k = self.value(k, depth + 1)?;
                k = self.ws(k);
                match self.at(k) {
                    Some(']') => return Ok(k + 1),
                    Some(',') => k = self.ws(k + 1),
                    _ => return Err(Self::err("Expecting ',' delimiter", k)),
                }
            }
        }
    }

    #[cfg(test)]
    mod tests {
        use super::py_json_error;

        #[test]
        fn python_json_error_positions() {
            // Each checked with CPython 3.11's json.loads.
            let e = |t: &str| py_json_error(t).map(|(m, p)| format!("{m} {p}"));
            assert_eq!(e(""), Some("Expecting value 0".into()));
            assert_eq!(e("{\n  \"a\": \"xy"), Some("Unterminated string starting at 9".into()));
            assert_eq!(e("{\"a\": 1"), Some("Expecting ',' delimiter 7".into()));
            assert_eq!(e("{\"a\": 1,"), Some("Expecting property name enclosed in double quotes 8".into()));
            assert_eq!(e("{\"a\" 1}"), Some("Expecting ':' delimiter 5".into()));
            assert_eq!(e("[1, 2."), Some("Expecting ',' delimiter 5".into()));
            assert_eq!(e("{\"a\": [1, "), Some("Expecting value 10".into()));
            assert_eq!(e("{\"a\": tru"), Some("Expecting value 6".into()));
            assert_eq!(e("{} x"), Some("Extra data 3".into()));
            assert_eq!(e("{\"a\": [1.5e3, -0, NaN, \"\\u00e9\"]}"), None);
        }
    }
}
