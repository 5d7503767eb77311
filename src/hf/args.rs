//! TrainingArguments: the checkpoint-relevant fields with the version's defaults, resolved and
//! validated in the order of that version's `__post_init__`, raising HF's exception types and
//! texts. Values keep Python's int/float distinction because HF's messages and JSON show it.

use crate::formats::pyjson::{float_repr, PyJson};
use crate::hf::accelerator::{self, AcceleratorConfig};
use crate::hf::behaviors::{GreaterDefault, PostInitOrder, WarmupCheck};
use crate::hf::error::HfError;
use crate::hf::profile::Profile;
use serde_json::{Map, Value};
use std::path::Path;

/// A Python number as HF sees it (`4` and `4.0` print differently).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Num {
    Int(i64),
    Float(f64),
}

impl Num {
    pub fn f(self) -> f64 {
        match self {
            Num::Int(i) => i as f64,
            Num::Float(x) => x,
        }
    }
    /// `str(value)` in Python.
    pub fn py(self) -> String {
        match self {
            Num::Int(i) => i.to_string(),
            Num::Float(x) => float_repr(x),
        }
    }
    pub fn to_json(self) -> PyJson {
        match self {
            Num::Int(i) => PyJson::Int(i as i128),
            Num::Float(x) => PyJson::Float(x),
        }
    }
    pub fn as_f64(self) -> f64 {
        self.f()
    }
    /// As a pickle value (state dicts keep the int/float type).
    pub fn to_py(self) -> crate::formats::torch_format::Value {
        match self {
            Num::Int(i) => crate::formats::torch_format::Value::Int(i),
            Num::Float(x) => crate::formats::torch_format::Value::Float(x),
        }
    }
    /// Python `self - 1`.
    pub fn minus_one(self) -> Num {
        match self {
            Num::Int(i) => Num::Int(i - 1),
            Num::Float(f) => Num::Float(f - 1.0),
        }
    }
    /// Python `self > other` (exact for the magnitudes that occur here).
    pub fn gt(self, other: Num) -> bool {
        match (self, other) {
            (Num::Int(a), Num::Int(b)) => a > b,
            _ => self.f() > other.f(),
        }
    }
    /// The Python type name (`"int"`/`"float"`).
    pub fn type_name(self) -> &'static str {
        match self {
            Num::Int(_) => "int",
            Num::Float(_) => "float",
        }
    }
    /// Python's `a % b` for the numbers HF compares (sign of the divisor).
    fn py_mod(self, other: Num) -> f64 {
        let (a, b) = (self.f(), other.f());
        let r = a % b;
        if r != 0.0 && (r < 0.0) != (b < 0.0) {
            r + b
        } else {
            r
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Interval {
    No,
    Steps,
    Epoch,
    Best,
}

impl Interval {
    pub fn value(self) -> &'static str {
        match self {
            Interval::No => "no",
            Interval::Steps => "steps",
            Interval::Epoch => "epoch",
            Interval::Best => "best",
        }
    }
    fn member(self) -> &'static str {
        match self {
            Interval::No => "NO",
            Interval::Steps => "STEPS",
            Interval::Epoch => "EPOCH",
            Interval::Best => "BEST",
        }
    }
}

/// The resolved arguments the trainer reads.
#[derive(Debug, Clone)]
pub struct Args {
    pub max_steps: i64,
    pub num_train_epochs: f64,
    pub per_device_train_batch_size: usize,
    pub per_device_eval_batch_size: usize,
    pub gradient_accumulation_steps: usize,
    pub dataloader_drop_last: bool,
    /// A resumed run does not skip the batches already trained in its epoch (it still starts
    /// at the epoch the checkpoint is in).
    pub ignore_data_skip: bool,
    pub learning_rate: f64,
    pub weight_decay: f64,
    pub adam_beta1: f64,
    pub adam_beta2: f64,
    pub adam_epsilon: f64,
    pub max_grad_norm: f64,
    pub optim: String,
    pub lr_scheduler_type: String,
    pub lr_scheduler_kwargs: Map<String, Value>,
    pub warmup_steps: Num,
    pub warmup_ratio: f64,
    pub logging_strategy: Interval,
    pub logging_steps: Num,
    pub logging_first_step: bool,
    pub eval_strategy: Interval,
    /// None when unset and not filled from logging_steps.
    pub eval_steps: Option<Num>,
    pub eval_delay: Num,
    pub eval_on_start: bool,
    pub save_strategy: Interval,
    pub save_steps: Num,
    pub save_total_limit: Option<i64>,
    pub save_only_model: bool,
    pub save_safetensors: bool,
    pub load_best_model_at_end: bool,
    pub metric_for_best_model: Option<String>,
    pub greater_is_better: Option<bool>,
    pub seed: i64,
    pub data_seed: Option<i64>,
    pub do_eval: bool,
    /// `label_names` as given (None: the Trainer finds them from the model's forward signature).
    pub label_names: Option<Vec<String>>,
    /// Columns the model's forward does not take are dropped from each batch.
    pub remove_unused_columns: bool,
    /// `gradient_checkpointing`: `train()` asks the model to enable it.
    pub gradient_checkpointing: bool,
    /// `label_smoothing_factor`: the loss goes through HF's LabelSmoother.
    pub label_smoothing_factor: f64,
    /// `use_cpu` (`no_cuda` before 4.32): the process's accelerate state is a CPU one.
    pub use_cpu: bool,
    /// Evaluation computes the loss only: no predictions, so `compute_metrics` is not called.
    pub prediction_loss_only: bool,
    /// A NaN or inf training loss adds the mean of the losses since the last log instead.
    pub logging_nan_inf_filter: bool,
    /// `bf16` / `fp16`: CPU autocast (accelerate's mixed precision) where the release trains
    /// with it here; their errors are raised in [`resolve`].
    pub bf16: bool,
    pub fp16: bool,
    /// `group_by_length`: the length-grouped sampler, which needs `input_ids` to measure rows.
    pub group_by_length: bool,
    /// `include_inputs_for_metrics` (4.31-4.57) or `"inputs"` in `include_for_metrics` (4.46+):
    /// evaluation gathers each batch's main input.
    pub include_inputs_for_metrics: bool,
    /// `include_num_input_tokens_seen`: every log records `num_input_tokens_seen`.
    pub include_num_input_tokens_seen: bool,
    /// `neftune_noise_alpha`: train() hooks the model's input embeddings.
    pub neftune_noise_alpha: Option<f64>,
    /// `optim_args`, parsed ("k=v,...") when the optimizer is built.
    pub optim_args: Option<String>,
    /// `auto_find_batch_size`: the loop runs inside accelerate's find_executable_batch_size
    /// (no out-of-memory error here, so the batch size stays); where the release reads it, a
    /// resume keeps the batch size the checkpoint recorded.
    pub auto_find_batch_size: bool,
    /// `use_cache` (5.0+): `Trainer.__init__` sets `model.config.use_cache` from it (config.json).
    pub use_cache: bool,
    /// `"underflow_overflow"` in `debug`: DebugUnderflowOverflow hooks every module's forward
    /// and raises at the first non-finite value (not modelled: the executor stops there).
    pub debug_underflow_overflow: bool,
    /// `restore_callback_states_from_checkpoint` (4.41+): a resume rebuilds the stateful
    /// callbacks from the checkpoint's trainer_state.json.
    pub restore_callback_states_from_checkpoint: bool,
    /// `train_sampling_strategy` (5.2+): "random" (the default), "sequential" or
    /// "group_by_length" (the length-grouped sampler, as `group_by_length` before).
    pub train_sampling_strategy: Option<String>,
    /// `eval_do_concat_batches` (4.40+; True where the field is missing).
    pub eval_do_concat_batches: bool,
    /// `accelerator_config` (4.38+) as `__post_init__` left it; None: not given (the release's
    /// default object, or a release without the field).
    pub accelerator_config: Option<AcceleratorConfig>,
    /// Every argument as HF holds it after `__post_init__` (name in this version's spelling).
    pub all: Vec<(String, PyJson)>,
}

fn type_error_unexpected(name: &str) -> HfError {
    HfError::new("TypeError", format!("TrainingArguments.__init__() got an unexpected keyword argument '{name}'"))
}

fn enum_error<S: AsRef<str>>(value: &str, enum_name: &str, values: &[S]) -> HfError {
    let list: Vec<String> = values.iter().map(|v| format!("'{}'", v.as_ref())).collect();
    HfError::value(format!("{value} is not a valid {enum_name}, please select one of [{}]", list.join(", ")))
}

/// Python's `str()` of a JSON-given value, for enum errors.
fn py_str(v: &PyJson) -> String {
    match v {
        PyJson::Str(s) => s.clone(),
        PyJson::Int(i) => i.to_string(),
        PyJson::Float(x) => float_repr(*x),
        PyJson::Bool(b) => if *b { "True".into() } else { "False".into() },
        PyJson::Null => "None".into(),
        other => format!("{other:?}"),
    }
}

struct Raw<'a> {
    profile: &'a Profile,
    vals: Vec<(String, PyJson)>,
}

impl Raw<'_> {
    fn get(&self, v1_name: &str) -> &PyJson {
        let name = self.profile.spelling(v1_name);
        self.vals.iter().find(|(n, _)| n == name).map(|(_, v)| v).unwrap_or(&PyJson::Null)
    }
    fn set(&mut self, v1_name: &str, v: PyJson) {
        let name = self.profile.spelling(v1_name).to_string();
        if let Some(slot) = self.vals.iter_mut().find(|(n, _)| *n == name) {
            slot.1 = v;
        }
    }
    fn num(&self, name: &str) -> Result<Num, HfError> {
        match self.get(name) {
            PyJson::Int(i) => Ok(Num::Int(*i as i64)),
            PyJson::Float(x) => Ok(Num::Float(*x)),
            PyJson::Bool(b) => Ok(Num::Int(*b as i64)),
            other => Err(HfError::not_modelled(format!("argument {name} = {other:?} (not a number)"))),
        }
    }
    fn opt_num(&self, name: &str) -> Result<Option<Num>, HfError> {
        match self.get(name) {
            PyJson::Null => Ok(None),
            _ => self.num(name).map(Some),
        }
    }
    fn boolean(&self, name: &str) -> bool {
        match self.get(name) {
            PyJson::Bool(b) => *b,
            PyJson::Int(i) => *i != 0,
            _ => false,
        }
    }
    fn string(&self, name: &str) -> Option<String> {
        match self.get(name) {
            PyJson::Str(s) => Some(s.clone()),
            _ => None,
        }
    }
    fn interval<S: AsRef<str>>(&self, name: &str, enum_name: &str, values: &[S]) -> Result<Interval, HfError> {
        let v = self.get(name);
        let s = py_str(v);
        if !matches!(v, PyJson::Str(_)) || !values.iter().any(|x| x.as_ref() == s) {
            return Err(enum_error(&s, enum_name, values));
        }
        Ok(match s.as_str() {
            "no" => Interval::No,
            "steps" => Interval::Steps,
            "epoch" => Interval::Epoch,
            _ => Interval::Best,
        })
    }
}

const INTERVALS: [&str; 3] = ["no", "steps", "epoch"];

/// Formats a strategy as Python 3.11 formats a str-mixin enum in an f-string.
fn strategy_repr(s: Interval, enum_name: &str) -> String {
    format!("{enum_name}.{}", s.member())
}

/// `TrainingArguments(**scenario_args)` of this version, in the process's working directory
/// (where an `accelerator_config` path is opened).
pub fn resolve(given: &Map<String, Value>, profile: &Profile) -> Result<Args, HfError> {
    resolve_in(given, profile, Path::new("."))
}

/// [`resolve`] with `base` as the working directory (a scenario's run directory).
pub fn resolve_in(given: &Map<String, Value>, profile: &Profile, base: &Path) -> Result<Args, HfError> {
    // Keyword arguments: unknown ones are Python's TypeError, the first one in call order.
    let mut vals: Vec<(String, PyJson)> = profile.fields.iter().map(|(n, d)| (n.clone(), PyJson::from(d))).collect();
    for (k, _) in given {
        let here = profile.spelling(k);
        if !vals.iter().any(|(n, _)| n == here) {
            return Err(type_error_unexpected(here));
        }
    }
    // A format-v1 name this release spells otherwise is set last, as the runner renames it
    // (`args[old] = args.pop(new)`): it wins over the old spelling given as well.
    let renamed = |k: &str| profile.spelling(k) != k;
    for (k, v) in given.iter().filter(|(k, _)| !renamed(k)).chain(given.iter().filter(|(k, _)| renamed(k))) {
        let here = profile.spelling(k);
        if let Some(slot) = vals.iter_mut().find(|(n, _)| n == here) {
            slot.1 = PyJson::from(v);
        }
    }
    let mut raw = Raw { profile, vals };
    // Where both spellings exist (4.41-4.50), a given `evaluation_strategy` overrides
    // `eval_strategy` (with a FutureWarning).
    if profile.has_field("evaluation_strategy") && profile.has_field("eval_strategy") {
        let old = raw.get("evaluation_strategy").clone();
        if old != PyJson::Null {
            raw.set("eval_strategy", old);
        }
    }

    if profile.checkpointing_aliases {
        for (old, new) in [("gradient_checkpointing", "activation_checkpointing"), ("gradient_checkpointing_kwargs", "activation_checkpointing_kwargs")] {
            if *raw.get(new) == PyJson::Null && *raw.get(old) != PyJson::Null {
                let v = raw.get(old).clone();
                raw.set(new, v);
            }
            let v = raw.get(new).clone();
            raw.set(old, v);
        }
        if *raw.get("activation_checkpointing") == PyJson::Null {
            raw.set("activation_checkpointing", PyJson::Bool(false));
            raw.set("gradient_checkpointing", PyJson::Bool(false));
        }
    }

    // Enum conversions, in __post_init__ order.
    let eval_strategy = raw.interval("eval_strategy", "IntervalStrategy", &INTERVALS)?;
    let logging_strategy = raw.interval("logging_strategy", "IntervalStrategy", &INTERVALS)?;
    let save_strategy = raw.interval("save_strategy", profile.save_strategy_enum, &profile.save_strategy_values)?;
    let lr_scheduler_type = raw.string("lr_scheduler_type").unwrap_or_default();
    if !profile.scheduler_types.contains(&lr_scheduler_type) {
        return Err(enum_error(&py_str(raw.get("lr_scheduler_type")), "SchedulerType", &profile.scheduler_types));
    }
    // One layout of __post_init__ per release (`post_init_order`): every placement below reads it.
    let order = profile.post_init_order;
    if order.optim_early() {
        optim_and_device_checks(&mut raw, profile)?;
        convert_debug(&mut raw)?;
    }
    let save_enum = profile.save_strategy_enum;

    let mut do_eval = raw.boolean("do_eval");
    if !do_eval && eval_strategy != Interval::No {
        do_eval = true;
        raw.set("do_eval", PyJson::Bool(true));
    }
    let mut logging_steps = raw.num("logging_steps")?;
    let mut eval_steps = raw.opt_num("eval_steps")?;
    if eval_strategy == Interval::Steps && eval_steps.is_none_or(|e| e.f() == 0.0) {
        if logging_steps.f() > 0.0 {
            eval_steps = Some(logging_steps);
            raw.set("eval_steps", logging_steps.to_json());
        } else {
            return Err(HfError::value(format!(
                "evaluation strategy {} requires either non-zero --eval_steps or --logging_steps",
                strategy_repr(eval_strategy, "IntervalStrategy")
            )));
        }
    }

    // Interval checks (in 5.x inside _validate_args, same order).
    if logging_strategy == Interval::Steps && logging_steps.f() == 0.0 {
        return Err(HfError::value(format!(
            "logging strategy {} requires non-zero --logging_steps",
            strategy_repr(logging_strategy, "IntervalStrategy")
        )));
    }
    let integral = |n: Num, flag: &str| -> Result<Num, HfError> {
        if n.f() != n.f().trunc() {
            return Err(HfError::value(format!("--{flag} must be an integer if bigger than 1: {}", n.py())));
        }
        Ok(Num::Int(n.f() as i64))
    };
    if logging_strategy == Interval::Steps && logging_steps.f() > 1.0 {
        logging_steps = integral(logging_steps, "logging_steps")?;
        raw.set("logging_steps", logging_steps.to_json());
    }
    if let Some(e) = eval_steps {
        if eval_strategy == Interval::Steps && e.f() > 1.0 {
            let e = integral(e, "eval_steps")?;
            eval_steps = Some(e);
            raw.set("eval_steps", e.to_json());
        }
    }
    let mut save_steps = raw.num("save_steps")?;
    if save_strategy == Interval::Steps && save_steps.f() > 1.0 {
        save_steps = integral(save_steps, "save_steps")?;
        raw.set("save_steps", save_steps.to_json());
    }

    let load_best = raw.boolean("load_best_model_at_end");
    if load_best && !(profile.load_best_skips_best_strategy && save_strategy == Interval::Best) {
        if eval_strategy.value() != save_strategy.value() {
            return Err(HfError::value(format!(
                "--load_best_model_at_end requires the save and eval strategy to match{}, but found\n- Evaluation strategy: {}\n- Save strategy: {}",
                profile.mismatch_extra,
                strategy_repr(eval_strategy, "IntervalStrategy"),
                strategy_repr(save_strategy, save_enum)
            )));
        }
        if eval_strategy == Interval::Steps {
            let e = eval_steps.expect("eval_steps is set for the steps strategy");
            if save_steps.py_mod(e) != 0.0 {
                let mut round_multiple = true;
                if e.f() < 1.0 || save_steps.f() < 1.0 {
                    if !(e.f() < 1.0 && save_steps.f() < 1.0) {
                        let sep = if profile.mixing_message_space { " " } else { "" };
                        return Err(HfError::value(format!(
                            "--load_best_model_at_end requires the saving steps to be a multiple of the evaluation steps, which cannot get guaranteed when mixing ratio and absolute steps for save_steps{sep}{} and eval_steps {}.",
                            save_steps.py(),
                            e.py()
                        )));
                    }
                    let big = 1_000_000.0;
                    let scaled = Num::Float(save_steps.f() * big).py_mod(Num::Float(e.f() * big));
                    if scaled != 0.0 {
                        return Err(HfError::value(format!(
                            "--load_best_model_at_end requires the saving steps to be a multiple of the evaluation steps, but found {}, which is not a multiple of {}.",
                            save_steps.py(),
                            e.py()
                        )));
                    }
                    round_multiple = profile.both_ratio_fallthrough;
                }
                if round_multiple {
                    return Err(HfError::value(format!(
                        "--load_best_model_at_end requires the saving steps to be a round multiple of the evaluation steps, but found {}, which is not a round multiple of {}.",
                        save_steps.py(),
                        e.py()
                    )));
                }
            }
        }
    }

    // Metric defaults.
    let mut metric = raw.string("metric_for_best_model");
    let plateau_like = lr_scheduler_type == "reduce_lr_on_plateau" || lr_scheduler_type == "greedy";
    if (load_best || plateau_like) && metric.is_none() {
        metric = Some("loss".into());
        raw.set("metric_for_best_model", PyJson::Str("loss".into()));
    }
    let mut greater = match raw.get("greater_is_better") {
        PyJson::Bool(b) => Some(*b),
        _ => None,
    };
    if greater.is_none() {
        if let Some(m) = &metric {
            let g = match profile.greater_default {
                GreaterDefault::NotLossName => m != "loss" && m != "eval_loss",
                GreaterDefault::NotEndsWithLoss => !m.ends_with("loss"),
            };
            greater = Some(g);
            raw.set("greater_is_better", PyJson::Bool(g));
        }
    }

    half_precision_checks(&mut raw, profile)?;
    if lr_scheduler_type == "reduce_lr_on_plateau" && eval_strategy == Interval::No {
        return Err(HfError::value("lr_scheduler_type reduce_lr_on_plateau requires an eval strategy"));
    }
    if lr_scheduler_type == "greedy" && eval_strategy == Interval::No {
        return Err(HfError::value("lr_scheduler_type greedy requires an eval strategy"));
    }
    let mut accelerator_config = None;
    if !order.optim_early() {
        optim_and_device_checks(&mut raw, profile)?;
        if order == PostInitOrder::AcceleratorAfterOptim {
            accelerator_config = convert_accelerator_config(&raw, profile, base)?;
        }
        tf32_check(&raw)?;
    }
    let mut warmup_ratio = 0.0;
    if profile.warmup_steps_ratio {
        // 5.x: a given (deprecated) warmup_ratio becomes warmup_steps, which may be a ratio.
        if profile.has_field("warmup_ratio") && *raw.get("warmup_ratio") != PyJson::Null {
            let r = raw.get("warmup_ratio").clone();
            raw.set("warmup_steps", r);
        }
    } else {
        warmup_ratio = raw.num("warmup_ratio")?.f();
        if !(0.0..=1.0).contains(&warmup_ratio) {
            return Err(HfError::value("warmup_ratio must lie in range [0,1]"));
        }
    }
    let warmup_steps = raw.num("warmup_steps")?;
    let is_int = matches!(raw.get("warmup_steps"), PyJson::Int(_) | PyJson::Bool(_));
    let w = warmup_steps.f();
    let bad = match profile.warmup_check {
        WarmupCheck::None => None,
        WarmupCheck::ZeroOrAboveOne => {
            (!is_int || w < 0.0 || (0.0 < w && w <= 1.0)).then(|| "warmup_steps must be either 0 or > 1".to_string())
        }
        WarmupCheck::NonNegativeInt => (!is_int || w < 0.0)
            .then(|| "warmup_steps must be of type int and must be 0 or a positive integer.".to_string()),
        WarmupCheck::NonNegative => (w < 0.0).then(|| "warmup_steps must be an integer or a float".to_string()),
        WarmupCheck::NonNegativeExplained => {
            (w < 0.0).then(|| format!("Got warmup_steps = {}, Expected value warmup_steps >= 0", warmup_steps.py()))
        }
    };
    if let Some(msg) = bad {
        return Err(HfError::value(msg));
    }
    match order {
        PostInitOrder::AcceleratorAfterWarmupChecks => accelerator_config = convert_accelerator_config(&raw, profile, base)?,
        PostInitOrder::ValidateArgs => {
            // `_validate_args` ends with the prefetch check; then accelerator_config and the
            // tf32 check of `__post_init__`.
            prefetch_check(&raw, profile)?;
            accelerator_config = convert_accelerator_config(&raw, profile, base)?;
            tf32_check(&raw)?;
        }
        PostInitOrder::AcceleratorAfterOptim => {}
    }

    let lr_scheduler_kwargs = match raw.get("lr_scheduler_kwargs") {
        PyJson::Dict(_) => raw.get("lr_scheduler_kwargs").to_serde().ok().and_then(|v| v.as_object().cloned()).unwrap_or_default(),
        _ => Map::new(),
    };
    let int = |raw: &Raw, n: &str| -> Result<i64, HfError> { Ok(raw.num(n)?.f() as i64) };
    // 4.32-4.57 keep the deprecated `no_cuda` beside `use_cpu` and copy it over
    // (`self.use_cpu = self.no_cuda` when it is set).
    if profile.has_field("use_cpu") && profile.has_field("no_cuda") && raw.boolean("no_cuda") {
        raw.set("use_cpu", PyJson::Bool(true));
    }
    let use_cpu = raw.boolean("use_cpu");
    if use_cpu && profile.use_cpu_unpins_memory {
        raw.set("dataloader_pin_memory", PyJson::Bool(false));
    }
    let optim = raw.string("optim").unwrap_or_default();
    if !order.optim_early() {
        convert_debug(&mut raw)?;
        // The prefetch check, among the last checks (5.2+: in `_validate_args`, above).
        prefetch_check(&raw, profile)?;
    }
    // The `train_batch_size` / `eval_batch_size` properties: `per_gpu_*_batch_size or
    // per_device_*_batch_size` (the deprecated per_gpu fields, 4.31-4.57, win when set).
    let batch = |raw: &Raw, per_gpu: &str, per_device: &str| -> Result<usize, HfError> {
        match raw.opt_num(per_gpu)? {
            Some(n) if n.f() != 0.0 => Ok(n.f() as usize),
            _ => Ok(int(raw, per_device)? as usize),
        }
    };
    if profile.include_inputs_appends && raw.boolean("include_inputs_for_metrics") {
        if let PyJson::List(mut l) = raw.get("include_for_metrics").clone() {
            l.push(PyJson::Str("inputs".into()));
            raw.set("include_for_metrics", PyJson::List(l));
        }
    }
    let include_num_input_tokens_seen = raw.boolean("include_num_input_tokens_seen")
        || matches!(raw.get("include_num_input_tokens_seen"), PyJson::Str(s) if s == "all");
    if profile.tokens_seen_true_is_all && *raw.get("include_num_input_tokens_seen") == PyJson::Bool(true) {
        raw.set("include_num_input_tokens_seen", PyJson::Str("all".into()));
    }
    let include_inputs_for_metrics = raw.boolean("include_inputs_for_metrics")
        || matches!(raw.get("include_for_metrics"), PyJson::List(l) if l.contains(&PyJson::Str("inputs".into())));
    Ok(Args {
        bf16: raw.boolean("bf16"),
        fp16: raw.boolean("fp16"),
        group_by_length: raw.boolean("group_by_length"),
        include_inputs_for_metrics,
        include_num_input_tokens_seen,
        neftune_noise_alpha: raw.opt_num("neftune_noise_alpha")?.map(|n| n.f()),
        optim_args: raw.string("optim_args").filter(|s| !s.is_empty()),
        auto_find_batch_size: raw.boolean("auto_find_batch_size"),
        use_cache: raw.boolean("use_cache"),
        restore_callback_states_from_checkpoint: raw.boolean("restore_callback_states_from_checkpoint"),
        train_sampling_strategy: raw.string("train_sampling_strategy"),
        eval_do_concat_batches: *raw.get("eval_do_concat_batches") != PyJson::Bool(false),
        accelerator_config,
        debug_underflow_overflow: matches!(raw.get("debug"), PyJson::List(l) if l.contains(&PyJson::Str("underflow_overflow".into()))),
        max_steps: int(&raw, "max_steps")?,
        num_train_epochs: raw.num("num_train_epochs")?.f(),
        per_device_train_batch_size: batch(&raw, "per_gpu_train_batch_size", "per_device_train_batch_size")?,
        per_device_eval_batch_size: batch(&raw, "per_gpu_eval_batch_size", "per_device_eval_batch_size")?,
        gradient_accumulation_steps: int(&raw, "gradient_accumulation_steps")? as usize,
        dataloader_drop_last: raw.boolean("dataloader_drop_last"),
        ignore_data_skip: raw.boolean("ignore_data_skip"),
        label_names: match raw.get("label_names") {
            PyJson::List(l) => Some(l.iter().filter_map(|v| if let PyJson::Str(s) = v { Some(s.clone()) } else { None }).collect()),
            _ => None,
        },
        remove_unused_columns: raw.boolean("remove_unused_columns"),
        prediction_loss_only: raw.boolean("prediction_loss_only"),
        gradient_checkpointing: raw.boolean("gradient_checkpointing"),
        label_smoothing_factor: raw.num("label_smoothing_factor")?.f(),
        use_cpu,
        logging_nan_inf_filter: raw.boolean("logging_nan_inf_filter"),
        learning_rate: raw.num("learning_rate")?.f(),
        weight_decay: raw.num("weight_decay")?.f(),
        adam_beta1: raw.num("adam_beta1")?.f(),
        adam_beta2: raw.num("adam_beta2")?.f(),
        adam_epsilon: raw.num("adam_epsilon")?.f(),
        max_grad_norm: raw.num("max_grad_norm")?.f(),
        optim,
        lr_scheduler_type,
        lr_scheduler_kwargs,
        warmup_steps,
        warmup_ratio,
        logging_strategy,
        logging_steps,
        logging_first_step: raw.boolean("logging_first_step"),
        eval_strategy,
        eval_steps,
        eval_delay: raw.opt_num("eval_delay")?.unwrap_or(Num::Int(0)),
        eval_on_start: profile.has_field("eval_on_start") && raw.boolean("eval_on_start"),
        save_strategy,
        save_steps,
        save_total_limit: match raw.get("save_total_limit") {
            PyJson::Int(i) => Some(*i as i64),
            _ => None,
        },
        save_only_model: profile.has_field("save_only_model") && raw.boolean("save_only_model"),
        save_safetensors: profile.has_field("save_safetensors") && raw.boolean("save_safetensors"),
        load_best_model_at_end: load_best,
        metric_for_best_model: metric,
        greater_is_better: greater,
        seed: int(&raw, "seed")?,
        data_seed: raw.opt_num("data_seed")?.map(|n| n.f() as i64),
        do_eval,
        all: raw.vals,
    })
}

/// `self.optim = OptimizerNames(self.optim)` (5.0 dropped adamw_hf), then the fp16 device check
/// of the releases that have it. Where they stand in `__post_init__` is the release's
/// (`post_init_order`); tf32's check follows them until 5.1 ([`tf32_check`]).
fn optim_and_device_checks(raw: &mut Raw, profile: &Profile) -> Result<(), HfError> {
    let optim = raw.string("optim").unwrap_or_default();
    if !profile.optimizer_names.contains(&optim) {
        return Err(enum_error(&py_str(raw.get("optim")), "OptimizerNames", &profile.optimizer_names));
    }
    // The deprecated `adafactor` flag (4.31-4.57; 5.0 removed the field, so TrainingArguments
    // raises its TypeError for it first): `self.optim = OptimizerNames.ADAFACTOR` with a
    // FutureWarning, right after the conversion (training_args.bin records both fields).
    if profile.has_field("adafactor") && raw.boolean("adafactor") {
        raw.set("optim", PyJson::Str("adafactor".into()));
    }
    // `self.device.type != "cuda" and (self.fp16 or self.fp16_full_eval)`, right after the optim
    // conversion, in the releases that check it (`fp16_cpu_error`).
    if let Some(msg) = profile.fp16_cpu_error {
        if raw.boolean("fp16") || raw.boolean("fp16_full_eval") {
            return Err(HfError::value(msg));
        }
    }
    Ok(())
}

/// `(not is_torch_available() or is_torch_greater_or_equal_than_2_0) and dataloader_num_workers
/// == 0 and dataloader_prefetch_factor is not None` (4.38+, where the field exists; every
/// profile's torch is 2.x): among the last checks of `__post_init__`, and the last of 5.2's
/// `_validate_args`.
fn prefetch_check(raw: &Raw, profile: &Profile) -> Result<(), HfError> {
    if *raw.get("dataloader_prefetch_factor") != PyJson::Null && raw.num("dataloader_num_workers")?.f() == 0.0 {
        return Err(HfError::value(format!(
            "--dataloader_prefetch_factor can only be set when data is loaded in a different process, i.e. when --dataloader_num_workers > {}.",
            profile.prefetch_factor_message_workers
        )));
    }
    Ok(())
}

/// `accelerator_config` converted where the release does it (`post_init_order`): a release
/// without the field has nothing to convert.
fn convert_accelerator_config(raw: &Raw, profile: &Profile, base: &Path) -> Result<Option<AcceleratorConfig>, HfError> {
    if !profile.has_field("accelerator_config") {
        return Ok(None);
    }
    accelerator::resolve(raw.get("accelerator_config"), profile, base)
}

/// `tf32=True` needs a CUDA device of the Ampere generation, which this machine lacks (False
/// only turns TF32 off where CUDA exists: nothing here). Until 5.1 right after the optim
/// conversion; from 5.2 (`PostInitOrder::ValidateArgs`: the restructured `__post_init__`) after
/// `_validate_args` (the interval, scheduler and warmup checks), in its "TF32" section. Found by
/// the differential test: `eval_steps=2.5` with `tf32=True` raises the eval_steps error in 5.24.0.
fn tf32_check(raw: &Raw) -> Result<(), HfError> {
    if raw.get("tf32") == &PyJson::Bool(true) {
        return Err(HfError::value("--tf32 requires Ampere or a newer GPU arch, cuda>=11 and torch>=1.7"));
    }
    Ok(())
}

/// `if isinstance(self.debug, str): self.debug = [DebugOption(s) for s in self.debug.split()]`
/// (None: []): ExplicitEnum's ValueError for a name DebugOption lacks. 5.2+ convert right after
/// `optim`; before, near the end of `__post_init__`.
fn convert_debug(raw: &mut Raw) -> Result<(), HfError> {
    let list = match raw.get("debug") {
        PyJson::Str(s) => s.split_whitespace().map(|w| PyJson::Str(w.to_string())).collect(),
        PyJson::Null => vec![],
        _ => return Ok(()),
    };
    for w in &list {
        if let PyJson::Str(w) = w {
            if !DEBUG_OPTIONS.contains(&w.as_str()) {
                // transformers' ExplicitEnum `_missing_`.
                return Err(enum_error(w, "DebugOption", &DEBUG_OPTIONS));
            }
        }
    }
    raw.set("debug", PyJson::List(list));
    Ok(())
}

/// `transformers.debug_utils.DebugOption`'s values (every profile).
const DEBUG_OPTIONS: [&str; 2] = ["underflow_overflow", "tpu_metrics_debug"];

/// The half-precision part of `__post_init__` (5.2+: `_validate_args`), just before the
/// reduce_lr_on_plateau check: `fp16_backend` copied, bf16 without `use_cpu` on a machine without
/// a bf16 GPU (`bf16_cpu_error`: the releases that raise here), fp16 and bf16 together.
/// `bf16_full_eval` / `fp16_full_eval` cast the model only in an `evaluate()` outside train(),
/// which no scenario calls: here only their checks.
fn half_precision_checks(raw: &mut Raw, profile: &Profile) -> Result<(), HfError> {
    // The deprecated `fp16_backend` (4.31-4.57) overrides `half_precision_backend` when set.
    if let PyJson::Str(b) = raw.get("fp16_backend").clone() {
        if !b.is_empty() && b != "auto" {
            raw.set("half_precision_backend", PyJson::Str(b));
        }
    }
    let use_cpu = raw.boolean("use_cpu") || raw.boolean("no_cuda");
    if let Some(msg) = profile.bf16_cpu_error {
        if (raw.boolean("bf16") || raw.boolean("bf16_full_eval")) && !use_cpu {
            return Err(HfError::value(msg));
        }
    }
    if raw.boolean("fp16") && raw.boolean("bf16") {
        return Err(HfError::value("At most one of fp16 and bf16 can be True, but not both"));
    }
    if raw.boolean("fp16_full_eval") && raw.boolean("bf16_full_eval") {
        return Err(HfError::value("At most one of fp16 and bf16 can be True for full eval, but not both"));
    }
    Ok(())
}

/// Whether the Rust trainer models an argument: its status in [`super::arguments`] is
/// `Reproduced` (one list for the executor and `ckptspec versions --arguments`). Any other
/// argument HF accepts is reported as "not yet implemented" or refused instead of being silently
/// ignored (an unknown one is HF's TypeError, above).
pub fn modelled(name: &str) -> bool {
    super::arguments::status(name) == super::arguments::Status::Reproduced
}

/// The reproduced fields the trainer models for some values only, with the values it models.
pub const MODELLED_VALUES: &[(&str, fn(&Value) -> bool)] = &[
    // The AdamW variants, plain SGD, torch's Adagrad and RMSprop, transformers' Adafactor, and
    // the seed config's bitsandbytes optimizer (HF's error).
    ("optim", |v| {
        matches!(v.as_str(), Some("adamw_torch" | "adamw_torch_fused" | "adamw_hf" | "sgd" | "adagrad" | "rmsprop" | "adafactor" | "paged_adamw_32bit"))
    }),
    // The world's batches have `input_x` and `labels`; other label names are not modelled.
    ("label_names", |v| v.is_null() || v.as_array().is_some_and(|l| l.len() == 1 && l[0] == "labels")),
    // Only "inputs" (the world's compute_metrics does not read the others).
    ("include_for_metrics", |v| v.as_array().is_some_and(|l| l.iter().all(|x| x == "inputs"))),
    // The booleans (5.x's "all" and "non_padding" strings are not).
    ("include_num_input_tokens_seen", |v| v.is_boolean()),
    // batch_rebalance (several processes) is not.
    ("train_sampling_strategy", |v| matches!(v.as_str(), Some("random" | "sequential" | "group_by_length"))),
];

/// Whether the trainer reproduces this argument with this value ([`MODELLED_VALUES`] for the
/// fields modelled for some values only).
pub fn is_modelled(name: &str, value: &Value) -> bool {
    modelled(name) && MODELLED_VALUES.iter().find(|(n, _)| *n == name).is_none_or(|(_, ok)| ok(value))
}

/// Whether the executor runs a scenario that sets `name` to `value` in this release: the field is
/// modelled ([`is_modelled`]) or accepted ([`super::arguments`]), or the value is the release's
/// default (HF cannot tell such a field from one not given: `TrainingArguments` holds the same
/// value, `training_args.bin` the same bytes; an int where the default is a float is another
/// value).
pub fn runs(name: &str, value: &Value, profile: &Profile) -> bool {
    is_modelled(name, value) || super::arguments::status(name).accepted() || profile.default_of(name) == Some(value)
}

impl Args {
    /// Sets a field as `Trainer.__init__` or `train()` writes it back into `self.args` (what
    /// training_args.bin then holds); a field this release lacks is left alone.
    pub fn set_field(&mut self, name: &str, v: PyJson) {
        if let Some(slot) = self.all.iter_mut().find(|(n, _)| n == name) {
            slot.1 = v;
        }
    }

    /// `TrainingArguments.should_save` in process `rank` (global), `local_rank` on its node: the
    /// main process, or each node's first with `save_on_each_node`.
    pub fn should_save(&self, rank: usize, local_rank: usize) -> bool {
        if self.is_true("save_on_each_node") {
            local_rank == 0
        } else {
            rank == 0
        }
    }

    /// A field as HF holds it (None: the release lacks it).
    pub fn field(&self, name: &str) -> Option<&PyJson> {
        self.all.iter().find(|(n, _)| n == name).map(|(_, v)| v)
    }

    /// Whether a boolean field is True (False where the release lacks it).
    pub fn is_true(&self, name: &str) -> bool {
        self.field(name) == Some(&PyJson::Bool(true))
    }

    /// The weights file `save_pretrained` writes: `save_safetensors` decides where the version has
    /// it (its default is the version's default: False before 4.35, True after); without it
    /// (5.x), always safetensors.
    pub fn weights_file(&self, profile: &Profile) -> &'static str {
        if profile.has_field("save_safetensors") && !self.save_safetensors {
            "pytorch_model.bin"
        } else {
            "model.safetensors"
        }
    }

    /// The `eval_`-prefixed metric HF looks up (`"loss"` -> `"eval_loss"`, `"eval_x"` stays).
    pub fn metric_to_check(&self) -> Option<String> {
        self.metric_for_best_model.as_deref().map(eval_prefixed)
    }
    pub fn uses_plateau(&self) -> bool {
        self.lr_scheduler_type == "reduce_lr_on_plateau"
    }
}

/// `metric_for_best_model` as HF looks it up: `eval_` prefixed unless it already is.
/// Idempotent: `eval_prefixed(eval_prefixed(m)) == eval_prefixed(m)`.
pub fn eval_prefixed(metric: &str) -> String {
    if metric.starts_with("eval_") {
        metric.to_string()
    } else {
        format!("eval_{metric}")
    }
}
