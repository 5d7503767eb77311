//! The fast checkpoint-writing path: the same `checkpoint-N/` files the HF Trainer writes
//! (`model.safetensors`, `optimizer.pt`, `scheduler.pt`, `rng_state.pth`, `trainer_state.json`,
//! `training_args.bin`, `config.json`), written straight from the tensors' memory.
//!
//! How it is fast (see README "Save speed" for the numbers):
//!
//! * **No second copy of any tensor.** The format layer ([`crate::formats::safetensors`],
//!   [`crate::formats::torch_format`]) streams every tensor from a [`ByteSource`]; here that source is the
//!   tensor's own memory ([`HostChunks`]) or, for a tensor on a GPU, a small reused pinned
//!   staging buffer ([`DeviceChunks`]). The file writer ([`FileSink`]) passes large chunks
//!   straight to `write(2)` and coalesces only the small headers, so memory use during a save
//!   stays a few MiB above the tensors themselves, whatever their size.
//! * **The two big files are written concurrently**, `optimizer.pt` (2/3 of the bytes) on a
//!   second thread, `model.safetensors` and the small files on the calling thread.
//! * **CRC32 stays on** (torch's default; zip tools and this crate's reader check it) and is
//!   computed by `crc32fast` (PCLMUL/AVX-512, 15-23 GB/s here, against ~1.5 GB/s for the CRC
//!   inside `torch.save`) in 1 MiB chunks immediately before each chunk is written, so the data
//!   is read from DRAM once; it costs ~0.04 s per 0.8 GB on the optimizer thread.
//!   [`SaveOptions::crc32`] can turn it off (torch writes such files when
//!   `torch.utils.serialization.config.save.compute_crc32 = False`; `torch.load` does not check
//!   CRCs and accepts them, `zipfile.testzip` does not).
//! * **Durable mode** ([`SaveOptions::durable`]) fsyncs every file and the directories, and starts
//!   the writeback of each big file while it is still being written (`sync_file_range`), so the
//!   disk works while the rest is copied into the page cache instead of after it.
//!
//! The bytes are exactly those of the normal path (`torch_format::save_with`,
//! `safetensors::save`): the same writers produce them (tests/fastsave.rs checks it, and loads
//! every file with the real torch / safetensors).
//!
//! [`raw_write`] writes the same tensor bytes with nothing else (no headers, no CRC, one thread):
//! the bound the benchmarks compare against. [`Snapshot`] + [`save_owned`] give an async save:
//! the training loop stalls only for the copy into reused buffers.

use crate::formats::safetensors::{self as st, Data, TensorRef};
use crate::formats::torch_format::{self as tf, contiguous_strides, ByteSource, DType, FormatError, Storage, Tensor, Value};
use std::fs::{self, File};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

pub type Result<T> = std::result::Result<T, String>;

/// Writes of at least this many bytes go straight to the file; smaller ones are coalesced.
const DIRECT_MIN: usize = 64 << 10;
/// The coalescing buffer for headers, pickles, descriptors, directories.
const SMALL_BUF: usize = 256 << 10;
/// Chunk in which a record is CRC'd and then written: small enough to stay in L2 between the
/// two passes, large enough that the syscall cost is negligible.
pub const CRC_CHUNK: usize = 1 << 20;
/// Chunk for data without a CRC (safetensors): one write per tensor up to this size.
pub const PLAIN_CHUNK: usize = 64 << 20;
/// Durable mode: start writeback every this many bytes.
const KICK_EVERY: u64 = 32 << 20;
/// Size of one pinned staging buffer for device tensors.
const STAGING: usize = 16 << 20;

/// How to write a checkpoint.
#[derive(Clone, Debug)]
pub struct SaveOptions {
    /// fsync every file, the checkpoint folder and its parent before returning.
    pub durable: bool,
    /// CRC32 of the `optimizer.pt` / `.pth` / `.bin` records (on by default, like torch).
    pub crc32: bool,
    /// Write `optimizer.pt` on a second thread while the rest is written on this one.
    pub parallel: bool,
    /// Durable mode: start each big file's writeback while writing it (`sync_file_range`).
    pub early_writeback: bool,
    /// Chunk size in which CRC'd records are hashed and written.
    pub crc_chunk: usize,
    /// Which torch layout the `.pt` files get.
    pub style: tf::ArchiveStyle,
    /// The `.data/serialization_id` of the `.pt` files (random, as torch writes, by default).
    pub serialization_id: tf::SerializationId,
    /// Atomic mode (beyond HF): [`save`] writes `dir`'s files durably into a staging folder beside
    /// it (a name HF's `get_last_checkpoint` and rotation never match; a leftover of a killed
    /// save is removed first), then publishes the folder by one rename ([`crate::save::atomic`]): a
    /// crash leaves either no `dir` or a complete one. Implies `durable`.
    pub atomic: bool,
}

impl Default for SaveOptions {
    fn default() -> Self {
        SaveOptions {
            durable: false,
            crc32: true,
            parallel: true,
            early_writeback: true,
            crc_chunk: CRC_CHUNK,
            style: tf::ArchiveStyle::Torch2_13,
            serialization_id: tf::SerializationId::Random,
            atomic: false,
        }
    }
}

impl SaveOptions {
    pub fn durable() -> Self {
        SaveOptions { durable: true, ..Default::default() }
    }
    /// Durable and atomic ([`SaveOptions::atomic`]).
    pub fn atomic() -> Self {
        SaveOptions { durable: true, atomic: true, ..Default::default() }
    }
}

/// A small file of the checkpoint.
pub enum Small {
    /// These bytes.
    Bytes(Vec<u8>),
    /// `torch.save` of this value.
    Torch(Value),
    /// A function that writes the file: it gets the checkpoint folder and must create the file
    /// under the name it is listed with (e.g. [`store::write_rng`]).
    With(WriteFn),
}

/// Writes a file into the checkpoint folder it is given.
pub type WriteFn = Box<dyn Fn(&Path) -> Result<()> + Send + Sync>;

/// One parameter's AdamW state (`{"step": tensor(step), "exp_avg": .., "exp_avg_sq": ..}`).
pub struct AdamEntry<'a> {
    pub step: f32,
    pub exp_avg: &'a tch::Tensor,
    pub exp_avg_sq: &'a tch::Tensor,
}

/// `optimizer.state_dict()` of a torch AdamW: `state` indexed 0.. in torch's parameter numbering
/// (group by group), and the `param_groups` list as a value.
pub struct AdamState<'a> {
    pub entries: Vec<AdamEntry<'a>>,
    pub param_groups: Value,
}

/// What one checkpoint holds. Tensors are borrowed: nothing is copied (except a device tensor's
/// chunks, through a staging buffer).
pub struct Checkpoint<'a> {
    /// The model's state dict, for `model.safetensors`.
    pub weights: Vec<(String, &'a tch::Tensor)>,
    /// `safetensors` metadata (HF: `{"format": "pt"}`).
    pub weights_metadata: Vec<(String, String)>,
    /// For `optimizer.pt` (None: `save_only_model`).
    pub optimizer: Option<AdamState<'a>>,
    /// The other files, by name.
    pub small: Vec<(String, Small)>,
}

/// What a save wrote and how long it took.
#[derive(Clone, Debug, Default)]
pub struct SaveReport {
    pub files: Vec<(String, u64)>,
    pub bytes: u64,
    pub elapsed: Duration,
}

fn e<E: std::fmt::Display>(x: E) -> String {
    x.to_string()
}

// ------------------------------------------------------------------------------ byte sources

/// The memory of a contiguous CPU tch tensor, streamed in `chunk`-sized slices, no copy.
pub struct HostChunks {
    t: tch::Tensor,
    len: usize,
    chunk: usize,
}

// SAFETY: the tensor is only read through its data pointer; no tch call mutates it.
unsafe impl Sync for HostChunks {}

impl HostChunks {
    /// `t` must be a CPU tensor; a non-contiguous one is made contiguous (a copy).
    pub fn new(t: &tch::Tensor, chunk: usize) -> Result<HostChunks> {
        if t.device() != tch::Device::Cpu {
            return Err("HostChunks needs a CPU tensor".into());
        }
        let t = if t.is_contiguous() { t.shallow_clone() } else { t.contiguous() };
        let len = t.numel() * kind_size(t.kind())?;
        Ok(HostChunks { t, len, chunk: chunk.max(4096) })
    }
    fn bytes(&self) -> &[u8] {
        if self.len == 0 {
            return &[];
        }
        // SAFETY: contiguous CPU tensor alive as long as self; `len` bytes from data_ptr.
        unsafe { std::slice::from_raw_parts(self.t.data_ptr() as *const u8, self.len) }
    }
}

impl ByteSource for HostChunks {
    fn len(&self) -> u64 {
        self.len as u64
    }
    fn stream(&self, sink: &mut dyn FnMut(&[u8]) -> io::Result<()>) -> io::Result<()> {
        for c in self.bytes().chunks(self.chunk) {
            sink(c)?;
        }
        Ok(())
    }
    fn as_slice(&self) -> Option<&[u8]> {
        Some(self.bytes())
    }
}

/// Reused pinned host buffers for device-to-host staging (one per writer thread at a time).
fn staging_pool() -> &'static Mutex<Vec<tch::Tensor>> {
    static POOL: OnceLock<Mutex<Vec<tch::Tensor>>> = OnceLock::new();
    POOL.get_or_init(|| Mutex::new(Vec::new()))
}

/// A tensor on a GPU, streamed through a pinned host staging buffer of [`STAGING`] bytes:
/// chunk by chunk, copy to host, hand to the writer. Host memory used: one staging buffer per
/// writer thread, reused across saves.
pub struct DeviceChunks {
    /// The tensor's bytes as a flat uint8 view on the device.
    flat: tch::Tensor,
    len: usize,
    device: tch::Device,
}

// SAFETY: the device tensor is only read (views and copies from it); one thread streams it.
unsafe impl Sync for DeviceChunks {}

impl DeviceChunks {
    pub fn new(t: &tch::Tensor) -> Result<DeviceChunks> {
        let device = t.device();
        let t = if t.is_contiguous() { t.shallow_clone() } else { t.contiguous() };
        let len = t.numel() * kind_size(t.kind())?;
        let flat = t.reshape([-1]).f_view_dtype(tch::Kind::Uint8).map_err(e)?;
        Ok(DeviceChunks { flat, len, device })
    }
}

impl ByteSource for DeviceChunks {
    fn len(&self) -> u64 {
        self.len as u64
    }
    fn stream(&self, sink: &mut dyn FnMut(&[u8]) -> io::Result<()>) -> io::Result<()> {
        let mut buf = staging_pool().lock().unwrap().pop();
        if buf.is_none() {
            let b = tch::Tensor::empty([STAGING as i64], (tch::Kind::Uint8, tch::Device::Cpu));
            buf = Some(if tch::Cuda::is_available() { b.pin_memory(self.device) } else { b });
        }
        let buf = buf.unwrap();
        let res = (|| {
            let mut off = 0usize;
            while off < self.len {
                let n = (self.len - off).min(STAGING);
                let mut dst = buf.narrow(0, 0, n as i64);
                dst.f_copy_(&self.flat.narrow(0, off as i64, n as i64))
                    .map_err(|x| io::Error::other(format!("device-to-host copy: {x}")))?;
                // SAFETY: `buf` is a contiguous CPU uint8 tensor of at least n bytes; the copy
                // above is synchronous.
                let s = unsafe { std::slice::from_raw_parts(buf.data_ptr() as *const u8, n) };
                sink(s)?;
                off += n;
            }
            Ok(())
        })();
        staging_pool().lock().unwrap().push(buf);
        res
    }
}

fn kind_size(k: tch::Kind) -> Result<usize> {
    let d = DType::from_kind(k).ok_or_else(|| format!("tch kind {k:?} has no torch dtype here"))?;
    Ok(d.size() as usize)
}

/// The byte source for a tensor wherever it lives.
pub fn source_of(t: &tch::Tensor, chunk: usize) -> Result<Arc<dyn ByteSource>> {
    Ok(if t.device() == tch::Device::Cpu { Arc::new(HostChunks::new(t, chunk)?) } else { Arc::new(DeviceChunks::new(t)?) })
}

/// A torch-format tensor over `t`'s memory (no copy), with torch's location tag.
pub fn tensor_of(t: &tch::Tensor, chunk: usize) -> Result<Tensor> {
    let dtype = DType::from_kind(t.kind()).ok_or_else(|| format!("tch kind {:?} has no torch dtype here", t.kind()))?;
    let location = match t.device() {
        tch::Device::Cpu => "cpu".to_string(),
        tch::Device::Cuda(i) => format!("cuda:{i}"),
        other => return Err(format!("tensors on {other:?} are not supported")),
    };
    let shape = t.size();
    Ok(Tensor {
        storage: Arc::new(Storage { dtype, location, data: source_of(t, chunk)? }),
        storage_offset: 0,
        stride: contiguous_strides(&shape),
        shape,
        requires_grad: false,
        metadata: None,
    })
}

// ------------------------------------------------------------------------------ the file sink

/// A `Write` to a new file: large writes go straight to `write(2)` from the caller's memory,
/// small ones are coalesced; in durable mode the written range's writeback is started every
/// [`KICK_EVERY`] bytes, and [`FileSink::finish`] fsyncs.
pub struct FileSink {
    f: File,
    buf: Vec<u8>,
    pos: u64,
    kicked: u64,
    kick: bool,
    /// An armed `mid` failpoint ([`crate::save::failpoint`]): every byte is kept in `buf`, and
    /// [`FileSink::finish`] writes the first half and kills the process.
    tear: bool,
}

impl FileSink {
    /// Creates the file (a [`crate::save::failpoint::file`] event: every checkpoint file but the
    /// small text ones comes through here).
    pub fn create(path: &Path, early_writeback: bool) -> io::Result<FileSink> {
        let tear = crate::save::failpoint::file(path) == crate::save::failpoint::Next::Tear;
        Ok(FileSink { f: File::create(path)?, buf: Vec::with_capacity(SMALL_BUF), pos: 0, kicked: 0, kick: early_writeback, tear })
    }
    fn flush_buf(&mut self) -> io::Result<()> {
        if !self.buf.is_empty() {
            self.f.write_all(&self.buf)?;
            self.pos += self.buf.len() as u64;
            self.buf.clear();
        }
        Ok(())
    }
    fn maybe_kick(&mut self) {
        if self.kick && self.pos - self.kicked >= KICK_EVERY {
            start_writeback(&self.f, self.kicked, self.pos - self.kicked);
            self.kicked = self.pos;
        }
    }
    /// Flushes; with `durable`, fsyncs. Returns the file size.
    pub fn finish(mut self, durable: bool) -> io::Result<u64> {
        if self.tear {
            let half = self.buf.len() / 2;
            self.f.write_all(&self.buf[..half])?;
            crate::save::failpoint::die();
        }
        self.flush_buf()?;
        if durable {
            self.f.sync_all()?;
        }
        Ok(self.pos)
    }
}

impl Write for FileSink {
    fn write(&mut self, b: &[u8]) -> io::Result<usize> {
        if b.len() >= DIRECT_MIN && !self.tear {
            self.flush_buf()?;
            self.f.write_all(b)?;
            self.pos += b.len() as u64;
            self.maybe_kick();
        } else {
            if self.buf.len() + b.len() > SMALL_BUF && !self.tear {
                self.flush_buf()?;
            }
            self.buf.extend_from_slice(b);
        }
        Ok(b.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        if self.tear {
            return Ok(());
        }
        self.flush_buf()
    }
}

#[cfg(target_os = "linux")]
fn start_writeback(f: &File, offset: u64, len: u64) {
    use std::os::fd::AsRawFd;
    // SAFETY: a plain syscall on an open descriptor; failure only loses the head start.
    unsafe {
        libc::sync_file_range(f.as_raw_fd(), offset as i64, len as i64, libc::SYNC_FILE_RANGE_WRITE);
    }
}

#[cfg(not(target_os = "linux"))]
fn start_writeback(_f: &File, _offset: u64, _len: u64) {}

/// fsync of a directory (makes the names of the files in it durable).
pub fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

// ------------------------------------------------------------------------------ the files

/// `model.safetensors` from named tensors (HF's `save_pretrained`: metadata `{"format": "pt"}`),
/// streamed from their memory. Returns the file size.
pub fn write_safetensors(
    path: &Path,
    tensors: &[(String, &tch::Tensor)],
    metadata: &[(String, String)],
    durable: bool,
    early_writeback: bool,
) -> Result<u64> {
    let run = || -> Result<u64> {
        let mut shapes = Vec::with_capacity(tensors.len());
        let mut sources = Vec::with_capacity(tensors.len());
        let mut dtypes = Vec::with_capacity(tensors.len());
        for (name, t) in tensors {
            let d = DType::from_kind(t.kind()).and_then(st::Dtype::from_torch);
            dtypes.push(d.ok_or_else(|| format!("tensor {name}: kind {:?} has no safetensors dtype", t.kind()))?);
            shapes.push(t.size().iter().map(|&s| s as u64).collect::<Vec<u64>>());
            sources.push(source_of(t, PLAIN_CHUNK)?);
        }
        let refs: Vec<TensorRef> = tensors
            .iter()
            .enumerate()
            .map(|(i, (name, _))| TensorRef {
                name: name.as_str(),
                dtype: dtypes[i],
                shape: &shapes[i],
                data: Data::Source(sources[i].as_ref()),
            })
            .collect();
        let md: Vec<(&str, &str)> = metadata.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        let sink = FileSink::create(path, durable && early_writeback).map_err(e)?;
        let (sink, n) = st::save_to_writer(sink, &refs, if md.is_empty() { None } else { Some(&md) }).map_err(e)?;
        let size = sink.finish(durable).map_err(e)?;
        debug_assert_eq!(size, n);
        Ok(size)
    };
    run().map_err(|m| format!("{}: {m}", path.display()))
}

/// A value in torch's format (`torch.save`), streamed; returns the file size.
pub fn write_torch(path: &Path, value: &Value, opts: &SaveOptions) -> Result<u64> {
    let sink = FileSink::create(path, opts.durable && opts.early_writeback).map_err(|x| format!("{}: {x}", path.display()))?;
    write_torch_to(sink, path, value, opts)
}

fn torch_options(path: &Path, opts: &SaveOptions) -> tf::SaveOptions {
    tf::SaveOptions {
        archive_name: Some(tf::archive_name_for(path)),
        style: opts.style,
        crc32: opts.crc32,
        serialization_id: opts.serialization_id.clone(),
        ..Default::default()
    }
}

fn write_torch_to(sink: FileSink, path: &Path, value: &Value, opts: &SaveOptions) -> Result<u64> {
    let run = || -> Result<u64> {
        let (sink, _) = tf::save_to_writer(sink, value, &torch_options(path, opts)).map_err(e)?;
        sink.finish(opts.durable).map_err(e)
    };
    run().map_err(|m| format!("{}: {m}", path.display()))
}

/// The optimizer state dict as a torch value over the tensors' memory.
pub fn optimizer_value(state: &AdamState<'_>, crc_chunk: usize) -> Result<Value> {
    let mut entries = Vec::with_capacity(state.entries.len());
    for (i, a) in state.entries.iter().enumerate() {
        let step = Tensor::scalar(a.step);
        let step = if a.exp_avg.device() == tch::Device::Cpu {
            step
        } else {
            // torch keeps a fused/capturable step on the parameter's device; keep the tag.
            let mut s = step;
            let loc = match a.exp_avg.device() {
                tch::Device::Cuda(i) => format!("cuda:{i}"),
                _ => "cpu".into(),
            };
            s.storage = Arc::new(Storage { dtype: s.storage.dtype, location: loc, data: s.storage.data.clone() });
            s
        };
        entries.push((
            Value::Int(i as i64),
            Value::dict([
                ("step", Value::Tensor(step)),
                ("exp_avg", Value::Tensor(tensor_of(a.exp_avg, crc_chunk)?)),
                ("exp_avg_sq", Value::Tensor(tensor_of(a.exp_avg_sq, crc_chunk)?)),
            ]),
        ));
    }
    Ok(Value::dict([("state", Value::Dict(entries)), ("param_groups", state.param_groups.clone())]))
}

fn write_small(dir: &Path, name: &str, s: &Small, opts: &SaveOptions) -> Result<u64> {
    let path = dir.join(name);
    match s {
        Small::Bytes(b) => {
            crate::save::failpoint::write_file(&path, b).map_err(|x| format!("{}: {x}", path.display()))?;
            Ok(b.len() as u64)
        }
        Small::Torch(v) => write_torch(&path, v, &SaveOptions { durable: false, ..opts.clone() }),
        Small::With(f) => {
            f(dir)?;
            Ok(fs::metadata(&path).map_err(|x| format!("{}: {x}", path.display()))?.len())
        }
    }
}

/// Writes `ckpt` into `dir` (created, with its parents, if missing), the big files concurrently.
pub fn save(dir: &Path, ckpt: &Checkpoint<'_>, opts: &SaveOptions) -> Result<SaveReport> {
    if opts.atomic {
        let t0 = Instant::now();
        let (Some(out), Some(folder)) = (dir.parent(), dir.file_name().and_then(|f| f.to_str())) else {
            return Err(format!("{}: atomic mode needs a folder name inside a parent folder", dir.display()));
        };
        let io = |x: io::Error| format!("{}: {x}", dir.display());
        fs::create_dir_all(out).map_err(io)?;
        crate::save::atomic::remove_leftovers(out).map_err(io)?;
        let staging = crate::save::atomic::staging_dir(out, folder);
        let mut rep = save(&staging, ckpt, &SaveOptions { atomic: false, durable: true, ..opts.clone() })?;
        crate::save::atomic::publish(out, &staging, folder).map_err(io)?;
        rep.elapsed = t0.elapsed();
        return Ok(rep);
    }
    let t0 = Instant::now();
    let new_dir = !dir.exists();
    fs::create_dir_all(dir).map_err(|x| format!("{}: {x}", dir.display()))?;
    let opt_value = match &ckpt.optimizer {
        Some(s) => Some(optimizer_value(s, opts.crc_chunk)?),
        None => None,
    };
    let opt_path = dir.join("optimizer.pt");
    let write_opt = || -> Result<u64> {
        match &opt_value {
            Some(v) => write_torch(&opt_path, v, opts),
            None => Ok(0),
        }
    };
    let (files, opt_n) = std::thread::scope(|s| -> Result<(Vec<(String, u64)>, u64)> {
        // optimizer.pt (2/3 of the bytes) on a second thread ...
        let opt_h = (opts.parallel && opt_value.is_some()).then(|| s.spawn(write_opt));
        // ... the small files, then model.safetensors, on this one.
        let mut files = Vec::new();
        let mut small_err = None;
        for (name, sm) in &ckpt.small {
            match write_small(dir, name, sm, opts) {
                Ok(n) => files.push((name.clone(), n)),
                Err(m) => {
                    small_err = Some(m);
                    break;
                }
            }
        }
        // Durable: the small files' fsyncs wait on the disk in the background meanwhile.
        let sync_h = (opts.durable && small_err.is_none()).then(|| {
            let names: Vec<PathBuf> = ckpt.small.iter().map(|(n, _)| dir.join(n)).collect();
            s.spawn(move || -> Result<()> {
                for p in names {
                    File::open(&p).and_then(|f| f.sync_all()).map_err(|x| format!("{}: fsync: {x}", p.display()))?;
                }
                Ok(())
            })
        });
        let model = match (&small_err, ckpt.weights.is_empty()) {
            (None, false) => Some(write_safetensors(
                &dir.join("model.safetensors"),
                &ckpt.weights,
                &ckpt.weights_metadata,
                opts.durable,
                opts.early_writeback,
            )),
            _ => None,
        };
        let opt_n = match opt_h {
            Some(h) => h.join().unwrap_or_else(|_| Err("optimizer writer panicked".into())),
            None if small_err.is_none() => write_opt(),
            None => Ok(0),
        };
        let synced = sync_h.map(|h| h.join().unwrap_or_else(|_| Err("fsync thread panicked".into())));
        if let Some(m) = small_err {
            return Err(m);
        }
        if let Some(n) = model {
            files.push(("model.safetensors".into(), n?));
        }
        let opt_n = opt_n?;
        synced.transpose()?;
        Ok((files, opt_n))
    })?;
    let mut files = files;
    if opt_value.is_some() {
        files.push(("optimizer.pt".into(), opt_n));
    }
    if opts.durable {
        sync_dir(dir).map_err(|x| format!("{}: fsync: {x}", dir.display()))?;
        if new_dir {
            if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
                sync_dir(parent).map_err(|x| format!("{}: fsync: {x}", parent.display()))?;
            }
        }
    }
    let bytes = files.iter().map(|(_, n)| n).sum();
    Ok(SaveReport { files, bytes, elapsed: t0.elapsed() })
}

// ------------------------------------------------------------------------------ the bound

/// The bound: the same tensor bytes written with nothing else: one file per group (e.g. the
/// weights, then the optimizer moments), sequentially, from one thread, no header, no CRC;
/// with `durable`, each file is fsynced after it is written (no early writeback).
pub fn raw_write(paths_and_tensors: &[(PathBuf, Vec<&tch::Tensor>)], durable: bool) -> Result<u64> {
    let mut total = 0;
    for (path, ts) in paths_and_tensors {
        let srcs = ts.iter().map(|t| HostChunks::new(t, usize::MAX)).collect::<Result<Vec<_>>>()?;
        total += raw_write_file(path, &srcs, durable)?;
    }
    Ok(total)
}

fn raw_write_file(path: &Path, srcs: &[HostChunks], durable: bool) -> Result<u64> {
    let mut f = File::create(path).map_err(|x| format!("{}: {x}", path.display()))?;
    let mut total = 0;
    for s in srcs {
        f.write_all(s.bytes()).map_err(|x| format!("{}: {x}", path.display()))?;
        total += s.len as u64;
    }
    if durable {
        f.sync_all().map_err(|x| format!("{}: {x}", path.display()))?;
    }
    Ok(total)
}

/// [`raw_write`] with each file on its own thread (what two writers can do at best).
pub fn raw_write_parallel(paths_and_tensors: &[(PathBuf, Vec<&tch::Tensor>)], durable: bool) -> Result<u64> {
    let groups = paths_and_tensors
        .iter()
        .map(|(p, ts)| Ok((p.clone(), ts.iter().map(|t| HostChunks::new(t, usize::MAX)).collect::<Result<Vec<_>>>()?)))
        .collect::<Result<Vec<_>>>()?;
    std::thread::scope(|s| {
        let hs: Vec<_> = groups.iter().map(|(p, srcs)| s.spawn(move || raw_write_file(p, srcs, durable))).collect();
        let mut total = 0;
        for h in hs {
            total += h.join().unwrap_or_else(|_| Err("raw writer panicked".into()))?;
        }
        Ok(total)
    })
}

// ------------------------------------------------------------------------------ async

/// Reused host buffers shaped like a set of tensors: [`Snapshot::capture`] copies the live
/// tensors into them (the only part a training loop waits for), and a background thread writes
/// the checkpoint from the copy. The buffers are allocated and touched once, so later captures
/// pay no page faults.
pub struct Snapshot {
    pub tensors: Vec<tch::Tensor>,
}

impl Snapshot {
    /// Buffers like `like` (on the CPU; pinned when CUDA is available and the source is on a GPU).
    pub fn new(like: &[&tch::Tensor]) -> Snapshot {
        let tensors = like
            .iter()
            .map(|t| {
                let b = tch::Tensor::empty(t.size(), (t.kind(), tch::Device::Cpu));
                let mut b = if t.device() != tch::Device::Cpu { b.pin_memory(t.device()) } else { b };
                let _ = b.zero_();
                b
            })
            .collect();
        Snapshot { tensors }
    }
    /// Copies `src` (same shapes, same order) into the buffers.
    pub fn capture(&mut self, src: &[&tch::Tensor]) -> Result<()> {
        if src.len() != self.tensors.len() {
            return Err(format!("snapshot of {} tensors given {}", self.tensors.len(), src.len()));
        }
        tch::no_grad(|| -> Result<()> {
            for (d, s) in self.tensors.iter_mut().zip(src) {
                d.f_copy_(s).map_err(e)?;
            }
            Ok(())
        })
    }
}

/// A save running in the background; [`PendingSave::wait`] returns the report and gives the
/// snapshot back for reuse.
pub struct PendingSave<T> {
    handle: std::thread::JoinHandle<(T, Result<SaveReport>)>,
}

impl<T: Send + 'static> PendingSave<T> {
    pub fn wait(self) -> (T, Result<SaveReport>) {
        self.handle.join().expect("background save panicked")
    }
    pub fn is_finished(&self) -> bool {
        self.handle.is_finished()
    }
}

/// Runs `save(dir, make(&owned), opts)` on a background thread that owns `owned` (e.g. a
/// [`Snapshot`] and what describes it); `owned` comes back from [`PendingSave::wait`].
pub fn save_owned<T, F>(dir: PathBuf, owned: T, make: F, opts: SaveOptions) -> PendingSave<T>
where
    T: Send + 'static,
    F: for<'a> Fn(&'a T) -> Result<Checkpoint<'a>> + Send + 'static,
{
    let handle = std::thread::spawn(move || {
        let r = make(&owned).and_then(|c| save(&dir, &c, &opts));
        (owned, r)
    });
    PendingSave { handle }
}

/// Maps a format error to this module's error type (for callers mixing both).
pub fn format_err(x: FormatError) -> String {
    x.to_string()
}
