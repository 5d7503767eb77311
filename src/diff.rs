//! Semantic comparison of two run directories (or two bare HF output folders), in the order and
//! with the tolerance classes of conformance/README.md: structure first, then JSON fields, then
//! tensors, then the error. The first difference is the one a reader needs; all are kept.
use serde_json::Value;
use std::collections::BTreeSet;
use std::fmt;
use std::path::{Path, PathBuf};

/// Relative bound of the "float math" class, with an absolute floor for values near zero.
pub const FLOAT_RTOL: f64 = 1e-5;
pub const FLOAT_ATOL: f64 = 1e-7;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Stage {
    Structure,
    Json,
    Tensor,
    Error,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Difference {
    pub stage: Stage,
    /// File (relative to the run directory) and, for JSON, the field path.
    pub place: String,
    pub what: String,
}

impl fmt::Display for Difference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.place, self.what)
    }
}

#[derive(Debug, Default)]
pub struct Report {
    pub differences: Vec<Difference>,
    /// Differences that only name the writing library's version: reported, never failures.
    pub notes: Vec<String>,
}

impl Report {
    pub fn is_clean(&self) -> bool {
        self.differences.is_empty()
    }
    pub fn first(&self) -> Option<&Difference> {
        self.differences.iter().min_by_key(|d| d.stage)
    }
}

#[derive(Debug)]
pub struct DiffError {
    pub path: PathBuf,
    pub message: String,
}

impl fmt::Display for DiffError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path.display(), self.message)
    }
}

impl std::error::Error for DiffError {}

/// Every file below `root`, relative, and every folder holding one (trailing '/').
fn tree(root: &Path) -> Result<BTreeSet<String>, DiffError> {
    fn walk(root: &Path, dir: &Path, out: &mut BTreeSet<String>) -> std::io::Result<()> {
        for e in std::fs::read_dir(dir)? {
            let p = e?.path();
            let rel = p.strip_prefix(root).unwrap().to_string_lossy().into_owned();
            if p.is_dir() {
                walk(root, &p, out)?;
            } else {
                // A folder counts through the files in it: git cannot hold an empty folder, so
                // a fresh clone of golden/ has none (HF leaves an empty output/ when it only
                // evaluated).
                let mut anc = Path::new(&rel).parent();
                while let Some(a) = anc.filter(|a| !a.as_os_str().is_empty()) {
                    out.insert(format!("{}/", a.display()));
                    anc = a.parent();
                }
                out.insert(rel);
            }
        }
        Ok(())
    }
    let mut out = BTreeSet::new();
    if root.exists() {
        walk(root, root, &mut out).map_err(|e| DiffError { path: root.to_path_buf(), message: e.to_string() })?;
    }
    Ok(out)
}

/// Compares `expected` (e.g. a golden run directory) with `actual`.
pub fn compare_run_dirs(expected: &Path, actual: &Path) -> Result<Report, DiffError> {
    let mut rep = Report::default();
    let (te, ta) = (tree(expected)?, tree(actual)?);
    for p in te.difference(&ta) {
        rep.differences.push(Difference { stage: Stage::Structure, place: p.clone(), what: "missing (expected, not written)".into() });
    }
    for p in ta.difference(&te) {
        rep.differences.push(Difference { stage: Stage::Structure, place: p.clone(), what: "unexpected (written, not expected)".into() });
    }
    for p in te.intersection(&ta) {
        if p.ends_with('/') {
            continue;
        }
        let (fe, fa) = (expected.join(p), actual.join(p));
        if p.ends_with(".json") {
            let (je, ja) = (read_json(&fe)?, read_json(&fa)?);
            if p == "result.json" {
                compare_result(&je, &ja, &mut rep);
            } else {
                compare_json(&je, &ja, p, "", &mut rep);
            }
        }
    }
    Ok(rep)
}

fn compare_result(e: &Value, a: &Value, rep: &mut Report) {
    let (ee, ea) = (&e["error"], &a["error"]);
    if ee != ea {
        let show = |v: &Value| match v {
            Value::Null => "no error".to_string(),
            v => format!("{}: {}", v["type"].as_str().unwrap_or("?"), v["message"].as_str().unwrap_or("?")),
        };
        rep.differences.push(Difference {
            stage: Stage::Error,
            place: "result.json error".into(),
            what: format!("expected {}, got {}", show(ee), show(ea)),
        });
    }
    if e["hf_version"] != a["hf_version"] {
        rep.differences.push(Difference {
            stage: Stage::Json,
            place: "result.json hf_version".into(),
            what: format!("expected {}, got {}", e["hf_version"], a["hf_version"]),
        });
    }
    compare_json(&e["final_state"], &a["final_state"], "result.json", "final_state", rep);
}

/// Reads JSON as Python writes it: NaN, Infinity and -Infinity become the strings "NaN",
/// "Infinity", "-Infinity" so that they compare equal to themselves.
pub fn read_json(path: &Path) -> Result<Value, DiffError> {
    let text = std::fs::read_to_string(path).map_err(|e| DiffError { path: path.to_path_buf(), message: e.to_string() })?;
    parse_py_json(&text).map_err(|e| DiffError { path: path.to_path_buf(), message: format!("not valid JSON: {e}") })
}

pub fn parse_py_json(text: &str) -> Result<Value, serde_json::Error> {
    let mut out = String::with_capacity(text.len());
    let mut in_str = false;
    let mut esc = false;
    let mut rest = text;
    while let Some(c) = rest.chars().next() {
        if in_str {
            out.push(c);
            if esc {
                esc = false;
            } else if c == '\\' {
                esc = true;
            } else if c == '"' {
                in_str = false;
            }
            rest = &rest[c.len_utf8()..];
            continue;
        }
        let mut matched = false;
        for tok in ["-Infinity", "Infinity", "NaN"] {
            if rest.starts_with(tok) {
                out.push('"');
                out.push_str(tok);
                out.push('"');
                rest = &rest[tok.len()..];
                matched = true;
                break;
            }
        }
        if matched {
            continue;
        }
        if c == '"' {
            in_str = true;
        }
        out.push(c);
        rest = &rest[c.len_utf8()..];
    }
    serde_json::from_str(&out)
}

/// Keys whose values are wall-clock measurements: never compared.
pub fn is_volatile(key: &str) -> bool {
    key.ends_with("_runtime") || key.ends_with("_per_second")
}

/// Keys whose values come out of float math (losses, norms, rates, flops): compared within
/// the float class. Everything else, scripted metrics included, is exact.
pub fn is_float_math(key: &str) -> bool {
    matches!(key, "loss" | "train_loss" | "grad_norm" | "learning_rate" | "total_flos" | "best_metric")
        || (key.starts_with("eval_") && key.ends_with("_loss"))
}

pub fn floats_close(a: f64, b: f64) -> bool {
    (a - b).abs() <= FLOAT_RTOL * a.abs().max(b.abs()) + FLOAT_ATOL
}

fn compare_json(e: &Value, a: &Value, file: &str, path: &str, rep: &mut Report) {
    let place = || if path.is_empty() { file.to_string() } else { format!("{file} {path}") };
    match (e, a) {
        (Value::Object(me), Value::Object(ma)) => {
            let ke: Vec<&String> = me.keys().filter(|k| !is_volatile(k)).collect();
            let ka: Vec<&String> = ma.keys().filter(|k| !is_volatile(k)).collect();
            for k in &ke {
                if !ma.contains_key(k.as_str()) {
                    rep.differences.push(Difference { stage: Stage::Json, place: place(), what: format!("key {k:?} missing") });
                }
            }
            for k in &ka {
                if !me.contains_key(k.as_str()) {
                    rep.differences.push(Difference { stage: Stage::Json, place: place(), what: format!("unexpected key {k:?}") });
                }
            }
            let common_e: Vec<_> = ke.iter().filter(|k| ma.contains_key(k.as_str())).collect();
            let common_a: Vec<_> = ka.iter().filter(|k| me.contains_key(k.as_str())).collect();
            if common_e != common_a {
                rep.differences.push(Difference { stage: Stage::Json, place: place(), what: "keys in a different order".into() });
            }
            for k in ke {
                if let Some(va) = ma.get(k.as_str()) {
                    let sub = if path.is_empty() { k.clone() } else { format!("{path}.{k}") };
                    if k == "transformers_version" && file.ends_with("config.json") {
                        if me[k.as_str()] != *va {
                            rep.notes.push(format!("{file} {sub}: {} vs {} (library version only)", me[k.as_str()], va));
                        }
                        continue;
                    }
                    if is_float_math(k) {
                        if let (Some(x), Some(y)) = (me[k.as_str()].as_f64(), va.as_f64()) {
                            if !floats_close(x, y) {
                                rep.differences.push(Difference {
                                    stage: Stage::Json,
                                    place: format!("{file} {sub}"),
                                    what: format!("expected {x}, got {y} (beyond float class {FLOAT_RTOL:e} rel)"),
                                });
                            }
                            continue;
                        }
                    }
                    compare_json(&me[k.as_str()], va, file, &sub, rep);
                }
            }
        }
        (Value::Array(ve), Value::Array(va)) => {
            if ve.len() != va.len() {
                rep.differences.push(Difference {
                    stage: Stage::Json,
                    place: place(),
                    what: format!("expected {} entries, got {}", ve.len(), va.len()),
                });
            }
            for (i, (x, y)) in ve.iter().zip(va).enumerate() {
                compare_json(x, y, file, &format!("{path}[{i}]"), rep);
            }
        }
        (Value::Number(x), Value::Number(y)) => {
            // ints and floats are different JSON values in Python (1 vs 1.0): exact class.
            if x.is_f64() != y.is_f64() || x.as_f64() != y.as_f64() {
                rep.differences.push(Difference { stage: Stage::Json, place: place(), what: format!("expected {x}, got {y}") });
            }
        }
        _ => {
            if e != a {
                rep.differences.push(Difference { stage: Stage::Json, place: place(), what: format!("expected {e}, got {a}") });
            }
        }
    }
}
