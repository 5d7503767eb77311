//! `torch.optim.lr_scheduler.ReduceLROnPlateau` as a pure state machine with torch's exact
//! semantics (torch 2.13.0 and 2.1.2 behave the same; their state dicts differ, see
//! [`Plateau::state_dict`]).
//!
//! Python keeps the type of each keyword argument (an int `min_lr=0` stays an int in the state
//! dict, a float `cooldown=2.0` makes `cooldown_counter` a float), so numbers are [`PyNum`].

use crate::hf::behaviors::TorchLayout;
use crate::numerics::optim::PyValue;
use serde_json::Value;

/// A Python number as passed in (`int` or `float`): the crate's one Python-number type.
pub use crate::hf::args::Num as PyNum;

/// A Python exception: class name and `str(exception)`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PyError {
    pub type_name: String,
    pub message: String,
}

impl PyError {
    pub(crate) fn new(t: &str, m: impl Into<String>) -> Self {
        PyError { type_name: t.to_string(), message: m.into() }
    }
}

impl std::fmt::Display for PyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.type_name, self.message)
    }
}

impl std::error::Error for PyError {}

/// `mode` / `threshold_mode`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    Min,
    Max,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ThresholdMode {
    Rel,
    Abs,
}

/// The scheduler: its attributes are torch's, with the optimizer's group lrs held here
/// (`lrs`, what `param_group["lr"]` holds; a reduction may store `min_lr` itself, keeping its
/// Python type).
#[derive(Clone, Debug, PartialEq)]
pub struct Plateau {
    pub factor: PyNum,
    /// torch 2.13 only (`default_min_lr`): the scalar `min_lr`, or None when a list was given.
    pub default_min_lr: Option<PyNum>,
    pub min_lrs: Vec<PyNum>,
    pub patience: PyNum,
    pub cooldown: PyNum,
    pub cooldown_counter: PyNum,
    pub mode: Mode,
    pub threshold: PyNum,
    pub threshold_mode: ThresholdMode,
    /// `inf`/`-inf` (mode_worse) until a better metric arrives.
    pub best: f64,
    pub num_bad_epochs: i64,
    pub eps: PyNum,
    pub last_epoch: i64,
    /// The optimizer's group lrs.
    pub lrs: Vec<PyNum>,
    /// `_last_lr` (torch 2.13 sets it at construction; torch 2.1.2 only after the first step).
    pub last_lr: Vec<PyNum>,
    /// Whether `step` was called (2.1.2 has no `_last_lr` key before).
    pub stepped: bool,
}

const KWARGS: [&str; 9] = ["mode", "factor", "patience", "threshold", "threshold_mode", "cooldown", "min_lr", "eps", "verbose"];

/// Python's type name of a JSON-decoded kwarg (for TypeError texts); shared with `greedy`.
pub(crate) fn py_type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "NoneType",
        Value::Bool(_) => "bool",
        Value::Number(n) if n.is_i64() || n.is_u64() => "int",
        Value::Number(_) => "float",
        Value::String(_) => "str",
        Value::Array(_) => "list",
        Value::Object(_) => "dict",
    }
}

/// A JSON-decoded kwarg as a Python number (bool counts as int); shared with `greedy`.
pub(crate) fn num(v: &Value) -> Option<PyNum> {
    match v {
        Value::Number(n) => {
            if let Some(i) = n.as_i64() {
                Some(PyNum::Int(i))
            } else {
                n.as_f64().map(PyNum::Float)
            }
        }
        Value::Bool(b) => Some(PyNum::Int(*b as i64)),
        _ => None,
    }
}

impl Plateau {
    /// `ReduceLROnPlateau(optimizer, **kwargs)` for an optimizer whose groups hold `group_lrs`.
    ///
    /// `kwargs` must be a JSON object (HF's `lr_scheduler_kwargs`). Errors are torch's (checked
    /// in torch's order: `factor`, `min_lr` list length, `mode`, `threshold_mode`), and Python's
    /// `TypeError` for an unknown keyword. `verbose` is accepted only by `TorchLayout::v2_1()`
    /// (2.13 dropped it) and otherwise ignored.
    pub fn from_kwargs(kwargs: &Value, group_lrs: &[f64], layout: TorchLayout) -> Result<Plateau, PyError> {
        let empty = serde_json::Map::new();
        let map = match kwargs {
            Value::Object(m) => m,
            Value::Null => &empty,
            other => {
                return Err(PyError::new(
                    "TypeError",
                    format!("transformers.optimization.get_reduce_on_plateau_schedule() argument after ** must be a mapping, not {}", py_type_name(other)),
                ))
            }
        };
        for k in map.keys() {
            if k == "optimizer" {
                return Err(PyError::new("TypeError", "get_reduce_on_plateau_schedule() got multiple values for argument 'optimizer'"));
            }
            let known = KWARGS.contains(&k.as_str()) && !(k == "verbose" && !layout.plateau_accepts_verbose);
            if !known {
                return Err(PyError::new("TypeError", format!("ReduceLROnPlateau.__init__() got an unexpected keyword argument '{k}'")));
            }
        }
        let get = |k: &str| map.get(k);
        let num_arg = |k: &str, default: PyNum| -> Result<PyNum, PyError> {
            match get(k) {
                None => Ok(default),
                Some(v) => num(v).ok_or_else(|| PyError::new("TypeError", format!("unsupported {k} of type '{}'", py_type_name(v)))),
            }
        };
        // factor
        let factor = match get("factor") {
            None => PyNum::Float(0.1),
            Some(v) => match num(v) {
                Some(n) => n,
                None => {
                    return Err(PyError::new("TypeError", format!("'>=' not supported between instances of '{}' and 'float'", py_type_name(v))))
                }
            },
        };
        if factor.as_f64() >= 1.0 {
            return Err(PyError::new("ValueError", "Factor should be < 1.0."));
        }
        // min_lr
        let n_groups = group_lrs.len();
        let (default_min_lr, min_lrs) = match get("min_lr") {
            None => (Some(PyNum::Int(0)), vec![PyNum::Int(0); n_groups]),
            Some(Value::Array(a)) => {
                if a.len() != n_groups {
                    return Err(PyError::new("ValueError", format!("expected {} min_lrs, got {}", n_groups, a.len())));
                }
                let v: Option<Vec<PyNum>> = a.iter().map(num).collect();
                (None, v.ok_or_else(|| PyError::new("TypeError", "min_lr list must hold numbers"))?)
            }
            Some(v) => {
                let n = num(v).ok_or_else(|| PyError::new("TypeError", format!("unsupported min_lr of type '{}'", py_type_name(v))))?;
                (Some(n), vec![n; n_groups])
            }
        };
        let patience = num_arg("patience", PyNum::Int(10))?;
        let cooldown = num_arg("cooldown", PyNum::Int(0))?;
        let eps = num_arg("eps", PyNum::Float(1e-8))?;
        let threshold = num_arg("threshold", PyNum::Float(1e-4))?;
        let str_arg = |k: &str, default: &str| -> Result<String, PyError> {
            match get(k) {
                None => Ok(default.to_string()),
                Some(Value::String(s)) => Ok(s.clone()),
                Some(v @ (Value::Array(_) | Value::Object(_))) => Err(PyError::new("TypeError", format!("unhashable type: '{}'", py_type_name(v)))),
                Some(v) => {
                    // `v not in {"min", "max"}` is True, then `"mode " + v` fails.
                    Err(PyError::new("TypeError", format!("can only concatenate str (not \"{}\") to str", py_type_name(v))))
                }
            }
        };
        let mode_s = str_arg("mode", "min")?;
        let mode = match mode_s.as_str() {
            "min" => Mode::Min,
            "max" => Mode::Max,
            _ => return Err(PyError::new("ValueError", format!("mode {mode_s} is unknown!"))),
        };
        let tm_s = str_arg("threshold_mode", "rel")?;
        let threshold_mode = match tm_s.as_str() {
            "rel" => ThresholdMode::Rel,
            "abs" => ThresholdMode::Abs,
            _ => return Err(PyError::new("ValueError", format!("threshold mode {tm_s} is unknown!"))),
        };
        let lrs: Vec<PyNum> = group_lrs.iter().map(|x| PyNum::Float(*x)).collect();
        Ok(Plateau {
            factor,
            default_min_lr,
            min_lrs,
            patience,
            cooldown,
            cooldown_counter: PyNum::Int(0),
            mode,
            threshold,
            threshold_mode,
            best: Self::mode_worse_of(mode),
            num_bad_epochs: 0,
            eps,
            last_epoch: 0,
            last_lr: lrs.clone(),
            lrs,
            stepped: false,
        })
    }

    fn mode_worse_of(mode: Mode) -> f64 {
        match mode {
            Mode::Min => f64::INFINITY,
            Mode::Max => f64::NEG_INFINITY,
        }
    }

    /// `mode_worse`.
    pub fn mode_worse(&self) -> f64 {
        Self::mode_worse_of(self.mode)
    }

    /// `_is_better(a, best)`.
    pub fn is_better(&self, a: f64, best: f64) -> bool {
        let t = self.threshold.as_f64();
        match (self.mode, self.threshold_mode) {
            (Mode::Min, ThresholdMode::Rel) => a < best * (1.0 - t),
            (Mode::Min, ThresholdMode::Abs) => a < best - t,
            (Mode::Max, ThresholdMode::Rel) => a > best * (t + 1.0),
            (Mode::Max, ThresholdMode::Abs) => a > best + t,
        }
    }

    /// `in_cooldown`.
    pub fn in_cooldown(&self) -> bool {
        self.cooldown_counter.gt(PyNum::Int(0))
    }

    /// `scheduler.step(metrics)` (`current = float(metrics)`).
    pub fn step(&mut self, metric: f64) {
        let current = metric;
        let epoch = self.last_epoch + 1;
        self.last_epoch = epoch;
        if self.is_better(current, self.best) {
            self.best = current;
            self.num_bad_epochs = 0;
        } else {
            self.num_bad_epochs += 1;
        }
        if self.in_cooldown() {
            self.cooldown_counter = self.cooldown_counter.minus_one();
            self.num_bad_epochs = 0;
        }
        if PyNum::Int(self.num_bad_epochs).gt(self.patience) {
            self.reduce_lr();
            self.cooldown_counter = self.cooldown;
            self.num_bad_epochs = 0;
        }
        self.last_lr = self.lrs.clone();
        self.stepped = true;
    }

    /// `_reduce_lr`: `new_lr = max(old_lr * factor, min_lr)`; applied if `old_lr - new_lr > eps`.
    fn reduce_lr(&mut self) {
        for i in 0..self.lrs.len() {
            let old_lr = self.lrs[i].as_f64();
            let cut = old_lr * self.factor.as_f64();
            let min_lr = self.min_lrs[i];
            // Python max(cut, min_lr): min_lr (with its type) only if min_lr > cut.
            let new_lr = if PyNum::Float(cut).lt_py(min_lr) { min_lr } else { PyNum::Float(cut) };
            if old_lr - new_lr.as_f64() > self.eps.as_f64() {
                self.lrs[i] = new_lr;
            }
        }
    }

    /// The group lrs as floats.
    pub fn lrs_f64(&self) -> Vec<f64> {
        self.lrs.iter().map(|x| x.as_f64()).collect()
    }

    /// `scheduler.load_state_dict(sd)` of a resumed run, after `optimizer.load_state_dict`
    /// gave the groups `lrs` (the saved `param_group["lr"]`, with their Python type):
    /// `self.__dict__.update(sd)`, then `_init_is_better` (which recomputes `mode_worse`). A key
    /// the saved dict lacks keeps this scheduler's value; `_last_lr` present marks a stepped
    /// scheduler (torch before 2.3 writes it only then).
    pub fn load_state_dict(&mut self, sd: &PyValue, lrs: Vec<PyNum>) -> Result<(), String> {
        let n = |k: &str, cur: PyNum| -> Result<PyNum, String> {
            match sd.get(k) {
                None => Ok(cur),
                Some(v) => py_num(v).ok_or(format!("scheduler.pt: {k} is not a number")),
            }
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
            match sd.get(k) {
                None => Ok(cur),
                Some(v) => v.as_i64().ok_or(format!("scheduler.pt: {k} is not an int")),
            }
        };
        self.factor = n("factor", self.factor)?;
        if let Some(v) = sd.get("default_min_lr") {
            self.default_min_lr = if matches!(v, PyValue::None) { None } else { Some(py_num(v).ok_or("scheduler.pt: default_min_lr")?) };
        }
        self.min_lrs = list("min_lrs", &self.min_lrs)?;
        self.patience = n("patience", self.patience)?;
        self.cooldown = n("cooldown", self.cooldown)?;
        self.cooldown_counter = n("cooldown_counter", self.cooldown_counter)?;
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
        self.eps = n("eps", self.eps)?;
        self.last_epoch = int("last_epoch", self.last_epoch)?;
        if sd.get("_last_lr").is_some() {
            self.last_lr = list("_last_lr", &self.last_lr)?;
            self.stepped = true;
        }
        if lrs.len() != self.lrs.len() {
            return Err(format!("{} group lrs, expected {}", lrs.len(), self.lrs.len()));
        }
        self.lrs = lrs;
        Ok(())
    }

    /// `scheduler.state_dict()` (`__dict__` minus `optimizer`), keys in torch's order:
    ///
    /// Keys in the torch release's order (`TorchLayout::plateau_keys`: each release's
    /// attribute assignment order in `__init__`); `verbose` is False; before torch 2.3 `_last_lr`
    /// exists only once `step` has been called.
    ///
    /// `mode`/`threshold_mode` are strings, `best`/`mode_worse` floats (`inf`/`-inf`),
    /// `last_epoch`/`num_bad_epochs` ints, the rest keep the Python type they were given
    /// (`min_lrs`/`_last_lr` are lists).
    pub fn state_dict(&self, layout: TorchLayout) -> PyValue {
        let list = |v: &Vec<PyNum>| PyValue::List(v.iter().map(|x| x.to_py()).collect());
        let mode = PyValue::Str(match self.mode {
            Mode::Min => "min".into(),
            Mode::Max => "max".into(),
        });
        let tmode = PyValue::Str(match self.threshold_mode {
            ThresholdMode::Rel => "rel".into(),
            ThresholdMode::Abs => "abs".into(),
        });
        let e: Vec<(&str, PyValue)> = layout
            .plateau_keys
            .iter()
            .filter(|k| **k != "_last_lr" || layout.plateau_last_lr_at_init || self.stepped)
            .map(|k| {
                let v = match *k {
                    "factor" => self.factor.to_py(),
                    "default_min_lr" => self.default_min_lr.map(|x| x.to_py()).unwrap_or(PyValue::None),
                    "min_lrs" => list(&self.min_lrs),
                    "patience" => self.patience.to_py(),
                    "verbose" => PyValue::Bool(false),
                    "cooldown" => self.cooldown.to_py(),
                    "cooldown_counter" => self.cooldown_counter.to_py(),
                    "mode" => mode.clone(),
                    "threshold" => self.threshold.to_py(),
                    "threshold_mode" => tmode.clone(),
                    "best" => PyValue::Float(self.best),
                    "num_bad_epochs" => PyValue::Int(self.num_bad_epochs),
                    "mode_worse" => PyValue::Float(self.mode_worse()),
                    "eps" => self.eps.to_py(),
                    "last_epoch" => PyValue::Int(self.last_epoch),
                    "_last_lr" => list(&self.last_lr),
                    other => unreachable!("plateau key {other} of the torch table"),
                };
                (*k, v)
            })
            .collect();
        PyValue::dict(e)
    }
}

/// A number read back from a pickle, keeping its Python type (`bool` counts as `int`).
pub(crate) fn py_num(v: &PyValue) -> Option<PyNum> {
    match v.resolved() {
        PyValue::Int(i) => Some(PyNum::Int(*i)),
        PyValue::Bool(b) => Some(PyNum::Int(*b as i64)),
        PyValue::Float(x) => Some(PyNum::Float(*x)),
        _ => None,
    }
}

impl PyNum {
    /// Python `self < other`.
    fn lt_py(self, other: PyNum) -> bool {
        other.gt(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    fn mk(kw: Value) -> Result<Plateau, PyError> {
        Plateau::from_kwargs(&kw, &[5e-5, 5e-5], TorchLayout::v2_13())
    }

    #[test]
    fn errors_are_torchs() {
        assert_eq!(mk(json!({"factor": 1.0})).unwrap_err().message, "Factor should be < 1.0.");
        assert_eq!(mk(json!({"mode": "x"})).unwrap_err().message, "mode x is unknown!");
        assert_eq!(mk(json!({"threshold_mode": "y"})).unwrap_err().message, "threshold mode y is unknown!");
        let e = mk(json!({"bogus": 1})).unwrap_err();
        assert_eq!((e.type_name.as_str(), e.message.as_str()), ("TypeError", "ReduceLROnPlateau.__init__() got an unexpected keyword argument 'bogus'"));
        assert_eq!(mk(json!({"mode": 3})).unwrap_err().message, "can only concatenate str (not \"int\") to str");
        assert_eq!(mk(json!({"min_lr": [1e-6]})).unwrap_err().message, "expected 2 min_lrs, got 1");
        assert!(Plateau::from_kwargs(&json!({"verbose": true}), &[1.0], TorchLayout::v2_1()).is_ok());
        assert!(mk(json!({"verbose": true})).is_err());
    }

    #[test]
    fn flat_metric_default_patience() {
        let mut p = mk(json!({})).unwrap();
        for _ in 0..11 {
            p.step(0.5);
        }
        assert_eq!(p.lrs_f64(), vec![5e-5, 5e-5]);
        p.step(0.5);
        assert_eq!(p.lrs_f64(), vec![5e-5 * 0.1, 5e-5 * 0.1]);
    }

    proptest! {
        #[test]
        fn lr_never_rises_nor_undershoots(
            metrics in proptest::collection::vec(prop_oneof![-10.0f64..10.0, Just(0.5), Just(f64::NAN)], 1..60),
            factor in 0.0f64..0.99, patience in 0i64..4, cooldown in 0i64..3, min_lr in 0.0f64..1e-3,
            max_mode in any::<bool>(), abs in any::<bool>(), threshold in 0.0f64..0.5,
        ) {
            let kw = json!({"factor": factor, "patience": patience, "cooldown": cooldown, "min_lr": min_lr,
                            "mode": if max_mode {"max"} else {"min"}, "threshold_mode": if abs {"abs"} else {"rel"},
                            "threshold": threshold});
            let mut p = Plateau::from_kwargs(&kw, &[1e-2, 1e-2], TorchLayout::v2_13()).unwrap();
            let mut prev = p.lrs_f64();
            for m in metrics {
                p.step(m);
                let now = p.lrs_f64();
                for (a, b) in now.iter().zip(prev.iter()) {
                    prop_assert!(a <= b);
                    prop_assert!(*a >= min_lr);
                }
                prev = now;
            }
        }
    }
}
