//! Loading CONFIG: a scenario file, a JSON/YAML file of TrainingArguments keyword arguments, or
//! a `training_args.bin`. Every failure is the tool's own error naming the file (and the field
//! where there is one) and what to write instead.

use crate::world::scenario::Scenario;
use serde_json::{Map, Value};
use std::path::{Path, PathBuf};

/// What kind of file CONFIG was.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A scenario file of the conformance suite (format v1): it brings its own data, scripted
    /// metrics, early stopping and `finally` calls, and its args are in HF 5.x spelling (the
    /// runner spells them per version, conformance/README.md).
    Scenario,
    /// TrainingArguments keyword arguments exactly as a user passes them: each name is passed as
    /// written, so a spelling the version lacks is that version's TypeError.
    Kwargs,
    /// The pickled TrainingArguments of a real run: the arguments that differ from its release's
    /// defaults, in format v1 spelling (the user's own spelling is not in the file).
    TrainingArgsBin,
}

impl Kind {
    pub fn label(self) -> &'static str {
        match self {
            Kind::Scenario => "scenario",
            Kind::Kwargs => "kwargs",
            Kind::TrainingArgsBin => "training_args.bin",
        }
    }
}

/// A loaded CONFIG.
#[derive(Debug, Clone)]
pub struct Config {
    pub path: PathBuf,
    pub kind: Kind,
    /// The keyword arguments, in the order written (call order decides which unknown keyword
    /// HF names in its TypeError).
    pub kwargs: Map<String, Value>,
    /// A scenario file's scenario (None for the other kinds).
    pub scenario: Option<Scenario>,
    /// What the output says about where the arguments came from (a training_args.bin).
    pub note: Option<String>,
}

impl Config {
    /// Loads CONFIG, telling the kinds apart by content: a zip archive (or a `.bin` name) is a
    /// `training_args.bin`; a JSON/YAML mapping with a `name` or `args` field is a scenario
    /// file (TrainingArguments has neither field); any other mapping is keyword arguments.
    pub fn load(path: &Path) -> Result<Config, String> {
        let shown = path.display();
        let bytes = std::fs::read(path).map_err(|e| format!("{shown}: cannot read the config file: {e}"))?;
        let ext = path.extension().and_then(|e| e.to_str()).unwrap_or("").to_ascii_lowercase();
        if bytes.starts_with(b"PK\x03\x04") || ext == "bin" {
            return load_training_args_bin(path);
        }
        let text = String::from_utf8(bytes)
            .map_err(|_| format!("{shown}: not UTF-8 text; CONFIG is a JSON or YAML file of TrainingArguments keyword arguments, a scenario file, or a training_args.bin"))?;
        let value = parse_text(path, &text, &ext)?;
        let Value::Object(obj) = value else {
            return Err(format!(
                "{shown}: the top level must be a mapping of TrainingArguments keyword arguments (e.g. `max_steps: 50`), found {}",
                kind_of(&value)
            ));
        };
        if obj.contains_key("name") || obj.contains_key("args") {
            if ext != "json" && serde_json::from_str::<Value>(&text).is_err() {
                return Err(format!("{shown}: looks like a scenario file (it has a `name` or `args` field), but scenario files are JSON (conformance/README.md); write it as JSON, or remove `name`/`args` to use it as keyword arguments"));
            }
            let sc = Scenario::load(path).map_err(|e| e.to_string())?;
            return Ok(Config { path: path.to_path_buf(), kind: Kind::Scenario, kwargs: sc.args.clone(), scenario: Some(sc), note: None });
        }
        Ok(Config { path: path.to_path_buf(), kind: Kind::Kwargs, kwargs: obj, scenario: None, note: None })
    }
}

/// JSON for `.json`, YAML for `.yaml`/`.yml`; anything else is tried as JSON, then as YAML.
fn parse_text(path: &Path, text: &str, ext: &str) -> Result<Value, String> {
    let shown = path.display();
    let json = || serde_json::from_str::<Value>(text).map_err(|e| format!("{shown}: not valid JSON: {e}"));
    let yaml = || {
        if text.trim().is_empty() {
            return Err(format!("{shown}: the file is empty; write TrainingArguments keyword arguments, e.g. `max_steps: 50`"));
        }
        serde_saphyr::from_str::<Value>(text).map_err(|e| format!("{shown}: not valid YAML: {e}"))
    };
    match ext {
        "json" => json(),
        "yaml" | "yml" => yaml(),
        _ => json().or_else(|_| yaml()),
    }
}

fn kind_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "a mapping",
    }
}

/// A `training_args.bin`: the arguments that differ from its release's defaults become the
/// keyword arguments, in format v1 spelling ([`crate::answers::inspect::training_args`], the restricted
/// unpickler: nothing in the file is executed). They are read against the newest profiled release
/// whose argument list the file fits; which releases fit is said in the output.
fn load_training_args_bin(path: &Path) -> Result<Config, String> {
    let file = crate::answers::inspect::training_args::read_training_args(path)?;
    let (kwargs, note) = match (file.profiles.first(), file.profiles.last()) {
        (Some(first), Some(last)) => {
            let fits = if first == last { format!("HF {first}") } else { format!("HF {first} .. {last}") };
            (file.kwargs.clone(), format!("a pickled {} whose argument list fits {fits}; its arguments that differ from {last}'s defaults are the keyword arguments", file.class))
        }
        _ => {
            let newest = crate::hf::profile::Profile::get(crate::hf::profile::newest())?;
            (file.kwargs(&newest), format!("a pickled {} whose argument list fits no profiled release; read against {}'s defaults", file.class, newest.version))
        }
    };
    Ok(Config { path: path.to_path_buf(), kind: Kind::TrainingArgsBin, kwargs, scenario: None, note: Some(note) })
}
