//! JSON exactly as Python's `json` module writes and reads it.
//!
//! [`dumps`] matches `json.dumps(obj, indent=..., sort_keys=..., ensure_ascii=True)`:
//! separators `", "`/`": "` without indent and `","`/`": "` with it, `\uXXXX` escapes (surrogate
//! pairs above U+FFFF), floats as Python's `repr` (shortest round-trip: `1e-05`, `0.0001`,
//! `1.5e+16`, `2.0`, `-0.0`), and `NaN` / `Infinity` / `-Infinity`.
//! [`loads`] accepts what `json.loads` accepts, those three tokens included, so HF's
//! `trainer_state.json` reads back even when a metric was NaN.
//!
//! `serde_json::Value` cannot hold NaN or infinities, hence [`PyJson`]; `From<&serde_json::Value>`
//! converts the common case and [`dumps_value`] writes a `serde_json::Value` directly.

use crate::formats::torch_format::{FormatError, Result};
use std::fmt::Write as _;
use std::path::Path;

/// A JSON value as Python's `json` holds it: ints and floats kept apart, non-finite floats
/// allowed, object keys in insertion order.
#[derive(Clone, Debug, PartialEq)]
pub enum PyJson {
    Null,
    Bool(bool),
    /// An int (Python ints are unbounded; larger ones use `BigInt`).
    Int(i128),
    /// An int beyond i128, as its decimal digits (with a leading `-` when negative).
    BigInt(String),
    Float(f64),
    Str(String),
    List(Vec<PyJson>),
    Dict(Vec<(String, PyJson)>),
}

impl PyJson {
    /// `self[key]` for a dict.
    pub fn get(&self, key: &str) -> Option<&PyJson> {
        match self {
            PyJson::Dict(d) => d.iter().rev().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }

    /// Converts to `serde_json::Value`; fails on NaN / infinities and ints beyond u64/i64.
    pub fn to_serde(&self) -> Result<serde_json::Value> {
        use serde_json::Value as J;
        Ok(match self {
            PyJson::Null => J::Null,
            PyJson::Bool(b) => J::Bool(*b),
            PyJson::Int(i) => {
                if let Ok(x) = i64::try_from(*i) {
                    J::from(x)
                } else if let Ok(x) = u64::try_from(*i) {
                    J::from(x)
                } else {
                    return Err(FormatError::unwritable(format!(
                        "int {i} does not fit serde_json"
                    )));
                }
            }
            PyJson::BigInt(s) => {
                return Err(FormatError::unwritable(format!(
                    "int {s} does not fit serde_json"
                )))
            }
            PyJson::Float(f) => J::Number(serde_json::Number::from_f64(*f).ok_or_else(|| {
                FormatError::unwritable(format!("{} has no serde_json form", float_repr(*f)))
            })?),
            PyJson::Str(s) => J::String(s.clone()),
            PyJson::List(v) => J::Array(v.iter().map(|x| x.to_serde()).collect::<Result<_>>()?),
            PyJson::Dict(d) => {
                let mut m = serde_json::Map::new();
                for (k, v) in d {
                    m.insert(k.clone(), v.to_serde()?);
                }
                J::Object(m)
            }
        })
    }
}

impl From<&serde_json::Value> for PyJson {
    fn from(v: &serde_json::Value) -> PyJson {
        use serde_json::Value as J;
        match v {
            J::Null => PyJson::Null,
            J::Bool(b) => PyJson::Bool(*b),
            J::Number(n) => {
                if let Some(i) = n.as_i64() {
                    PyJson::Int(i as i128)
                } else if let Some(u) = n.as_u64() {
                    PyJson::Int(u as i128)
                } else {
                    PyJson::Float(n.as_f64().unwrap_or(f64::NAN))
                }
            }
            J::String(s) => PyJson::Str(s.clone()),
            J::Array(a) => PyJson::List(a.iter().map(PyJson::from).collect()),
            J::Object(o) => PyJson::Dict(
                o.iter()
                    .map(|(k, v)| (k.clone(), PyJson::from(v)))
                    .collect(),
            ),
        }
    }
}

impl From<serde_json::Value> for PyJson {
    fn from(v: serde_json::Value) -> PyJson {
        PyJson::from(&v)
    }
}
impl From<f64> for PyJson {
    fn from(f: f64) -> PyJson {
        PyJson::Float(f)
    }
}
impl From<i64> for PyJson {
    fn from(i: i64) -> PyJson {
        PyJson::Int(i as i128)
    }
}
impl From<bool> for PyJson {
    fn from(b: bool) -> PyJson {
        PyJson::Bool(b)
    }
}
impl From<&str> for PyJson {
    fn from(s: &str) -> PyJson {
        PyJson::Str(s.to_string())
    }
}
impl From<String> for PyJson {
    fn from(s: String) -> PyJson {
        PyJson::Str(s)
    }
}

/// `json.dumps` options.
#[derive(Clone, Debug)]
pub struct DumpOptions {
    /// `None`: one line with `", "` / `": "`; `Some(n)`: newlines and n spaces per level.
    pub indent: Option<usize>,
    pub sort_keys: bool,
    /// Escape everything outside printable ASCII (Python's default).
    pub ensure_ascii: bool,
    /// Write NaN / Infinity (Python's default); otherwise they are an error.
    pub allow_nan: bool,
}

impl Default for DumpOptions {
    fn default() -> Self {
        DumpOptions {
            indent: None,
            sort_keys: false,
            ensure_ascii: true,
            allow_nan: true,
        }
    }
}

impl DumpOptions {
    /// `indent=2, sort_keys=True`: what HF uses for trainer_state.json and config.json.
    pub fn hf() -> Self {
        DumpOptions {
            indent: Some(2),
            sort_keys: true,
            ..DumpOptions::default()
        }
    }
}

/// Python's `repr(float)`.
pub fn float_repr(x: f64) -> String {
    if x.is_nan() {
        return "nan".into();
    }
    if x.is_infinite() {
        return if x > 0.0 { "inf".into() } else { "-inf".into() };
    }
    if x == 0.0 {
        return if x.is_sign_negative() {
            "-0.0".into()
        } else {
            "0.0".into()
        };
    }
    // Python's repr: the fewest digits that round-trip, and of those the decimal nearest to x
    // with ties to even. Rust's `{:e}` gives the fewest digits; its fixed-precision formatting
    // rounds exactly, ties to even (Rust's shortest form may break an exact tie the other way).
    let shortest = format!("{:e}", x);
    let n = shortest
        .split_once('e')
        .expect("exponent")
        .0
        .chars()
        .filter(|c| c.is_ascii_digit())
        .count();
    let s = format!("{:.*e}", n.saturating_sub(1), x);
    let (mant, exp) = s.split_once('e').expect("exponent");
    let exp: i32 = exp.parse().expect("exponent digits");
    let (neg, mant) = match mant.strip_prefix('-') {
        Some(m) => (true, m),
        None => (false, mant),
    };
    let digits: String = mant.chars().filter(|c| *c != '.').collect();
    let nd = digits.len() as i32;
    let decpt = exp + 1;
    let mut out = String::with_capacity(24);
    if neg {
        out.push('-');
    }
    if -4 < decpt && decpt <= 16 {
        if decpt <= 0 {
            out.push_str("0.");
            out.extend(std::iter::repeat_n('0', (-decpt) as usize));
            out.push_str(&digits);
        } else if decpt >= nd {
            out.push_str(&digits);
            out.extend(std::iter::repeat_n('0', (decpt - nd) as usize));
            out.push_str(".0");
        } else {
            out.push_str(&digits[..decpt as usize]);
            out.push('.');
            out.push_str(&digits[decpt as usize..]);
        }
    } else {
        out.push_str(&digits[..1]);
        if nd > 1 {
            out.push('.');
            out.push_str(&digits[1..]);
        }
        let e = decpt - 1;
        let _ = write!(out, "e{}{:02}", if e < 0 { '-' } else { '+' }, e.abs());
    }
    out
}

fn write_str(out: &mut String, s: &str, ensure_ascii: bool) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{08}' => out.push_str("\\b"),
            '\u{0c}' => out.push_str("\\f"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c if ensure_ascii && (c as u32) > 0x7e => {
                let mut buf = [0u16; 2];
                for unit in c.encode_utf16(&mut buf) {
                    let _ = write!(out, "\\u{:04x}", unit);
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

fn write_float(out: &mut String, f: f64, opts: &DumpOptions) -> Result<()> {
    if !f.is_finite() && !opts.allow_nan {
        return Err(FormatError::unwritable(format!(
            "out of range float value {} (allow_nan is off)",
            float_repr(f)
        )));
    }
    if f.is_nan() {
        out.push_str("NaN");
    } else if f == f64::INFINITY {
        out.push_str("Infinity");
    } else if f == f64::NEG_INFINITY {
        out.push_str("-Infinity");
    } else {
        out.push_str(&float_repr(f));
    }
    Ok(())
}

fn newline(out: &mut String, indent: usize, level: usize) {
    out.push('\n');
    out.extend(std::iter::repeat_n(' ', indent * level));
}

fn dump(out: &mut String, v: &PyJson, opts: &DumpOptions, level: usize) -> Result<()> {
    let item_sep = if opts.indent.is_some() { "," } else { ", " };
    match v {
        PyJson::Null => out.push_str("null"),
        PyJson::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        PyJson::Int(i) => {
            let _ = write!(out, "{i}");
        }
        PyJson::BigInt(s) => out.push_str(s),
        PyJson::Float(f) => write_float(out, *f, opts)?,
        PyJson::Str(s) => write_str(out, s, opts.ensure_ascii),
        PyJson::List(items) => {
            if items.is_empty() {
                out.push_str("[]");
                return Ok(());
            }
            out.push('[');
            for (i, it) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(item_sep);
                }
                if let Some(n) = opts.indent {
                    newline(out, n, level + 1);
                }
                dump(out, it, opts, level + 1)?;
            }
            if let Some(n) = opts.indent {
                newline(out, n, level);
            }
            out.push(']');
        }
        PyJson::Dict(items) => {
            if items.is_empty() {
                out.push_str("{}");
                return Ok(());
            }
            let mut refs: Vec<&(String, PyJson)> = items.iter().collect();
            if opts.sort_keys {
                refs.sort_by(|a, b| a.0.cmp(&b.0));
            }
            out.push('{');
            for (i, (k, it)) in refs.into_iter().enumerate() {
                if i > 0 {
                    out.push_str(item_sep);
                }
                if let Some(n) = opts.indent {
                    newline(out, n, level + 1);
                }
                write_str(out, k, opts.ensure_ascii);
                out.push_str(": ");
                dump(out, it, opts, level + 1)?;
            }
            if let Some(n) = opts.indent {
                newline(out, n, level);
            }
            out.push('}');
        }
    }
    Ok(())
}

/// `json.dumps(v, ...)`. Fails only for NaN / infinities when `allow_nan` is off.
pub fn dumps(v: &PyJson, opts: &DumpOptions) -> Result<String> {
    let mut out = String::new();
    dump(&mut out, v, opts, 0)?;
    Ok(out)
}

/// `json.dumps` of a `serde_json::Value` (ints stay ints, f64s are floats).
pub fn dumps_value(v: &serde_json::Value, opts: &DumpOptions) -> String {
    dumps(&PyJson::from(v), opts).expect("serde_json values are finite")
}

struct Parser<'a> {
    s: &'a [u8],
    text: &'a str,
    pos: usize,
}

impl<'a> Parser<'a> {
    fn err(&self, msg: impl Into<String>) -> FormatError {
        let before = &self.text[..self.pos.min(self.text.len())];
        let line = before.matches('\n').count() + 1;
        let column = before.rfind('\n').map_or(before.chars().count() + 1, |i| {
            before[i + 1..].chars().count() + 1
        });
        FormatError::Json {
            path: String::new(),
            line,
            column,
            msg: msg.into(),
        }
    }
    fn ws(&mut self) {
        while self.pos < self.s.len() && matches!(self.s[self.pos], b' ' | b'\t' | b'\n' | b'\r') {
            self.pos += 1;
        }
    }
    fn eat(&mut self, lit: &str) -> bool {
        if self.s[self.pos..].starts_with(lit.as_bytes()) {
            self.pos += lit.len();
            true
        } else {
            false
        }
    }

    fn value(&mut self, depth: usize) -> Result<PyJson> {
        if depth > 1000 {
            return Err(self.err("nesting too deep"));
        }
        self.ws();
        let Some(&c) = self.s.get(self.pos) else {
            return Err(self.err("Expecting value"));
        };
        match c {
            b'{' => {
                self.pos += 1;
                let mut items: Vec<(String, PyJson)> = Vec::new();
                self.ws();
                if self.eat("}") {
                    return Ok(PyJson::Dict(items));
                }
                loop {
                    self.ws();
                    if self.s.get(self.pos) != Some(&b'"') {
                        return Err(self.err("Expecting property name enclosed in double quotes"));
                    }
                    let k = self.string()?;
                    self.ws();
                    if !self.eat(":") {
                        return Err(self.err("Expecting ':' delimiter"));
                    }
                    let v = self.value(depth + 1)?;
                    // Python dicts keep the first position and the last value of a repeated key.
                    match items.iter_mut().find(|(ik, _)| *ik == k) {
                        Some(slot) => slot.1 = v,
                        None => items.push((k, v)),
                    }
                    self.ws();
                    if self.eat(",") {
                        continue;
                    }
                    if self.eat("}") {
                        return Ok(PyJson::Dict(items));
                    }
                    return Err(self.err("Expecting ',' delimiter"));
                }
            }
            b'[' => {
                self.pos += 1;
                let mut items = Vec::new();
                self.ws();
                if self.eat("]") {
                    return Ok(PyJson::List(items));
                }
                loop {
                    items.push(self.value(depth + 1)?);
                    self.ws();
                    if self.eat(",") {
                        continue;
                    }
                    if self.eat("]") {
                        return Ok(PyJson::List(items));
                    }
                    return Err(self.err("Expecting ',' delimiter"));
                }
            }
            b'"' => Ok(PyJson::Str(self.string()?)),
            b'n' if self.eat("null") => Ok(PyJson::Null),
            b't' if self.eat("true") => Ok(PyJson::Bool(true)),
            b'f' if self.eat("false") => Ok(PyJson::Bool(false)),
            b'N' if self.eat("NaN") => Ok(PyJson::Float(f64::NAN)),
            b'I' if self.eat("Infinity") => Ok(PyJson::Float(f64::INFINITY)),
            b'-' if self.eat("-Infinity") => Ok(PyJson::Float(f64::NEG_INFINITY)),
            b'-' | b'0'..=b'9' => self.number(),
            _ => Err(self.err("Expecting value")),
        }
    }

    fn number(&mut self) -> Result<PyJson> {
        let start = self.pos;
        let digits = |p: &mut Self| {
            let b = p.pos;
            while p.pos < p.s.len() && p.s[p.pos].is_ascii_digit() {
                p.pos += 1;
            }
            p.pos - b
        };
        if self.s[self.pos] == b'-' {
            self.pos += 1;
        }
        let int_start = self.pos;
        let n = digits(self);
        if n == 0 {
            self.pos = start;
            return Err(self.err("Expecting value"));
        }
        if n > 1 && self.s[int_start] == b'0' {
            // Python reads "01" as 0 followed by garbage.
            self.pos = int_start + 1;
            return Err(self.err("Extra data"));
        }
        let mut is_float = false;
        if self.s.get(self.pos) == Some(&b'.')
            && self.s.get(self.pos + 1).is_some_and(|c| c.is_ascii_digit())
        {
            self.pos += 1;
            digits(self);
            is_float = true;
        }
        if matches!(self.s.get(self.pos), Some(b'e' | b'E')) {
            let save = self.pos;
            self.pos += 1;
            if matches!(self.s.get(self.pos), Some(b'+' | b'-')) {
                self.pos += 1;
            }
            if digits(self) == 0 {
                self.pos = save;
            } else {
                is_float = true;
            }
        }
        let text = &self.text[start..self.pos];
        if is_float {
            return Ok(PyJson::Float(
                text.parse().map_err(|_| self.err("bad number"))?,
            ));
        }
        Ok(match text.parse::<i128>() {
            Ok(i) => PyJson::Int(i),
            Err(_) => PyJson::BigInt(text.to_string()),
        })
    }

    fn hex4(&mut self) -> Result<u32> {
        let h = self
            .s
            .get(self.pos..self.pos + 4)
            .ok_or_else(|| self.err("Invalid \\uXXXX escape"))?;
        let h = std::str::from_utf8(h).map_err(|_| self.err("Invalid \\uXXXX escape"))?;
        let v = u32::from_str_radix(h, 16).map_err(|_| self.err("Invalid \\uXXXX escape"))?;
        self.pos += 4;
        Ok(v)
    }

    fn string(&mut self) -> Result<String> {
        self.pos += 1; // opening quote
        let mut out = String::new();
        loop {
            let start = self.pos;
            while self.pos < self.s.len()
                && !matches!(self.s[self.pos], b'"' | b'\\')
                && self.s[self.pos] >= 0x20
            {
                self.pos += 1;
            }
            out.push_str(&self.text[start..self.pos]);
            let Some(&c) = self.s.get(self.pos) else {
                return Err(self.err("Unterminated string starting at"));
            };
            match c {
                b'"' => {
                    self.pos += 1;
                    return Ok(out);
                }
                b'\\' => {
                    self.pos += 1;
                    let Some(&e) = self.s.get(self.pos) else {
                        return Err(self.err("Unterminated string starting at"));
                    };
                    self.pos += 1;
                    match e {
                        b'"' => out.push('"'),
                        b'\\' => out.push('\\'),
                        b'/' => out.push('/'),
                        b'b' => out.push('\u{08}'),
                        b'f' => out.push('\u{0c}'),
                        b'n' => out.push('\n'),
                        b'r' => out.push('\r'),
                        b't' => out.push('\t'),
                        b'u' => {
                            let u = self.hex4()?;
                            let cp = if (0xD800..0xDC00).contains(&u)
                                && self.s[self.pos..].starts_with(b"\\u")
                            {
                                let save = self.pos;
                                self.pos += 2;
                                let lo = self.hex4()?;
                                if (0xDC00..0xE000).contains(&lo) {
                                    0x10000 + ((u - 0xD800) << 10) + (lo - 0xDC00)
                                } else {
                                    self.pos = save;
                                    u
                                }
                            } else {
                                u
                            };
                            let ch = char::from_u32(cp).ok_or_else(|| {
                                self.err("lone surrogate in string (not representable here)")
                            })?;
                            out.push(ch);
                        }
                        _ => {
                            self.pos -= 2;
                            return Err(self.err("Invalid \\escape"));
                        }
                    }
                }
                _ => return Err(self.err("Invalid control character at")),
            }
        }
    }
}

/// `json.loads(text)`.
pub fn loads(text: &str) -> Result<PyJson> {
    let mut p = Parser {
        s: text.as_bytes(),
        text,
        pos: 0,
    };
    let v = p.value(0)?;
    p.ws();
    if p.pos != p.s.len() {
        return Err(p.err("Extra data"));
    }
    Ok(v)
}

/// Reads and parses a JSON file.
pub fn read_file(path: impl AsRef<Path>) -> Result<PyJson> {
    let path = path.as_ref();
    let text = std::fs::read_to_string(path).map_err(|e| FormatError::io("read", e).at(path))?;
    loads(&text).map_err(|e| e.at(path))
}

/// Writes `dumps(v, opts)` plus a final newline (as HF writes its JSON files) to `path`.
pub fn write_file(
    path: impl AsRef<Path>,
    v: &PyJson,
    opts: &DumpOptions,
    fsync: bool,
) -> Result<()> {
    let path = path.as_ref();
    let run = || -> Result<()> {
        let mut text = dumps(v, opts)?;
        text.push('\n');
        let mut f = std::fs::File::create(path).map_err(|e| FormatError::io("create", e))?;
        std::io::Write::write_all(&mut f, text.as_bytes())
            .map_err(|e| FormatError::io("write", e))?;
        if fsync {
            f.sync_all().map_err(|e| FormatError::io("fsync", e))?;
        }
        Ok(())
    };
    run().map_err(|e| e.at(path))
}

/// Python's `repr(str)`: single quotes unless the text holds a single quote and no double one.
pub fn py_str_repr(s: &str) -> String {
    let q = if s.contains('\'') && !s.contains('"') { '"' } else { '\'' };
    let mut out = String::with_capacity(s.len() + 2);
    out.push(q);
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c == q => {
                out.push('\\');
                out.push(c);
            }
            c => out.push(c),
        }
    }
    out.push(q);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn python_float_reprs() {
        let cases = [
            (1e-5, "1e-05"),
            (0.0001, "0.0001"),
            (1.5e16, "1.5e+16"),
            (1e16, "1e+16"),
            (9999999999999998.0, "9999999999999998.0"),
            (2.0, "2.0"),
            (-0.0, "-0.0"),
            (0.1, "0.1"),
            (3e-5, "3e-05"),
            (123.456, "123.456"),
            (1e22, "1e+22"),
            (5e-324, "5e-324"),
            (1.7976931348623157e308, "1.7976931348623157e+308"),
            (0.5, "0.5"),
        ];
        for (x, want) in cases {
            assert_eq!(float_repr(x), want, "{x:e}");
        }
    }

    #[test]
    fn dumps_like_python() {
        let v = loads(r#"{"b": [1, 2.5, {}], "a": {"x": NaN, "y": -Infinity}, "é": "\ud83d\ude00\n", "e": []}"#).unwrap();
        assert_eq!(
            dumps(&v, &DumpOptions::default()).unwrap(),
            r#"{"b": [1, 2.5, {}], "a": {"x": NaN, "y": -Infinity}, "\u00e9": "\ud83d\ude00\n", "e": []}"#
        );
        assert_eq!(
            dumps(&v, &DumpOptions::hf()).unwrap(),
            "{\n  \"a\": {\n    \"x\": NaN,\n    \"y\": -Infinity\n  },\n  \"b\": [\n    1,\n    2.5,\n    {}\n  ],\n  \"e\": [],\n  \"\\u00e9\": \"\\ud83d\\ude00\\n\"\n}"
        );
    }

    #[test]
    fn parse_errors_have_positions() {
        let e = loads("{\n  \"a\": tru }").unwrap_err();
        assert_eq!(e.to_string(), "Expecting value at line 2 column 8");
    }
}
