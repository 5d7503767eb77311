//! `TrainingArguments.accelerator_config` (4.38+): what `__post_init__` makes of it, as the
//! release does. A dict (or a JSON file's path) becomes an `AcceleratorConfig` dataclass of the
//! release's fields (`accelerator_config_keys`; a key it lacks is the dataclass's TypeError, a
//! file's unknown keys its own ValueError); 4.38 keeps a dict as given until `Trainer.__init__`
//! (`accelerator_dict_kept`). `_setup_devices` pops `use_configured_state` off the object (4.42+),
//! so the pickled arguments never hold it.
//!
//! What each field does in the spec's world (one process on CPU), from the goldens of the
//! `args-accelerator-config-*` scenarios: `use_seedable_sampler=False` leaves the Trainer's torch
//! `RandomSampler` in place (its seed drawn from the global generator each epoch), whatever the
//! release's seedable sampler; `split_batches`, `dispatch_batches`, `even_batches` and
//! `non_blocking` change nothing with one process; `gradient_accumulation_kwargs` is what
//! [`crate::hf::behaviors::GaKwargs`] says (the Trainer's part: `crate::trainer`);
//! `use_configured_state=True` is refused ([`USE_CONFIGURED_STATE_REFUSAL`]).

use crate::formats::pyjson::{py_str_repr, PyJson};
use crate::hf::error::HfError;
use crate::hf::profile::Profile;
use std::path::Path;

/// Why `use_configured_state=True` is not run: it makes TrainingArguments take the accelerate
/// state that code before it configured in the same process, and raise a ValueError without one.
pub const USE_CONFIGURED_STATE_REFUSAL: &str = "refused, its use_configured_state=True takes the accelerate state (an Accelerator or PartialState) that code before TrainingArguments configured in the same process, and HF raises a ValueError without one: what that state is, the scenario world does not define (the generator's own earlier Trainers would decide it)";

/// A value as the scenario's JSON spells it (for the spec's own messages).
fn shown(v: &PyJson) -> String {
    v.to_serde().map(|x| x.to_string()).unwrap_or_else(|_| format!("{v:?}"))
}

/// `AcceleratorConfig`'s default for one of its fields.
fn default_of(key: &str) -> PyJson {
    match key {
        "even_batches" | "use_seedable_sampler" => PyJson::Bool(true),
        "dispatch_batches" | "gradient_accumulation_kwargs" => PyJson::Null,
        _ => PyJson::Bool(false),
    }
}

/// The keys `accelerate.utils.GradientAccumulationPlugin` takes (every pinned accelerate,
/// 0.30-1.15).
pub const PLUGIN_KEYS: [&str; 4] = ["num_steps", "adjust_scheduler", "sync_with_dataloader", "sync_each_batch"];

/// `accelerator_config` after `__post_init__`.
#[derive(Debug, Clone, PartialEq)]
pub struct AcceleratorConfig {
    /// The `AcceleratorConfig` object's `__dict__` (the release's fields in order, the given
    /// values over the defaults, `use_configured_state` popped), or with `object` false the dict
    /// as given (4.38).
    pub fields: Vec<(String, PyJson)>,
    /// training_args.bin pickles an `AcceleratorConfig` object (else a plain dict).
    pub object: bool,
    /// 4.38: the TypeError `Trainer.__init__` raises building the object from the kept dict.
    pub trainer_error: Option<HfError>,
}

impl AcceleratorConfig {
    /// A field's value (its default where the kept dict of 4.38 lacks it).
    pub fn get(&self, key: &str) -> PyJson {
        self.fields.iter().find(|(k, _)| k == key).map(|(_, v)| v.clone()).unwrap_or_else(|| default_of(key))
    }
    fn flag(&self, key: &str) -> bool {
        self.get(key) == PyJson::Bool(true)
    }
    pub fn use_seedable_sampler(&self) -> bool {
        self.flag("use_seedable_sampler")
    }
    /// `gradient_accumulation_kwargs` (None: not given).
    pub fn gradient_accumulation_kwargs(&self) -> Option<Vec<(String, PyJson)>> {
        match self.get("gradient_accumulation_kwargs") {
            PyJson::Dict(d) => Some(d),
            _ => None,
        }
    }
    pub fn set_gradient_accumulation_kwargs(&mut self, d: Vec<(String, PyJson)>) {
        if let Some(slot) = self.fields.iter_mut().find(|(k, _)| k == "gradient_accumulation_kwargs") {
            slot.1 = PyJson::Dict(d);
        }
    }
    /// The fields that decide how accelerate shards the batches of several processes, where
    /// they are not their defaults (one process: they change nothing).
    pub fn sharding_set(&self) -> Vec<String> {
        ["split_batches", "dispatch_batches", "even_batches", "use_seedable_sampler"]
            .iter()
            .filter(|k| self.get(k) != default_of(k))
            .map(|k| format!("{k}={}", shown(&self.get(k))))
            .collect()
    }
}

/// `AcceleratorConfig(**d)`: the dataclass's TypeError for the first key it lacks (in the
/// dict's order, as Python checks keyword arguments).
fn unknown_key_error(d: &[(String, PyJson)], keys: &[&str]) -> Option<HfError> {
    d.iter().find(|(k, _)| !keys.contains(&k.as_str())).map(|(k, _)| {
        HfError::new("TypeError", format!("AcceleratorConfig.__init__() got an unexpected keyword argument '{k}'"))
    })
}

/// The values the spec models: booleans (None too for dispatch_batches), and
/// gradient_accumulation_kwargs as None or a dict whose `num_steps` is a positive int and whose
/// plugin flags are booleans (a key the plugin lacks is its TypeError, whatever its value).
fn check_values(d: &[(String, PyJson)]) -> Result<(), HfError> {
    for (k, v) in d {
        let ok = match k.as_str() {
            "dispatch_batches" => matches!(v, PyJson::Null | PyJson::Bool(_)),
            "gradient_accumulation_kwargs" => match v {
                PyJson::Null => true,
                PyJson::Dict(g) => g.iter().all(|(gk, gv)| match gk.as_str() {
                    "num_steps" => matches!(gv, PyJson::Int(n) if *n >= 1),
                    "adjust_scheduler" | "sync_with_dataloader" | "sync_each_batch" => matches!(gv, PyJson::Bool(_)),
                    _ => true,
                }),
                _ => false,
            },
            "use_configured_state" if *v == PyJson::Bool(true) => {
                return Err(HfError::not_modelled(format!("argument accelerator_config: {USE_CONFIGURED_STATE_REFUSAL}")));
            }
            _ => matches!(v, PyJson::Bool(_)),
        };
        if !ok {
            return Err(HfError::not_modelled(format!(
                "argument accelerator_config: its {k}={} (the spec models booleans, and gradient_accumulation_kwargs as a dict whose num_steps is a positive int)",
                shown(v)
            )));
        }
    }
    Ok(())
}

/// The object `AcceleratorConfig(**d)` of this release, as `__post_init__` leaves it.
fn object_of(d: &[(String, PyJson)], profile: &Profile) -> Result<AcceleratorConfig, HfError> {
    let keys = profile.accelerator_config_keys;
    if let Some(e) = unknown_key_error(d, keys) {
        return Err(e);
    }
    check_values(d)?;
    let fields = keys
        .iter()
        .filter(|k| **k != "use_configured_state")
        .map(|k| (k.to_string(), d.iter().find(|(g, _)| g == k).map(|(_, v)| v.clone()).unwrap_or_else(|| default_of(k))))
        .collect();
    Ok(AcceleratorConfig { fields, object: true, trainer_error: None })
}

/// `AcceleratorConfig.from_json_file(path)`, the path relative to `base` (the run directory:
/// the process's working directory).
fn from_json_file(path: &str, base: &Path, profile: &Profile) -> Result<AcceleratorConfig, HfError> {
    let text = match std::fs::read_to_string(base.join(path)) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(HfError::new("FileNotFoundError", format!("[Errno 2] No such file or directory: {}", py_str_repr(path))));
        }
        Err(e) if e.kind() == std::io::ErrorKind::IsADirectory => {
            return Err(HfError::new("IsADirectoryError", format!("[Errno 21] Is a directory: {}", py_str_repr(path))));
        }
        Err(e) => return Err(HfError::not_modelled(format!("argument accelerator_config: reading {path}: {e}"))),
    };
    let d = match serde_json::from_str::<serde_json::Value>(&text) {
        Ok(v @ serde_json::Value::Object(_)) => match PyJson::from(&v) {
            PyJson::Dict(d) => d,
            _ => unreachable!("a JSON object is a dict"),
        },
        // json.load's JSONDecodeError texts, and what a file of another JSON type does, are not
        // modelled.
        _ => return Err(HfError::not_modelled(format!("argument accelerator_config: {path} does not hold a JSON object"))),
    };
    // "Check for keys and load sensible defaults": sorted, as Python lists them.
    let mut extra: Vec<&str> = d.iter().map(|(k, _)| k.as_str()).filter(|k| !profile.accelerator_config_keys.contains(k)).collect();
    extra.sort();
    if !extra.is_empty() {
        let list: Vec<String> = extra.iter().map(|k| py_str_repr(k)).collect();
        return Err(HfError::value(format!(
            "The config file at {path} had unknown keys ([{}]), please try upgrading your `transformers` version or fix (and potentially remove these keys) from your config file.",
            list.join(", ")
        )));
    }
    object_of(&d, profile)
}

/// `accelerator_config` as `__post_init__` converts it (None: not given, the release's default
/// object, which TRAINING_ARGS.pkl holds).
pub fn resolve(v: &PyJson, profile: &Profile, base: &Path) -> Result<Option<AcceleratorConfig>, HfError> {
    match v {
        PyJson::Null => Ok(None),
        PyJson::Dict(d) if profile.accelerator_dict_kept => {
            let trainer_error = unknown_key_error(d, profile.accelerator_config_keys);
            if trainer_error.is_none() {
                check_values(d)?;
            }
            Ok(Some(AcceleratorConfig { fields: d.clone(), object: false, trainer_error }))
        }
        PyJson::Dict(d) => object_of(d, profile).map(Some),
        PyJson::Str(path) => from_json_file(path, base, profile).map(Some),
        other => Err(HfError::not_modelled(format!(
            "argument accelerator_config={}: neither a dict nor a JSON file's path (HF hands it to `AcceleratorConfig.from_json_file`)",
            shown(other)
        ))),
    }
}
