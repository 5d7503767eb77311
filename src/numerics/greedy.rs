//! transformers 5.24.0's `GreedyLR` (`lr_scheduler_type="greedy"`, built by `get_scheduler` as
//! `get_greedy_schedule(optimizer, **lr_scheduler_kwargs)` = `GreedyLR(optimizer, **kwargs)`)
//! as a pure state machine with the same f64 operations in the same order as Python.
//!
//! Like [`crate::numerics::plateau`], Python keeps the type of each keyword argument (an int `min_lr=0`
//! can land in the optimizer's `lr` and in the state dict as an int; a float `cooldown=2.0`
//! makes `cooldown_counter` a float), so numbers are [`PyNum`].
//!
//! Not modelled: the `epoch` argument of `step` (HF never passes it), `load_state_dict`, the
//! `verbose` prints (stdout only), and kwargs of non-numeric type where Python takes a number
//! (Python accepts e.g. `patience="x"` and fails at the first step; here `from_kwargs` refuses
//! it with a `TypeError` of our own wording). `bool`s given for numeric kwargs are treated as
//! ints 0/1 (Python would keep the `bool` in the state dict).

use crate::numerics::optim::PyValue;
use serde_json::Value;
pub use crate::numerics::plateau::{Mode, PyError, PyNum, ThresholdMode};

const KWARGS: [&str; 14] = [
    "mode",
    "factor",
    "patience",
    "threshold",
    "threshold_mode",
    "cooldown",
    "warmup",
    "min_lr",
    "max_lr",
    "eps",
    "verbose",
    "smooth",
    "window_size",
    "reset_start",
];

use crate::formats::pyjson::py_str_repr;
use crate::numerics::plateau::{num, py_type_name};

fn err(t: &str, m: impl Into<String>) -> PyError {
    PyError::new(t, m)
}

fn py_repr(v: &Value) -> String {
    match v {
        Value::String(s) => py_str_repr(s),
        Value::Array(a) => format!("[{}]", a.iter().map(py_repr).collect::<Vec<_>>().join(", ")),
        Value::Object(m) => {
            format!("{{{}}}", m.iter().map(|(k, v)| format!("{}: {}", py_str_repr(k), py_repr(v))).collect::<Vec<_>>().join(", "))
        }
        other => py_str(other),
    }
}

/// Python `str` of a JSON-decoded value (what an f-string shows).
fn py_str(v: &Value) -> String {
    match v {
        Value::Null => "None".into(),
        Value::Bool(true) => "True".into(),
        Value::Bool(false) => "False".into(),
        Value::Number(_) => num(v).unwrap().py(),
        Value::String(s) => s.clone(),
        other => py_repr(other),
    }
}

/// A JSON-decoded value as the Python object (`verbose`/`smooth` are kept as given).
fn to_py(v: &Value) -> PyValue {
    match v {
        Value::Null => PyValue::None,
        Value::Bool(b) => PyValue::Bool(*b),
        Value::Number(_) => num(v).unwrap().to_py(),
        Value::String(s) => PyValue::str(s.clone()),
        Value::Array(a) => PyValue::List(a.iter().map(to_py).collect()),
        Value::Object(m) => PyValue::dict(m.iter().map(|(k, v)| (k.clone(), to_py(v)))),
    }
}

/// Python truthiness of a JSON-decoded value.
fn truthy(v: &Value) -> bool {
    match v {
        Value::Null => false,
        Value::Bool(b) => *b,
        Value::Number(n) => n.as_i64().map(|i| i != 0).unwrap_or_else(|| n.as_f64().unwrap() != 0.0),
        Value::String(s) => !s.is_empty(),
        Value::Array(a) => !a.is_empty(),
        Value::Object(m) => !m.is_empty(),
    }
}

/// Python truthiness of a value read back from a pickle.
fn truthy_py(v: &PyValue) -> bool {
    match v.resolved() {
        PyValue::None => false,
        PyValue::Bool(b) => *b,
        PyValue::Int(i) => *i != 0,
        PyValue::Float(x) => *x != 0.0,
        PyValue::Str(s) => !s.is_empty(),
        PyValue::List(a) | PyValue::Tuple(a) => !a.is_empty(),
        PyValue::Dict(d) => !d.is_empty(),
        _ => true,
    }
}

/// Python `a <= b`.
fn le(a: PyNum, b: PyNum) -> bool {
    match (a, b) {
        (PyNum::Int(x), PyNum::Int(y)) => x <= y,
        _ => a.as_f64() <= b.as_f64(),
    }
}

/// `a op b` with x86's NaN rule, which CPython's `float` ops show (`self.sum += value` keeps
/// `self.sum`'s NaN when both are NaN): the first NaN operand is the result. LLVM may swap the
/// operands of a commutative `fadd`, so the choice is made explicitly; a NaN made from non-NaN
/// operands (`inf - inf`) is the hardware's, as in Python.
fn nan_first(a: f64, b: f64, op: impl Fn(f64, f64) -> f64) -> f64 {
    if a.is_nan() {
        a
    } else if b.is_nan() {
        b
    } else {
        op(a, b)
    }
}

/// `StreamingAverage`: a rolling window (`values` is a Python list; `pop(0)` drops the oldest).
#[derive(Clone, Debug, PartialEq)]
pub struct StreamingAverage {
    pub window_size: PyNum,
    pub values: Vec<f64>,
    pub sum: f64,
}

impl StreamingAverage {
    pub fn new(window_size: PyNum) -> Self {
        StreamingAverage { window_size, values: Vec::new(), sum: 0.0 }
    }

    /// `streamavg(value)`; a window below 1 empties the list: `ZeroDivisionError`.
    pub fn streamavg(&mut self, value: f64) -> Result<f64, PyError> {
        self.values.push(value);
        self.sum = nan_first(self.sum, value, |a, b| a + b);
        if PyNum::Int(self.values.len() as i64).gt(self.window_size) {
            let removed = self.values.remove(0);
            self.sum = nan_first(self.sum, removed, |a, b| a - b);
        }
        if self.values.is_empty() {
            return Err(err("ZeroDivisionError", "float division by zero"));
        }
        Ok(self.sum / self.values.len() as f64)
    }

    /// `state_dict()`: `{"window_size", "values", "sum"}`.
    pub fn state_dict(&self) -> PyValue {
        PyValue::dict(vec![
            ("window_size", self.window_size.to_py()),
            ("values", PyValue::List(self.values.iter().map(|x| PyValue::Float(*x)).collect())),
            ("sum", PyValue::Float(self.sum)),
        ])
    }
}

/// The scheduler: GreedyLR's attributes, with the optimizer's group lrs held here (`lrs`, what
/// `param_group["lr"]` holds; a clamp may store `min_lr`/`max_lr` itself, keeping its type).
#[derive(Clone, Debug, PartialEq)]
pub struct Greedy {
    pub factor: PyNum,
    pub min_lrs: Vec<PyNum>,
    pub max_lrs: Vec<PyNum>,
    pub patience: PyNum,
    /// As given (any Python value; only printed).
    pub verbose: PyValue,
    pub cooldown: PyNum,
    pub warmup: PyNum,
    pub cooldown_counter: PyNum,
    pub warmup_counter: PyNum,
    pub mode: Mode,
    pub threshold: PyNum,
    pub threshold_mode: ThresholdMode,
    pub best: f64,
    pub num_bad_epochs: i64,
    pub num_good_epochs: i64,
    pub eps: PyNum,
    pub last_epoch: i64,
    /// As given (its truthiness switches smoothing on).
    pub smooth: PyValue,
    smooth_on: bool,
    pub window_size: PyNum,
    pub reset_start: PyNum,
    pub reset_start_original: PyNum,
    pub last_lr: Vec<PyNum>,
    pub init_lrs: Vec<PyNum>,
    /// The optimizer's group lrs.
    pub lrs: Vec<PyNum>,
    /// `_streaming_avg` (Some iff `smooth` is truthy).
    pub streaming_avg: Option<StreamingAverage>,
}

impl Greedy {
    /// `get_scheduler("greedy", optimizer, scheduler_specific_kwargs=kwargs)` for an optimizer
    /// whose groups hold `group_lrs`. `kwargs`: a JSON object, or null (= `{}`).
    ///
    /// Errors, in Python's order: a non-mapping `kwargs`; `optimizer` among the kwargs; an
    /// unknown keyword; `factor >= 1.0` (`ValueError`, or `TypeError` if not comparable);
    /// `min_lr`/`max_lr` list length; `mode`; `threshold_mode`.
    pub fn from_kwargs(kwargs: &Value, group_lrs: &[f64]) -> Result<Greedy, PyError> {
        let empty = serde_json::Map::new();
        let map = match kwargs {
            Value::Object(m) => m,
            Value::Null => &empty,
            other => {
                return Err(err(
                    "TypeError",
                    format!("transformers.optimization.get_greedy_schedule() argument after ** must be a mapping, not {}", py_type_name(other)),
                ))
            }
        };
        if map.contains_key("optimizer") {
            return Err(err("TypeError", "get_greedy_schedule() got multiple values for argument 'optimizer'"));
        }
        if let Some(k) = map.keys().find(|k| !KWARGS.contains(&k.as_str())) {
            return Err(err("TypeError", format!("GreedyLR.__init__() got an unexpected keyword argument '{k}'")));
        }
        let get = |k: &str| map.get(k);
        let num_arg = |k: &str, default: PyNum| -> Result<PyNum, PyError> {
            match get(k) {
                None => Ok(default),
                Some(v) => num(v).ok_or_else(|| err("TypeError", format!("unsupported {k} of type '{}' (not modelled)", py_type_name(v)))),
            }
        };
        let factor = match get("factor") {
            None => PyNum::Float(0.95),
            Some(v) => num(v).ok_or_else(|| err("TypeError", format!("'>=' not supported between instances of '{}' and 'float'", py_type_name(v))))?,
        };
        if factor.as_f64() >= 1.0 {
            return Err(err("ValueError", "Factor should be < 1.0."));
        }
        let patience = num_arg("patience", PyNum::Int(10))?;
        let cooldown = num_arg("cooldown", PyNum::Int(0))?;
        let warmup = num_arg("warmup", PyNum::Int(0))?;
        let threshold = num_arg("threshold", PyNum::Float(1e-6))?;
        let eps = num_arg("eps", PyNum::Float(1e-8))?;
        let window_size = num_arg("window_size", PyNum::Int(50))?;
        let reset_start = num_arg("reset_start", PyNum::Int(500))?;
        let verbose = get("verbose").map(to_py).unwrap_or(PyValue::Bool(false));
        let smooth_v = get("smooth").cloned().unwrap_or(Value::Bool(false));
        let n = group_lrs.len();
        let bounds = |k: &str, plural: &str, default: PyNum| -> Result<Vec<PyNum>, PyError> {
            match get(k) {
                None => Ok(vec![default; n]),
                Some(Value::Array(a)) => {
                    if a.len() != n {
                        return Err(err("ValueError", format!("expected {n} {plural}, got {}", a.len())));
                    }
                    a.iter().map(|x| num(x).ok_or_else(|| err("TypeError", format!("unsupported {k} element (not modelled)")))).collect()
                }
                Some(v) => Ok(vec![num(v).ok_or_else(|| err("TypeError", format!("unsupported {k} of type '{}' (not modelled)", py_type_name(v))))?; n]),
            }
        };
        let min_lrs = bounds("min_lr", "min_lrs", PyNum::Float(1e-3))?;
        let max_lrs = bounds("max_lr", "max_lrs", PyNum::Float(1.0))?;
        let mode = match get("mode") {
            None => Mode::Min,
            Some(Value::String(s)) if s == "min" => Mode::Min,
            Some(Value::String(s)) if s == "max" => Mode::Max,
            Some(v) => return Err(err("ValueError", format!("mode {} is unknown!", py_str(v)))),
        };
        let threshold_mode = match get("threshold_mode") {
            None => ThresholdMode::Abs,
            Some(Value::String(s)) if s == "rel" => ThresholdMode::Rel,
            Some(Value::String(s)) if s == "abs" => ThresholdMode::Abs,
            Some(v) => return Err(err("ValueError", format!("threshold mode {} is unknown!", py_str(v)))),
        };
        let smooth_on = truthy(&smooth_v);
        let init_lrs: Vec<PyNum> = group_lrs.iter().map(|x| PyNum::Float(*x)).collect();
        Ok(Greedy {
            factor,
            min_lrs,
            max_lrs,
            patience,
            verbose,
            cooldown,
            warmup,
            cooldown_counter: PyNum::Int(0),
            warmup_counter: PyNum::Int(0),
            mode,
            threshold,
            threshold_mode,
            best: Self::mode_worse_of(mode),
            num_bad_epochs: 0,
            num_good_epochs: 0,
            eps,
            last_epoch: 0,
            smooth: to_py(&smooth_v),
            smooth_on,
            window_size,
            reset_start,
            reset_start_original: reset_start,
            last_lr: init_lrs.clone(),
            lrs: init_lrs.clone(),
            init_lrs,
            streaming_avg: if smooth_on { Some(StreamingAverage::new(window_size)) } else { None },
        })
    }

    fn mode_worse_of(mode: Mode) -> f64 {
        match mode {
            Mode::Min => f64::INFINITY,
            Mode::Max => f64::NEG_INFINITY,
        }
    }

    /// `is_better(current, best)`.
    pub fn is_better(&self, current: f64, best: f64) -> bool {
        let t = self.threshold.as_f64();
        match (self.mode, self.threshold_mode) {
            (Mode::Min, ThresholdMode::Rel) => current < best * (1.0 - t),
            (Mode::Min, ThresholdMode::Abs) => current < best - t,
            (Mode::Max, ThresholdMode::Rel) => current > best * (1.0 + t),
            (Mode::Max, ThresholdMode::Abs) => current > best + t,
        }
    }

    /// `scheduler.step(metrics)`; panics where Python raises (see [`Greedy::try_step`]).
    pub fn step(&mut self, metric: f64) {
        if let Err(e) = self.try_step(metric) {
            panic!("GreedyLR.step raised {e}");
        }
    }

    /// `scheduler.step(metrics)` (`current = float(metrics)`). Python raises
    /// `ZeroDivisionError: float division by zero` for `factor == 0` when the lr would rise,
    /// and for smoothing with `window_size < 1`; the state is then left as Python leaves it.
    pub fn try_step(&mut self, metric: f64) -> Result<(), PyError> {
        let mut current = metric;
        if self.smooth_on {
            if let Some(avg) = self.streaming_avg.as_mut() {
                current = avg.streamavg(current)?;
            }
        }
        self.last_epoch += 1;
        let zero = PyNum::Int(0);
        if self.cooldown_counter.gt(zero) {
            self.cooldown_counter = self.cooldown_counter.minus_one();
            self.num_bad_epochs = 0;
            self.num_good_epochs = 0;
        } else if self.warmup_counter.gt(zero) {
            self.warmup_counter = self.warmup_counter.minus_one();
            self.num_bad_epochs = 0;
            self.num_good_epochs = 0;
        } else {
            if self.is_better(current, self.best) {
                self.best = current;
                self.num_bad_epochs = 0;
                self.num_good_epochs += 1;
            } else {
                self.num_bad_epochs += 1;
                self.num_good_epochs = 0;
            }
            if PyNum::Int(self.num_good_epochs).gt(self.patience) {
                self.increase_lr()?;
                self.warmup_counter = self.warmup;
                self.num_good_epochs = 0;
            } else if PyNum::Int(self.num_bad_epochs).gt(self.patience) {
                self.reduce_lr();
                self.cooldown_counter = self.cooldown;
                self.num_bad_epochs = 0;
            }
        }
        self.last_lr = self.lrs.clone();
        Ok(())
    }

    /// `_reduce_lr`: `new_lr = max(old_lr * factor, min_lr)`, applied if `old_lr - new_lr > eps`;
    /// when every group sits at (or below) its `min_lr`, `reset_start` counts down to `_reset`.
    fn reduce_lr(&mut self) {
        let mut all_at_min = true;
        for i in 0..self.lrs.len() {
            let old_lr = self.lrs[i].as_f64();
            let cut = old_lr * self.factor.as_f64();
            let min_lr = self.min_lrs[i];
            // Python max(cut, min_lr): min_lr (with its type) only if min_lr > cut.
            let new_lr = if min_lr.gt(PyNum::Float(cut)) { min_lr } else { PyNum::Float(cut) };
            if old_lr - new_lr.as_f64() > self.eps.as_f64() {
                self.lrs[i] = new_lr;
            }
            if self.lrs[i].gt(min_lr) {
                all_at_min = false;
            }
        }
        if all_at_min {
            self.reset_start = self.reset_start.minus_one();
            if le(self.reset_start, PyNum::Int(0)) {
                self.reset();
            }
        }
    }

    /// `_increase_lr`: `new_lr = min(old_lr / factor, max_lr)`, applied if `new_lr - old_lr > eps`.
    fn increase_lr(&mut self) -> Result<(), PyError> {
        for i in 0..self.lrs.len() {
            let old_lr = self.lrs[i].as_f64();
            let f = self.factor.as_f64();
            if f == 0.0 {
                return Err(err("ZeroDivisionError", "float division by zero"));
            }
            let up = old_lr / f;
            let max_lr = self.max_lrs[i];
            // Python min(up, max_lr): max_lr (with its type) only if max_lr < up.
            let new_lr = if PyNum::Float(up).gt(max_lr) { max_lr } else { PyNum::Float(up) };
            if new_lr.as_f64() - old_lr > self.eps.as_f64() {
                self.lrs[i] = new_lr;
            }
        }
        self.reset_start = self.reset_start_original;
        Ok(())
    }

    /// `_reset`.
    fn reset(&mut self) {
        self.lrs = self.init_lrs.clone();
        self.best = Self::mode_worse_of(self.mode);
        self.num_bad_epochs = 0;
        self.num_good_epochs = 0;
        self.cooldown_counter = PyNum::Int(0);
        self.warmup_counter = PyNum::Int(0);
        self.reset_start = self.reset_start_original;
        if self.smooth_on && self.streaming_avg.is_some() {
            self.streaming_avg = Some(StreamingAverage::new(self.window_size));
        }
    }

    /// The group lrs as floats.
    pub fn lrs_f64(&self) -> Vec<f64> {
        self.lrs.iter().map(|x| x.as_f64()).collect()
    }

    /// `get_last_lr()`.
    pub fn last_lr_f64(&self) -> Vec<f64> {
        self.last_lr.iter().map(|x| x.as_f64()).collect()
    }

    /// `scheduler.state_dict()`, GreedyLR's own (a plain dict, no `optimizer`):
    /// `factor, min_lrs, max_lrs, patience, verbose, cooldown, warmup, cooldown_counter,
    /// warmup_counter, mode, threshold, threshold_mode, best, num_bad_epochs, num_good_epochs,
    /// eps, last_epoch, smooth, window_size, reset_start, reset_start_original, _last_lr,
    /// _init_lrs`, then `_streaming_avg` (`{window_size, values, sum}`) when smoothing.
    /// `GreedyLR.load_state_dict(sd)` of a resumed run (transformers' own: each attribute
    /// `sd.get(key, current)`, the `_streaming_avg` window restored, and, when `_last_lr` is
    /// there, every group's lr set to it). `lrs`: the groups' lrs `optimizer.load_state_dict`
    /// restored just before.
    pub fn load_state_dict(&mut self, sd: &PyValue, lrs: Vec<PyNum>) -> Result<(), String> {
        use crate::numerics::plateau::py_num;
        let n = |k: &str, cur: PyNum| -> Result<PyNum, String> {
            sd.get(k).map_or(Ok(cur), |v| py_num(v).ok_or(format!("scheduler.pt: {k} is not a number")))
        };
        let list = |k: &str, cur: &Vec<PyNum>| -> Result<Vec<PyNum>, String> {
            match sd.get(k) {
                None => Ok(cur.clone()),
                Some(v) => v
                    .as_seq()
                    .ok_or(format!("scheduler.pt: {k} is not a list"))?
                    .iter()
                    .map(|x| py_num(x).ok_or(format!("scheduler.pt: {k} holds a non-number")))
                    .collect(),
            }
        };
        let int = |k: &str, cur: i64| -> Result<i64, String> {
            sd.get(k).map_or(Ok(cur), |v| v.as_i64().ok_or(format!("scheduler.pt: {k} is not an int")))
        };
        if lrs.len() != self.lrs.len() {
            return Err(format!("{} group lrs, expected {}", lrs.len(), self.lrs.len()));
        }
        self.lrs = lrs;
        self.factor = n("factor", self.factor)?;
        self.min_lrs = list("min_lrs", &self.min_lrs)?;
        self.max_lrs = list("max_lrs", &self.max_lrs)?;
        self.patience = n("patience", self.patience)?;
        if let Some(v) = sd.get("verbose") {
            self.verbose = v.clone();
        }
        self.cooldown = n("cooldown", self.cooldown)?;
        self.warmup = n("warmup", self.warmup)?;
        self.cooldown_counter = n("cooldown_counter", self.cooldown_counter)?;
        self.warmup_counter = n("warmup_counter", self.warmup_counter)?;
        if let Some(m) = sd.get("mode") {
            self.mode = match m.as_str() {
                Some("min") => Mode::Min,
                Some("max") => Mode::Max,
                _ => return Err("scheduler.pt: mode".into()),
            };
        }
        self.threshold = n("threshold", self.threshold)?;
        if let Some(m) = sd.get("threshold_mode") {
            self.threshold_mode = match m.as_str() {
                Some("rel") => ThresholdMode::Rel,
                Some("abs") => ThresholdMode::Abs,
                _ => return Err("scheduler.pt: threshold_mode".into()),
            };
        }
        if let Some(b) = sd.get("best") {
            self.best = b.as_f64().ok_or("scheduler.pt: best is not a number")?;
        }
        self.num_bad_epochs = int("num_bad_epochs", self.num_bad_epochs)?;
        self.num_good_epochs = int("num_good_epochs", self.num_good_epochs)?;
        self.eps = n("eps", self.eps)?;
        self.last_epoch = int("last_epoch", self.last_epoch)?;
        if let Some(v) = sd.get("smooth") {
            // Its truthiness is what `step` reads.
            self.smooth_on = truthy_py(v);
            self.smooth = v.clone();
        }
        self.window_size = n("window_size", self.window_size)?;
        self.reset_start = n("reset_start", self.reset_start)?;
        self.reset_start_original = n("reset_start_original", self.reset_start_original)?;
        self.last_lr = list("_last_lr", &self.last_lr)?;
        self.init_lrs = list("_init_lrs", &self.init_lrs)?;
        if let Some(avg) = sd.get("_streaming_avg") {
            let cur = self.streaming_avg.get_or_insert_with(|| StreamingAverage::new(self.window_size));
            cur.window_size = avg.get("window_size").map_or(Ok(cur.window_size), |v| py_num(v).ok_or("scheduler.pt: window_size"))?;
            cur.values = match avg.get("values") {
                None => vec![],
                Some(v) => v
                    .as_seq()
                    .ok_or("scheduler.pt: values")?
                    .iter()
                    .map(|x| py_num(x).map(|p| p.f()).ok_or("scheduler.pt: values"))
                    .collect::<Result<_, _>>()?,
            };
            cur.sum = avg.get("sum").map_or(Ok(0.0), |v| v.as_f64().ok_or("scheduler.pt: sum"))?;
        }
        if sd.get("_last_lr").is_some() {
            for (lr, last) in self.lrs.iter_mut().zip(&self.last_lr) {
                *lr = *last;
            }
        }
        Ok(())
    }

    pub fn state_dict(&self) -> PyValue {
        let list = |v: &Vec<PyNum>| PyValue::List(v.iter().map(|x| x.to_py()).collect());
        let mode = PyValue::str(match self.mode {
            Mode::Min => "min",
            Mode::Max => "max",
        });
        let tmode = PyValue::str(match self.threshold_mode {
            ThresholdMode::Rel => "rel",
            ThresholdMode::Abs => "abs",
        });
        let mut e: Vec<(&str, PyValue)> = vec![
            ("factor", self.factor.to_py()),
            ("min_lrs", list(&self.min_lrs)),
            ("max_lrs", list(&self.max_lrs)),
            ("patience", self.patience.to_py()),
            ("verbose", self.verbose.clone()),
            ("cooldown", self.cooldown.to_py()),
            ("warmup", self.warmup.to_py()),
            ("cooldown_counter", self.cooldown_counter.to_py()),
            ("warmup_counter", self.warmup_counter.to_py()),
            ("mode", mode),
            ("threshold", self.threshold.to_py()),
            ("threshold_mode", tmode),
            ("best", PyValue::Float(self.best)),
            ("num_bad_epochs", PyValue::Int(self.num_bad_epochs)),
            ("num_good_epochs", PyValue::Int(self.num_good_epochs)),
            ("eps", self.eps.to_py()),
            ("last_epoch", PyValue::Int(self.last_epoch)),
            ("smooth", self.smooth.clone()),
            ("window_size", self.window_size.to_py()),
            ("reset_start", self.reset_start.to_py()),
            ("reset_start_original", self.reset_start_original.to_py()),
            ("_last_lr", list(&self.last_lr)),
            ("_init_lrs", list(&self.init_lrs)),
        ];
        if self.smooth_on {
            if let Some(avg) = &self.streaming_avg {
                e.push(("_streaming_avg", avg.state_dict()));
            }
        }
        PyValue::dict(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn mk(kw: Value) -> Result<Greedy, PyError> {
        Greedy::from_kwargs(&kw, &[5e-5, 5e-5])
    }

    #[test]
    fn greedy_errors_are_pythons() {
        let e = mk(json!({"x": 1})).unwrap_err();
        assert_eq!((e.type_name.as_str(), e.message.as_str()), ("TypeError", "GreedyLR.__init__() got an unexpected keyword argument 'x'"));
        assert_eq!(mk(json!({"factor": 1.0})).unwrap_err().message, "Factor should be < 1.0.");
        assert_eq!(mk(json!({"mode": [1, "a", null, 1.5, {"k": true}]})).unwrap_err().message, "mode [1, 'a', None, 1.5, {'k': True}] is unknown!");
        assert_eq!(mk(json!({"threshold_mode": 2.0})).unwrap_err().message, "threshold mode 2.0 is unknown!");
        assert_eq!(mk(json!({"max_lr": [1, 2, 3]})).unwrap_err().message, "expected 2 max_lrs, got 3");
        assert_eq!(mk(json!([1])).unwrap_err().message, "transformers.optimization.get_greedy_schedule() argument after ** must be a mapping, not list");
    }

    #[test]
    fn greedy_rises_after_patience_good_epochs() {
        let mut g = mk(json!({"patience": 1, "factor": 0.5})).unwrap();
        g.step(3.0);
        assert_eq!(g.lrs_f64(), vec![5e-5, 5e-5]);
        g.step(2.0);
        assert_eq!(g.lrs_f64(), vec![1e-4, 1e-4]);
        assert_eq!(g.num_good_epochs, 0);
    }

    #[test]
    fn greedy_zero_factor_raises_on_increase() {
        let mut g = mk(json!({"factor": 0, "patience": 0})).unwrap();
        let e = g.try_step(1.0).unwrap_err();
        assert_eq!(e.type_name, "ZeroDivisionError");
        assert_eq!(g.num_good_epochs, 1);
    }
}
