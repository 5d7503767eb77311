//! The scenario format, contract v2 (conformance/README.md): v1's fields plus `tokenizer` and
//! `resume`. Parsing is strict: a typo in a scenario is the tool's error naming the file and
//! field, never a silently defaulted run.

use crate::world::launch::{Disks, LaunchSpec};
use serde::Deserialize;
use serde_json::{Map, Value};
use std::fmt;
use std::path::{Path, PathBuf};

/// A scenario as written in `conformance/scenarios/<area>/<name>.json`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    pub name: String,
    pub summary: String,
    /// TrainingArguments keyword arguments, HF 5.x spelling, in the order written.
    pub args: Map<String, Value>,
    #[serde(default)]
    pub model: ModelSpec,
    #[serde(default)]
    pub data: DataSpec,
    /// Scripted compute_metrics results; `None` means the Trainer gets no compute_metrics.
    #[serde(default)]
    pub metrics: Option<Vec<Map<String, Value>>>,
    #[serde(default)]
    pub early_stopping: Option<EarlyStoppingSpec>,
    #[serde(default, rename = "finally")]
    pub finally_calls: Vec<FinallyCall>,
    /// `"tokenizer": true`: the Trainer also gets the world's tokenizer (its processing class),
    /// whose files every `_save` writes beside the weights.
    #[serde(default)]
    pub tokenizer: bool,
    /// A second Trainer resuming in the same run directory after the first run.
    #[serde(default)]
    pub resume: Option<ResumeSpec>,
    /// Contract v3 part 2: the processes and nodes of the first run (default one process).
    #[serde(default)]
    pub launch: Option<LaunchSpec>,
    /// Contract v3 part 3 (g): a SIGTERM the process sends itself at a step of every train().
    #[serde(default)]
    pub signal: Option<SignalSpec>,
    /// Contract v3 part 3 (f): `false`: the first run calls no `train()`, only the `finally`
    /// calls (`save_model()` / `save_state()` of a Trainer that never trained).
    #[serde(default = "yes")]
    pub train: bool,
    /// Contract v3 part 3 (a): what the output folder already holds before the first Trainer
    /// is built (an earlier run's folders, a folder that is no checkpoint, a stray file).
    #[serde(default)]
    pub earlier: Vec<Earlier>,
    /// Contract v3 part 3 (c): flags the world's callback sets in `on_step_end` of a step,
    /// after the Trainer's own callbacks (every train() of the scenario).
    #[serde(default)]
    pub control: Vec<ControlSet>,
}

/// One item of `earlier`, relative to the run directory, under `output/`.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(untagged, deny_unknown_fields)]
pub enum Earlier {
    /// `{"folder": PATH}`: an empty folder (and its parents).
    Folder { folder: String },
    /// `{"file": PATH, "text": T}`: a file holding T (default empty), its parents made.
    File {
        file: String,
        #[serde(default)]
        text: String,
    },
}

impl Earlier {
    pub fn path(&self) -> &str {
        match self {
            Earlier::Folder { folder } => folder,
            Earlier::File { file, .. } => file,
        }
    }

    /// Makes it inside `run_dir`.
    pub fn apply(&self, run_dir: &Path) -> std::io::Result<()> {
        let p = run_dir.join(self.path());
        match self {
            Earlier::Folder { .. } => std::fs::create_dir_all(&p),
            Earlier::File { text, .. } => {
                if let Some(parent) = p.parent() {
                    std::fs::create_dir_all(parent)?;
                }
                std::fs::write(&p, text)
            }
        }
    }

    /// Makes every item, then dates each (and its folders below `output/`) [`EARLIER_MTIME`]:
    /// an earlier run's folders are older than this run's by far more than the 1 s below which
    /// HF's mtime-ordered rotation falls back to the numbers.
    pub fn apply_all(items: &[Earlier], run_dir: &Path) -> std::io::Result<()> {
        for e in items {
            e.apply(run_dir)?;
        }
        let t = std::time::UNIX_EPOCH + std::time::Duration::from_secs(EARLIER_MTIME);
        for e in items {
            let parts: Vec<&str> = e.path().split('/').collect();
            for k in (2..=parts.len()).rev() {
                std::fs::File::open(run_dir.join(parts[..k].join("/")))?.set_modified(t)?;
            }
        }
        Ok(())
    }
}

/// The modification time of `earlier` items: 2020-01-01T00:00:00Z (conformance/generate.py's
/// `EARLIER_MTIME`).
pub const EARLIER_MTIME: u64 = 1577836800;

/// `{"at_step": N, "set": FLAG}` of `control`: `TrainerControl.FLAG = True` at global step N.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ControlSet {
    pub at_step: i64,
    pub set: ControlFlag,
}

/// The `TrainerControl` flags a callback may set.
#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum ControlFlag {
    ShouldSave,
    ShouldEvaluate,
    ShouldLog,
    ShouldTrainingStop,
    ShouldEpochStop,
}

fn yes() -> bool {
    true
}

/// `"signal": {"at_step": N}`: after the Trainer's own callbacks' `on_step_end` of global step
/// N, the world's callback sends SIGTERM to its own process and waits out enable_jit_checkpoint's
/// grace period (conformance/README.md "Signal"), so the handler has requested its checkpoint
/// before the Trainer's next callback event.
#[derive(Debug, Clone, Copy, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct SignalSpec {
    pub at_step: i64,
}

/// `"resume"`: after the first run (train() and the `finally` calls) and the damage, a second
/// Trainer built fresh from the scenario, its arguments the first's updated with `args`, calls
/// `train(resume_from_checkpoint=...)` and the `finally` calls again.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ResumeSpec {
    /// `"last"` (passed as `True`: HF's `get_last_checkpoint`) or `"checkpoint-N"` (passed as
    /// the path `output/checkpoint-N`).
    pub from: String,
    /// Overrides of the first run's arguments, in the order written.
    #[serde(default)]
    pub args: Map<String, Value>,
    /// Applied to the run directory between the two runs, in order.
    #[serde(default)]
    pub damage: Vec<Damage>,
    /// The second Trainer's model (contract v3), e.g. another kind; default the first run's.
    #[serde(default)]
    pub model: Option<ModelSpec>,
    /// The second run's launch (v3 part 2), e.g. another number of processes; default the first's.
    #[serde(default)]
    pub launch: Option<LaunchSpec>,
    /// Contract v3 part 3 (d): the second run's EarlyStoppingCallback when it differs from the
    /// first's: absent (the same), `null` (none), or its own `{"patience", "threshold"}`.
    #[serde(default, deserialize_with = "present")]
    pub early_stopping: Option<Option<EarlyStoppingSpec>>,
}

/// A field that may be absent (outer `None`, by `#[serde(default)]`) or `null` (`Some(None)`).
fn present<'de, D: serde::Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<Option<Option<T>>, D::Error> {
    Option::<T>::deserialize(d).map(Some)
}

/// One damage of `resume.damage`: what a run killed during a save leaves. Paths are relative to
/// the run directory and lie in `output/`; a path that does not exist is left alone (which
/// folders a release wrote is its outcome, not the scenario's).
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(untagged, deny_unknown_fields)]
pub enum Damage {
    /// `{"truncate": PATH, "bytes": N}`: the file cut (or extended with zeros) to N bytes.
    Truncate { truncate: String, bytes: u64 },
    /// `{"remove": PATH}`: a file or a whole folder removed.
    Remove { remove: String },
    /// `{"reshard": CHECKPOINT, "max_shard_size": N}` (contract v3 part 3 e): the checkpoint's
    /// full weights file rewritten in save_pretrained's sharded layout, shards of at most N bytes
    /// (a tensor larger than N alone) and the index file. Not damage in the sense of loss: the
    /// weights are all there, as a model saved with `max_shard_size` holds them. Written by
    /// `save::shards` (a writer of weights files, a layer above this one).
    Reshard { reshard: String, max_shard_size: u64 },
}

impl Damage {
    pub fn path(&self) -> &str {
        match self {
            Damage::Remove { remove } => remove,
            Damage::Truncate { truncate, .. } => truncate,
            Damage::Reshard { reshard, .. } => reshard,
        }
    }

    /// Applies a file damage (remove, truncate) inside `run_dir`; a reshard is `save::shards`'
    /// (this layer writes no weights files), and this refuses it.
    pub fn apply(&self, run_dir: &Path) -> std::io::Result<()> {
        let p = run_dir.join(self.path());
        match self {
            Damage::Reshard { .. } => Err(std::io::Error::new(std::io::ErrorKind::Unsupported, "a reshard damage is applied by save::shards::reshard")),
            Damage::Remove { .. } if p.is_dir() => std::fs::remove_dir_all(&p),
            Damage::Remove { .. } if p.exists() => std::fs::remove_file(&p),
            Damage::Truncate { bytes, .. } if p.is_file() => std::fs::OpenOptions::new().write(true).open(&p)?.set_len(*bytes),
            _ => Ok(()),
        }
    }
}

impl ResumeSpec {
    /// The second run's arguments: the first run's, updated with `resume.args` (a key already
    /// there keeps its place, as Python's `dict.update` does).
    pub fn args_over(&self, first: &Map<String, Value>) -> Map<String, Value> {
        let mut out = first.clone();
        for (k, v) in &self.args {
            out.insert(k.clone(), v.clone());
        }
        out
    }
}

/// `"model"` (contract v3, part 1: conformance/README.md "Model kinds"): the kind, the initial
/// `a` and `b`, and for `lora` the adapter's rank, alpha and initial entries. Fields another kind
/// does not take are an error of the file, as in the generator.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(try_from = "RawModelSpec")]
pub struct ModelSpec {
    pub kind: ModelKind,
    pub a: f64,
    pub b: f64,
    /// `lora` only (defaults r=1, alpha=2, lora_a=1.0, lora_b=0.0).
    pub lora: LoraSpec,
    /// Contract v3 part 3 (b): parameters (`named_parameters()` names) the world sets
    /// `requires_grad=False` on before the Trainer is built; not for `lora` (peft freezes the
    /// base itself).
    pub frozen: Vec<String>,
}

/// What the Trainer is handed (HF's `_save` has one branch per class family).
#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq, Default)]
#[serde(rename_all = "lowercase")]
pub enum ModelKind {
    /// HF's regression test model, a `PreTrainedModel` with scalars `a`, `b`.
    #[default]
    Regression,
    /// A plain `torch.nn.Module` with the same parameters: "only saving its state dict".
    Module,
    /// A `PreTrainedModel` whose prediction is an `nn.Linear(1, 1)` (weight a, bias b).
    Linear,
    /// `linear` wrapped by peft's `get_peft_model` with the contract's `LoraConfig`.
    Lora,
}

impl ModelKind {
    pub const ALL: [ModelKind; 4] = [ModelKind::Regression, ModelKind::Module, ModelKind::Linear, ModelKind::Lora];

    pub fn from_name(name: &str) -> Option<ModelKind> {
        ModelKind::ALL.into_iter().find(|k| k.name() == name)
    }

    /// The kind's own parameters as `named_parameters()` names them (`frozen` may name these).
    pub fn param_names(self) -> &'static [&'static str] {
        match self {
            ModelKind::Regression | ModelKind::Module => &["a", "b"],
            ModelKind::Linear | ModelKind::Lora => &["linear.weight", "linear.bias"],
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            ModelKind::Regression => "regression",
            ModelKind::Module => "module",
            ModelKind::Linear => "linear",
            ModelKind::Lora => "lora",
        }
    }
}

/// The `lora` kind's `LoraConfig(r, lora_alpha)` and the world's initial adapter entries.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LoraSpec {
    pub r: i64,
    pub alpha: f64,
    /// `alpha` was written as an integer (Python keeps `lora_alpha` an int then, and
    /// adapter_config.json says `2`, not `2.0`).
    pub alpha_is_int: bool,
    pub lora_a: f64,
    pub lora_b: f64,
}

impl Default for LoraSpec {
    fn default() -> Self {
        LoraSpec { r: 1, alpha: 2.0, alpha_is_int: true, lora_a: 1.0, lora_b: 0.0 }
    }
}

impl Default for ModelSpec {
    fn default() -> Self {
        ModelSpec { kind: ModelKind::Regression, a: 0.0, b: 0.0, lora: LoraSpec::default(), frozen: vec![] }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawModelSpec {
    #[serde(default)]
    kind: ModelKind,
    #[serde(default)]
    a: f64,
    #[serde(default)]
    b: f64,
    r: Option<i64>,
    alpha: Option<serde_json::Number>,
    lora_a: Option<f64>,
    lora_b: Option<f64>,
    #[serde(default)]
    frozen: Vec<String>,
}

impl TryFrom<RawModelSpec> for ModelSpec {
    type Error = String;
    fn try_from(m: RawModelSpec) -> Result<Self, String> {
        let d = LoraSpec::default();
        if m.kind != ModelKind::Lora {
            for (name, set) in [("r", m.r.is_some()), ("alpha", m.alpha.is_some()), ("lora_a", m.lora_a.is_some()), ("lora_b", m.lora_b.is_some())] {
                if set {
                    return Err(format!("model field `{name}` belongs to kind \"lora\", not \"{}\"", m.kind.name()));
                }
            }
        }
        if !m.frozen.is_empty() {
            let names = m.kind.param_names();
            if m.kind == ModelKind::Lora {
                return Err("model field `frozen` is not for kind \"lora\" (peft freezes the base model itself)".into());
            }
            for (k, n) in m.frozen.iter().enumerate() {
                if !names.contains(&n.as_str()) {
                    return Err(format!("model field `frozen` names {n:?}, which kind \"{}\" does not have; its parameters: {names:?}", m.kind.name()));
                }
                if m.frozen[..k].contains(n) {
                    return Err(format!("model field `frozen` names {n:?} twice"));
                }
            }
        }
        let r = m.r.unwrap_or(d.r);
        if r < 1 {
            return Err(format!("model field `r` must be a positive integer, got {r}"));
        }
        Ok(ModelSpec {
            kind: m.kind,
            a: m.a,
            b: m.b,
            lora: LoraSpec {
                r,
                alpha: m.alpha.as_ref().and_then(|n| n.as_f64()).unwrap_or(d.alpha),
                alpha_is_int: m.alpha.as_ref().is_none_or(|n| n.is_i64() || n.is_u64()),
                lora_a: m.lora_a.unwrap_or(d.lora_a), lora_b: m.lora_b.unwrap_or(d.lora_b) },
            frozen: m.frozen,
        })
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DataSpec {
    #[serde(default = "default_train")]
    pub train: usize,
    #[serde(default = "default_eval")]
    pub eval: EvalSpec,
}

fn default_train() -> usize {
    64
}
fn default_eval() -> EvalSpec {
    EvalSpec::Single(16)
}

impl Default for DataSpec {
    fn default() -> Self {
        DataSpec { train: default_train(), eval: default_eval() }
    }
}

/// `0` means no eval set; a map is a dict `eval_dataset` (names in the order written).
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(untagged)]
pub enum EvalSpec {
    Single(usize),
    Named(Map<String, Value>),
}

impl EvalSpec {
    /// The eval sets as (name, size, offset); name is None for a single set.
    pub fn sets(&self) -> Vec<(Option<String>, usize, usize)> {
        match self {
            EvalSpec::Single(0) => vec![],
            EvalSpec::Single(n) => vec![(None, *n, 10000)],
            EvalSpec::Named(m) => m
                .iter()
                .enumerate()
                .map(|(k, (name, size))| (Some(name.clone()), size.as_u64().unwrap_or(0) as usize, 10000 * (k + 1)))
                .collect(),
        }
    }
}

#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct EarlyStoppingSpec {
    #[serde(default = "one")]
    pub patience: i64,
    #[serde(default)]
    pub threshold: f64,
}

fn one() -> i64 {
    1
}

#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum FinallyCall {
    SaveModel,
    SaveState,
}

/// Arguments the runner owns (conformance/README.md).
pub const RUNNER_ARGS: [&str; 4] = ["output_dir", "report_to", "disable_tqdm", "logging_dir"];

/// A broken scenario file: the tool's own error.
#[derive(Debug)]
pub struct ScenarioError {
    pub path: PathBuf,
    pub message: String,
}

impl fmt::Display for ScenarioError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path.display(), self.message)
    }
}

impl std::error::Error for ScenarioError {}

impl Scenario {
    pub fn load(path: &Path) -> Result<Scenario, ScenarioError> {
        let err = |message: String| ScenarioError { path: path.to_path_buf(), message };
        let text = std::fs::read_to_string(path).map_err(|e| err(format!("cannot read: {e}")))?;
        let sc: Scenario = serde_json::from_str(&text).map_err(|e| err(format!("{e}")))?;
        let stem = path.file_stem().and_then(|s| s.to_str()).unwrap_or("");
        if sc.name != stem {
            return Err(err(format!("field 'name' is {:?} but must equal the file stem {:?}", sc.name, stem)));
        }
        for owned in RUNNER_ARGS {
            if sc.args.contains_key(owned) {
                return Err(err(format!("field 'args' may not set '{owned}': the runner owns it; remove it")));
            }
        }
        if let Some(r) = &sc.resume {
            let n = r.from.strip_prefix("checkpoint-");
            if !(r.from == "last" || n.is_some_and(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()))) {
                return Err(err(format!("field 'resume.from' must be \"last\" or \"checkpoint-<N>\", not {:?}", r.from)));
            }
            for owned in RUNNER_ARGS {
                if r.args.contains_key(owned) {
                    return Err(err(format!("field 'resume.args' may not set '{owned}': the runner owns it; remove it")));
                }
            }
            if let Some(l) = &r.launch {
                l.check("resume.launch").map_err(err)?;
            }
            // With per-node disks a damage may name node K's output: `node-K/output/...`.
            let per_node = [sc.launch, r.launch].iter().flatten().any(|l| l.disks == Disks::PerNode);
            for (k, d) in r.damage.iter().enumerate() {
                let p = d.path();
                let inner = match p.split_once('/') {
                    Some((node, rest)) if per_node && node.strip_prefix("node-").is_some_and(|n| n == "0" || n == "1") => rest,
                    _ => p,
                };
                if !(inner == "output" || inner.starts_with("output/")) || p.split('/').any(|c| c == ".." || c.is_empty()) {
                    return Err(err(format!("field 'resume.damage[{k}]': the path must be output or lie under it (relative, no '..'; node-K/output with per-node disks), not {p:?}")));
                }
                if let Damage::Reshard { max_shard_size, .. } = d {
                    if *max_shard_size == 0 {
                        return Err(err(format!("field 'resume.damage[{k}]': 'max_shard_size' must be a positive integer (bytes), not 0")));
                    }
                }
            }
        }
        if let Some(l) = &sc.launch {
            l.check("launch").map_err(err)?;
        }
        let under_output = |p: &str| (p == "output" || p.starts_with("output/")) && !p.split('/').any(|c| c == ".." || c.is_empty());
        for (k, e) in sc.earlier.iter().enumerate() {
            if !under_output(e.path()) || e.path() == "output" {
                return Err(err(format!("field 'earlier[{k}]': the path must lie under output (relative, no '..'), not {:?}", e.path())));
            }
        }
        if !sc.earlier.is_empty() && (sc.first_launch().world_size() > 1 || sc.first_launch().disks == Disks::PerNode) {
            return Err(err("field 'earlier' is for a first run of one process".into()));
        }
        for (k, c) in sc.control.iter().enumerate() {
            if c.at_step < 1 {
                return Err(err(format!("field 'control[{k}].at_step' must be a positive integer (a global step), not {}", c.at_step)));
            }
        }
        if !sc.train && sc.resume.is_some() {
            return Err(err("field 'train' may be false only without 'resume' (a resume needs a first run's checkpoint)".into()));
        }
        if let Some(sg) = &sc.signal {
            if sg.at_step < 1 {
                return Err(err(format!("field 'signal.at_step' must be a positive integer (a global step), not {}", sg.at_step)));
            }
            if sc.args.get("enable_jit_checkpoint") != Some(&Value::Bool(true)) {
                return Err(err("field 'signal' needs args.enable_jit_checkpoint=true: without its handler SIGTERM ends the process".into()));
            }
            if sc.first_launch().world_size() > 1 || sc.second_launch().world_size() > 1 {
                return Err(err("field 'signal' is for one process (no launch of several)".into()));
            }
        }
        if let EvalSpec::Named(m) = &sc.data.eval {
            for (k, v) in m {
                if v.as_u64().is_none() {
                    return Err(err(format!("field 'data.eval.{k}' must be a non-negative integer size")));
                }
            }
        }
        Ok(sc)
    }

    /// The launch of the first run (`Phase::First` and a scenario without `resume`).
    pub fn first_launch(&self) -> LaunchSpec {
        self.launch.unwrap_or_default()
    }

    /// The launch of the resumed second run: `resume.launch`, else the first run's.
    pub fn second_launch(&self) -> LaunchSpec {
        self.resume.as_ref().and_then(|r| r.launch).unwrap_or_else(|| self.first_launch())
    }

    /// The races of real HF `version` (conformance/races.json) that one of this scenario's
    /// train() calls meets: the same files are then not what every run of real HF gives.
    pub fn races(&self, version: &str) -> Vec<&'static crate::hf::races::Race> {
        let first = |k: &str| self.args.get(k).and_then(Value::as_bool).unwrap_or(false);
        let second = |k: &str| {
            let resumed = self.resume.as_ref().and_then(|r| r.args.get(k));
            resumed.or_else(|| self.args.get(k)).and_then(Value::as_bool).unwrap_or(false)
        };
        let disks = |l: LaunchSpec| if l.disks == Disks::Shared { "shared" } else { "per-node" };
        let (l1, l2) = (self.first_launch(), self.second_launch());
        let mut phases = vec![crate::hf::races::Phase { nnodes: l1.nnodes, nproc_per_node: l1.nproc_per_node, disks: disks(l1), flag: &first }];
        if self.resume.is_some() {
            phases.push(crate::hf::races::Phase { nnodes: l2.nnodes, nproc_per_node: l2.nproc_per_node, disks: disks(l2), flag: &second });
        }
        crate::hf::races::applying(version, &phases)
    }

    /// Every scenario file below `root` (recursively), sorted by path, names checked unique.
    pub fn load_dir(root: &Path) -> Result<Vec<(PathBuf, Scenario)>, ScenarioError> {
        let mut paths = Vec::new();
        collect_json(root, &mut paths).map_err(|e| ScenarioError { path: root.to_path_buf(), message: format!("cannot list: {e}") })?;
        paths.sort();
        let mut out: Vec<(PathBuf, Scenario)> = Vec::new();
        for p in paths {
            let sc = Scenario::load(&p)?;
            if let Some((other, _)) = out.iter().find(|(_, s)| s.name == sc.name) {
                return Err(ScenarioError {
                    path: p.clone(),
                    message: format!("scenario name {:?} is already used by {}", sc.name, other.display()),
                });
            }
            out.push((p, sc));
        }
        Ok(out)
    }
}

fn collect_json(dir: &Path, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let p = entry?.path();
        if p.is_dir() {
            collect_json(&p, out)?;
        } else if p.extension().is_some_and(|e| e == "json") {
            out.push(p);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn model(json: &str) -> Result<ModelSpec, String> {
        serde_json::from_str::<ModelSpec>(json).map_err(|e| e.to_string())
    }

    #[test]
    fn model_kinds_parse_strictly() {
        assert_eq!(model("{}").unwrap(), ModelSpec::default());
        let m = model(r#"{"kind": "lora", "r": 2, "alpha": 4, "lora_a": 0.5}"#).unwrap();
        assert_eq!((m.kind, m.lora.r, m.lora.alpha, m.lora.alpha_is_int, m.lora.lora_a, m.lora.lora_b), (ModelKind::Lora, 2, 4.0, true, 0.5, 0.0));
        assert!(!model(r#"{"kind": "lora", "alpha": 4.0}"#).unwrap().lora.alpha_is_int);
        assert_eq!(model(r#"{"kind": "module", "a": 1.5}"#).unwrap().a, 1.5);
        let e = model(r#"{"kind": "module", "r": 2}"#).unwrap_err();
        assert!(e.contains("`r` belongs to kind \"lora\", not \"module\""), "{e}");
        assert!(model(r#"{"kind": "lora", "r": 0}"#).unwrap_err().contains("positive integer"));
        assert!(model(r#"{"kind": "peft"}"#).unwrap_err().contains("unknown variant"));
        assert!(model(r#"{"kind": "linear", "c": 1}"#).unwrap_err().contains("unknown field"));
    }

    #[test]
    fn frozen_names_the_kinds_own_parameters() {
        assert_eq!(model(r#"{"kind": "linear", "frozen": ["linear.bias"]}"#).unwrap().frozen, vec!["linear.bias".to_string()]);
        let e = model(r#"{"frozen": ["linear.bias"]}"#).unwrap_err();
        assert!(e.contains("kind \"regression\" does not have") && e.contains("[\"a\", \"b\"]"), "{e}");
        assert!(model(r#"{"frozen": ["a", "a"]}"#).unwrap_err().contains("twice"));
        assert!(model(r#"{"kind": "lora", "frozen": ["linear.bias"]}"#).unwrap_err().contains("peft freezes"));
    }

    /// Loads `fields` (a JSON object's inner text) as scenario `x` from a scratch file.
    fn load(fields: &str) -> Result<Scenario, String> {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("x.json");
        std::fs::write(&p, format!(r#"{{"name": "x", "summary": "s", {fields}}}"#)).unwrap();
        Scenario::load(&p).map_err(|e| e.message)
    }

    #[test]
    fn contract_v3_part_3_fields_are_checked_naming_the_field() {
        let ok = load(r#""args": {"enable_jit_checkpoint": true}, "signal": {"at_step": 2}, "earlier": [{"folder": "output/checkpoint-9"}, {"file": "output/a.txt"}], "control": [{"at_step": 1, "set": "should_save"}]"#).unwrap();
        assert_eq!((ok.signal.unwrap().at_step, ok.earlier.len(), ok.control[0].set, ok.train), (2, 2, ControlFlag::ShouldSave, true));
        let r = load(r#""args": {}, "resume": {"from": "last", "damage": [{"reshard": "output/checkpoint-2", "max_shard_size": 4}]}"#).unwrap();
        assert_eq!(r.resume.unwrap().damage, vec![Damage::Reshard { reshard: "output/checkpoint-2".into(), max_shard_size: 4 }]);
        let cases = [
            (r#""args": {}, "signal": {"at_step": 2}"#, "needs args.enable_jit_checkpoint=true"),
            (r#""args": {"enable_jit_checkpoint": true}, "signal": {"at_step": 0}"#, "'signal.at_step' must be a positive integer"),
            (r#""args": {"enable_jit_checkpoint": true}, "signal": {"at_step": 2}, "launch": {"nproc_per_node": 2}"#, "for one process"),
            (r#""args": {}, "earlier": [{"folder": "elsewhere/x"}]"#, "'earlier[0]': the path must lie under output"),
            (r#""args": {}, "earlier": [{"folder": "output/../x"}]"#, "'earlier[0]'"),
            (r#""args": {}, "control": [{"at_step": 0, "set": "should_save"}]"#, "'control[0].at_step'"),
            (r#""args": {}, "control": [{"at_step": 1, "set": "should_fly"}]"#, "unknown variant"),
            (r#""args": {}, "train": false, "resume": {"from": "last"}"#, "'train' may be false only without 'resume'"),
            (r#""args": {}, "resume": {"from": "last", "damage": [{"reshard": "output/checkpoint-2", "max_shard_size": 0}]}"#, "'max_shard_size' must be a positive integer"),
            (r#""args": {}, "resume": {"from": "last", "damage": [{"reshard": "checkpoint-2", "max_shard_size": 4}]}"#, "'resume.damage[0]': the path must be output"),
        ];
        for (fields, want) in cases {
            let e = load(fields).unwrap_err();
            assert!(e.contains(want), "{fields}: {e}");
        }
    }
}
