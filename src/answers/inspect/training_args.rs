//! `training_args.bin`: the `TrainingArguments` object HF pickles into every checkpoint (and
//! `save_model` into the output folder), read field by field with the project's restricted
//! unpickler ([`crate::formats::torch_format`]): nothing is imported or executed, so a hostile file can
//! name any class it likes and still cannot run code here.
//!
//! [`read_training_args`] is the public entry point (`ckptspec inspect` uses it for every
//! checkpoint, `ckptspec plan` for a `training_args.bin` CONFIG). It returns the file's fields as
//! JSON, which profiled releases have exactly this argument list, and, for a chosen profile, the
//! keyword arguments that differ from that release's defaults in format v1 (HF 5.x) spelling,
//! i.e. what a scenario's `args` holds.

use crate::formats::torch_format::{self, AllowList, Construct, FormatError, Global, LoadOptions, Value};
use crate::hf::profile::{self, Profile};
use serde_json::{Map, Value as J};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// A `training_args.bin` as read.
#[derive(Debug, Clone)]
pub struct TrainingArgsFile {
    pub path: PathBuf,
    /// The pickled class, `module.name` (`transformers.training_args.TrainingArguments`, or a
    /// subclass such as `Seq2SeqTrainingArguments`).
    pub class: String,
    /// Every attribute of the object that is a `TrainingArguments` field of some profiled
    /// release, in the pickle's order, as JSON: enum members as their values (`"steps"`), a
    /// `torch.device` as its string, dataclass objects (`AcceleratorConfig`) as objects of their
    /// fields, other objects as `{"__class__": "module.name"}`, tuples and sets as arrays,
    /// non-finite floats as the strings Python's `json` writes (`"NaN"`, `"Infinity"`).
    pub fields: Map<String, J>,
    /// The object's other attributes (HF's private state: `_n_gpu`, `distributed_state`, ...),
    /// by name.
    pub other_attributes: Vec<String>,
    /// Profiled releases whose argument list (golden/hf-V/TRAINING_ARGS.json) this file fits
    /// best, oldest first: each of their fields is in the file, and the file has the fewest
    /// fields they lack. Adjacent releases often share one list, so this is usually a range.
    /// Empty when no profile's fields are all present.
    pub profiles: Vec<&'static str>,
    /// [`TrainingArgsFile::kwargs`] for the newest of `profiles` (empty when none fits).
    pub kwargs: Map<String, J>,
    /// The launch the writing process was part of, from its `distributed_state` (see
    /// [`LaunchRecord`]): `Ok(None)` when the object has no `distributed_state` (nothing
    /// recorded), `Err` (naming the file) when it has one that is not accelerate's
    /// `PartialState` as every profiled release pickles it.
    pub launch: Result<Option<LaunchRecord>, String>,
}

/// The launch a `training_args.bin` records: accelerate's `PartialState`, pickled inside the
/// arguments as `distributed_state` by every profiled release (4.31-5.24; read in the goldens of
/// each: `{_cpu, backend, device, [debug,] distributed_type, num_processes, process_index,
/// local_process_index, fork_launched}`, 4.31-4.39 with `local_process_index` first). HF's
/// `args.world_size` and `args.process_index` are `num_processes` and `process_index` of that
/// object, so they are what decides the rng file names: `rng_state.pth` when the world size is
/// 1, `rng_state_{process_index}.pth` otherwise (`_save_rng_state` and `_load_rng_state`, every
/// release). The record is the *writing* process's: the main process (global rank 0) on a
/// shared disk, each node's first process with `save_on_each_node` (`process_index` the node's
/// first rank, `local_process_index` 0). The number of nodes is not recorded anywhere in it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LaunchRecord {
    /// `num_processes`: the world size.
    pub num_processes: usize,
    /// `process_index`: the writer's global rank.
    pub process_index: usize,
    /// `local_process_index`: the writer's rank on its node.
    pub local_process_index: usize,
    /// `distributed_type` is `MULTI_CPU` (gloo on CPUs, `use_cpu`): the device of each process
    /// is then `cpu[:<local rank>]`, which decides whether 4.40-5.17 can load optimizer.pt back
    /// in a launch (`LaunchBehaviors::map_location_fails`).
    pub multi_cpu: bool,
    /// `distributed_type` as recorded (`NO`, `MULTI_CPU`, `MULTI_GPU`, ...).
    pub distributed_type: Option<String>,
}

impl LaunchRecord {
    /// The writer's node was not node 0: its first process is not the world's first.
    pub fn writer_on_other_node(&self) -> bool {
        self.process_index != self.local_process_index
    }
}

/// [`LaunchRecord`] of the pickled object's field dict; errors name the file.
fn launch_record(path: &Path, state: &[(Value, Value)]) -> Result<Option<LaunchRecord>, String> {
    let Some((_, ds)) = state.iter().find(|(k, _)| k.as_str() == Some("distributed_state")) else { return Ok(None) };
    let bad = |what: String| format!("{}: distributed_state {what}", path.display());
    if matches!(ds.resolved(), Value::None) {
        // TrainingArguments before its devices were set up (never pickled so by a Trainer).
        return Ok(None);
    }
    let obj = ds.as_object().ok_or_else(|| bad("is not an object (accelerate's PartialState)".into()))?;
    let d = obj.state.as_ref().and_then(|s| s.as_dict()).ok_or_else(|| bad("has no field dict".into()))?;
    let get = |k: &str| d.iter().find(|(kk, _)| kk.as_str() == Some(k)).map(|(_, v)| v);
    let int = |k: &str| -> Result<usize, String> {
        let v = get(k).ok_or_else(|| bad(format!("has no {k}")))?;
        v.as_i64().and_then(|i| usize::try_from(i).ok()).ok_or_else(|| bad(format!("{k} is not a non-negative int ({})", to_json(v))))
    };
    let num_processes = int("num_processes")?;
    let process_index = int("process_index")?;
    let local_process_index = int("local_process_index")?;
    if num_processes == 0 || process_index >= num_processes || local_process_index > process_index {
        return Err(bad(format!(
            "is not a process of its launch: num_processes {num_processes}, process_index {process_index}, local_process_index {local_process_index}"
        )));
    }
    // An enum member pickles as `DistributedType('MULTI_CPU')`: its value.
    let distributed_type = get("distributed_type").map(to_json).and_then(|j| j.as_str().map(str::to_string));
    Ok(Some(LaunchRecord { num_processes, process_index, local_process_index, multi_cpu: distributed_type.as_deref() == Some("MULTI_CPU"), distributed_type }))
}

impl TrainingArgsFile {
    /// A field's value, by this version's name.
    pub fn get(&self, name: &str) -> Option<&J> {
        self.fields.get(name)
    }

    /// The keyword arguments of this object for `profile`: every field whose value differs from
    /// that release's dataclass default, renamed to format v1 (HF 5.x) spelling (the
    /// `evaluation_strategy` of releases before 4.41 becomes `eval_strategy`), in the file's
    /// order. A field equal to its value in the release's own object for no arguments
    /// (golden/hf-V/TRAINING_ARGS.pkl, pickled by the real HF: `__post_init__`'s results such
    /// as `debug=[]`, `local_rank=0`, and the conformance runner's `output_dir="output"`,
    /// `report_to="none"`) is not listed either. Values `__post_init__` filled in from given ones (`do_eval`, an `eval_steps` taken from
    /// `logging_steps`, `metric_for_best_model="loss"` under `load_best_model_at_end`, the
    /// integers 4.31 wrote over ratio intervals) count as given: passing them back yields the
    /// same resolved arguments.
    pub fn kwargs(&self, profile: &Profile) -> Map<String, J> {
        let template = template_fields(profile);
        let mut out = Map::new();
        for (name, v) in &self.fields {
            let Some(default) = profile.default_of(name) else { continue };
            if same_json(v, default) || template.get(name).is_some_and(|t| same_json(v, t)) {
                continue;
            }
            let v1 = profile.renames.iter().find(|(_, here)| here == name).map(|(v1, _)| *v1).unwrap_or(name);
            out.insert(v1.to_string(), v.clone());
        }
        out
    }

    /// A bool field (None when absent or not a bool).
    pub fn flag(&self, name: &str) -> Option<bool> {
        self.fields.get(name).and_then(J::as_bool)
    }
}

/// Equality as Python compares the two JSON forms (`1 == 1.0`; arrays and objects by content).
fn same_json(a: &J, b: &J) -> bool {
    match (a, b) {
        (J::Number(x), J::Number(y)) => match (x.as_i64(), y.as_i64()) {
            (Some(p), Some(q)) => p == q,
            _ => x.as_f64() == y.as_f64(),
        },
        (J::Array(x), J::Array(y)) => x.len() == y.len() && x.iter().zip(y).all(|(p, q)| same_json(p, q)),
        (J::Object(x), J::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| same_json(v, w)))
        }
        _ => a == b,
    }
}

/// The fields of the release's TrainingArguments for no arguments (TRAINING_ARGS.pkl), cached.
fn template_fields(profile: &Profile) -> &'static Map<String, J> {
    static T: OnceLock<Vec<(&'static str, Map<String, J>)>> = OnceLock::new();
    let all = T.get_or_init(|| {
        all_profiles()
            .iter()
            .map(|p| {
                let m = torch_format::unpickle(p.training_args_template)
                    .ok()
                    .and_then(|v| v.as_object().and_then(|o| o.state.as_ref()).and_then(|s| s.as_dict()).map(|d| match dict_json(d) {
                        J::Object(m) => m,
                        _ => Map::new(),
                    }))
                    .unwrap_or_default();
                (p.version, m)
            })
            .collect()
    });
    static EMPTY: OnceLock<Map<String, J>> = OnceLock::new();
    all.iter().find(|(v, _)| *v == profile.version).map(|(_, m)| m).unwrap_or_else(|| EMPTY.get_or_init(Map::new))
}

/// Every profile, built once (each parses its TRAINING_ARGS.json).
pub(crate) fn all_profiles() -> &'static [Profile] {
    static P: OnceLock<Vec<Profile>> = OnceLock::new();
    P.get_or_init(|| profile::supported().iter().map(|v| Profile::get(v).expect("a profiled release")).collect())
}

/// The profile of a profiled version string (cached).
pub(crate) fn cached_profile(version: &str) -> Option<&'static Profile> {
    all_profiles().iter().find(|p| p.version == version)
}

/// How many times an unknown global of HF's own packages may be added to the allow-list while
/// reading one file (each retry names one more; nothing is executed either way).
const MAX_EXTRA_GLOBALS: usize = 32;

/// Reads a `training_args.bin`. Errors name the file: not a torch zip, a CRC mismatch, a
/// malformed pickle, a global outside `transformers`/`accelerate`/`torch`/`numpy`/`enum`
/// (refused: the file names code this reader will not even name), or a pickle that is not an
/// object with a field dict holding `output_dir`.
///
/// Classes of HF's own packages beyond the project's allow-list (`Seq2SeqTrainingArguments`,
/// `FSDPOption`, `DebugOption`, a newer accelerate enum) are admitted one by one: the
/// unpickler builds them as inert [`torch_format::Object`]s, so admitting a name runs nothing.
pub fn read_training_args(path: &Path) -> Result<TrainingArgsFile, String> {
    let mut allow = AllowList::default();
    let mut extra = 0;
    let value = loop {
        let opts = LoadOptions { lazy: false, verify_crc: true, allow: allow.clone() };
        match torch_format::load_with(path, &opts) {
            Ok(l) => break l.value,
            Err(FormatError::RefusedGlobal { global, .. }) if extra < MAX_EXTRA_GLOBALS && hf_package(&global) => {
                let (m, n) = global.rsplit_once('.').unwrap_or(("", &global));
                allow.allow(Global::new(m, n));
                extra += 1;
            }
            Err(e) => return Err(format!("{}: {}", path.display(), strip_path(&e.to_string(), path))),
        }
    };
    from_value(path, &value)
}

fn hf_package(global: &str) -> bool {
    ["transformers.", "accelerate.", "torch.", "numpy.", "enum.", "peft.", "trl."].iter().any(|p| global.starts_with(p))
}

/// A FormatError's text without the path prefix it carries (the caller adds the path).
pub(crate) fn strip_path(msg: &str, path: &Path) -> String {
    let p = format!("{}: ", path.display());
    msg.strip_prefix(&p).unwrap_or(msg).to_string()
}

fn from_value(path: &Path, value: &Value) -> Result<TrainingArgsFile, String> {
    let bad = |what: &str| format!("{}: not a pickled TrainingArguments ({what})", path.display());
    let obj = value.as_object().ok_or_else(|| bad("the pickle is not an object"))?;
    let state = obj.state.as_ref().and_then(|s| s.as_dict()).ok_or_else(|| bad("the object has no field dict"))?;
    let class = obj.class.to_string();
    let known = all_field_names();
    let mut fields = Map::new();
    let mut other = vec![];
    for (k, v) in state {
        let Some(name) = k.as_str() else { return Err(bad("a field name is not a string")) };
        if known.contains(name) {
            fields.insert(name.to_string(), to_json(v));
        } else {
            other.push(name.to_string());
        }
    }
    if !fields.contains_key("output_dir") {
        return Err(bad("no output_dir field"));
    }
    let profiles = fitting_profiles(&fields);
    let kwargs = profiles.last().and_then(|v| cached_profile(v)).map(|p| kwargs_of(&fields, p)).unwrap_or_default();
    let launch = launch_record(path, state);
    Ok(TrainingArgsFile { path: path.to_path_buf(), class, fields, other_attributes: other, profiles, kwargs, launch })
}

fn kwargs_of(fields: &Map<String, J>, p: &Profile) -> Map<String, J> {
    TrainingArgsFile {
        path: PathBuf::new(),
        class: String::new(),
        fields: fields.clone(),
        other_attributes: vec![],
        profiles: vec![],
        kwargs: Map::new(),
        launch: Ok(None),
    }
    .kwargs(p)
}

/// The union of every profile's field names.
fn all_field_names() -> &'static std::collections::HashSet<String> {
    static N: OnceLock<std::collections::HashSet<String>> = OnceLock::new();
    N.get_or_init(|| all_profiles().iter().flat_map(|p| p.fields.iter().map(|(n, _)| n.clone())).collect())
}

/// Each profile's field names as a set.
fn profile_field_sets() -> &'static [(&'static str, std::collections::HashSet<String>)] {
    static S: OnceLock<Vec<(&'static str, std::collections::HashSet<String>)>> = OnceLock::new();
    S.get_or_init(|| all_profiles().iter().map(|p| (p.version, p.fields.iter().map(|(n, _)| n.clone()).collect())).collect())
}

/// Profiles all of whose fields the file has, with the fewest file fields they lack.
fn fitting_profiles(fields: &Map<String, J>) -> Vec<&'static str> {
    let mut best: Option<usize> = None;
    let mut out = vec![];
    for (version, set) in profile_field_sets() {
        if set.len() > fields.len() || !set.iter().all(|n| fields.contains_key(n)) {
            continue;
        }
        let extra = fields.len() - set.len();
        match best {
            Some(b) if extra > b => continue,
            Some(b) if extra == b => out.push(*version),
            _ => {
                best = Some(extra);
                out = vec![*version];
            }
        }
    }
    out
}

/// A pickled value as JSON (see [`TrainingArgsFile::fields`]).
pub fn to_json(v: &Value) -> J {
    match v.resolved() {
        Value::None => J::Null,
        Value::Bool(b) => J::Bool(*b),
        Value::Int(i) => J::from(*i),
        Value::BigInt(b) => J::String(bigint_decimal(b)),
        Value::Float(f) if f.is_finite() => serde_json::Number::from_f64(*f).map(J::Number).unwrap_or(J::Null),
        Value::Float(f) => J::String(if f.is_nan() { "NaN" } else if *f > 0.0 { "Infinity" } else { "-Infinity" }.into()),
        Value::Str(s) => J::String(s.clone()),
        Value::Bytes(b) => J::String(String::from_utf8_lossy(b).into_owned()),
        Value::List(x) | Value::Tuple(x) | Value::Set(x) | Value::FrozenSet(x) => J::Array(x.iter().map(to_json).collect()),
        Value::Dict(d) => dict_json(d),
        Value::Global(g) => J::String(g.to_string()),
        Value::Tensor(t) => J::String(format!("tensor({}, shape {:?})", t.dtype().torch_name(), t.shape)),
        Value::Object(o) => {
            if o.class.is("collections", "OrderedDict") {
                return dict_json(&o.dict_items);
            }
            // An enum member (`IntervalStrategy('steps')`) or a torch.device('cpu'): class(value).
            if o.construct == Construct::Reduce && o.args.len() == 1 && o.state.is_none() {
                return to_json(&o.args[0]);
            }
            match o.state.as_ref().map(|s| s.resolved()) {
                Some(Value::Dict(d)) => dict_json(d),
                _ => {
                    let mut m = Map::new();
                    m.insert("__class__".into(), J::String(o.class.to_string()));
                    J::Object(m)
                }
            }
        }
        Value::Shared(_) => unreachable!("resolved"),
    }
}

fn dict_json(d: &[(Value, Value)]) -> J {
    let mut m = Map::new();
    for (k, v) in d {
        let key = match k.resolved() {
            Value::Str(s) => s.clone(),
            other => crate::harness::diff::value_repr(other),
        };
        m.insert(key, to_json(v));
    }
    J::Object(m)
}

/// A little-endian two's-complement int as decimal digits.
fn bigint_decimal(b: &[u8]) -> String {
    if b.len() <= 16 {
        let neg = b.last().is_some_and(|x| x & 0x80 != 0);
        let mut buf = [if neg { 0xFF } else { 0 }; 16];
        buf[..b.len()].copy_from_slice(b);
        return i128::from_le_bytes(buf).to_string();
    }
    format!("<int of {} bytes>", b.len())
}
