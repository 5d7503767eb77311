//! Semantic comparison of two run directories (or two bare HF output folders), in the order and
//! with the tolerance classes of conformance/README.md: structure first, then JSON fields, then
//! tensors (and every other value inside torch / safetensors files), then the error. The first
//! difference is the one a reader needs; all are kept.
//!
//! * **Structure**: the set of files (relative paths) and the folders holding them.
//! * **JSON** (`result.json`, `trainer_state.json`, `config.json`, any `*.json`): keys and key
//!   order exact; ints, strings, booleans, nulls exact; an int never equals a float (`1` vs
//!   `1.0`); the float-math keys ([`is_float_math`]) within [`floats_close`]; wall-clock keys
//!   ([`crate::hf::state::is_volatile`]) ignored; path-valued keys ([`PATH_KEYS`]) compared relative to their
//!   output_dir; `transformers_version` in `config.json` only noted ([`Report::notes`]).
//! * **Tensors** (`model.safetensors`, `pytorch_model.bin`, `optimizer.pt`, `scheduler.pt`,
//!   `rng_state.pth`, `training_args.bin`, any torch zip): the loaded value trees
//!   ([`crate::formats::torch_format::load`], [`crate::formats::safetensors::load`]) with structure, dict keys and
//!   their order, class names, ints, strings, bools and bytes (numpy arrays are their bytes)
//!   exact; Python floats and float tensor elements within the float class; dtypes and shapes
//!   exact; integer / bool tensors (the rng `cpu` ByteTensor) exact. Other files: bytes exact.
//! * **Error**: `result.json`'s `error` type and message exact.
use crate::formats::pyjson::{self, PyJson};
use crate::formats::torch_format::{self, DType, Tensor, Value};
use crate::hf::state::is_volatile;
use std::collections::BTreeSet;
use std::fmt;
use std::path::{Path, PathBuf};

mod json;
mod torch;

use json::JsonCx;
use torch::TorchCx;
pub use torch::{compare_tensor, value_repr};

/// Relative bound of the "float math" class, with an absolute floor for values near zero.
pub const FLOAT_RTOL: f64 = 1e-5;
pub const FLOAT_ATOL: f64 = 1e-7;

/// Keys whose string values are paths: compared relative to the output_dir of their side.
pub const PATH_KEYS: [&str; 3] = ["best_model_checkpoint", "output_dir", "logging_dir"];

/// The stages of a comparison, in the order they are reported.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Stage {
    Structure,
    Json,
    Tensor,
    Error,
}

impl Stage {
    pub fn label(self) -> &'static str {
        match self {
            Stage::Structure => "structure",
            Stage::Json => "json",
            Stage::Tensor => "tensor",
            Stage::Error => "error",
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Difference {
    pub stage: Stage,
    /// File (relative to the run directory) and, for JSON or torch values, the field path.
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
    /// In reporting order: by stage, then by file path, then in field order.
    pub differences: Vec<Difference>,
    /// Differences that only name the writing library's version: reported, never failures.
    pub notes: Vec<String>,
    /// Files present on both sides and compared.
    pub files_compared: usize,
    /// Whether the two sides were run directories (result.json) or bare output folders.
    pub bare: bool,
}

impl Report {
    pub fn is_clean(&self) -> bool {
        self.differences.is_empty()
    }

    /// The first difference in reporting order (structure before JSON before tensors before the
    /// error).
    pub fn first(&self) -> Option<&Difference> {
        self.differences.iter().min_by_key(|d| d.stage)
    }

    /// How many differences each stage has.
    pub fn count(&self, stage: Stage) -> usize {
        self.differences.iter().filter(|d| d.stage == stage).count()
    }

    /// The readable report: the first difference plainly at the top, then all of them (at most
    /// `cap` lines, with a count of the rest), then the notes.
    pub fn render(&self, expected: &Path, actual: &Path, cap: usize) -> String {
        let mut s = String::new();
        let kind = if self.bare { "output folders" } else { "run directories" };
        s.push_str(&format!("expected: {}\nactual:   {}\n", expected.display(), actual.display()));
        match self.first() {
            None => s.push_str(&format!("no differences ({kind}, {} files compared)\n", self.files_compared)),
            Some(d) => {
                s.push_str(&format!("\nFIRST DIFFERENCE ({}): {d}\n", d.stage.label()));
                let per_stage: Vec<String> = [Stage::Structure, Stage::Json, Stage::Tensor, Stage::Error]
                    .iter()
                    .filter(|st| self.count(**st) > 0)
                    .map(|st| format!("{} {}", self.count(*st), st.label()))
                    .collect();
                s.push_str(&format!(
                    "\n{} difference(s) ({}), {} files compared:\n",
                    self.differences.len(),
                    per_stage.join(", "),
                    self.files_compared
                ));
                for d in self.differences.iter().take(cap) {
                    s.push_str(&format!("  [{}] {d}\n", d.stage.label()));
                }
                if self.differences.len() > cap {
                    s.push_str(&format!("  ... and {} more\n", self.differences.len() - cap));
                }
            }
        }
        if !self.notes.is_empty() {
            s.push_str("\nnotes (reported, not failures):\n");
            for n in &self.notes {
                s.push_str(&format!("  {n}\n"));
            }
        }
        s
    }

    fn push(&mut self, stage: Stage, place: impl Into<String>, what: impl Into<String>) {
        self.differences.push(Difference { stage, place: place.into(), what: what.into() });
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

/// One side of a comparison: its root and the spellings of its output_dir (for path fields).
struct Side {
    root: PathBuf,
    out_dirs: Vec<String>,
}

impl Side {
    fn new(root: &Path, files: &BTreeSet<String>, bare: bool) -> Side {
        let mut out_dirs = Vec::new();
        if bare {
            // What HF recorded as output_dir (training_args.bin), else the folder as given.
            if let Some(ta) = files.iter().find(|f| f.ends_with("training_args.bin")) {
                if let Ok(v) = torch_format::load(root.join(ta)) {
                    if let Some(s) = v.get("output_dir").and_then(|o| o.as_str()) {
                        out_dirs.push(s.to_string());
                    }
                }
            }
            out_dirs.push(root.to_string_lossy().into_owned());
            if let Ok(c) = root.canonicalize() {
                out_dirs.push(c.to_string_lossy().into_owned());
            }
        } else {
            // The runner contract: output_dir="output", relative to the run directory.
            out_dirs.push("output".to_string());
        }
        Side { root: root.to_path_buf(), out_dirs }
    }

    /// A path as HF recorded it, relative to this side's output_dir (`<output_dir>/checkpoint-8`).
    fn relative(&self, p: &str) -> String {
        let n = crate::policy::rotation::normalize(p);
        for d in &self.out_dirs {
            let d = crate::policy::rotation::normalize(d);
            if n == d {
                return "<output_dir>".into();
            }
            if let Some(rest) = n.strip_prefix(&format!("{d}/")) {
                return format!("<output_dir>/{rest}");
            }
        }
        n
    }
}

/// Compares `expected` (e.g. a golden run directory) with `actual`.
///
/// A run directory holds `result.json` (and `output/`); when neither side has one, both are
/// taken as bare HF output folders and only their trees are compared.
pub fn compare_run_dirs(expected: &Path, actual: &Path) -> Result<Report, DiffError> {
    let (te, ta) = (tree(expected)?, tree(actual)?);
    let bare = !te.contains("result.json") && !ta.contains("result.json");
    let mut rep = Report { bare, ..Report::default() };
    let (se, sa) = (Side::new(expected, &te, bare), Side::new(actual, &ta, bare));

    // 1. Structure: a missing or unexpected folder is one difference (its files are counted).
    let structure = |only: Vec<&String>, other_has: &BTreeSet<String>, what: &str, rep: &mut Report| {
        for p in &only {
            let under_reported_folder = Path::new(p.trim_end_matches('/'))
                .ancestors()
                .skip(1)
                .filter(|a| !a.as_os_str().is_empty())
                .any(|a| !other_has.contains(&format!("{}/", a.display())));
            if under_reported_folder {
                continue;
            }
            if p.ends_with('/') {
                let n = only.iter().filter(|q| !q.ends_with('/') && q.starts_with(p.as_str())).count();
                rep.push(Stage::Structure, p.as_str(), format!("{what} folder ({n} file(s))"));
            } else {
                rep.push(Stage::Structure, p.as_str(), format!("{what} file"));
            }
        }
    };
    structure(te.difference(&ta).collect(), &ta, "missing (expected, not written):", &mut rep);
    structure(ta.difference(&te).collect(), &te, "unexpected (written, not expected):", &mut rep);

    // 2-4. Values of the files both sides have.
    for p in te.intersection(&ta) {
        if p.ends_with('/') {
            continue;
        }
        rep.files_compared += 1;
        compare_file(p, &se, &sa, &mut rep);
    }
    // Reporting order: stage, then the order found (file path, field order).
    rep.differences.sort_by_key(|d| d.stage);
    Ok(rep)
}

fn compare_file(rel: &str, se: &Side, sa: &Side, rep: &mut Report) {
    let (fe, fa) = (se.root.join(rel), sa.root.join(rel));
    let name = Path::new(rel).file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    // Equal bytes load as equal values in every stage (a torch file's random serialization id
    // aside): the common case, since the Rust trainer writes HF's bytes; nothing to parse then.
    if let (Ok(a), Ok(b)) = (std::fs::read(&fe), std::fs::read(&fa)) {
        if a == b || (is_torch_bytes(&name, &a) && mask_serialization_id(a) == mask_serialization_id(b)) {
            return;
        }
    }
    if name.ends_with(".json") {
        match (pyjson::read_file(&fe), pyjson::read_file(&fa)) {
            (Ok(je), Ok(ja)) => {
                let mut cx = JsonCx { file: rel, se, sa, rep, config: name == "config.json", best_exact: false };
                if rel == "result.json" {
                    cx.result(&je, &ja);
                } else {
                    cx.value(&je, &ja, "");
                }
            }
            (Ok(_), Err(e)) => rep.push(Stage::Json, rel, format!("not valid JSON: {}", short_err(&e.to_string()))),
            (Err(e), Ok(_)) => rep.push(Stage::Json, rel, format!("expected file is not valid JSON ({})", short_err(&e.to_string()))),
            (Err(_), Err(_)) => compare_bytes(rel, &fe, &fa, Stage::Json, rep),
        }
    } else if name.ends_with(".safetensors") {
        match (crate::formats::safetensors::load(&fe), crate::formats::safetensors::load(&fa)) {
            (Ok((he, te)), Ok((ha, ta))) => {
                if he.metadata != ha.metadata {
                    rep.push(Stage::Tensor, format!("{rel} __metadata__"), format!("expected {:?}, got {:?}", he.metadata, ha.metadata));
                }
                let ne: Vec<&str> = te.iter().map(|(n, _)| n.as_str()).collect();
                let na: Vec<&str> = ta.iter().map(|(n, _)| n.as_str()).collect();
                if ne != na {
                    rep.push(Stage::Tensor, rel, format!("tensor names: expected {ne:?}, got {na:?}"));
                }
                for (n, t) in &te {
                    if let Some((_, u)) = ta.iter().find(|(m, _)| m == n) {
                        compare_tensor(t, u, &format!("{rel} {n}"), rep);
                    }
                }
            }
            (Ok(_), Err(e)) => rep.push(Stage::Tensor, rel, format!("unreadable: {}", short_err(&e.to_string()))),
            (Err(e), Ok(_)) => rep.push(Stage::Tensor, rel, format!("expected file is unreadable ({})", short_err(&e.to_string()))),
            (Err(_), Err(_)) => compare_bytes(rel, &fe, &fa, Stage::Tensor, rep),
        }
    } else if is_torch_file(&fe) || is_torch_file(&fa) {
        match (torch_format::load(&fe), torch_format::load(&fa)) {
            (Ok(ve), Ok(va)) => {
                let mut cx = TorchCx { file: rel, se, sa, rep };
                cx.value(&ve, &va, "");
            }
            (Ok(_), Err(e)) => rep.push(Stage::Tensor, rel, format!("unreadable: {}", short_err(&e.to_string()))),
            (Err(e), Ok(_)) => rep.push(Stage::Tensor, rel, format!("expected file is unreadable ({})", short_err(&e.to_string()))),
            (Err(_), Err(_)) => compare_bytes(rel, &fe, &fa, Stage::Tensor, rep),
        }
    } else {
        compare_bytes(rel, &fe, &fa, Stage::Tensor, rep);
    }
}

/// A file named like a torch.save file.
fn torch_name(p: &Path) -> bool {
    matches!(p.extension().and_then(|e| e.to_str()), Some("pt" | "pth" | "bin"))
}

/// [`is_torch_file`] on bytes already read.
fn is_torch_bytes(name: &str, bytes: &[u8]) -> bool {
    torch_name(Path::new(name)) || bytes.starts_with(b"PK\x03\x04")
}

/// A torch.save zip (by its first bytes), or a file named like one.
fn is_torch_file(p: &Path) -> bool {
    let by_name = torch_name(p);
    let mut magic = [0u8; 4];
    let by_magic = std::fs::File::open(p).and_then(|mut f| std::io::Read::read_exact(&mut f, &mut magic)).is_ok()
        && magic == *b"PK\x03\x04";
    by_name || by_magic
}

fn short_err(s: &str) -> String {
    shorten(s, 200)
}

fn shorten(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        format!("{}...", s.chars().take(n).collect::<String>())
    }
}

fn compare_bytes(rel: &str, fe: &Path, fa: &Path, stage: Stage, rep: &mut Report) {
    match (std::fs::read(fe), std::fs::read(fa)) {
        (Ok(a), Ok(b)) => {
            // Two torch files neither side can load (a file cut short): bytes, except torch's
            // random per-save serialization id, the one part of a torch file no two saves share.
            let (a, b) = if stage == Stage::Tensor { (mask_serialization_id(a), mask_serialization_id(b)) } else { (a, b) };
            if a != b {
                rep.push(stage, rel, bytes_what(&a, &b));
            }
        }
        (x, y) => {
            if x.is_ok() != y.is_ok() {
                rep.push(stage, rel, "unreadable on one side");
            }
        }
    }
}

/// Zeroes the content and CRC-32 of every `*/.data/serialization_id` record of a (possibly cut
/// short) torch zip: torch (2.1.2 among others) writes a random id there on every save, which the value
/// stage never sees (it is no part of the loaded value) but a byte comparison would.
pub(crate) fn mask_serialization_id(mut z: Vec<u8>) -> Vec<u8> {
    const NAME: &[u8] = b".data/serialization_id";
    let u16_at = |z: &[u8], i: usize| z.get(i..i + 2).map(|b| u16::from_le_bytes([b[0], b[1]]) as usize);
    let zero = |z: &mut Vec<u8>, from: usize, len: usize| {
        let end = (from + len).min(z.len());
        if from < end {
            z[from..end].fill(0);
        }
    };
    let mut i = 0;
    while i + 4 <= z.len() {
        match &z[i..i + 4] {
            b"PK\x03\x04" => {
                let (Some(n), Some(e)) = (u16_at(&z, i + 26), u16_at(&z, i + 28)) else { break };
                let name_end = (i + 30 + n).min(z.len());
                if z[(i + 30).min(name_end)..name_end].ends_with(NAME) {
                    let flags = u16_at(&z, i + 6).unwrap_or(0);
                    let mut len = z.get(i + 18..i + 22).map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize).unwrap_or(0);
                    let data = i + 30 + n + e;
                    if flags & 8 != 0 && len == 0 {
                        // Sizes in the data descriptor after the data (torch writes them so).
                        len = z.get(data..).and_then(|rest| rest.windows(4).position(|w| w == b"PK\x07\x08")).unwrap_or(z.len().saturating_sub(data));
                    }
                    zero(&mut z, i + 14, 4);
                    zero(&mut z, data, len);
                    if flags & 8 != 0 && z.get(data + len..data + len + 4) == Some(b"PK\x07\x08") {
                        zero(&mut z, data + len + 4, 4);
                    }
                }
                i += 4;
            }
            b"PK\x01\x02" => {
                let Some(n) = u16_at(&z, i + 28) else { break };
                let name_end = (i + 46 + n).min(z.len());
                if z[(i + 46).min(name_end)..name_end].ends_with(NAME) {
                    zero(&mut z, i + 16, 4);
                }
                i += 4;
            }
            _ => i += 1,
        }
    }
    z
}

fn bytes_what(a: &[u8], b: &[u8]) -> String {
    let first = a.iter().zip(b).position(|(x, y)| x != y).unwrap_or(a.len().min(b.len()));
    let n = a.iter().zip(b).filter(|(x, y)| x != y).count() + a.len().abs_diff(b.len());
    if a.len() != b.len() {
        format!("expected {} bytes, got {} (first difference at byte {first})", a.len(), b.len())
    } else {
        format!("{n} of {} bytes differ, first at byte {first}", a.len())
    }
}

/// Keys whose values come out of float math (losses, norms, rates, flops): compared within
/// the float class. Everything else, scripted metrics included, is exact. `best_metric` is float
/// math only when the best metric is a loss (decided per state, see [`best_metric_is_float_math`]).
pub fn is_float_math(key: &str) -> bool {
    matches!(key, "loss" | "train_loss" | "grad_norm" | "learning_rate" | "total_flos")
        || (key.starts_with("eval_") && key.ends_with("_loss"))
}

/// Whether a TrainerState's `best_metric` is a float-math value: the log_history keys holding
/// exactly that value are all float-math keys (a loss). A scripted metric is exact. When no
/// logged value matches, the float class applies.
pub fn best_metric_is_float_math(state: &PyJson) -> bool {
    let Some(best) = state.get("best_metric") else { return true };
    let mut keys = vec![];
    if let Some(PyJson::List(hist)) = state.get("log_history") {
        for e in hist {
            if let PyJson::Dict(d) = e {
                for (k, v) in d {
                    if k != "best_metric" && same_number(v, best) {
                        keys.push(k.as_str());
                    }
                }
            }
        }
    }
    keys.iter().all(|k| is_float_math(k))
}

fn same_number(a: &PyJson, b: &PyJson) -> bool {
    match (a, b) {
        (PyJson::Float(x), PyJson::Float(y)) => x.to_bits() == y.to_bits(),
        (PyJson::Int(x), PyJson::Int(y)) => x == y,
        _ => false,
    }
}

/// The float class: `|a - b| <= 1e-5 * max(|a|, |b|) + 1e-7`; NaN equals NaN, an infinity only
/// itself.
pub fn floats_close(a: f64, b: f64) -> bool {
    if a == b || (a.is_nan() && b.is_nan()) {
        return true;
    }
    if !a.is_finite() || !b.is_finite() {
        return false;
    }
    (a - b).abs() <= FLOAT_RTOL * a.abs().max(b.abs()) + FLOAT_ATOL
}

/// Exact float equality as Python's json would print it: same bits, NaN equals NaN.
fn floats_exact(a: f64, b: f64) -> bool {
    a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan())
}

fn json_show(v: &PyJson) -> String {
    let s = match v {
        PyJson::Float(x) => pyjson::float_repr(*x),
        other => pyjson::dumps(other, &pyjson::DumpOptions::default()).unwrap_or_else(|_| format!("{other:?}")),
    };
    shorten(&s, 120)
}

fn json_kind(v: &PyJson) -> &'static str {
    match v {
        PyJson::Null => "null",
        PyJson::Bool(_) => "bool",
        PyJson::Int(_) | PyJson::BigInt(_) => "int",
        PyJson::Float(_) => "float",
        PyJson::Str(_) => "string",
        PyJson::List(_) => "list",
        PyJson::Dict(_) => "object",
    }
}
#[cfg(test)]
mod tests {
    use super::torch::f16_to_f64;
    use super::*;

    #[test]
    fn float_class() {
        assert!(floats_close(1.0, 1.0 + 5e-6));
        assert!(!floats_close(1.0, 1.0 + 2e-5));
        assert!(floats_close(0.0, 5e-8));
        assert!(!floats_close(0.0, 2e-7));
        assert!(floats_close(f64::NAN, f64::NAN));
        assert!(floats_close(f64::INFINITY, f64::INFINITY));
        assert!(!floats_close(f64::INFINITY, f64::NEG_INFINITY));
        assert!(!floats_close(f64::NAN, 1.0));
    }

    #[test]
    fn halves_decode() {
        assert_eq!(f16_to_f64(0x3c00), 1.0);
        assert_eq!(f16_to_f64(0xc000), -2.0);
        assert_eq!(f16_to_f64(0x0001), 2f64.powi(-24));
        assert!(f16_to_f64(0x7e00).is_nan());
    }

    #[test]
    fn best_metric_class_follows_the_logged_key() {
        let s = pyjson::loads(r#"{"best_metric": 0.5, "log_history": [{"eval_loss": 0.5, "eval_acc": 0.7}]}"#).unwrap();
        assert!(best_metric_is_float_math(&s));
        let s = pyjson::loads(r#"{"best_metric": 0.7, "log_history": [{"eval_loss": 0.5, "eval_acc": 0.7}]}"#).unwrap();
        assert!(!best_metric_is_float_math(&s));
    }
}

