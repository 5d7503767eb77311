//! The value stage of a comparison inside torch and safetensors files: the loaded value trees
//! (structure, dict keys and their order, class names, exact scalars), tensors' dtypes and
//! shapes exact and their float elements within the float class (conformance/README.md).

use super::*;

/// Comparing two loaded torch files.
pub(super) struct TorchCx<'a> {
    pub(super) file: &'a str,
    pub(super) se: &'a Side,
    pub(super) sa: &'a Side,
    pub(super) rep: &'a mut Report,
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

    pub(super) fn value(&mut self, e: &Value, a: &Value, path: &str) {
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

pub(super) fn f16_to_f64(h: u16) -> f64 {
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
