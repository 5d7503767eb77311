//! Semantic comparison of two run directories (or two bare HF output folders), in the order and
//! with the tolerance classes of conformance/README.md: structure first, then JSON fields, then
//! tensors (and every other value inside torch / safetensors files), then the error. The first
//! difference is the one a reader needs; all are kept.
//!
//! * **Structure**: the set of files (relative paths) and the folders holding them.
//! * **JSON** (`result.json`, `trainer_state.json`, `config.json`, any `*.json`): keys and key
//!   order exact; ints, strings, booleans, nulls exact; an int never equals a float (`1` vs
//!   `1.0`); the float-math keys ([`is_float_math`]) within [`floats_close`]; wall-clock keys
//!   ([`is_volatile`]) ignored; path-valued keys ([`PATH_KEYS`]) compared relative to their
//!   output_dir; `transformers_version` in `config.json` only noted ([`Report::notes`]).
//! * **Tensors** (`model.safetensors`, `pytorch_model.bin`, `optimizer.pt`, `scheduler.pt`,
//!   `rng_state.pth`, `training_args.bin`, any torch zip): the loaded value trees
//!   ([`crate::torch_format::load`], [`crate::safetensors::load`]) with structure, dict keys and
//!   their order, class names, ints, strings, bools and bytes (numpy arrays are their bytes)
//!   exact; Python floats and float tensor elements within the float class; dtypes and shapes
//!   exact; integer / bool tensors (the rng `cpu` ByteTensor) exact. Other files: bytes exact.
//! * **Error**: `result.json`'s `error` type and message exact.
use crate::pyjson::{self, PyJson};
use crate::torch_format::{self, DType, Tensor, Value};
use std::collections::BTreeSet;
use std::fmt;
use std::path::{Path, PathBuf};

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
        let n = crate::rotation::normalize(p);
        for d in &self.out_dirs {
            let d = crate::rotation::normalize(d);
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
        match (crate::safetensors::load(&fe), crate::safetensors::load(&fa)) {
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

/// A torch.save zip (by its first bytes), or a file named like one.
fn is_torch_file(p: &Path) -> bool {
    let by_name = matches!(p.extension().and_then(|e| e.to_str()), Some("pt" | "pth" | "bin"));
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

fn bytes_what(a: &[u8], b: &[u8]) -> String {
    let first = a.iter().zip(b).position(|(x, y)| x != y).unwrap_or(a.len().min(b.len()));
    let n = a.iter().zip(b).filter(|(x, y)| x != y).count() + a.len().abs_diff(b.len());
    if a.len() != b.len() {
        format!("expected {} bytes, got {} (first difference at byte {first})", a.len(), b.len())
    } else {
        format!("{n} of {} bytes differ, first at byte {first}", a.len())
    }
}

/// Keys whose values are wall-clock measurements: never compared.
pub fn is_volatile(key: &str) -> bool {
    key.ends_with("_runtime") || key.ends_with("_per_second")
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

/// Comparing two JSON values of one file.
struct JsonCx<'a> {
    file: &'a str,
    se: &'a Side,
    sa: &'a Side,
    rep: &'a mut Report,
    config: bool,
    /// Within a TrainerState whose best_metric is a scripted (exact) metric.
    best_exact: bool,
}

impl JsonCx<'_> {
    fn place(&self, path: &str) -> String {
        if path.is_empty() {
            self.file.to_string()
        } else {
            format!("{} {path}", self.file)
        }
    }

    fn diff(&mut self, path: &str, what: String) {
        let place = self.place(path);
        self.rep.push(Stage::Json, place, what);
    }

    /// result.json: the error is its own stage; everything else is JSON.
    fn result(&mut self, e: &PyJson, a: &PyJson) {
        let (ee, ea) = (e.get("error"), a.get("error"));
        if ee != ea {
            let show = |v: Option<&PyJson>| match v {
                None => "no error key".to_string(),
                Some(PyJson::Null) => "no error".to_string(),
                Some(v) => {
                    let s = |k| match v.get(k) {
                        Some(PyJson::Str(s)) => s.clone(),
                        Some(o) => json_show(o),
                        None => "?".into(),
                    };
                    format!("{}: {}", s("type"), s("message"))
                }
            };
            let (te, ta) = (ee.and_then(|v| v.get("type")), ea.and_then(|v| v.get("type")));
            let (me, ma) = (ee.and_then(|v| v.get("message")), ea.and_then(|v| v.get("message")));
            let what = match (te, me, ma) {
                (Some(t), Some(PyJson::Str(x)), Some(PyJson::Str(y))) if te == ta => {
                    let at = x.chars().zip(y.chars()).position(|(c, d)| c != d).unwrap_or(x.chars().count().min(y.chars().count()));
                    format!(
                        "same type {}, message differs at character {at}: expected {:?}, got {:?}",
                        json_show(t),
                        shorten(x, 400),
                        shorten(y, 400)
                    )
                }
                _ => format!("expected {}, got {}", shorten(&show(ee), 400), shorten(&show(ea), 400)),
            };
            self.rep.push(Stage::Error, "result.json error", what);
        }
        self.value_skipping(e, a, "", Some("error"));
    }

    fn value(&mut self, e: &PyJson, a: &PyJson, path: &str) {
        self.value_skipping(e, a, path, None)
    }

    fn value_skipping(&mut self, e: &PyJson, a: &PyJson, path: &str, skip: Option<&str>) {
        match (e, a) {
            (PyJson::Dict(me), PyJson::Dict(ma)) => {
                let keep = |k: &String| !is_volatile(k) && Some(k.as_str()) != skip;
                let ke: Vec<&String> = me.iter().map(|(k, _)| k).filter(|k| keep(k)).collect();
                let ka: Vec<&String> = ma.iter().map(|(k, _)| k).filter(|k| keep(k)).collect();
                for k in &ke {
                    if !ka.contains(k) {
                        self.diff(path, format!("key {k:?} missing"));
                    }
                }
                for k in &ka {
                    if !ke.contains(k) {
                        self.diff(path, format!("unexpected key {k:?}"));
                    }
                }
                let common_e: Vec<_> = ke.iter().filter(|k| ka.contains(k)).collect();
                let common_a: Vec<_> = ka.iter().filter(|k| ke.contains(k)).collect();
                if common_e != common_a {
                    let pos = common_e.iter().zip(&common_a).position(|(x, y)| x != y).unwrap_or(0);
                    self.diff(
                        path,
                        format!("keys in a different order (at position {pos}: expected {:?}, got {:?})", common_e[pos], common_a[pos]),
                    );
                }
                // A TrainerState: decide the class of its best_metric from its own log_history.
                let outer_best = self.best_exact;
                if me.iter().any(|(k, _)| k == "best_metric") && me.iter().any(|(k, _)| k == "log_history") {
                    self.best_exact = !best_metric_is_float_math(e);
                }
                for (k, ve) in me {
                    if !keep(k) {
                        continue;
                    }
                    let Some(va) = a.get(k) else { continue };
                    let sub = if path.is_empty() { k.clone() } else { format!("{path}.{k}") };
                    self.field(k, ve, va, &sub);
                }
                self.best_exact = outer_best;
            }
            (PyJson::List(ve), PyJson::List(va)) => {
                if ve.len() != va.len() {
                    self.diff(path, format!("expected {} entries, got {}", ve.len(), va.len()));
                }
                for (i, (x, y)) in ve.iter().zip(va).enumerate() {
                    self.value(x, y, &format!("{path}[{i}]"));
                }
            }
            (PyJson::Float(x), PyJson::Float(y)) => {
                if !floats_exact(*x, *y) {
                    self.diff(path, format!("expected {}, got {}", pyjson::float_repr(*x), pyjson::float_repr(*y)));
                }
            }
            _ => {
                if json_kind(e) != json_kind(a) {
                    // ints and floats are different JSON values in Python (1 vs 1.0).
                    self.diff(path, format!("expected {} ({}), got {} ({})", json_show(e), json_kind(e), json_show(a), json_kind(a)));
                } else if e != a {
                    self.diff(path, format!("expected {}, got {}", json_show(e), json_show(a)));
                }
            }
        }
    }

    fn field(&mut self, k: &str, ve: &PyJson, va: &PyJson, sub: &str) {
        if k == "transformers_version" && self.config {
            if ve != va {
                let note = format!("{} {sub}: {} vs {} (names the writing library)", self.file, json_show(ve), json_show(va));
                self.rep.notes.push(note);
            }
            return;
        }
        if PATH_KEYS.contains(&k) {
            if let (PyJson::Str(x), PyJson::Str(y)) = (ve, va) {
                let (rx, ry) = (self.se.relative(x), self.sa.relative(y));
                if rx != ry {
                    self.diff(sub, format!("expected {x:?} ({rx}), got {y:?} ({ry}) (relative to output_dir)"));
                }
                return;
            }
        }
        let float_math = is_float_math(k) || (k == "best_metric" && !self.best_exact);
        if float_math {
            if let (PyJson::Float(x), PyJson::Float(y)) = (ve, va) {
                if !floats_close(*x, *y) {
                    self.diff(
                        sub,
                        format!(
                            "expected {}, got {} (beyond the float class: rel {FLOAT_RTOL:e}, abs {FLOAT_ATOL:e})",
                            pyjson::float_repr(*x),
                            pyjson::float_repr(*y)
                        ),
                    );
                }
                return;
            }
        }
        self.value(ve, va, sub);
    }
}

/// Comparing two loaded torch files.
struct TorchCx<'a> {
    file: &'a str,
    se: &'a Side,
    sa: &'a Side,
    rep: &'a mut Report,
}

fn kind_name(v: &Value) -> &'static str {
    match v.resolved() {
        Value::None => "None",
        Value::Bool(_) => "bool",
        Value::Int(_) | Value::BigInt(_) => "int",
        Value::Float(_) => "float",
        Value::Str(_) => "str",
        Value::Bytes(_) => "bytes",
        Value::List(_) => "list",
        Value::Tuple(_) => "tuple",
        Value::Dict(_) => "dict",
        Value::Set(_) => "set",
        Value::FrozenSet(_) => "frozenset",
        Value::Global(_) => "global",
        Value::Object(_) => "object",
        Value::Tensor(_) => "tensor",
        Value::Shared(_) => unreachable!("resolved"),
    }
}

/// A short Python-like repr of a value for messages.
pub fn value_repr(v: &Value) -> String {
    let s = match v.resolved() {
        Value::None => "None".into(),
        Value::Bool(b) => if *b { "True" } else { "False" }.into(),
        Value::Int(i) => i.to_string(),
        Value::BigInt(b) => format!("<int of {} bytes>", b.len()),
        Value::Float(f) => pyjson::float_repr(*f),
        Value::Str(s) => format!("'{s}'"),
        Value::Bytes(b) => format!("<{} bytes>", b.len()),
        Value::List(x) => format!("[{}]", x.iter().map(value_repr).collect::<Vec<_>>().join(", ")),
        Value::Tuple(x) => format!("({})", x.iter().map(value_repr).collect::<Vec<_>>().join(", ")),
        Value::Set(x) | Value::FrozenSet(x) => format!("{{{}}}", x.iter().map(value_repr).collect::<Vec<_>>().join(", ")),
        Value::Dict(d) => format!("{{{}}}", d.iter().map(|(k, v)| format!("{}: {}", value_repr(k), value_repr(v))).collect::<Vec<_>>().join(", ")),
        Value::Global(g) => g.to_string(),
        Value::Object(o) => {
            let args = o.args.iter().map(value_repr).collect::<Vec<_>>().join(", ");
            format!("{}({args})", o.class)
        }
        Value::Tensor(t) => format!("tensor({}, shape {:?})", t.dtype().torch_name(), t.shape),
        Value::Shared(_) => unreachable!("resolved"),
    };
    shorten(&s, 120)
}

fn key_path(path: &str, k: &Value) -> String {
    match k.resolved() {
        Value::Str(s) => format!("{path}['{s}']"),
        other => format!("{path}[{}]", value_repr(other)),
    }
}

impl TorchCx<'_> {
    fn diff(&mut self, path: &str, what: String) {
        let place = if path.is_empty() { self.file.to_string() } else { format!("{} {path}", self.file) };
        self.rep.push(Stage::Tensor, place, what);
    }

    fn value(&mut self, e: &Value, a: &Value, path: &str) {
        let (e, a) = (e.resolved(), a.resolved());
        if kind_name(e) != kind_name(a) {
            self.diff(path, format!("expected {} ({}), got {} ({})", value_repr(e), kind_name(e), value_repr(a), kind_name(a)));
            return;
        }
        match (e, a) {
            (Value::Float(x), Value::Float(y)) => {
                if !floats_close(*x, *y) {
                    self.diff(
                        path,
                        format!("expected {}, got {} (beyond the float class)", pyjson::float_repr(*x), pyjson::float_repr(*y)),
                    );
                }
            }
            (Value::Int(_), Value::BigInt(_)) | (Value::BigInt(_), Value::Int(_)) => {
                self.diff(path, format!("expected {}, got {}", value_repr(e), value_repr(a)));
            }
            (Value::Str(x), Value::Str(y)) => {
                if x != y {
                    let last = path.rsplit('.').next().unwrap_or("");
                    if PATH_KEYS.contains(&last) {
                        let (rx, ry) = (self.se.relative(x), self.sa.relative(y));
                        if rx != ry {
                            self.diff(path, format!("expected '{x}' ({rx}), got '{y}' ({ry}) (relative to output_dir)"));
                        }
                    } else {
                        self.diff(path, format!("expected {}, got {}", value_repr(e), value_repr(a)));
                    }
                }
            }
            (Value::Bytes(x), Value::Bytes(y)) => {
                if x != y {
                    self.diff(path, bytes_what(x, y));
                }
            }
            (Value::List(x), Value::List(y))
            | (Value::Tuple(x), Value::Tuple(y))
            | (Value::Set(x), Value::Set(y))
            | (Value::FrozenSet(x), Value::FrozenSet(y)) => self.seq(x, y, path),
            (Value::Dict(x), Value::Dict(y)) => self.dict(x, y, path),
            (Value::Object(x), Value::Object(y)) => {
                if x.class != y.class {
                    self.diff(path, format!("expected an object of class {}, got {}", x.class, y.class));
                    return;
                }
                if x.construct != y.construct {
                    self.diff(path, format!("built with {:?}, expected {:?}", y.construct, x.construct));
                }
                if !x.args.is_empty() || !y.args.is_empty() {
                    self.seq(&x.args, &y.args, &format!("{path}<args>"));
                }
                match (&x.state, &y.state) {
                    (None, None) => {}
                    (Some(se), Some(sa)) => {
                        // A plain object's __dict__: its fields by name (TrainingArguments).
                        match (se.resolved(), sa.resolved()) {
                            (Value::Dict(de), Value::Dict(da)) if x.construct == torch_format::Construct::NewObj => {
                                self.fields(de, da, path)
                            }
                            _ => self.value(se, sa, &format!("{path}<state>")),
                        }
                    }
                    (Some(_), None) => self.diff(path, "state missing".into()),
                    (None, Some(_)) => self.diff(path, "unexpected state".into()),
                }
                if !x.list_items.is_empty() || !y.list_items.is_empty() {
                    self.seq(&x.list_items, &y.list_items, path);
                }
                if !x.dict_items.is_empty() || !y.dict_items.is_empty() {
                    self.dict(&x.dict_items, &y.dict_items, path);
                }
            }
            (Value::Tensor(x), Value::Tensor(y)) => {
                let place = if path.is_empty() { self.file.to_string() } else { format!("{} {path}", self.file) };
                compare_tensor(x, y, &place, self.rep);
            }
            _ => {
                if e != a {
                    self.diff(path, format!("expected {}, got {}", value_repr(e), value_repr(a)));
                }
            }
        }
    }

    fn seq(&mut self, x: &[Value], y: &[Value], path: &str) {
        if x.len() != y.len() {
            self.diff(path, format!("expected {} items, got {}", x.len(), y.len()));
        }
        for (i, (p, q)) in x.iter().zip(y).enumerate() {
            self.value(p, q, &format!("{path}[{i}]"));
        }
    }

    fn dict(&mut self, x: &[(Value, Value)], y: &[(Value, Value)], path: &str) {
        let ke: Vec<&Value> = x.iter().map(|(k, _)| k).collect();
        let ka: Vec<&Value> = y.iter().map(|(k, _)| k).collect();
        for k in &ke {
            if !ka.contains(k) {
                self.diff(path, format!("key {} missing", value_repr(k)));
            }
        }
        for k in &ka {
            if !ke.contains(k) {
                self.diff(path, format!("unexpected key {}", value_repr(k)));
            }
        }
        let ce: Vec<&&Value> = ke.iter().filter(|k| ka.contains(k)).collect();
        let ca: Vec<&&Value> = ka.iter().filter(|k| ke.contains(k)).collect();
        if ce != ca {
            let pos = ce.iter().zip(&ca).position(|(p, q)| p != q).unwrap_or(0);
            self.diff(
                path,
                format!("keys in a different order (at position {pos}: expected {}, got {})", value_repr(ce[pos]), value_repr(ca[pos])),
            );
        }
        for (k, ve) in x {
            if let Some((_, va)) = y.iter().find(|(q, _)| q == k) {
                self.value(ve, va, &key_path(path, k));
            }
        }
    }

    /// An object's fields (`args.learning_rate`): the same rules as a dict, `.name` paths.
    fn fields(&mut self, x: &[(Value, Value)], y: &[(Value, Value)], path: &str) {
        if x.iter().chain(y).any(|(k, _)| k.as_str().is_none()) {
            return self.dict(x, y, &format!("{path}<state>"));
        }
        let ke: Vec<&str> = x.iter().filter_map(|(k, _)| k.as_str()).collect();
        let ka: Vec<&str> = y.iter().filter_map(|(k, _)| k.as_str()).collect();
        for k in &ke {
            if !ka.contains(k) {
                self.diff(path, format!("field {k} missing"));
            }
        }
        for k in &ka {
            if !ke.contains(k) {
                self.diff(path, format!("unexpected field {k}"));
            }
        }
        let ce: Vec<&&str> = ke.iter().filter(|k| ka.contains(k)).collect();
        let ca: Vec<&&str> = ka.iter().filter(|k| ke.contains(k)).collect();
        if ce != ca {
            let pos = ce.iter().zip(&ca).position(|(p, q)| p != q).unwrap_or(0);
            self.diff(path, format!("fields in a different order (at position {pos}: expected {}, got {})", ce[pos], ca[pos]));
        }
        for (k, ve) in x {
            let name = k.as_str().unwrap();
            if let Some((_, va)) = y.iter().find(|(q, _)| q.as_str() == Some(name)) {
                let sub = if path.is_empty() { name.to_string() } else { format!("{path}.{name}") };
                self.value(ve, va, &sub);
            }
        }
    }
}

fn is_float_dtype(d: DType) -> bool {
    matches!(d, DType::Float64 | DType::Float32 | DType::Float16 | DType::BFloat16 | DType::Complex32 | DType::Complex64 | DType::Complex128)
}

fn f16_to_f64(h: u16) -> f64 {
    let sign = if h & 0x8000 != 0 { -1.0 } else { 1.0 };
    let exp = ((h >> 10) & 0x1f) as i32;
    let frac = (h & 0x3ff) as f64;
    sign * match exp {
        0 => frac * 2f64.powi(-24),
        31 => {
            if frac == 0.0 {
                f64::INFINITY
            } else {
                f64::NAN
            }
        }
        e => (1.0 + frac / 1024.0) * 2f64.powi(e - 15),
    }
}

/// The float components of a float tensor's bytes (complex: real and imaginary parts).
fn decode_floats(d: DType, b: &[u8]) -> Vec<f64> {
    match d {
        DType::Float64 | DType::Complex128 => b.chunks_exact(8).map(|c| f64::from_le_bytes(c.try_into().unwrap())).collect(),
        DType::Float32 | DType::Complex64 => b.chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().unwrap()) as f64).collect(),
        DType::Float16 | DType::Complex32 => b.chunks_exact(2).map(|c| f16_to_f64(u16::from_le_bytes([c[0], c[1]]))).collect(),
        DType::BFloat16 => {
            b.chunks_exact(2).map(|c| f32::from_bits((u16::from_le_bytes([c[0], c[1]]) as u32) << 16) as f64).collect()
        }
        _ => vec![],
    }
}

/// `[i, j]` of a flat row-major index.
fn index_of(mut flat: usize, shape: &[i64]) -> String {
    if shape.is_empty() {
        return String::new();
    }
    let mut idx = vec![0usize; shape.len()];
    for d in (0..shape.len()).rev() {
        let n = shape[d].max(1) as usize;
        idx[d] = flat % n;
        flat /= n;
    }
    format!(" element [{}]", idx.iter().map(|i| i.to_string()).collect::<Vec<_>>().join(", "))
}

/// Two tensors: dtype, shape and requires_grad exact; float elements within the float class,
/// other elements exact.
pub fn compare_tensor(e: &Tensor, a: &Tensor, place: &str, rep: &mut Report) {
    if e.dtype() != a.dtype() {
        rep.push(Stage::Tensor, place, format!("dtype: expected {}, got {}", e.dtype().torch_name(), a.dtype().torch_name()));
        return;
    }
    if e.shape != a.shape {
        rep.push(Stage::Tensor, place, format!("shape: expected {:?}, got {:?}", e.shape, a.shape));
        return;
    }
    if e.requires_grad != a.requires_grad {
        rep.push(Stage::Tensor, place, format!("requires_grad: expected {}, got {}", e.requires_grad, a.requires_grad));
    }
    let (be, ba) = match (e.contiguous_bytes(), a.contiguous_bytes()) {
        (Ok(x), Ok(y)) => (x, y),
        (x, y) => {
            if x.is_ok() != y.is_ok() {
                rep.push(Stage::Tensor, place, "tensor data unreadable on one side");
            }
            return;
        }
    };
    let d = e.dtype();
    let shown = |x: f64| pyjson::float_repr(x);
    if is_float_dtype(d) {
        let (fe, fa) = (decode_floats(d, &be), decode_floats(d, &ba));
        let per = if matches!(d, DType::Complex32 | DType::Complex64 | DType::Complex128) { 2 } else { 1 };
        let bad: Vec<usize> = fe.iter().zip(&fa).enumerate().filter(|(_, (x, y))| !floats_close(**x, **y)).map(|(i, _)| i).collect();
        if let Some(&i) = bad.first() {
            rep.push(
                Stage::Tensor,
                place,
                format!(
                    "{}{}: expected {}, got {} (beyond the float class; {} of {} values differ)",
                    d.torch_name(),
                    index_of(i / per, &e.shape),
                    shown(fe[i]),
                    shown(fa[i]),
                    bad.len(),
                    fe.len()
                ),
            );
        }
    } else {
        let es = d.size().max(1) as usize;
        let bad: Vec<usize> =
            be.chunks(es).zip(ba.chunks(es)).enumerate().filter(|(_, (x, y))| x != y).map(|(i, _)| i).collect();
        if let Some(&i) = bad.first() {
            let show = |c: &[u8]| c.iter().map(|b| format!("{b:02x}")).collect::<String>();
            rep.push(
                Stage::Tensor,
                place,
                format!(
                    "{}{}: expected 0x{}, got 0x{} (exact class; {} of {} elements differ)",
                    d.torch_name(),
                    index_of(i, &e.shape),
                    show(&be[i * es..(i + 1) * es]),
                    show(&ba[i * es..(i + 1) * es]),
                    bad.len(),
                    be.len() / es
                ),
            );
        }
    }
}

#[cfg(test)]
mod tests {
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
