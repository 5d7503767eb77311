//! Scenario format v1 (conformance/README.md). Parsing is strict: a typo in a scenario is the
//! tool's error naming the file and field, never a silently defaulted run.

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
}

#[derive(Debug, Clone, Deserialize, Default, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ModelSpec {
    #[serde(default)]
    pub a: f64,
    #[serde(default)]
    pub b: f64,
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
        if let EvalSpec::Named(m) = &sc.data.eval {
            for (k, v) in m {
                if v.as_u64().is_none() {
                    return Err(err(format!("field 'data.eval.{k}' must be a non-negative integer size")));
                }
            }
        }
        Ok(sc)
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
