//! The value model of pickled data: what `torch.save` writes and `torch.load` reads, as plain
//! Rust data. Nothing here executes anything; a Python object is its class name plus the
//! arguments and state the pickle carries.

use std::collections::HashMap;
use std::fmt;
use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock};
use super::error::{FormatError, Result};

/// A Python global (a class or function) named by module and qualified name,
/// e.g. `collections.OrderedDict`. Module names are the Python 3 ones (`builtins`,
/// not `__builtin__`; the writer applies protocol 2's renaming).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Global {
    pub module: String,
    pub name: String,
}

impl Global {
    pub fn new(module: impl Into<String>, name: impl Into<String>) -> Self {
        Global {
            module: module.into(),
            name: name.into(),
        }
    }
    /// True when this is `module.name`.
    pub fn is(&self, module: &str, name: &str) -> bool {
        self.module == module && self.name == name
    }
}

impl fmt::Display for Global {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.module, self.name)
    }
}

/// How the pickle builds an object.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Construct {
    /// `REDUCE`: `class(*args)` (enum members, `OrderedDict()`, `torch.device('cpu')`, numpy).
    Reduce,
    /// `NEWOBJ`: `class.__new__(class, *args)` (plain Python objects such as `TrainingArguments`).
    NewObj,
}

/// A Python object as the pickle describes it (the parts of `__reduce_ex__(2)`):
/// `class` built with `args`, then `list_items` appended, `dict_items` set, and `state`
/// applied by `BUILD` — written and read in that order.
#[derive(Clone, Debug, PartialEq)]
pub struct Object {
    pub class: Global,
    pub construct: Construct,
    pub args: Vec<Value>,
    pub state: Option<Value>,
    pub list_items: Vec<Value>,
    pub dict_items: Vec<(Value, Value)>,
}

/// A value of pickled data.
///
/// Identity: Python's pickler memoizes by object identity. This model reproduces it as follows:
/// equal `Str`s are one object (Python interns the identifiers and literals HF stores), equal
/// `Global`s are one object (classes are singletons), and every other value is a new object at
/// each place it occurs — unless wrapped in [`Value::Shared`]: every place holding a clone of
/// the same `Arc` is one object (the second and later places become memo references), and a
/// `Shared` string is a string object distinct from equal plain `Str`s (e.g. the `'cpu'` that
/// `torch.device.__reduce__` creates afresh). The reader produces `Shared` exactly where the file
/// needs it, so reading and writing back gives the same bytes.
#[derive(Clone, Debug)]
pub enum Value {
    None,
    Bool(bool),
    /// A Python int that fits in i64.
    Int(i64),
    /// A Python int outside i64: little-endian two's complement, minimal length.
    BigInt(Vec<u8>),
    Float(f64),
    Str(String),
    Bytes(Vec<u8>),
    List(Vec<Value>),
    Tuple(Vec<Value>),
    /// A plain `dict`; insertion order kept.
    Dict(Vec<(Value, Value)>),
    Set(Vec<Value>),
    FrozenSet(Vec<Value>),
    /// A class or function used as a value (e.g. a `torch.dtype` such as `torch.float32`).
    Global(Global),
    Object(Box<Object>),
    Tensor(Tensor),
    /// One Python object referenced from every place that holds a clone of this `Arc`.
    Shared(Arc<Value>),
}

/// Equality of content: `Shared` compares what it holds; floats compare by bits (so NaN equals
/// NaN and 0.0 differs from -0.0); tensors compare metadata and bytes.
impl PartialEq for Value {
    fn eq(&self, other: &Value) -> bool {
        use Value::*;
        match (self, other) {
            (Shared(a), b) => a.as_ref() == b,
            (a, Shared(b)) => a == b.as_ref(),
            (None, None) => true,
            (Bool(a), Bool(b)) => a == b,
            (Int(a), Int(b)) => a == b,
            (BigInt(a), BigInt(b)) => a == b,
            (Float(a), Float(b)) => a.to_bits() == b.to_bits(),
            (Str(a), Str(b)) => a == b,
            (Bytes(a), Bytes(b)) => a == b,
            (List(a), List(b))
            | (Tuple(a), Tuple(b))
            | (Set(a), Set(b))
            | (FrozenSet(a), FrozenSet(b)) => a == b,
            (Dict(a), Dict(b)) => a == b,
            (Global(a), Global(b)) => a == b,
            (Object(a), Object(b)) => a == b,
            (Tensor(a), Tensor(b)) => a == b,
            _ => false,
        }
    }
}

impl From<&str> for Value {
    fn from(s: &str) -> Self {
        Value::Str(s.to_string())
    }
}
impl From<String> for Value {
    fn from(s: String) -> Self {
        Value::Str(s)
    }
}
impl From<i64> for Value {
    fn from(i: i64) -> Self {
        Value::Int(i)
    }
}
impl From<u64> for Value {
    fn from(u: u64) -> Self {
        Value::from_u64(u)
    }
}
impl From<f64> for Value {
    fn from(f: f64) -> Self {
        Value::Float(f)
    }
}
impl From<bool> for Value {
    fn from(b: bool) -> Self {
        Value::Bool(b)
    }
}
impl From<Tensor> for Value {
    fn from(t: Tensor) -> Self {
        Value::Tensor(t)
    }
}

impl Value {
    pub fn str(s: impl Into<String>) -> Value {
        Value::Str(s.into())
    }

    /// A Python int from a u64 (`BigInt` above i64::MAX).
    pub fn from_u64(u: u64) -> Value {
        if u <= i64::MAX as u64 {
            Value::Int(u as i64)
        } else {
            let mut b = u.to_le_bytes().to_vec();
            b.push(0);
            Value::BigInt(b)
        }
    }

    /// A plain dict with string keys.
    pub fn dict<K: Into<String>>(items: impl IntoIterator<Item = (K, Value)>) -> Value {
        Value::Dict(
            items
                .into_iter()
                .map(|(k, v)| (Value::Str(k.into()), v))
                .collect(),
        )
    }

    /// `collections.OrderedDict(items)` (what `nn.Module.state_dict()` and tensors' backward
    /// hooks are).
    pub fn ordered_dict(items: Vec<(Value, Value)>) -> Value {
        Value::Object(Box::new(Object {
            class: Global::new("collections", "OrderedDict"),
            construct: Construct::Reduce,
            args: vec![],
            state: None,
            list_items: vec![],
            dict_items: items,
        }))
    }

    /// `module.class(*args)` via REDUCE, with no state.
    pub fn reduce(module: &str, class: &str, args: Vec<Value>) -> Value {
        Value::Object(Box::new(Object {
            class: Global::new(module, class),
            construct: Construct::Reduce,
            args,
            state: None,
            list_items: vec![],
            dict_items: vec![],
        }))
    }

    /// A plain Python object (`copyreg.__newobj__` + `BUILD`): how a dataclass such as
    /// `transformers.training_args.TrainingArguments` pickles, `state` being its `__dict__`.
    pub fn new_object(module: &str, class: &str, state: Value) -> Value {
        Value::Object(Box::new(Object {
            class: Global::new(module, class),
            construct: Construct::NewObj,
            args: vec![],
            state: Some(state),
            list_items: vec![],
            dict_items: vec![],
        }))
    }

    /// An enum member, e.g. `enum_member("transformers.trainer_utils", "IntervalStrategy",
    /// "steps".into())`. Members are singletons in Python, so every call with the same arguments
    /// returns (a clone of) the same `Shared` object: a pickle holding it twice memoizes it.
    pub fn enum_member(module: &str, class: &str, value: Value) -> Value {
        static CACHE: OnceLock<Mutex<HashMap<String, Arc<Value>>>> = OnceLock::new();
        let key = format!("{module}\n{class}\n{value:?}");
        let mut cache = CACHE
            .get_or_init(Default::default)
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let arc = cache
            .entry(key)
            .or_insert_with(|| Arc::new(Value::reduce(module, class, vec![value])))
            .clone();
        Value::Shared(arc)
    }

    /// A contiguous float32 CPU tensor (what optimizer state dicts hold).
    pub fn f32_tensor(shape: Vec<i64>, data: Vec<f32>) -> Value {
        Value::Tensor(Tensor::from_vec(&shape, data).expect("shape matches the data"))
    }

    /// The keys of a dict as text (ints printed), in order; empty for anything else.
    pub fn str_keys(&self) -> Vec<String> {
        match self.resolved() {
            Value::Dict(e) => e
                .iter()
                .map(|(k, _)| match k.resolved() {
                    Value::Str(s) => s.clone(),
                    Value::Int(i) => i.to_string(),
                    other => format!("{other:?}"),
                })
                .collect(),
            _ => vec![],
        }
    }

    /// `torch.device(kind)`: pickles as `torch.device('cpu')` whose string is a fresh object.
    pub fn torch_device(kind: &str) -> Value {
        Value::reduce("torch", "device", vec![Value::fresh_str(kind)])
    }

    /// A string that is its own Python object (not merged with equal strings in the memo).
    pub fn fresh_str(s: &str) -> Value {
        Value::Shared(Arc::new(Value::Str(s.to_string())))
    }

    /// The value itself, looking through `Shared`.
    pub fn resolved(&self) -> &Value {
        let mut v = self;
        while let Value::Shared(a) = v {
            v = a.as_ref();
        }
        v
    }

    pub fn as_str(&self) -> Option<&str> {
        match self.resolved() {
            Value::Str(s) => Some(s),
            _ => None,
        }
    }
    pub fn as_i64(&self) -> Option<i64> {
        match self.resolved() {
            Value::Int(i) => Some(*i),
            _ => None,
        }
    }
    /// A float, or an int converted to f64.
    pub fn as_f64(&self) -> Option<f64> {
        match self.resolved() {
            Value::Float(f) => Some(*f),
            Value::Int(i) => Some(*i as f64),
            _ => None,
        }
    }
    pub fn as_bool(&self) -> Option<bool> {
        match self.resolved() {
            Value::Bool(b) => Some(*b),
            _ => None,
        }
    }
    /// Items of a list, tuple, set or frozenset.
    pub fn as_seq(&self) -> Option<&[Value]> {
        match self.resolved() {
            Value::List(v) | Value::Tuple(v) | Value::Set(v) | Value::FrozenSet(v) => Some(v),
            _ => None,
        }
    }
    /// Items of a dict, or of an `OrderedDict` object.
    pub fn as_dict(&self) -> Option<&[(Value, Value)]> {
        match self.resolved() {
            Value::Dict(d) => Some(d),
            Value::Object(o) if o.class.is("collections", "OrderedDict") => Some(&o.dict_items),
            _ => None,
        }
    }
    pub fn as_tensor(&self) -> Option<&Tensor> {
        match self.resolved() {
            Value::Tensor(t) => Some(t),
            _ => None,
        }
    }
    pub fn as_object(&self) -> Option<&Object> {
        match self.resolved() {
            Value::Object(o) => Some(o),
            _ => None,
        }
    }
    /// `self[key]` for a dict / OrderedDict with string keys, or an object's state dict
    /// (`args.learning_rate` for a `TrainingArguments`).
    pub fn get(&self, key: &str) -> Option<&Value> {
        let items: &[(Value, Value)] = match self.resolved() {
            Value::Object(o) if !o.class.is("collections", "OrderedDict") => {
                o.state.as_ref()?.as_dict()?
            }
            _ => self.as_dict()?,
        };
        items
            .iter()
            .find(|(k, _)| k.as_str() == Some(key))
            .map(|(_, v)| v)
    }
}

/// Element types of tensors, with their torch, storage and safetensors names.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DType {
    Float64,
    Float32,
    Float16,
    BFloat16,
    Int64,
    Int32,
    Int16,
    Int8,
    UInt8,
    Bool,
    Complex32,
    Complex64,
    Complex128,
    UInt16,
    UInt32,
    UInt64,
    Float8E4M3FN,
    Float8E5M2,
    Float8E8M0FNU,
}

impl DType {
    pub const ALL: [DType; 19] = [
        DType::Float64,
        DType::Float32,
        DType::Float16,
        DType::BFloat16,
        DType::Int64,
        DType::Int32,
        DType::Int16,
        DType::Int8,
        DType::UInt8,
        DType::Bool,
        DType::Complex32,
        DType::Complex64,
        DType::Complex128,
        DType::UInt16,
        DType::UInt32,
        DType::UInt64,
        DType::Float8E4M3FN,
        DType::Float8E5M2,
        DType::Float8E8M0FNU,
    ];

    /// Bytes per element.
    pub fn size(self) -> u64 {
        use DType::*;
        match self {
            Float64 | Int64 | UInt64 | Complex64 => 8,
            Float32 | Int32 | UInt32 | Complex32 => 4,
            Float16 | BFloat16 | Int16 | UInt16 => 2,
            Int8 | UInt8 | Bool | Float8E4M3FN | Float8E5M2 | Float8E8M0FNU => 1,
            Complex128 => 16,
        }
    }

    /// The name after `torch.` (`float32`, `bfloat16`, ...).
    pub fn torch_name(self) -> &'static str {
        use DType::*;
        match self {
            Float64 => "float64",
            Float32 => "float32",
            Float16 => "float16",
            BFloat16 => "bfloat16",
            Int64 => "int64",
            Int32 => "int32",
            Int16 => "int16",
            Int8 => "int8",
            UInt8 => "uint8",
            Bool => "bool",
            Complex32 => "complex32",
            Complex64 => "complex64",
            Complex128 => "complex128",
            UInt16 => "uint16",
            UInt32 => "uint32",
            UInt64 => "uint64",
            Float8E4M3FN => "float8_e4m3fn",
            Float8E5M2 => "float8_e5m2",
            Float8E8M0FNU => "float8_e8m0fnu",
        }
    }

    /// From a torch dtype name, including the aliases torch pickles (`float`, `half`, `long`, ...).
    pub fn from_torch_name(name: &str) -> Option<DType> {
        let alias = match name {
            "float" => Some(DType::Float32),
            "double" => Some(DType::Float64),
            "half" => Some(DType::Float16),
            "long" => Some(DType::Int64),
            "int" => Some(DType::Int32),
            "short" => Some(DType::Int16),
            "cfloat" => Some(DType::Complex64),
            "cdouble" => Some(DType::Complex128),
            "chalf" => Some(DType::Complex32),
            _ => None,
        };
        alias.or_else(|| DType::ALL.iter().copied().find(|d| d.torch_name() == name))
    }

    /// The legacy typed-storage class torch pickles for this dtype (`FloatStorage`), or `None`
    /// for dtypes torch saves with `_rebuild_tensor_v3` and an `UntypedStorage`.
    pub fn storage_class(self) -> Option<&'static str> {
        use DType::*;
        Some(match self {
            Float64 => "DoubleStorage",
            Float32 => "FloatStorage",
            Float16 => "HalfStorage",
            BFloat16 => "BFloat16Storage",
            Int64 => "LongStorage",
            Int32 => "IntStorage",
            Int16 => "ShortStorage",
            Int8 => "CharStorage",
            UInt8 => "ByteStorage",
            Bool => "BoolStorage",
            Complex64 => "ComplexFloatStorage",
            Complex128 => "ComplexDoubleStorage",
            Complex32 | UInt16 | UInt32 | UInt64 | Float8E4M3FN | Float8E5M2 | Float8E8M0FNU => {
                return None
            }
        })
    }

    pub fn from_storage_class(name: &str) -> Option<DType> {
        DType::ALL
            .iter()
            .copied()
            .find(|d| d.storage_class() == Some(name))
    }

    /// The matching tch kind (tch has no unsigned 16/32/64-bit or e8m0 kinds).
    pub fn to_kind(self) -> Option<tch::Kind> {
        use tch::Kind as K;
        use DType::*;
        Some(match self {
            Float64 => K::Double,
            Float32 => K::Float,
            Float16 => K::Half,
            BFloat16 => K::BFloat16,
            Int64 => K::Int64,
            Int32 => K::Int,
            Int16 => K::Int16,
            Int8 => K::Int8,
            UInt8 => K::Uint8,
            Bool => K::Bool,
            Complex32 => K::ComplexHalf,
            Complex64 => K::ComplexFloat,
            Complex128 => K::ComplexDouble,
            Float8E4M3FN => K::Float8e4m3fn,
            Float8E5M2 => K::Float8e5m2,
            UInt16 | UInt32 | UInt64 | Float8E8M0FNU => return None,
        })
    }

    pub fn from_kind(kind: tch::Kind) -> Option<DType> {
        DType::ALL
            .iter()
            .copied()
            .find(|d| d.to_kind() == Some(kind))
    }
}

/// Plain-old-data element types whose memory can be viewed as bytes (native little-endian).
///
/// # Safety
/// Implementors must have no padding and no invalid bit patterns.
pub unsafe trait Pod: Copy + Send + Sync + 'static {
    const DTYPE: DType;
}
unsafe impl Pod for f64 {
    const DTYPE: DType = DType::Float64;
}
unsafe impl Pod for f32 {
    const DTYPE: DType = DType::Float32;
}
unsafe impl Pod for i64 {
    const DTYPE: DType = DType::Int64;
}
unsafe impl Pod for i32 {
    const DTYPE: DType = DType::Int32;
}
unsafe impl Pod for i16 {
    const DTYPE: DType = DType::Int16;
}
unsafe impl Pod for i8 {
    const DTYPE: DType = DType::Int8;
}
unsafe impl Pod for u8 {
    const DTYPE: DType = DType::UInt8;
}
unsafe impl Pod for u16 {
    const DTYPE: DType = DType::UInt16;
}
unsafe impl Pod for u32 {
    const DTYPE: DType = DType::UInt32;
}
unsafe impl Pod for u64 {
    const DTYPE: DType = DType::UInt64;
}

/// The bytes of a slice of plain-old-data (native byte order; torch files are little-endian and
/// so is every machine this project runs on).
pub fn pod_bytes<T: Pod>(s: &[T]) -> &[u8] {
    // SAFETY: T is Pod (no padding), the length covers exactly the slice's memory.
    unsafe { std::slice::from_raw_parts(s.as_ptr() as *const u8, std::mem::size_of_val(s)) }
}

/// Where a tensor's bytes come from when a file is written: the writer streams them in
/// chunks, so a checkpoint never needs a second in-memory copy of its tensors.
pub trait ByteSource: Send + Sync {
    /// Total number of bytes.
    fn len(&self) -> u64;
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Calls `sink` with the bytes, in order, in one or more chunks.
    fn stream(&self, sink: &mut dyn FnMut(&[u8]) -> io::Result<()>) -> io::Result<()>;
    /// The bytes, when they are in memory.
    fn as_slice(&self) -> Option<&[u8]> {
        None
    }
    /// All the bytes in one buffer (a copy when they are not in memory).
    fn to_vec(&self) -> io::Result<Vec<u8>> {
        if let Some(s) = self.as_slice() {
            return Ok(s.to_vec());
        }
        let mut out = Vec::with_capacity(self.len() as usize);
        self.stream(&mut |c| {
            out.extend_from_slice(c);
            Ok(())
        })?;
        Ok(out)
    }
}

impl<T: Pod> ByteSource for Vec<T> {
    fn len(&self) -> u64 {
        std::mem::size_of_val(self.as_slice()) as u64
    }
    fn stream(&self, sink: &mut dyn FnMut(&[u8]) -> io::Result<()>) -> io::Result<()> {
        sink(pod_bytes(self))
    }
    fn as_slice(&self) -> Option<&[u8]> {
        Some(pod_bytes(self))
    }
}

impl<T: Pod> ByteSource for Arc<[T]> {
    fn len(&self) -> u64 {
        std::mem::size_of_val(&self[..]) as u64
    }
    fn stream(&self, sink: &mut dyn FnMut(&[u8]) -> io::Result<()>) -> io::Result<()> {
        sink(pod_bytes(self))
    }
    fn as_slice(&self) -> Option<&[u8]> {
        Some(pod_bytes(self))
    }
}

/// A byte range of a file, read in 8 MiB chunks when streamed (what a lazy load yields).
#[derive(Clone, Debug)]
pub struct FileRange {
    pub path: PathBuf,
    pub offset: u64,
    pub len: u64,
}

impl ByteSource for FileRange {
    fn len(&self) -> u64 {
        self.len
    }
    fn stream(&self, sink: &mut dyn FnMut(&[u8]) -> io::Result<()>) -> io::Result<()> {
        let mut f = File::open(&self.path)?;
        f.seek(SeekFrom::Start(self.offset))?;
        let mut buf = vec![0u8; (8 << 20).min(self.len as usize)];
        let mut left = self.len;
        while left > 0 {
            let n = (buf.len() as u64).min(left) as usize;
            f.read_exact(&mut buf[..n])?;
            sink(&buf[..n])?;
            left -= n as u64;
        }
        Ok(())
    }
}

/// Bytes produced on demand by a callback (e.g. generated or gathered data).
pub struct FnSource<F> {
    pub len: u64,
    pub f: F,
}

impl<F> ByteSource for FnSource<F>
where
    F: Fn(&mut dyn FnMut(&[u8]) -> io::Result<()>) -> io::Result<()> + Send + Sync,
{
    fn len(&self) -> u64 {
        self.len
    }
    fn stream(&self, sink: &mut dyn FnMut(&[u8]) -> io::Result<()>) -> io::Result<()> {
        let mut count = 0u64;
        (self.f)(&mut |c: &[u8]| {
            count += c.len() as u64;
            sink(c)
        })?;
        if count != self.len {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("byte source produced {count} bytes, declared {}", self.len),
            ));
        }
        Ok(())
    }
}

/// Borrowed bytes lent to [`with_borrowed`]'s closure; unusable once it returns.
struct Lent {
    ptr: *const u8,
    len: usize,
    valid: Arc<std::sync::RwLock<bool>>,
}

// SAFETY: the pointer is only dereferenced under the read lock while `valid` is true, and
// `with_borrowed` sets it false (under the write lock) before the borrow it came from ends.
unsafe impl Send for Lent {}
unsafe impl Sync for Lent {}

impl ByteSource for Lent {
    fn len(&self) -> u64 {
        self.len as u64
    }
    fn stream(&self, sink: &mut dyn FnMut(&[u8]) -> io::Result<()>) -> io::Result<()> {
        let valid = self.valid.read().unwrap_or_else(|e| e.into_inner());
        if !*valid {
            return Err(io::Error::other(
                "borrowed tensor bytes used after with_borrowed returned",
            ));
        }
        // SAFETY: see the Send/Sync impls; the borrow is alive while `valid` is true.
        sink(unsafe { std::slice::from_raw_parts(self.ptr, self.len) })
    }
}

/// Lends borrowed slices (e.g. `pod_bytes(&params)`) as byte sources to `f`, which builds a
/// [`Value`] from them and saves it: the bytes are streamed straight from the slices, never
/// copied. Sources that outlive `f` refuse to stream (an error, not a dangling read).
pub fn with_borrowed<R>(slices: &[&[u8]], f: impl FnOnce(Vec<Arc<dyn ByteSource>>) -> R) -> R {
    struct Revoke(Arc<std::sync::RwLock<bool>>);
    impl Drop for Revoke {
        fn drop(&mut self) {
            *self.0.write().unwrap_or_else(|e| e.into_inner()) = false;
        }
    }
    let valid = Arc::new(std::sync::RwLock::new(true));
    let _revoke = Revoke(valid.clone());
    let sources = slices
        .iter()
        .map(|s| {
            Arc::new(Lent {
                ptr: s.as_ptr(),
                len: s.len(),
                valid: valid.clone(),
            }) as Arc<dyn ByteSource>
        })
        .collect();
    f(sources)
}

/// The memory of a contiguous CPU `tch::Tensor`, streamed without a copy.
///
/// The wrapper keeps the tensor alive; its bytes are read when the file is written, so the
/// tensor must not be modified in place until then.
pub struct TchBytes {
    tensor: tch::Tensor,
    len: u64,
}

// SAFETY: the wrapped tensor is only used to read its memory (data_ptr + len); no tch call that
// could mutate it is made through a shared reference.
unsafe impl Sync for TchBytes {}

impl TchBytes {
    /// Wraps `t` (made CPU and contiguous first; a copy only when it is not already).
    pub fn new(t: &tch::Tensor) -> Result<TchBytes> {
        let t = if t.device() != tch::Device::Cpu {
            t.to_device(tch::Device::Cpu)
        } else {
            t.shallow_clone()
        };
        let t = if t.is_contiguous() { t } else { t.contiguous() };
        let dtype = DType::from_kind(t.kind()).ok_or_else(|| {
            FormatError::unwritable(format!("tch kind {:?} has no torch dtype here", t.kind()))
        })?;
        let len = t.numel() as u64 * dtype.size();
        Ok(TchBytes { tensor: t, len })
    }
    pub fn tensor(&self) -> &tch::Tensor {
        &self.tensor
    }
}

impl ByteSource for TchBytes {
    fn len(&self) -> u64 {
        self.len
    }
    fn stream(&self, sink: &mut dyn FnMut(&[u8]) -> io::Result<()>) -> io::Result<()> {
        sink(self.as_slice().unwrap_or(&[]))
    }
    fn as_slice(&self) -> Option<&[u8]> {
        if self.len == 0 {
            return Some(&[]);
        }
        // SAFETY: the tensor is contiguous on the CPU and alive as long as self; len bytes
        // starting at data_ptr are its elements.
        Some(unsafe {
            std::slice::from_raw_parts(self.tensor.data_ptr() as *const u8, self.len as usize)
        })
    }
}

/// A torch storage: the bytes one or more tensors view.
pub struct Storage {
    pub dtype: DType,
    /// The location tag torch records (`"cpu"`, `"cuda:0"`).
    pub location: String,
    pub data: Arc<dyn ByteSource>,
}

impl Storage {
    pub fn new(dtype: DType, data: Arc<dyn ByteSource>) -> Storage {
        Storage {
            dtype,
            location: "cpu".to_string(),
            data,
        }
    }
    /// Bytes in the storage.
    pub fn nbytes(&self) -> u64 {
        self.data.len()
    }
    /// Elements in the storage.
    pub fn numel(&self) -> u64 {
        self.data.len() / self.dtype.size()
    }
}

impl fmt::Debug for Storage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Storage({:?}, {} bytes, {})",
            self.dtype,
            self.nbytes(),
            self.location
        )
    }
}

/// A tensor: a strided view of a storage (`torch._utils._rebuild_tensor_v2` arguments).
///
/// Tensors holding clones of one `Arc<Storage>` share it in the file (one `data/<key>` record),
/// as views of one torch storage do.
#[derive(Clone)]
pub struct Tensor {
    pub storage: Arc<Storage>,
    /// In elements.
    pub storage_offset: i64,
    pub shape: Vec<i64>,
    /// In elements.
    pub stride: Vec<i64>,
    pub requires_grad: bool,
    /// The optional seventh argument torch adds for tensors with extra metadata.
    pub metadata: Option<Box<Value>>,
}

impl fmt::Debug for Tensor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Tensor({:?}, shape {:?}, stride {:?}, offset {}, {:?})",
            self.dtype(),
            self.shape,
            self.stride,
            self.storage_offset,
            self.storage
        )
    }
}

impl PartialEq for Tensor {
    fn eq(&self, o: &Tensor) -> bool {
        if self.dtype() != o.dtype()
            || self.shape != o.shape
            || self.stride != o.stride
            || self.storage_offset != o.storage_offset
            || self.requires_grad != o.requires_grad
            || self.metadata != o.metadata
            || self.storage.location != o.storage.location
        {
            return false;
        }
        if Arc::ptr_eq(&self.storage, &o.storage) {
            return true;
        }
        match (self.storage.data.to_vec(), o.storage.data.to_vec()) {
            (Ok(a), Ok(b)) => a == b,
            _ => false,
        }
    }
}

/// Row-major strides of a shape.
pub fn contiguous_strides(shape: &[i64]) -> Vec<i64> {
    let mut stride = vec![1i64; shape.len()];
    for i in (0..shape.len().saturating_sub(1)).rev() {
        stride[i] = stride[i + 1] * shape[i + 1].max(1);
    }
    stride
}

impl Tensor {
    /// A contiguous tensor over its own storage holding exactly `shape`'s elements.
    pub fn new(dtype: DType, shape: &[i64], data: Arc<dyn ByteSource>) -> Result<Tensor> {
        // Checked: a wrapped product could match a small source and pass.
        let numel: i64 = if shape.iter().any(|&s| s < 0) {
            -1
        } else {
            shape
                .iter()
                .try_fold(1i64, |a, &s| a.checked_mul(s))
                .unwrap_or(-1)
        };
        if numel < 0 || (numel as u64).checked_mul(dtype.size()) != Some(data.len()) {
            return Err(FormatError::unwritable(format!(
                "tensor of shape {shape:?} and dtype {} needs {} bytes, source has {}",
                dtype.torch_name(),
                numel.max(0) as u64 * dtype.size(),
                data.len()
            )));
        }
        Ok(Tensor {
            storage: Arc::new(Storage::new(dtype, data)),
            storage_offset: 0,
            shape: shape.to_vec(),
            stride: contiguous_strides(shape),
            requires_grad: false,
            metadata: None,
        })
    }

    /// A contiguous tensor owning `data`.
    pub fn from_vec<T: Pod>(shape: &[i64], data: Vec<T>) -> Result<Tensor> {
        Tensor::new(T::DTYPE, shape, Arc::new(data))
    }

    /// A 0-dim tensor holding one value (what optimizers keep as `step`).
    pub fn scalar<T: Pod>(x: T) -> Tensor {
        Tensor::new(T::DTYPE, &[], Arc::new(vec![x])).expect("one element")
    }

    /// Wraps a tch tensor without copying its memory (see [`TchBytes`]).
    pub fn from_tch(t: &tch::Tensor) -> Result<Tensor> {
        let dtype = DType::from_kind(t.kind()).ok_or_else(|| {
            FormatError::unwritable(format!("tch kind {:?} has no torch dtype here", t.kind()))
        })?;
        let bytes = TchBytes::new(t)?;
        let shape = t.size();
        Tensor::new(dtype, &shape, Arc::new(bytes))
    }

    /// A new tch tensor holding a copy of this tensor's elements.
    pub fn to_tch(&self) -> Result<tch::Tensor> {
        let dtype = self.dtype();
        let kind = dtype.to_kind().ok_or_else(|| {
            FormatError::invalid(format!("dtype {} has no tch kind", dtype.torch_name()))
        })?;
        let bytes = self
            .storage
            .data
            .to_vec()
            .map_err(|e| FormatError::io("read tensor data", e))?;
        let numel = self.storage.numel() as i64;
        let storage = tch::Tensor::f_from_data_size(&bytes, &[numel], kind)
            .map_err(|e| FormatError::invalid(format!("tch refused tensor data: {e}")))?;
        let view = storage
            .f_as_strided(&self.shape, &self.stride, Some(self.storage_offset))
            .map_err(|e| FormatError::invalid(format!("tch refused tensor view: {e}")))?;
        Ok(view.contiguous())
    }

    pub fn dtype(&self) -> DType {
        self.storage.dtype
    }

    pub fn numel(&self) -> u64 {
        self.shape.iter().product::<i64>().max(0) as u64
    }

    pub fn with_requires_grad(mut self, requires_grad: bool) -> Tensor {
        self.requires_grad = requires_grad;
        self
    }

    /// True when the tensor is the whole of its storage, row-major.
    pub fn is_whole_contiguous(&self) -> bool {
        self.storage_offset == 0
            && (self.numel() <= 1 || self.stride == contiguous_strides(&self.shape))
            && self.numel() * self.dtype().size() == self.storage.nbytes()
    }

    /// The elements of the view, row-major, as bytes (a copy).
    pub fn contiguous_bytes(&self) -> io::Result<Vec<u8>> {
        let all = self.storage.data.to_vec()?;
        if self.is_whole_contiguous() {
            return Ok(all);
        }
        let es = self.dtype().size() as usize;
        let n = self.numel() as usize;
        let mut out = Vec::with_capacity(n * es);
        let mut idx = vec![0i64; self.shape.len()];
        for _ in 0..n {
            let off: i64 = self.storage_offset
                + idx
                    .iter()
                    .zip(&self.stride)
                    .map(|(i, s)| i * s)
                    .sum::<i64>();
            let o = off as usize * es;
            let chunk = all
                .get(o..o + es)
                .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "view out of storage"))?;
            out.extend_from_slice(chunk);
            for d in (0..idx.len()).rev() {
                idx[d] += 1;
                if idx[d] < self.shape[d] {
                    break;
                }
                idx[d] = 0;
            }
        }
        Ok(out)
    }
}
