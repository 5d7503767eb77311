//! `torch.save` / `torch.load` files (zip + pickle), written byte for byte as torch writes them
//! and read without executing anything.
//!
//! * [`save`] / [`save_with`] / [`save_to_writer`] write a [`Value`] the way torch 2.13's
//!   `torch.save` does (or torch 2.1's, see [`ArchiveStyle`]): `<archive>/data.pkl` (pickle
//!   protocol 2 as CPython's C pickler emits it), `.format_version`, `.storage_alignment`,
//!   `byteorder`, one `data/<key>` record per storage (64-byte aligned, streamed from the
//!   tensors' [`ByteSource`]s), `version`, `.data/serialization_id`; stored entries with CRC32,
//!   zip64 records where needed.
//! * [`load`] / [`load_with`] read such a file with a restricted unpickler that refuses any
//!   global not on its [`AllowList`] (`refusing global os.system`).
//! * Reading a file and writing the value back with [`ArchiveInfo::save_options`] reproduces
//!   the file byte for byte (the golden checkpoints of HF 5.24.0 and 4.31.0 do).

pub mod error;
mod pickle_read;
mod pickle_write;
pub mod value;
pub mod zip;

pub use error::{FormatError, Result};
pub use pickle_read::{default_allow_list, AllowList, StorageRequest, MAX_DEPTH};
pub use value::{
    contiguous_strides, pod_bytes, with_borrowed, ByteSource, Construct, DType, FileRange,
    FnSource, Global, Object, Pod, Storage, TchBytes, Tensor, Value,
};

use std::collections::HashMap;
use std::fs::File;
use std::io::{self, BufWriter, Read, Write};
use std::path::Path;
use std::sync::Arc;

/// Which torch version's archive layout to write.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum ArchiveStyle {
    /// torch ≥ 2.3 (2.13 here): `.format_version` and `.storage_alignment` records after
    /// `data.pkl`, storages in first-use order (`data/0`, `data/1`, ..., `data/10`).
    #[default]
    Torch2_13,
    /// torch 2.1: no `.format_version` / `.storage_alignment`, storages in lexicographic key
    /// order (`data/0`, `data/1`, `data/10`, `data/2`).
    Torch2_1,
}

/// The `.data/serialization_id` record.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub enum SerializationId {
    /// A fresh random 40-digit id, as torch writes.
    #[default]
    Random,
    /// This id (e.g. the one read from the file being reproduced).
    Fixed(String),
    /// No such record (files of torch before 2.0).
    Omit,
}

/// How to write a torch file.
#[derive(Clone, Debug)]
pub struct SaveOptions {
    /// Folder name inside the zip; `None`: derived from the file name as torch does
    /// (`optimizer.pt` → `optimizer`), `archive` when writing to a stream.
    pub archive_name: Option<String>,
    pub style: ArchiveStyle,
    /// Alignment of record data (torch's `storage_alignment`, 64).
    pub storage_alignment: u64,
    pub serialization_id: SerializationId,
    /// Write CRC32s (torch does unless told not to).
    pub crc32: bool,
    /// `fsync` the file before returning (only for [`save_with`]).
    pub fsync: bool,
    /// Capacity of the write buffer; writes larger than it go straight to the file.
    pub buffer_size: usize,
}

impl Default for SaveOptions {
    fn default() -> Self {
        SaveOptions {
            archive_name: None,
            style: ArchiveStyle::Torch2_13,
            storage_alignment: 64,
            serialization_id: SerializationId::Random,
            crc32: true,
            fsync: false,
            buffer_size: 8 << 20,
        }
    }
}

/// What a loaded file's container looked like: enough to write it back identically.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ArchiveInfo {
    pub archive_name: String,
    pub style: ArchiveStyle,
    pub storage_alignment: u64,
    pub serialization_id: Option<String>,
    /// Record names in file order, without the archive folder.
    pub records: Vec<String>,
}

impl ArchiveInfo {
    /// Options that write this archive's layout again.
    pub fn save_options(&self) -> SaveOptions {
        SaveOptions {
            archive_name: Some(self.archive_name.clone()),
            style: self.style,
            storage_alignment: self.storage_alignment,
            serialization_id: match &self.serialization_id {
                Some(s) => SerializationId::Fixed(s.clone()),
                None => SerializationId::Omit,
            },
            ..SaveOptions::default()
        }
    }
}

/// How to read a torch file.
#[derive(Clone, Debug)]
pub struct LoadOptions {
    /// Leave tensor bytes in the file ([`FileRange`] sources) instead of reading them.
    pub lazy: bool,
    /// Check each storage record's CRC32 when reading it eagerly (a stored CRC of 0 means "none
    /// computed", see [`zip::read_entry`]). The small records (`data.pkl`, `byteorder`, ...) are
    /// always checked; with `lazy`, storages are not read here, so their CRCs are not checked.
    pub verify_crc: bool,
    pub allow: AllowList,
}

impl Default for LoadOptions {
    fn default() -> Self {
        LoadOptions {
            lazy: false,
            verify_crc: true,
            allow: AllowList::default(),
        }
    }
}

/// A loaded file: its value and its container layout.
#[derive(Clone, Debug)]
pub struct Loaded {
    pub value: Value,
    pub archive: ArchiveInfo,
}

/// The archive folder torch uses for a file: its name up to the last `.`.
pub fn archive_name_for(path: &Path) -> String {
    let base = path
        .file_name()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    match base.rfind('.') {
        Some(i) => base[..i].to_string(),
        None => base,
    }
}

/// A random serialization id in torch's form: 40 decimal digits.
pub fn new_serialization_id() -> String {
    use std::collections::hash_map::RandomState;
    use std::hash::{BuildHasher, Hasher};
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let mut parts = [0u64; 2];
    for p in &mut parts {
        let mut h = RandomState::new().build_hasher();
        h.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
        h.write_u128(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos())
                .unwrap_or(0),
        );
        h.write_u32(std::process::id());
        *p = h.finish();
    }
    format!("{:020}{:020}", parts[0], parts[1])
}

/// Writes `value` to `path` as `torch.save(value, path)` does.
pub fn save(path: impl AsRef<Path>, value: &Value) -> Result<()> {
    save_with(path, value, &SaveOptions::default()).map(|_| ())
}

/// Writes `value` to `path`; returns the file size.
pub fn save_with(path: impl AsRef<Path>, value: &Value, opts: &SaveOptions) -> Result<u64> {
    let path = path.as_ref();
    let run = || -> Result<u64> {
        let mut opts = opts.clone();
        if opts.archive_name.is_none() {
            opts.archive_name = Some(archive_name_for(path));
        }
        let f = File::create(path).map_err(|e| FormatError::io("create", e))?;
        let w = BufWriter::with_capacity(opts.buffer_size.max(1), f);
        let (w, n) = save_to_writer(w, value, &opts)?;
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

/// Writes `value` in torch's format to `w` (buffer it yourself; [`save_with`] does).
/// Returns the writer and the number of bytes written.
pub fn save_to_writer<W: Write>(w: W, value: &Value, opts: &SaveOptions) -> Result<(W, u64)> {
    let pickled = pickle_write::pickle(value)?;
    let archive = opts
        .archive_name
        .clone()
        .unwrap_or_else(|| "archive".to_string());
    let mut storages: Vec<&pickle_write::StorageRef> = pickled.storages.iter().collect();
    if opts.style == ArchiveStyle::Torch2_1 {
        storages.sort_by(|a, b| a.key.cmp(&b.key));
    }
    let werr = |e: io::Error| FormatError::io("write", e);
    let mut z = zip::ZipWriter::new(w, opts.storage_alignment, opts.crc32);
    z.record_bytes(&format!("{archive}/data.pkl"), &pickled.bytes)
        .map_err(werr)?;
    if opts.style == ArchiveStyle::Torch2_13 {
        z.record_bytes(&format!("{archive}/.format_version"), b"1")
            .map_err(werr)?;
        z.record_bytes(
            &format!("{archive}/.storage_alignment"),
            opts.storage_alignment.to_string().as_bytes(),
        )
        .map_err(werr)?;
    }
    z.record_bytes(&format!("{archive}/byteorder"), b"little")
        .map_err(werr)?;
    for s in storages {
        let src = &s.storage.data;
        z.record(
            &format!("{archive}/data/{}", s.key),
            src.len(),
            &mut |sink| src.stream(sink),
        )
        .map_err(werr)?;
    }
    z.record_bytes(&format!("{archive}/version"), b"3\n")
        .map_err(werr)?;
    let sid = match &opts.serialization_id {
        SerializationId::Random => Some(new_serialization_id()),
        SerializationId::Fixed(s) => Some(s.clone()),
        SerializationId::Omit => None,
    };
    if let Some(sid) = sid {
        z.record_bytes(&format!("{archive}/.data/serialization_id"), sid.as_bytes())
            .map_err(werr)?;
    }
    z.finish().map_err(werr)
}

/// Reads a torch file (what `torch.load(path, weights_only=True)` would accept, and the
/// HF objects of training_args.bin, kept as [`Object`]s).
pub fn load(path: impl AsRef<Path>) -> Result<Value> {
    load_with(path, &LoadOptions::default()).map(|l| l.value)
}

/// Reads a torch file with options; also returns its container layout.
pub fn load_with(path: impl AsRef<Path>, opts: &LoadOptions) -> Result<Loaded> {
    let path = path.as_ref();
    load_inner(path, opts).map_err(|e| e.at(path))
}

fn load_inner(path: &Path, opts: &LoadOptions) -> Result<Loaded> {
    let mut f = File::open(path).map_err(|e| FormatError::io("open", e))?;
    let mut magic = [0u8; 4];
    let n = f.read(&mut magic).map_err(|e| FormatError::io("read", e))?;
    if n < 4 || magic != *b"PK\x03\x04" {
        if n >= 1 && magic[0] == 0x80 {
            return Err(FormatError::invalid(
                "legacy (non-zip, torch < 1.6) torch.save format is not supported",
            ));
        }
        return Err(FormatError::zip(
            "not a torch.save zip archive (no zip local header at the start)",
        ));
    }
    let entries = zip::read_directory(&mut f)?;
    let first = entries
        .first()
        .ok_or_else(|| FormatError::zip("empty zip archive"))?;
    let archive_name = match first.name.find('/') {
        Some(i) => first.name[..i].to_string(),
        None => {
            return Err(FormatError::zip(format!(
                "record {} is not inside an archive folder",
                first.name
            )))
        }
    };
    let prefix = format!("{archive_name}/");
    let mut by_name: HashMap<&str, &zip::ZipEntry> = HashMap::new();
    let mut records = Vec::with_capacity(entries.len());
    for e in &entries {
        let rel = e.name.strip_prefix(&prefix).ok_or_else(|| {
            FormatError::zip(format!(
                "record {} is outside the archive folder {archive_name}/",
                e.name
            ))
        })?;
        by_name.insert(rel, e);
        records.push(rel.to_string());
    }
    // Records read (and CRC-checked) so far; the rest are checked at the end.
    let read = std::cell::RefCell::new(std::collections::HashSet::<String>::new());
    let read_small = |f: &mut File, name: &str| -> Result<Option<Vec<u8>>> {
        match by_name.get(name) {
            Some(e) => {
                read.borrow_mut().insert(e.name.clone());
                Ok(Some(zip::read_entry(f, e, true)?))
            }
            None => Ok(None),
        }
    };
    if let Some(b) = read_small(&mut f, "byteorder")? {
        if b != b"little" {
            return Err(FormatError::invalid(format!(
                "byteorder {:?}: only little-endian archives are supported",
                String::from_utf8_lossy(&b)
            )));
        }
    }
    let style = if by_name.contains_key(".format_version") {
        ArchiveStyle::Torch2_13
    } else {
        ArchiveStyle::Torch2_1
    };
    let storage_alignment = match read_small(&mut f, ".storage_alignment")? {
        Some(b) => String::from_utf8_lossy(&b)
            .trim()
            .parse()
            .map_err(|_| FormatError::invalid("unreadable .storage_alignment record"))?,
        None => 64,
    };
    let serialization_id = read_small(&mut f, ".data/serialization_id")?
        .map(|b| String::from_utf8_lossy(&b).into_owned());
    let pkl = read_small(&mut f, "data.pkl")?
        .ok_or_else(|| FormatError::zip(format!("no {archive_name}/data.pkl record")))?;

    let mut cache: HashMap<String, Arc<Storage>> = HashMap::new();
    let lazy = opts.lazy;
    let verify = opts.verify_crc;
    let mut resolve = |req: &StorageRequest| -> Result<Arc<Storage>> {
        if let Some(s) = cache.get(&req.key) {
            if s.dtype != req.dtype {
                return Err(FormatError::invalid(format!(
                    "storage {} is viewed as both {} and {}",
                    req.key,
                    s.dtype.torch_name(),
                    req.dtype.torch_name()
                )));
            }
            return Ok(s.clone());
        }
        let name = format!("data/{}", req.key);
        let e = by_name.get(name.as_str()).ok_or_else(|| {
            FormatError::invalid(format!(
                "data.pkl refers to storage {} but there is no record {archive_name}/{name}",
                req.key
            ))
        })?;
        if e.size != req.nbytes {
            return Err(FormatError::invalid(format!(
                "record {archive_name}/{name} has {} bytes, data.pkl says {}",
                e.size, req.nbytes
            )));
        }
        let data: Arc<dyn ByteSource> = if lazy {
            Arc::new(FileRange {
                path: path.to_path_buf(),
                offset: e.data_offset,
                len: e.size,
            })
        } else {
            read.borrow_mut().insert(e.name.clone());
            Arc::new(zip::read_entry(&mut f, e, verify)?)
        };
        let s = Arc::new(Storage {
            dtype: req.dtype,
            location: req.location.clone(),
            data,
        });
        cache.insert(req.key.clone(), s.clone());
        Ok(s)
    };
    let value = pickle_read::unpickle_with(&pkl, "data.pkl", &opts.allow, &mut resolve)?;
    // Every other record is CRC-checked too (`version`, `.format_version`, storages data.pkl
    // does not use): a flipped bit anywhere in the file's records is an error, not a file that
    // loads equal. Lazy loads leave the storages unread, so only their small records are checked.
    if verify {
        let read = read.into_inner();
        for e in &entries {
            let is_storage = e.name[prefix.len()..].starts_with("data/");
            if !read.contains(&e.name) && !(lazy && is_storage) {
                zip::read_entry(&mut f, e, true)?;
            }
        }
    }
    Ok(Loaded {
        value,
        archive: ArchiveInfo {
            archive_name,
            style,
            storage_alignment,
            serialization_id,
            records,
        },
    })
}

/// Reads a bare pickle (no zip, so no tensors) with the default allow-list.
pub fn unpickle(bytes: &[u8]) -> Result<Value> {
    unpickle_allowing(bytes, &AllowList::default())
}

/// Reads a bare pickle with the given allow-list.
pub fn unpickle_allowing(bytes: &[u8], allow: &AllowList) -> Result<Value> {
    pickle_read::unpickle_with(bytes, "pickle", allow, &mut |req| {
        Err(FormatError::invalid(format!(
            "a bare pickle cannot hold tensors (storage {})",
            req.key
        )))
    })
}

/// The pickle bytes `torch.save` would put in `data.pkl` for `value`.
pub fn pickle_bytes(value: &Value) -> Result<Vec<u8>> {
    Ok(pickle_write::pickle(value)?.bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Keeps the first and last bytes written and counts the rest.
    struct Ends {
        head: Vec<u8>,
        tail: Vec<u8>,
        n: u64,
    }
    impl Write for Ends {
        fn write(&mut self, b: &[u8]) -> io::Result<usize> {
            if self.head.len() < 4096 {
                let k = (4096 - self.head.len()).min(b.len());
                self.head.extend_from_slice(&b[..k]);
            }
            self.tail
                .extend_from_slice(&b[b.len().saturating_sub(8192)..]);
            if self.tail.len() > 8192 {
                self.tail.drain(..self.tail.len() - 8192);
            }
            self.n += b.len() as u64;
            Ok(b.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    /// The layout torch 2.13 wrote for `{'a': arange(3.), 'big': zeros(2**32+100, uint8),
    /// 'c': arange(5)}` (checked against a real 4 GiB torch.save file): zip64 extra fields on
    /// the big record (sizes) and on every record after the 4 GiB mark (offsets), 64-bit data
    /// descriptors there, zip64 end records.
    #[test]
    fn zip64_layout_matches_torch() {
        const BIG: u64 = (1 << 32) + 100;
        let zeros = vec![0u8; 1 << 20];
        let big = FnSource {
            len: BIG,
            f: move |sink: &mut dyn FnMut(&[u8]) -> io::Result<()>| {
                let mut left = BIG;
                while left > 0 {
                    let n = left.min(zeros.len() as u64) as usize;
                    sink(&zeros[..n])?;
                    left -= n as u64;
                }
                Ok(())
            },
        };
        let v = Value::dict([
            (
                "a",
                Value::Tensor(Tensor::from_vec(&[3], vec![0f32, 1., 2.]).unwrap()),
            ),
            (
                "big",
                Value::Tensor(Tensor::new(DType::UInt8, &[BIG as i64], Arc::new(big)).unwrap()),
            ),
            (
                "c",
                Value::Tensor(Tensor::from_vec(&[5], vec![0i64, 1, 2, 3, 4]).unwrap()),
            ),
        ]);
        let opts = SaveOptions {
            archive_name: Some("big".into()),
            serialization_id: SerializationId::Fixed("0".repeat(40)),
            crc32: false,
            ..SaveOptions::default()
        };
        let (w, n) = save_to_writer(
            Ends {
                head: vec![],
                tail: vec![],
                n: 0,
            },
            &v,
            &opts,
        )
        .unwrap();
        assert_eq!(n, 4294969533, "same size as torch's file");
        let t = &w.tail;
        let hex = |b: &[u8]| b.iter().map(|x| format!("{x:02x}")).collect::<String>();
        let eocd = &t[t.len() - 22..];
        assert_eq!(hex(eocd), "504b050600000000090009005b020000ffffffff0000");
        let loc = &t[t.len() - 42..t.len() - 22];
        assert_eq!(hex(loc), "504b0607000000005b0800000100000001000000");
        let cd = &t[t.len() - 42 - 56 - 0x25b..t.len() - 42 - 56];
        // the big record's central entry: sizes in the zip64 field, real offset 924
        let big_at = cd.windows(10).position(|w| w == b"big/data/1").unwrap() - 46;
        assert_eq!(
            hex(&cd[big_at + 20..big_at + 32]),
            "ffffffffffffffff0a001400"
        );
        assert_eq!(
            u32::from_le_bytes(cd[big_at + 42..big_at + 46].try_into().unwrap()),
            924
        );
        assert_eq!(
            hex(&cd[big_at + 56..big_at + 76]),
            "0100100064000000010000006400000001000000"
        );
        // a record after the 4 GiB mark: offset in the zip64 field
        let c_at = cd.windows(10).position(|w| w == b"big/data/2").unwrap() - 46;
        assert_eq!(hex(&cd[c_at + 42..c_at + 46]), "ffffffff");
        assert_eq!(hex(&cd[c_at + 56..c_at + 68]), "010008007c04000001000000");
    }

    #[test]
    fn archive_names_follow_torch() {
        assert_eq!(archive_name_for(Path::new("/x/optimizer.pt")), "optimizer");
        assert_eq!(archive_name_for(Path::new("a.b.c")), "a.b");
        assert_eq!(archive_name_for(Path::new("noext")), "noext");
        assert_eq!(new_serialization_id().len(), 40);
    }
}
