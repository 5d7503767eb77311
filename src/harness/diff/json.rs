//! The JSON stage of a comparison: keys and their order, Python's types (an int never equals a
//! float), the float-math class, wall-clock keys ignored, paths relative to their output_dir,
//! `result.json`'s error (conformance/README.md).

use super::*;

/// Comparing two JSON values of one file.
pub(super) struct JsonCx<'a> {
    pub(super) file: &'a str,
    pub(super) se: &'a Side,
    pub(super) sa: &'a Side,
    pub(super) rep: &'a mut Report,
    pub(super) config: bool,
    /// Within a TrainerState whose best_metric is a scripted (exact) metric.
    pub(super) best_exact: bool,
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
    pub(super) fn result(&mut self, e: &PyJson, a: &PyJson) {
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

    pub(super) fn value(&mut self, e: &PyJson, a: &PyJson, path: &str) {
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
