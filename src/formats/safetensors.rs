//! `model.safetensors` exactly as the `safetensors` Python package (0.8, Rust core) writes it:
//! an 8-byte little-endian header length, a compact JSON header — `__metadata__` first, then the
//! tensors sorted by dtype (largest alignment first, in the crate's `Dtype` order) and name —
//! padded with spaces to a multiple of 8, then the tensor bytes in header order.
//! Tensor data is streamed from borrowed slices or [`ByteSource`]s.

use crate::formats::torch_format::{ByteSource, DType, FileRange, FormatError, Result, Tensor};
use serde_json::{Map, Value as Json};
use std::fs::File;
use std::io::{self, BufWriter, Read, Seek, SeekFrom, Write};
use std::path::Path;
use std::sync::Arc;

/// Element types of safetensors, in the crate's order (which decides the tensor order).
#[allow(non_camel_case_types)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Dtype {
    BOOL,
    F4,
    F6_E2M3,
    F6_E3M2,
    U8,
    I8,
    F8_E5M2,
    F8_E4M3,
    F8_E8M0,
    I16,
    U16,
    F16,
    BF16,
    I32,
    U32,
    F32,
    C64,
    F64,
    I64,
    U64,
}

impl Dtype {
    pub const ALL: [Dtype; 20] = [
        Dtype::BOOL,
        Dtype::F4,
        Dtype::F6_E2M3,
        Dtype::F6_E3M2,
        Dtype::U8,
        Dtype::I8,
        Dtype::F8_E5M2,
        Dtype::F8_E4M3,
        Dtype::F8_E8M0,
        Dtype::I16,
        Dtype::U16,
        Dtype::F16,
        Dtype::BF16,
        Dtype::I32,
        Dtype::U32,
        Dtype::F32,
        Dtype::C64,
        Dtype::F64,
        Dtype::I64,
        Dtype::U64,
    ];

    pub fn name(self) -> &'static str {
        use Dtype::*;
        match self {
            BOOL => "BOOL",
            F4 => "F4",
            F6_E2M3 => "F6_E2M3",
            F6_E3M2 => "F6_E3M2",
            U8 => "U8",
            I8 => "I8",
            F8_E5M2 => "F8_E5M2",
            F8_E4M3 => "F8_E4M3",
            F8_E8M0 => "F8_E8M0",
            I16 => "I16",
            U16 => "U16",
            F16 => "F16",
            BF16 => "BF16",
            I32 => "I32",
            U32 => "U32",
            F32 => "F32",
            C64 => "C64",
            F64 => "F64",
            I64 => "I64",
            U64 => "U64",
        }
    }

    pub fn from_name(s: &str) -> Option<Dtype> {
        Dtype::ALL.iter().copied().find(|d| d.name() == s)
    }

    /// Bits per element.
    pub fn bits(self) -> u64 {
        use Dtype::*;
        match self {
            F4 => 4,
            F6_E2M3 | F6_E3M2 => 6,
            BOOL | U8 | I8 | F8_E5M2 | F8_E4M3 | F8_E8M0 => 8,
            I16 | U16 | F16 | BF16 => 16,
            I32 | U32 | F32 => 32,
            C64 | F64 | I64 | U64 => 64,
        }
    }

    pub fn to_torch(self) -> Option<DType> {
        use Dtype::*;
        Some(match self {
            BOOL => DType::Bool,
            U8 => DType::UInt8,
            I8 => DType::Int8,
            F8_E5M2 => DType::Float8E5M2,
            F8_E4M3 => DType::Float8E4M3FN,
            F8_E8M0 => DType::Float8E8M0FNU,
            I16 => DType::Int16,
            U16 => DType::UInt16,
            F16 => DType::Float16,
            BF16 => DType::BFloat16,
            I32 => DType::Int32,
            U32 => DType::UInt32,
            F32 => DType::Float32,
            C64 => DType::Complex64,
            F64 => DType::Float64,
            I64 => DType::Int64,
            U64 => DType::UInt64,
            F4 | F6_E2M3 | F6_E3M2 => return None,
        })
    }

    pub fn from_torch(d: DType) -> Option<Dtype> {
        Dtype::ALL.iter().copied().find(|x| x.to_torch() == Some(d))
    }
}

/// The bytes of one tensor to write.
#[derive(Clone, Copy)]
pub enum Data<'a> {
    Bytes(&'a [u8]),
    Source(&'a dyn ByteSource),
}

impl Data<'_> {
    fn len(&self) -> u64 {
        match self {
            Data::Bytes(b) => b.len() as u64,
            Data::Source(s) => s.len(),
        }
    }
}

/// One tensor to write: name, dtype, shape and its bytes (row-major, little-endian).
#[derive(Clone, Copy)]
pub struct TensorRef<'a> {
    pub name: &'a str,
    pub dtype: Dtype,
    pub shape: &'a [u64],
    pub data: Data<'a>,
}

/// Shapes of torch tensors as safetensors wants them.
pub fn shape_u64(t: &Tensor) -> Vec<u64> {
    t.shape.iter().map(|&s| s as u64).collect()
}

impl<'a> TensorRef<'a> {
    pub fn new(name: &'a str, dtype: Dtype, shape: &'a [u64], bytes: &'a [u8]) -> Self {
        TensorRef {
            name,
            dtype,
            shape,
            data: Data::Bytes(bytes),
        }
    }

    /// A torch-format tensor that is the whole of its storage, row-major; `shape` must be
    /// [`shape_u64`] of it.
    pub fn from_tensor(name: &'a str, t: &'a Tensor, shape: &'a [u64]) -> Result<Self> {
        if !t.is_whole_contiguous() {
            return Err(FormatError::unwritable(format!(
                "tensor {name}: safetensors needs a contiguous tensor covering its whole storage"
            )));
        }
        let dtype = Dtype::from_torch(t.dtype()).ok_or_else(|| {
            FormatError::unwritable(format!(
                "tensor {name}: dtype {} has no safetensors name",
                t.dtype().torch_name()
            ))
        })?;
        Ok(TensorRef {
            name,
            dtype,
            shape,
            data: Data::Source(t.storage.data.as_ref()),
        })
    }
}

/// How to write.
#[derive(Clone, Debug)]
pub struct SaveOptions {
    pub fsync: bool,
    pub buffer_size: usize,
}

impl Default for SaveOptions {
    fn default() -> Self {
        SaveOptions {
            fsync: false,
            buffer_size: 8 << 20,
        }
    }
}

fn nbytes(dtype: Dtype, shape: &[u64]) -> Option<u64> {
    let numel = shape.iter().try_fold(1u64, |a, &s| a.checked_mul(s))?;
    let bits = numel.checked_mul(dtype.bits())?;
    if bits % 8 != 0 {
        return None;
    }
    Some(bits / 8)
}

/// The order the tensors are written in: dtype descending, then name.
fn ordered<'a, 'b>(tensors: &'b [TensorRef<'a>]) -> Result<Vec<&'b TensorRef<'a>>> {
    let mut v: Vec<&TensorRef> = tensors.iter().collect();
    v.sort_by(|a, b| b.dtype.cmp(&a.dtype).then(a.name.cmp(b.name)));
    for w in v.windows(2) {
        if w[0].name == w[1].name {
            return Err(FormatError::unwritable(format!(
                "tensor name {} given twice",
                w[0].name
            )));
        }
    }
    for t in &v {
        if t.name == "__metadata__" {
            return Err(FormatError::unwritable(
                "a tensor may not be called __metadata__",
            ));
        }
        let need = nbytes(t.dtype, t.shape).ok_or_else(|| {
            FormatError::unwritable(format!("tensor {}: bad shape {:?}", t.name, t.shape))
        })?;
        if need != t.data.len() {
            return Err(FormatError::unwritable(format!(
                "tensor {}: shape {:?} of {} needs {need} bytes, data has {}",
                t.name,
                t.shape,
                t.dtype.name(),
                t.data.len()
            )));
        }
    }
    Ok(v)
}

/// The header (length prefix included, padded) for these tensors.
pub fn header_bytes(
    tensors: &[TensorRef<'_>],
    metadata: Option<&[(&str, &str)]>,
) -> Result<Vec<u8>> {
    let order = ordered(tensors)?;
    Ok(header_of(&order, metadata))
}

fn header_of(order: &[&TensorRef<'_>], metadata: Option<&[(&str, &str)]>) -> Vec<u8> {
    let mut map = Map::new();
    if let Some(md) = metadata {
        let m: Map<String, Json> = md
            .iter()
            .map(|(k, v)| (k.to_string(), Json::String(v.to_string())))
            .collect();
        map.insert("__metadata__".into(), Json::Object(m));
    }
    let mut off = 0u64;
    for t in order {
        let n = t.data.len();
        let mut info = Map::new();
        info.insert("dtype".into(), Json::String(t.dtype.name().into()));
        info.insert(
            "shape".into(),
            Json::Array(t.shape.iter().map(|&s| Json::from(s)).collect()),
        );
        info.insert(
            "data_offsets".into(),
            Json::Array(vec![Json::from(off), Json::from(off + n)]),
        );
        map.insert(t.name.to_string(), Json::Object(info));
        off += n;
    }
    let mut json = serde_json::to_vec(&Json::Object(map)).expect("JSON of strings and ints");
    let pad = (8 - json.len() % 8) % 8;
    json.extend(std::iter::repeat_n(b' ', pad));
    let mut out = (json.len() as u64).to_le_bytes().to_vec();
    out.extend_from_slice(&json);
    out
}

/// Writes a safetensors file to `w`; returns the writer and the byte count.
pub fn save_to_writer<W: Write>(
    mut w: W,
    tensors: &[TensorRef<'_>],
    metadata: Option<&[(&str, &str)]>,
) -> Result<(W, u64)> {
    let order = ordered(tensors)?;
    let head = header_of(&order, metadata);
    let werr = |e: io::Error| FormatError::io("write", e);
    w.write_all(&head).map_err(werr)?;
    let mut n = head.len() as u64;
    for t in order {
        match t.data {
            Data::Bytes(b) => w.write_all(b).map_err(werr)?,
            Data::Source(s) => {
                let mut got = 0u64;
                s.stream(&mut |c| {
                    got += c.len() as u64;
                    w.write_all(c)
                })
                .map_err(werr)?;
                if got != t.data.len() {
                    return Err(FormatError::unwritable(format!(
                        "tensor {}: source gave {got} bytes",
                        t.name
                    )));
                }
            }
        }
        n += t.data.len();
    }
    Ok((w, n))
}

/// Writes `path` as `safetensors.torch.save_file(tensors, path, metadata)` does.
/// HF passes `metadata = {"format": "pt"}`.
pub fn save(
    path: impl AsRef<Path>,
    tensors: &[TensorRef<'_>],
    metadata: Option<&[(&str, &str)]>,
    opts: &SaveOptions,
) -> Result<u64> {
    let path = path.as_ref();
    let run = || -> Result<u64> {
        let f = File::create(path).map_err(|e| FormatError::io("create", e))?;
        let (w, n) = save_to_writer(
            BufWriter::with_capacity(opts.buffer_size.max(1), f),
            tensors,
            metadata,
        )?;
        let f = w
            .into_inner()
            .map_err(|e| FormatError::io("write", e.into_error()))?;
        if opts.fsync {
            f.sync_all().map_err(|e| FormatError::io("fsync", e))?;
        }
        Ok(n)
    };
    run().map_err(|e| e.at(path))
}

/// A tensor entry of a header.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TensorInfo {
    pub name: String,
    pub dtype: Dtype,
    pub shape: Vec<u64>,
    /// Byte range relative to the start of the data section.
    pub data_offsets: (u64, u64),
}

/// `__metadata__` entries in file order.
pub type Metadata = Vec<(String, String)>;

/// A safetensors file's header, validated against the file's size.
#[derive(Clone, Debug)]
pub struct SafeTensors {
    pub path: std::path::PathBuf,
    /// Length of the JSON header (padding included).
    pub header_len: u64,
    /// `__metadata__`, in file order.
    pub metadata: Option<Metadata>,
    /// Tensors in header order.
    pub tensors: Vec<TensorInfo>,
}

const MAX_HEADER: u64 = 100_000_000;

/// Reads and validates the header of `path` (as the safetensors crate does: size limits,
/// known dtypes, contiguous non-overlapping offsets covering the data exactly).
pub fn read_header(path: impl AsRef<Path>) -> Result<SafeTensors> {
    let path = path.as_ref();
    read_header_inner(path).map_err(|e| e.at(path))
}

/// Parses a header from the start of a safetensors byte buffer (`total_len`: file size).
pub fn parse_header(
    bytes: &[u8],
    total_len: u64,
) -> Result<(u64, Option<Metadata>, Vec<TensorInfo>)> {
    let st = |m: String| FormatError::safetensors(m);
    if bytes.len() < 8 {
        return Err(st(format!(
            "truncated file: {} bytes, no header length",
            bytes.len()
        )));
    }
    let n = u64::from_le_bytes(bytes[..8].try_into().unwrap());
    if n > MAX_HEADER {
        return Err(st(format!(
            "header length {n} exceeds the limit of {MAX_HEADER}"
        )));
    }
    if 8 + n > total_len || 8 + n > bytes.len() as u64 {
        return Err(st(format!(
            "truncated header: {n} bytes announced, file has {total_len}"
        )));
    }
    let text = std::str::from_utf8(&bytes[8..8 + n as usize])
        .map_err(|_| st("header is not UTF-8".into()))?;
    let map = entries_of(text)?;
    let mut metadata = None;
    let mut tensors = Vec::new();
    for (k, v) in map {
        if k == "__metadata__" {
            let Json::Object(m) = v else {
                return Err(st("__metadata__ is not an object".into()));
            };
            let mut md = Vec::new();
            for (mk, mv) in m {
                let Json::String(s) = mv else {
                    return Err(st(format!("__metadata__ value of {mk} is not a string")));
                };
                md.push((mk, s));
            }
            metadata = Some(md);
            continue;
        }
        let bad = |what: &str| st(format!("tensor {k}: {what}"));
        let dtype = v
            .get("dtype")
            .and_then(|d| d.as_str())
            .ok_or_else(|| bad("no dtype"))
            .and_then(|d| Dtype::from_name(d).ok_or_else(|| bad(&format!("unknown dtype {d}"))))?;
        let shape: Vec<u64> = v
            .get("shape")
            .and_then(|s| s.as_array())
            .ok_or_else(|| bad("no shape"))?
            .iter()
            .map(|x| {
                // Bounded by i64::MAX: shapes become torch (i64) shapes, and with a 0 elsewhere
                // in the shape a huge dimension would still need 0 bytes.
                x.as_u64()
                    .filter(|&d| d <= i64::MAX as u64)
                    .ok_or_else(|| bad("shape is not a list of non-negative 64-bit ints"))
            })
            .collect::<Result<_>>()?;
        let offs = v
            .get("data_offsets")
            .and_then(|s| s.as_array())
            .ok_or_else(|| bad("no data_offsets"))?;
        if offs.len() != 2 {
            return Err(bad("data_offsets is not [begin, end]"));
        }
        let b = offs[0].as_u64().ok_or_else(|| bad("bad data_offsets"))?;
        let e = offs[1].as_u64().ok_or_else(|| bad("bad data_offsets"))?;
        if e < b {
            return Err(bad("data_offsets end before begin"));
        }
        let need = nbytes(dtype, &shape).ok_or_else(|| bad("shape overflows"))?;
        if need != e - b {
            return Err(bad(&format!(
                "shape {shape:?} of {} needs {need} bytes, offsets give {}",
                dtype.name(),
                e - b
            )));
        }
        tensors.push(TensorInfo {
            name: k,
            dtype,
            shape,
            data_offsets: (b, e),
        });
    }
    let mut by_off: Vec<&TensorInfo> = tensors.iter().collect();
    by_off.sort_by_key(|t| t.data_offsets);
    let mut end = 0u64;
    for t in by_off {
        if t.data_offsets.0 != end {
            return Err(st(format!(
                "tensor {}: data_offsets do not follow the previous tensor (gap or overlap)",
                t.name
            )));
        }
        end = t.data_offsets.1;
    }
    let data_len = total_len - 8 - n;
    if end != data_len {
        return Err(st(if end > data_len {
            format!("truncated data: header needs {end} bytes, file has {data_len}")
        } else {
            format!("{} bytes after the last tensor", data_len - end)
        }));
    }
    Ok((n, metadata, tensors))
}

/// The header's top-level entries in file order, duplicates kept: a JSON object read into a map
/// keeps only the last of two equal keys, so a file naming a tensor twice would load as one
/// tensor; it is refused instead.
fn entries_of(text: &str) -> Result<Vec<(String, Json)>> {
    use serde::de::{Deserializer, MapAccess, Visitor};
    struct Entries;
    impl<'de> Visitor<'de> for Entries {
        type Value = Vec<(String, Json)>;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("a JSON object")
        }
        fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> std::result::Result<Self::Value, A::Error> {
            let mut out = Vec::new();
            while let Some((k, v)) = m.next_entry::<String, Json>()? {
                out.push((k, v));
            }
            Ok(out)
        }
    }
    let mut de = serde_json::Deserializer::from_str(text);
    // On failure, the same messages as a plain parse: "not JSON" (with serde's reason) unless
    // the text is JSON of another kind.
    let entries = de.deserialize_map(Entries).map_err(|_| {
        FormatError::safetensors(match serde_json::from_str::<Json>(text) {
            Err(e) => format!("header is not JSON: {e}"),
            Ok(_) => "header is not a JSON object".to_string(),
        })
    })?;
    de.end()
        .map_err(|e| FormatError::safetensors(format!("header is not JSON: {e}")))?;
    let mut seen = std::collections::HashSet::new();
    for (k, _) in &entries {
        if !seen.insert(k.as_str()) {
            return Err(FormatError::safetensors(format!(
                "tensor {k}: named twice in the header"
            )));
        }
    }
    Ok(entries)
}

fn read_header_inner(path: &Path) -> Result<SafeTensors> {
    let mut f = File::open(path).map_err(|e| FormatError::io("open", e))?;
    let total = f.metadata().map_err(|e| FormatError::io("stat", e))?.len();
    let mut len8 = [0u8; 8];
    let got = read_up_to(&mut f, &mut len8)?;
    if got < 8 {
        return Err(FormatError::safetensors(format!(
            "truncated file: {total} bytes, no header length"
        )));
    }
    let n = u64::from_le_bytes(len8);
    if n > MAX_HEADER {
        return Err(FormatError::safetensors(format!(
            "header length {n} exceeds the limit of {MAX_HEADER}"
        )));
    }
    if 8 + n > total {
        return Err(FormatError::safetensors(format!(
            "truncated header: {n} bytes announced, file has {total}"
        )));
    }
    let mut buf = vec![0u8; 8 + n as usize];
    buf[..8].copy_from_slice(&len8);
    f.read_exact(&mut buf[8..])
        .map_err(|e| FormatError::io("read", e))?;
    let (header_len, metadata, tensors) = parse_header(&buf, total)?;
    Ok(SafeTensors {
        path: path.to_path_buf(),
        header_len,
        metadata,
        tensors,
    })
}

fn read_up_to(f: &mut File, buf: &mut [u8]) -> Result<usize> {
    let mut got = 0;
    while got < buf.len() {
        let n = f
            .read(&mut buf[got..])
            .map_err(|e| FormatError::io("read", e))?;
        if n == 0 {
            break;
        }
        got += n;
    }
    Ok(got)
}

impl SafeTensors {
    fn data_start(&self) -> u64 {
        8 + self.header_len
    }

    pub fn get(&self, name: &str) -> Option<&TensorInfo> {
        self.tensors.iter().find(|t| t.name == name)
    }

    /// Where a tensor's bytes are in the file (to stream them without reading).
    pub fn source(&self, info: &TensorInfo) -> FileRange {
        FileRange {
            path: self.path.clone(),
            offset: self.data_start() + info.data_offsets.0,
            len: info.data_offsets.1 - info.data_offsets.0,
        }
    }

    /// A tensor's bytes.
    pub fn read(&self, info: &TensorInfo) -> Result<Vec<u8>> {
        let run = || -> Result<Vec<u8>> {
            let mut f = File::open(&self.path).map_err(|e| FormatError::io("open", e))?;
            f.seek(SeekFrom::Start(self.data_start() + info.data_offsets.0))
                .map_err(|e| FormatError::io("seek", e))?;
            let mut buf = vec![0u8; (info.data_offsets.1 - info.data_offsets.0) as usize];
            f.read_exact(&mut buf).map_err(|e| {
                if e.kind() == io::ErrorKind::UnexpectedEof {
                    FormatError::safetensors(format!("truncated data of tensor {}", info.name))
                } else {
                    FormatError::io("read", e)
                }
            })?;
            Ok(buf)
        };
        run().map_err(|e| e.at(&self.path))
    }

    /// A tensor as a torch-format [`Tensor`] (bytes read into memory).
    pub fn tensor(&self, info: &TensorInfo) -> Result<Tensor> {
        let dtype = info.dtype.to_torch().ok_or_else(|| {
            FormatError::invalid(format!(
                "tensor {}: dtype {} has no torch dtype here",
                info.name,
                info.dtype.name()
            ))
            .at(&self.path)
        })?;
        let shape: Vec<i64> = info.shape.iter().map(|&s| s as i64).collect();
        Tensor::new(dtype, &shape, Arc::new(self.read(info)?)).map_err(|e| e.at(&self.path))
    }
}

/// Reads every tensor of a file, in header order.
pub fn load(path: impl AsRef<Path>) -> Result<(SafeTensors, Vec<(String, Tensor)>)> {
    let st = read_header(path)?;
    let mut out = Vec::with_capacity(st.tensors.len());
    for t in &st.tensors {
        out.push((t.name.clone(), st.tensor(t)?));
    }
    Ok((st, out))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_matches_python_ordering_and_padding() {
        let a = [0u8; 8];
        let b = [0u8; 6];
        let c = [0u8; 1];
        let s1: &[u64] = &[2];
        let s3: &[u64] = &[3];
        let s_: &[u64] = &[1];
        let ts = [
            TensorRef::new("b", Dtype::F16, s3, &b),
            TensorRef::new("a", Dtype::F32, s1, &a),
            TensorRef::new("c", Dtype::BOOL, s_, &c),
        ];
        let h = header_bytes(&ts, Some(&[("format", "pt")])).unwrap();
        let text = std::str::from_utf8(&h[8..]).unwrap();
        assert_eq!(
            text.trim_end(),
            r#"{"__metadata__":{"format":"pt"},"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F16","shape":[3],"data_offsets":[8,14]},"c":{"dtype":"BOOL","shape":[1],"data_offsets":[14,15]}}"#
        );
        assert_eq!((h.len() - 8) % 8, 0);
        assert_eq!(
            header_bytes(&[], None).unwrap(),
            b"\x08\0\0\0\0\0\0\0{}      ".to_vec()
        );
    }

    #[test]
    fn rejects_truncated_and_corrupt_headers() {
        let e = parse_header(b"\x10\0\0\0\0\0\0\0{}", 10).unwrap_err();
        assert!(e.to_string().contains("truncated header"), "{e}");
        let mut good =
            header_bytes(&[TensorRef::new("x", Dtype::F32, &[1], &[0; 4])], None).unwrap();
        let n = good.len() as u64;
        let e = parse_header(&good, n + 2).unwrap_err();
        assert!(e.to_string().contains("truncated data"), "{e}");
        good[8] = b'[';
        let e = parse_header(&good, n + 4).unwrap_err();
        assert!(e.to_string().contains("not JSON"), "{e}");
    }
}
