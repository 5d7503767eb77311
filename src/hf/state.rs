//! TrainerState as the version serialises it (`json.dumps(asdict(state), indent=2,
//! sort_keys=True)`): which fields exist is a profile matter; values keep Python's types. Also
//! the rest of trainer_callback.py's vocabulary the layers above share: TrainerControl's flags,
//! the resolved logging/eval/save intervals the state records, and the best-metric fields. How
//! they change is [`crate::policy`]'s to decide (`impl Best` is in [`crate::policy::best`]).

use crate::formats::pyjson::{DumpOptions, PyJson};
use crate::hf::args::{Args, Num};
use crate::hf::profile::Profile;

/// The best-tracking part of TrainerState (its rules: [`crate::policy::best`]).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Best {
    pub best_metric: Option<PyJson>,
    pub best_global_step: Option<u64>,
    pub best_model_checkpoint: Option<String>,
}

/// TrainerControl's flags.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Control {
    pub should_training_stop: bool,
    pub should_epoch_stop: bool,
    pub should_save: bool,
    pub should_evaluate: bool,
    pub should_log: bool,
}

/// logging/eval/save intervals after ratio resolution (`ceil(max_steps * ratio)` below 1).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Intervals {
    pub logging: Num,
    /// `None` when `eval_steps` is unset (the state then shows the dataclass default 500).
    pub eval: Option<Num>,
    pub save: Num,
}

/// HF's ratio rule. `zero_is_ratio`: 4.32+ resolves any value < 1 (0 stays 0 through ceil);
/// 4.31 skips falsy values — the result is the same number.
pub fn resolve_ratio(n: Num, max_steps: i64) -> Num {
    if n.f() < 1.0 {
        Num::Int((max_steps as f64 * n.f()).ceil() as i64)
    } else {
        n
    }
}

impl Intervals {
    pub fn resolve(args: &Args, max_steps: i64) -> Intervals {
        Intervals {
            logging: resolve_ratio(args.logging_steps, max_steps),
            eval: args.eval_steps.map(|e| resolve_ratio(e, max_steps)),
            save: resolve_ratio(args.save_steps, max_steps),
        }
    }
}

/// Keys of a log entry whose values are wall-clock measurements (`*_runtime`,
/// `*_per_second`, jit_mode_eval's `*_jit_compilation_time`): they differ on every run, so
/// nothing compares or plans by them.
pub fn is_volatile(key: &str) -> bool {
    key.ends_with("_runtime") || key.ends_with("_per_second") || key.ends_with("_jit_compilation_time")
}

/// Keys `Trainer.log()` adds to every entry it logs (`epoch`, `num_input_tokens_seen` with
/// include_num_input_tokens_seen, `step`): the context of an entry, not one of its metrics.
pub fn is_log_context(key: &str) -> bool {
    matches!(key, "epoch" | "step" | "num_input_tokens_seen")
}

/// One log_history entry: `{**logs, "step": global_step}` in insertion order.
pub type LogEntry = Vec<(String, PyJson)>;

#[derive(Debug, Clone)]
pub struct TrainerState {
    /// `None` before training in older versions; the int 0 at train start; a float after a step.
    pub epoch: Option<Num>,
    pub global_step: u64,
    pub max_steps: i64,
    pub num_train_epochs: i64,
    /// The int 0 until HF's first `store_flos`, a float after (this model counts no flops).
    pub total_flos: Num,
    pub log_history: Vec<LogEntry>,
    pub best: Best,
    pub intervals: Option<Intervals>,
    pub train_batch_size: Option<usize>,
    /// `stateful_callbacks` as last refreshed (at init, then at each save).
    pub stateful_callbacks: Vec<(String, PyJson)>,
    /// `is_local_process_zero` / `is_world_process_zero`: the writing process's place in a launch
    /// (both true for one process).
    pub is_local_process_zero: bool,
    pub is_world_process_zero: bool,
}

impl TrainerState {
    pub fn new(profile: &Profile) -> TrainerState {
        TrainerState {
            epoch: if profile.epoch_starts_at_zero { Some(Num::Int(0)) } else { None },
            global_step: 0,
            max_steps: 0,
            num_train_epochs: 0,
            total_flos: Num::Int(0),
            log_history: vec![],
            best: Best::default(),
            intervals: None,
            train_batch_size: None,
            stateful_callbacks: vec![],
            is_local_process_zero: true,
            is_world_process_zero: true,
        }
    }

    /// `asdict(state)` with keys sorted at every level (what the JSON file holds).
    pub fn to_json(&self, profile: &Profile) -> PyJson {
        let opt_str = |s: &Option<String>| s.as_ref().map(|s| PyJson::Str(s.clone())).unwrap_or(PyJson::Null);
        let mut d: Vec<(String, PyJson)> = vec![
            ("best_metric".into(), self.best.best_metric.clone().unwrap_or(PyJson::Null)),
            ("best_model_checkpoint".into(), opt_str(&self.best.best_model_checkpoint)),
            ("epoch".into(), self.epoch.map(|e| e.to_json()).unwrap_or(PyJson::Null)),
            ("global_step".into(), PyJson::Int(self.global_step as i128)),
            ("is_hyper_param_search".into(), PyJson::Bool(false)),
            ("is_local_process_zero".into(), PyJson::Bool(self.is_local_process_zero)),
            ("is_world_process_zero".into(), PyJson::Bool(self.is_world_process_zero)),
            ("log_history".into(), PyJson::List(self.log_history.iter().map(|e| PyJson::Dict(e.clone())).collect())),
            ("max_steps".into(), PyJson::Int(self.max_steps as i128)),
            ("num_train_epochs".into(), PyJson::Int(self.num_train_epochs as i128)),
            ("total_flos".into(), self.total_flos.to_json()),
            ("trial_name".into(), PyJson::Null),
            ("trial_params".into(), PyJson::Null),
        ];
        if profile.state_has_best_global_step {
            d.push(("best_global_step".into(), self.best.best_global_step.map(|s| PyJson::Int(s as i128)).unwrap_or(PyJson::Null)));
        }
        if profile.state_has_intervals {
            let iv = self.intervals;
            let n = |x: Option<Num>| x.map(|v| v.to_json()).unwrap_or(PyJson::Int(500));
            d.push(("logging_steps".into(), n(iv.map(|i| i.logging))));
            d.push(("eval_steps".into(), n(iv.and_then(|i| i.eval))));
            d.push(("save_steps".into(), n(iv.map(|i| i.save))));
        }
        if profile.state_has_batch_and_tokens {
            d.push(("num_input_tokens_seen".into(), PyJson::Int(0)));
            d.push(("train_batch_size".into(), self.train_batch_size.map(|b| PyJson::Int(b as i128)).unwrap_or(PyJson::Null)));
        }
        if profile.stateful_callbacks != crate::hf::behaviors::CallbackRefresh::Absent {
            d.push(("stateful_callbacks".into(), PyJson::Dict(self.stateful_callbacks.clone())));
        }
        sorted(PyJson::Dict(d))
    }

    /// `TrainerState.load_from_json` of a checkpoint's trainer_state.json (the fields this
    /// state models; `intervals` are left to the caller).
    pub fn from_json(v: &PyJson, profile: &Profile) -> Result<TrainerState, String> {
        let num = |k: &str| -> Result<Num, String> {
            match v.get(k) {
                Some(PyJson::Int(i)) => Ok(Num::Int(*i as i64)),
                Some(PyJson::Float(f)) => Ok(Num::Float(*f)),
                other => Err(format!("{k}: expected a number, found {other:?}")),
            }
        };
        let int = |k: &str| -> Result<i64, String> {
            match v.get(k) {
                Some(PyJson::Int(i)) => Ok(*i as i64),
                other => Err(format!("{k}: expected an int, found {other:?}")),
            }
        };
        let mut st = TrainerState::new(profile);
        st.epoch = match v.get("epoch") {
            Some(PyJson::Null) | None => None,
            _ => Some(num("epoch")?),
        };
        st.global_step = int("global_step")? as u64;
        st.max_steps = int("max_steps")?;
        st.num_train_epochs = int("num_train_epochs")?;
        st.total_flos = num("total_flos")?;
        st.log_history = match v.get("log_history") {
            Some(PyJson::List(l)) => l
                .iter()
                .map(|e| match e {
                    PyJson::Dict(d) => Ok(d.clone()),
                    other => Err(format!("log_history: expected dicts, found {other:?}")),
                })
                .collect::<Result<_, _>>()?,
            other => return Err(format!("log_history: expected a list, found {other:?}")),
        };
        st.best.best_metric = v.get("best_metric").filter(|m| **m != PyJson::Null).cloned();
        st.best.best_model_checkpoint = match v.get("best_model_checkpoint") {
            Some(PyJson::Str(p)) => Some(p.clone()),
            _ => None,
        };
        st.best.best_global_step = match v.get("best_global_step") {
            Some(PyJson::Int(i)) => Some(*i as u64),
            _ => None,
        };
        st.train_batch_size = match v.get("train_batch_size") {
            Some(PyJson::Int(i)) => Some(*i as usize),
            _ => None,
        };
        if let Some(PyJson::Dict(cbs)) = v.get("stateful_callbacks") {
            st.stateful_callbacks = cbs.clone();
        }
        Ok(st)
    }

    /// `store_flos`: adds this run's flops (0.0: the model has no `input_ids`, so HF's
    /// estimate is 0), which turns the int into a float.
    pub fn store_flos(&mut self) {
        self.total_flos = Num::Float(self.total_flos.f() + 0.0);
    }

    pub fn to_json_string(&self, profile: &Profile) -> String {
        crate::formats::pyjson::dumps(&self.to_json(profile), &DumpOptions::hf()).expect("state is serialisable") + "\n"
    }
}

/// `TrainerControl.state()`: the ExportableState entry of the control flags.
pub fn control_state(c: &Control) -> PyJson {
    PyJson::Dict(vec![
        (
            "args".into(),
            PyJson::Dict(vec![
                ("should_training_stop".into(), PyJson::Bool(c.should_training_stop)),
                ("should_epoch_stop".into(), PyJson::Bool(c.should_epoch_stop)),
                ("should_save".into(), PyJson::Bool(c.should_save)),
                ("should_evaluate".into(), PyJson::Bool(c.should_evaluate)),
                ("should_log".into(), PyJson::Bool(c.should_log)),
            ]),
        ),
        ("attributes".into(), PyJson::Dict(vec![])),
    ])
}

/// Sorts dict keys at every level, as `json.dumps(..., sort_keys=True)` then `json.loads` does.
pub fn sorted(v: PyJson) -> PyJson {
    match v {
        PyJson::Dict(mut d) => {
            d.sort_by(|a, b| a.0.cmp(&b.0));
            PyJson::Dict(d.into_iter().map(|(k, v)| (k, sorted(v))).collect())
        }
        PyJson::List(l) => PyJson::List(l.into_iter().map(sorted).collect()),
        other => other,
    }
}
