//! `ckptspec plan CONFIG --hf VERSION...`: the checkpoint timeline and the answers for a user's
//! config, without training: for each version the executor ([`crate::trainer::plan`]) runs the
//! config with the same policies as a trained run, with given (or assumed) metrics and no tensor
//! math, into a temporary run directory; the checkpoints it leaves there are the plan's.
//!
//! - [`config`]: CONFIG (scenario file, JSON/YAML keyword arguments, training_args.bin);
//! - [`arguments`]: which arguments reach the executor, and the ones taken out, named;
//! - [`data`]: training rows and eval sets; [`metrics`]: `--metrics` / `--metrics-from`;
//! - [`answers`]: the answers read from the plan's run directory;
//! - [`render`] (text) and [`json`] (`--json`).

pub mod answers;
pub mod arguments;
pub mod config;
pub mod data;
pub mod json;
pub mod metrics;
pub mod render;

use config::{Config, Kind};
use crate::hf::profile::{self, Profile};
use crate::trainer::{self, PlanMetrics};
use crate::world::scenario::{DataSpec, EvalSpec, FinallyCall, ModelKind, ModelSpec, ResumeSpec, Scenario};
use crate::world::launch::{Disks, LaunchSpec};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicUsize, Ordering};

/// The command line of `ckptspec plan`, as the CLI parsed it.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// A scenario file, a JSON/YAML file of TrainingArguments keyword arguments, or a
    /// `training_args.bin`.
    pub config: PathBuf,
    /// Profiles (`--hf`, repeatable; `all` for every profile). Patch mapping is the CLI's.
    pub hf: Vec<String>,
    pub train_rows: Option<usize>,
    /// `--eval-rows M` or `--eval-rows a=8,b=4`, as given.
    pub eval_rows: Option<String>,
    pub steps_per_epoch: Option<usize>,
    pub metrics: Option<PathBuf>,
    pub metrics_from: Option<PathBuf>,
    /// `--model`: the model kind (None: the scenario's, else `regression`).
    pub model: Option<ModelKind>,
    /// `--resume-from last|checkpoint-N`: plan a `train(resume_from_checkpoint=...)` after the
    /// first run (a scenario's `resume.from` replaced).
    pub resume_from: Option<String>,
    /// `--resume-max-steps N`: the resumed Trainer's max_steps (implies `--resume-from last`
    /// when not given).
    pub resume_max_steps: Option<u64>,
    /// `--resume-metrics-from`: the resumed run's trainer_state.json.
    pub resume_metrics_from: Option<PathBuf>,
    /// `--nproc-per-node N` / `--nnodes M`: plan a launch of several processes (contract v3
    /// part 2); several nodes have a disk each (node-local `output_dir`).
    pub nproc_per_node: Option<usize>,
    pub nnodes: Option<usize>,
    pub json: bool,
}

/// What every version's plan shares: the data options and the metrics, resolved once.
#[derive(Debug, Clone)]
pub struct Request {
    pub train_rows: Option<usize>,
    pub steps_per_epoch: Option<usize>,
    pub eval: EvalSpec,
    pub eval_note: String,
    /// Per `evaluate()` call; None: assumed.
    pub given: Option<Vec<metrics::Call>>,
    pub metrics_note: String,
    /// `--model`.
    pub model: Option<ModelKind>,
    /// The resumed run's own evaluations (`--resume-metrics-from`); None: the resumed run's
    /// evaluations continue the given list where the first run left it, then are assumed.
    pub resume_given: Option<Vec<metrics::Call>>,
    /// `--resume-from` (checked) and `--resume-max-steps`.
    pub resume_from: Option<String>,
    pub resume_max_steps: Option<u64>,
    /// `--nproc-per-node` / `--nnodes` (checked); None: the scenario's launch, or one process.
    pub launch: Option<LaunchSpec>,
}

impl Request {
    /// Data and metrics for `cfg` from the options. A scenario file brings its own data and
    /// scripted metrics; the options override them (and say so).
    pub fn new(cfg: &Config, opts: &Options) -> Result<Request, String> {
        let eval_rows = opts.eval_rows.as_deref().map(data::parse_eval_rows).transpose()?;
        let sc_eval = cfg.scenario.as_ref().map(|s| &s.data.eval);
        let (eval, eval_note) = data::eval_sets(&cfg.kwargs, eval_rows.as_ref(), sc_eval);
        let sets = data::set_names(&eval);
        let (given, metrics_note) = match (&opts.metrics, &opts.metrics_from) {
            (Some(_), Some(_)) => return Err("give --metrics or --metrics-from, not both".into()),
            (Some(p), None) => {
                let calls = metrics::load_rounds(p, &sets)?;
                let n = calls.len();
                (Some(calls), format!("given by {} ({n} evaluate() calls); any later evaluation is assumed", p.display()))
            }
            (None, Some(p)) => {
                let calls = metrics::load_trainer_state(p)?;
                let n = calls.len();
                (Some(calls), format!("given by the log_history of {} ({n} evaluations); any later evaluation is assumed", p.display()))
            }
            (None, None) => (None, match cfg.kind {
                Kind::Scenario => "the scenario's scripted compute_metrics; the eval loss (a model's output) is assumed".to_string(),
                _ => "assumed (no --metrics or --metrics-from): the eval loss and the metric for best model improve at every evaluation; anything that depends on them is marked".to_string(),
            }),
        };
        let resume_from = match (&opts.resume_from, opts.resume_max_steps) {
            (Some(f), _) if f == "last" || f.strip_prefix("checkpoint-").is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit())) => Some(f.clone()),
            (Some(f), _) => return Err(format!("--resume-from: \"last\" or \"checkpoint-<N>\", not {f:?}")),
            (None, Some(_)) => Some("last".to_string()),
            (None, None) => None,
        };
        let resumes = resume_from.is_some() || cfg.scenario.as_ref().is_some_and(|s| s.resume.is_some());
        let (resume_given, metrics_note) = match &opts.resume_metrics_from {
            Some(p) if !resumes => return Err(format!("--resume-metrics-from {}: the plan does not resume (give --resume-from or --resume-max-steps, or a scenario with `resume`)", p.display())),
            Some(p) => {
                let calls = metrics::load_trainer_state(p)?;
                let n = calls.len();
                (Some(calls), format!("{metrics_note}; the resumed run's: the log_history of {} ({n} evaluations, the checkpoint's own skipped); any later evaluation is assumed", p.display()))
            }
            None if resumes && given.is_some() => (None, format!("{metrics_note}; the resumed run's evaluations continue the list where the first run's end")),
            None => (None, metrics_note),
        };
        let launch = match (opts.nproc_per_node, opts.nnodes) {
            (None, None) => None,
            (nproc, nnodes) => {
                let l = LaunchSpec {
                    nnodes: nnodes.unwrap_or(1),
                    nproc_per_node: nproc.unwrap_or(1),
                    // Several nodes: each its own disk, as a relative output_dir on node-local
                    // storage is (a shared file system is a scenario's `"disks": "shared"`).
                    disks: if nnodes.unwrap_or(1) > 1 { Disks::PerNode } else { Disks::Shared },
                };
                l.check("launch").map_err(|e| e.replace("field 'launch.nnodes'", "--nnodes").replace("field 'launch.nproc_per_node'", "--nproc-per-node"))?;
                Some(l)
            }
        };
        Ok(Request {
            launch,
            train_rows: opts.train_rows,
            steps_per_epoch: opts.steps_per_epoch,
            eval,
            eval_note,
            given,
            metrics_note,
            model: opts.model,
            resume_given,
            resume_from,
            resume_max_steps: opts.resume_max_steps,
        })
    }
}

/// One version's plan.
#[derive(Debug, Clone)]
pub struct VersionPlan {
    /// What `--hf` said (another patch maps to its minor's profile).
    pub asked: String,
    pub hf_version: &'static str,
    pub config: String,
    pub config_kind: &'static str,
    pub config_note: Option<String>,
    pub classified: arguments::Classified,
    pub train_note: String,
    pub eval_note: String,
    pub metrics_note: String,
    pub finally_calls: Vec<String>,
    /// Err: the executor could not plan this version (a gap in the model, an I/O failure).
    pub outcome: Result<answers::Answers, String>,
    /// The text timeline (empty when not planned).
    pub timeline: String,
    /// Races of real HF this config meets in this release (conformance/races.json): the plan
    /// answers their first outcome, and says that real HF may give another.
    pub races: Vec<&'static crate::hf::races::Race>,
}

/// A temporary run directory, removed when dropped.
struct TempRun(PathBuf);

impl TempRun {
    fn new(version: &str) -> Result<TempRun, String> {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let dir = crate::harness::runner::scratch_root().join(format!("ckptspec-plan-{}-{n}-{version}", std::process::id()));
        if dir.exists() {
            std::fs::remove_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        }
        std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create the plan's temporary folder {}: {e}", dir.display()))?;
        Ok(TempRun(dir))
    }
}

impl Drop for TempRun {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Plans `cfg` for one profile. Err is the tool's error (e.g. the data size is needed).
pub fn plan_version(cfg: &Config, req: &Request, profile: &Profile, asked: &str) -> Result<VersionPlan, String> {
    let classified = arguments::classify(&cfg.kwargs, profile, cfg.kind == Kind::Kwargs, cfg.kind != Kind::Scenario);
    let resolved = match classified.spelling_error {
        Some(_) => None,
        None => crate::hf::args::resolve(&classified.args, profile).ok(),
    };
    let sc_rows = cfg.scenario.as_ref().map(|s| s.data.train);
    let (train, train_note) = data::train_rows(resolved.as_ref(), req.train_rows, req.steps_per_epoch, sc_rows)?;
    let mut sc = match &cfg.scenario {
        Some(base) => {
            let mut sc = base.clone();
            sc.args = classified.args.clone();
            sc.data = DataSpec { train, eval: req.eval.clone() };
            sc
        }
        None => Scenario {
            name: cfg.path.file_stem().and_then(|s| s.to_str()).unwrap_or("config").to_string(),
            summary: String::new(),
            args: classified.args.clone(),
            model: ModelSpec::default(),
            data: DataSpec { train, eval: req.eval.clone() },
            metrics: None,
            early_stopping: None,
            finally_calls: vec![],
            tokenizer: false,
            resume: None,
            launch: None,
            signal: None,
            train: true,
            earlier: vec![],
            control: vec![],
        },
    };
    if let Some(kind) = req.model {
        sc.model = ModelSpec { kind, ..sc.model.clone() };
    }
    if let Some(l) = req.launch {
        sc.launch = Some(l);
    }
    // The resume a user asks for (a scenario's own `resume`, its `from` and max_steps replaced).
    if req.resume_from.is_some() || req.resume_max_steps.is_some() {
        let mut r = sc.resume.clone().unwrap_or(ResumeSpec { from: "last".into(), args: Default::default(), damage: vec![], model: None, launch: None, early_stopping: None });
        if let Some(f) = &req.resume_from {
            r.from = f.clone();
        }
        if let Some(n) = req.resume_max_steps {
            r.args.insert("max_steps".into(), n.into());
        }
        sc.resume = Some(r);
    }
    let run = TempRun::new(profile.version)?;
    let title = format!("plan of {} @ HF {}", cfg.path.display(), profile.version);
    let traced = match &classified.spelling_error {
        // The executor would spell the name for this version; HF takes it as written.
        Some((t, m)) => write_rejected(&run.0, profile, t, m).map(|()| trainer::PlanTrace::default()),
        None => {
            let metrics = match &req.given {
                Some(calls) => PlanMetrics::Given(calls.clone()),
                None => PlanMetrics::Assumed { metric_keys_unknown: cfg.kind != Kind::Scenario },
            };
            trainer::plan_resumed(&sc, profile, &run.0, metrics, req.resume_given.clone()).map_err(|e| e.to_string())
        }
    };
    let (outcome, timeline) = match traced {
        Err(e) => (Err(e), String::new()),
        Ok(trace) => {
            let a = answers::read(&run.0, &trace, resolved.as_ref(), &sc)?;
            let text = render::timeline(&run.0, &title, &trace, a.assumed)?;
            (Ok(a), text)
        }
    };
    Ok(VersionPlan {
        asked: asked.to_string(),
        hf_version: profile.version,
        config: cfg.path.display().to_string(),
        config_kind: cfg.kind.label(),
        config_note: cfg.note.clone(),
        classified,
        train_note,
        eval_note: req.eval_note.clone(),
        metrics_note: req.metrics_note.clone(),
        finally_calls: sc
            .finally_calls
            .iter()
            .map(|c| match c {
                FinallyCall::SaveModel => "save_model".to_string(),
                FinallyCall::SaveState => "save_state".to_string(),
            })
            .collect(),
        outcome,
        timeline,
        races: sc.races(profile.version),
    })
}

/// `result.json` of a version that rejects the arguments before a Trainer exists, in the shape
/// the executor writes for its own argument errors.
fn write_rejected(run_dir: &Path, profile: &Profile, type_: &str, message: &str) -> Result<(), String> {
    use crate::formats::pyjson::{DumpOptions, PyJson};
    let result = PyJson::Dict(vec![
        ("hf_version".into(), PyJson::Str(profile.version.into())),
        ("error".into(), PyJson::Dict(vec![("type".into(), PyJson::Str(type_.into())), ("message".into(), PyJson::Str(message.into()))])),
        ("final_state".into(), PyJson::Null),
    ]);
    let text = crate::formats::pyjson::dumps(&result, &DumpOptions { indent: Some(2), ..DumpOptions::default() }).map_err(|e| e.to_string())?;
    std::fs::write(run_dir.join("result.json"), text + "\n").map_err(|e| format!("{}: {e}", run_dir.display()))
}

/// One `--hf` value resolved: what was asked, the profile, and the note said on stderr when
/// another patch maps to its minor's profile.
pub type Asked = (String, &'static str, Option<String>);

/// The `--hf` values: repeatable, comma lists, `all`; each resolved to its profile (another patch
/// of a profiled minor maps to it, with a note). Oldest first, each profile once.
pub fn resolve_versions(hf: &[String]) -> Result<Vec<Asked>, String> {
    let all = profile::supported();
    let mut out: Vec<Asked> = vec![];
    for part in hf.iter().flat_map(|h| h.split(',')).map(str::trim).filter(|s| !s.is_empty()) {
        if part == "all" {
            for v in &all {
                out.push((v.to_string(), v, None));
            }
            continue;
        }
        let r = profile::resolve(part)?;
        out.push((part.to_string(), r.profile(), r.note()));
    }
    if out.is_empty() {
        return Err(format!("--hf: no version given; give one or more of: all, {}", all.join(", ")));
    }
    let pos = |v: &str| all.iter().position(|x| *x == v).unwrap_or(usize::MAX);
    out.sort_by_key(|(_, v, _)| pos(v));
    out.dedup_by_key(|(_, v, _)| *v);
    Ok(out)
}

/// Plans every version on the machine's cores; in the order given.
pub fn plan_all(cfg: &Config, req: &Request, versions: &[Asked]) -> Result<Vec<VersionPlan>, String> {
    crate::harness::par::map(versions.len(), crate::harness::par::cores(), |k| {
        let (asked, v, _) = &versions[k];
        Profile::get(v).and_then(|p| plan_version(cfg, req, &p, asked))
    })
    .into_iter()
    .collect()
}

/// The text output: each version's section, then the differences when there are several.
pub fn text(plans: &[VersionPlan]) -> String {
    let mut s = String::new();
    let mut shown: Vec<(String, &str)> = vec![];
    for vp in plans {
        let args = render::arguments_text(vp);
        let same = shown.iter().find(|(t, _)| *t == args).map(|(_, v)| *v);
        s.push_str(&render::section(vp, same));
        if same.is_none() {
            shown.push((args, vp.hf_version));
        }
    }
    if plans.len() > 1 {
        s.push_str(&render::differences(plans));
    }
    s
}

/// Runs `ckptspec plan`; Err is the tool's own error (exit 2). Exit 0 when every version was
/// planned (an error HF raises is an answer), 1 when some version could not be planned.
pub fn main(opts: &Options) -> Result<ExitCode, String> {
    let versions = resolve_versions(&opts.hf)?;
    let cfg = Config::load(&opts.config)?;
    let req = Request::new(&cfg, opts)?;
    for (_, _, note) in &versions {
        if let Some(n) = note {
            eprintln!("{n}");
        }
    }
    let plans = plan_all(&cfg, &req, &versions)?;
    if opts.json {
        print!("{}", json::output(&plans));
    } else {
        print!("{}", text(&plans));
    }
    let unplanned: Vec<String> = plans
        .iter()
        .filter_map(|p| p.outcome.as_ref().err().map(|e| format!("HF {}: {e}", p.hf_version)))
        .collect();
    if unplanned.is_empty() {
        Ok(ExitCode::SUCCESS)
    } else {
        eprintln!("could not plan {} version(s):\n  {}", unplanned.len(), unplanned.join("\n  "));
        Ok(ExitCode::from(1))
    }
}
