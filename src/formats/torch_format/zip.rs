//! The zip container as PyTorch's `PyTorchStreamWriter` (miniz) writes it: stored entries,
//! local headers without sizes followed by data descriptors, an `FB` extra field padding each
//! record's data to the storage alignment (64), zip64 extra fields only where a size or offset
//! reaches 0xFFFFFFFF, and always a zip64 end-of-central-directory record and locator.
//! The reader accepts any stored (uncompressed) zip, zip64 included, and trusts nothing in it:
//! every size and offset is checked against the file's length before a buffer is allocated
//! (so a hostile file can make it allocate at most its own size), records may not overlap (a
//! stored "zip bomb" reuses one record's bytes under many names), names with `..`, absolute
//! paths or duplicates are refused, and each record's CRC32 is checked when it is read
//! (see [`read_entry`] for CRC 0).

use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom, Write};
use super::error::{FormatError, Result};

const LOCAL_SIG: u32 = 0x0403_4b50;
const CENTRAL_SIG: u32 = 0x0201_4b50;
const DESCRIPTOR_SIG: u32 = 0x0807_4b50;
const EOCD_SIG: u32 = 0x0605_4b50;
const ZIP64_EOCD_SIG: u32 = 0x0606_4b50;
const ZIP64_LOCATOR_SIG: u32 = 0x0706_4b50;
const FLAGS: u16 = 0x0808; // data descriptor + UTF-8 names
const FLAGS_EMPTY: u16 = 0x0800; // an empty record: UTF-8 names, no data descriptor (as miniz)
const U32_MAX: u64 = 0xFFFF_FFFF;

/// Receives a record's bytes, chunk by chunk.
pub(crate) type Sink<'a> = dyn FnMut(&[u8]) -> io::Result<()> + 'a;

struct CdEntry {
    name: String,
    crc: u32,
    size: u64,
    offset: u64,
}

/// Writes a torch-style zip to any `Write`, tracking the offset itself (no seeking needed:
/// sizes and CRCs go into data descriptors after the data).
pub(crate) struct ZipWriter<W: Write> {
    w: W,
    pos: u64,
    alignment: u64,
    crc32: bool,
    entries: Vec<CdEntry>,
}

impl<W: Write> ZipWriter<W> {
    pub fn new(w: W, alignment: u64, crc32: bool) -> Self {
        ZipWriter {
            w,
            pos: 0,
            alignment: alignment.max(1),
            crc32,
            entries: Vec::new(),
        }
    }

    fn put(&mut self, b: &[u8]) -> io::Result<()> {
        self.w.write_all(b)?;
        self.pos += b.len() as u64;
        Ok(())
    }

    /// Writes one record of `size` bytes produced by `data` (which must deliver exactly `size`).
    pub fn record(
        &mut self,
        name: &str,
        size: u64,
        data: &mut dyn FnMut(&mut Sink) -> io::Result<()>,
    ) -> io::Result<()> {
        let offset = self.pos;
        let big_size = size >= U32_MAX;
        let big_off = offset >= U32_MAX;
        let zip64 = big_size || big_off;
        // The padding computation of caffe2/serialize/inline_container.cc (getPadding).
        let mut start = offset + 30 + name.len() as u64 + 4;
        if zip64 {
            start += 4;
            if big_size {
                start += 16;
            }
            if big_off {
                start += 8;
            }
        }
        let pad = (self.alignment - start % self.alignment) % self.alignment;
        let mut extra = Vec::with_capacity(32 + pad as usize);
        if zip64 {
            // miniz's local zip64 field: uncompressed size, compressed size (still 0 when the
            // local header is written), local header offset.
            extra.extend_from_slice(&1u16.to_le_bytes());
            let n: u16 = if big_size { 16 } else { 0 } + if big_off { 8 } else { 0 };
            extra.extend_from_slice(&n.to_le_bytes());
            if big_size {
                extra.extend_from_slice(&size.to_le_bytes());
                extra.extend_from_slice(&0u64.to_le_bytes());
            }
            if big_off {
                extra.extend_from_slice(&offset.to_le_bytes());
            }
        }
        extra.extend_from_slice(b"FB");
        extra.extend_from_slice(&(pad as u16).to_le_bytes());
        extra.resize(extra.len() + pad as usize, b'Z');

        let mut h = Vec::with_capacity(30 + name.len() + extra.len());
        h.extend_from_slice(&LOCAL_SIG.to_le_bytes());
        h.extend_from_slice(&0u16.to_le_bytes()); // version needed
        h.extend_from_slice(&(if size == 0 { FLAGS_EMPTY } else { FLAGS }).to_le_bytes());
        h.extend_from_slice(&0u16.to_le_bytes()); // method: stored
        h.extend_from_slice(&0u32.to_le_bytes()); // time, date
        h.extend_from_slice(&0u32.to_le_bytes()); // crc (in the descriptor)
        h.extend_from_slice(&0u32.to_le_bytes()); // compressed size
        h.extend_from_slice(&0u32.to_le_bytes()); // uncompressed size
        h.extend_from_slice(&(name.len() as u16).to_le_bytes());
        h.extend_from_slice(&(extra.len() as u16).to_le_bytes());
        h.extend_from_slice(name.as_bytes());
        h.extend_from_slice(&extra);
        self.put(&h)?;

        let mut hasher = crc32fast::Hasher::new();
        let mut written = 0u64;
        let crc_on = self.crc32;
        {
            let w = &mut self.w;
            data(&mut |chunk: &[u8]| {
                if crc_on {
                    hasher.update(chunk);
                }
                written += chunk.len() as u64;
                w.write_all(chunk)
            })?;
        }
        self.pos += written;
        if written != size {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("record {name}: data source gave {written} bytes, expected {size}"),
            ));
        }
        let crc = if crc_on { hasher.finalize() } else { 0 };
        if size == 0 {
            self.entries.push(CdEntry {
                name: name.to_string(),
                crc,
                size,
                offset,
            });
            return Ok(());
        }
        let mut d = Vec::with_capacity(24);
        d.extend_from_slice(&DESCRIPTOR_SIG.to_le_bytes());
        d.extend_from_slice(&crc.to_le_bytes());
        if zip64 {
            d.extend_from_slice(&size.to_le_bytes());
            d.extend_from_slice(&size.to_le_bytes());
        } else {
            d.extend_from_slice(&(size as u32).to_le_bytes());
            d.extend_from_slice(&(size as u32).to_le_bytes());
        }
        self.put(&d)?;
        self.entries.push(CdEntry {
            name: name.to_string(),
            crc,
            size,
            offset,
        });
        Ok(())
    }

    pub fn record_bytes(&mut self, name: &str, bytes: &[u8]) -> io::Result<()> {
        self.record(name, bytes.len() as u64, &mut |sink| sink(bytes))
    }

    /// Central directory, zip64 end records, end record. Returns the writer and the file size.
    pub fn finish(mut self) -> io::Result<(W, u64)> {
        let cd_offset = self.pos;
        let mut cd = Vec::new();
        for e in &self.entries {
            let big_size = e.size >= U32_MAX;
            let big_off = e.offset >= U32_MAX;
            let mut extra = Vec::new();
            if big_size || big_off {
                extra.extend_from_slice(&1u16.to_le_bytes());
                let n: u16 = if big_size { 16 } else { 0 } + if big_off { 8 } else { 0 };
                extra.extend_from_slice(&n.to_le_bytes());
                if big_size {
                    extra.extend_from_slice(&e.size.to_le_bytes());
                    extra.extend_from_slice(&e.size.to_le_bytes());
                }
                if big_off {
                    extra.extend_from_slice(&e.offset.to_le_bytes());
                }
            }
            cd.extend_from_slice(&CENTRAL_SIG.to_le_bytes());
            cd.extend_from_slice(&0u16.to_le_bytes()); // version made by
            cd.extend_from_slice(&0u16.to_le_bytes()); // version needed
            cd.extend_from_slice(&(if e.size == 0 { FLAGS_EMPTY } else { FLAGS }).to_le_bytes());
            cd.extend_from_slice(&0u16.to_le_bytes()); // method
            cd.extend_from_slice(&0u32.to_le_bytes()); // time, date
            cd.extend_from_slice(&e.crc.to_le_bytes());
            cd.extend_from_slice(&(e.size.min(U32_MAX) as u32).to_le_bytes());
            cd.extend_from_slice(&(e.size.min(U32_MAX) as u32).to_le_bytes());
            cd.extend_from_slice(&(e.name.len() as u16).to_le_bytes());
            cd.extend_from_slice(&(extra.len() as u16).to_le_bytes());
            cd.extend_from_slice(&0u16.to_le_bytes()); // comment length
            cd.extend_from_slice(&0u16.to_le_bytes()); // disk
            cd.extend_from_slice(&0u16.to_le_bytes()); // internal attributes
            cd.extend_from_slice(&0u32.to_le_bytes()); // external attributes
            cd.extend_from_slice(&(e.offset.min(U32_MAX) as u32).to_le_bytes());
            cd.extend_from_slice(e.name.as_bytes());
            cd.extend_from_slice(&extra);
        }
        let cd_size = cd.len() as u64;
        let n = self.entries.len() as u64;
        let zip64_eocd_offset = cd_offset + cd_size;
        cd.extend_from_slice(&ZIP64_EOCD_SIG.to_le_bytes());
        cd.extend_from_slice(&44u64.to_le_bytes());
        cd.extend_from_slice(&0x031Eu16.to_le_bytes());
        cd.extend_from_slice(&0x002Du16.to_le_bytes());
        cd.extend_from_slice(&0u32.to_le_bytes());
        cd.extend_from_slice(&0u32.to_le_bytes());
        cd.extend_from_slice(&n.to_le_bytes());
        cd.extend_from_slice(&n.to_le_bytes());
        cd.extend_from_slice(&cd_size.to_le_bytes());
        cd.extend_from_slice(&cd_offset.to_le_bytes());
        cd.extend_from_slice(&ZIP64_LOCATOR_SIG.to_le_bytes());
        cd.extend_from_slice(&0u32.to_le_bytes());
        cd.extend_from_slice(&zip64_eocd_offset.to_le_bytes());
        cd.extend_from_slice(&1u32.to_le_bytes());
        cd.extend_from_slice(&EOCD_SIG.to_le_bytes());
        cd.extend_from_slice(&0u16.to_le_bytes());
        cd.extend_from_slice(&0u16.to_le_bytes());
        cd.extend_from_slice(&(n.min(0xFFFF) as u16).to_le_bytes());
        cd.extend_from_slice(&(n.min(0xFFFF) as u16).to_le_bytes());
        cd.extend_from_slice(&(cd_size.min(U32_MAX) as u32).to_le_bytes());
        cd.extend_from_slice(&(cd_offset.min(U32_MAX) as u32).to_le_bytes());
        cd.extend_from_slice(&0u16.to_le_bytes());
        self.put(&cd)?;
        Ok((self.w, self.pos))
    }
}

/// One entry of a zip's central directory, with where its data starts.
#[derive(Clone, Debug)]
pub struct ZipEntry {
    pub name: String,
    pub crc: u32,
    pub size: u64,
    pub data_offset: u64,
}

fn le16(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([b[at], b[at + 1]])
}
fn le32(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().unwrap())
}
fn le64(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().unwrap())
}

fn read_at(f: &mut File, offset: u64, len: usize, what: &str) -> Result<Vec<u8>> {
    let mut buf = vec![0u8; len];
    f.seek(SeekFrom::Start(offset))
        .map_err(|e| FormatError::io("seek", e))?;
    f.read_exact(&mut buf).map_err(|e| {
        if e.kind() == io::ErrorKind::UnexpectedEof {
            FormatError::zip(format!("truncated {what}"))
        } else {
            FormatError::io("read", e)
        }
    })?;
    Ok(buf)
}

/// Adds two file offsets, refusing an overflow (a hostile zip64 field can hold any u64).
fn add(a: u64, b: u64, what: impl FnOnce() -> String) -> Result<u64> {
    a.checked_add(b)
        .ok_or_else(|| FormatError::zip(format!("{}: offset overflows", what())))
}

/// Why a record name is refused: torch writes `archive/relative/path` names only, so anything
/// that could point outside a folder when extracted (`..`, an absolute or drive path), an empty
/// name or component, or a NUL is taken as hostile rather than guessed at.
fn bad_name(name: &str) -> Option<&'static str> {
    if name.is_empty() {
        return Some("empty record name");
    }
    if name.starts_with('/') || name.starts_with('\\') {
        return Some("absolute path");
    }
    let b = name.as_bytes();
    if b.len() >= 2 && b[1] == b':' && b[0].is_ascii_alphabetic() {
        return Some("drive-letter path");
    }
    if name.contains('\0') {
        return Some("NUL in record name");
    }
    if name.split(['/', '\\']).any(|c| c == "..") {
        return Some("`..` in record name");
    }
    None
}

/// Reads the central directory of a stored zip and locates every entry's data.
///
/// Checked before anything is allocated from a declared size: the end records, the central
/// directory (inside the file, before the end records), each entry's local header and data
/// (inside the file, with overflow-checked offsets), that no two records overlap, and the
/// names (see [`bad_name`]; duplicates refused too).
pub fn read_directory(f: &mut File) -> Result<Vec<ZipEntry>> {
    let file_len = f.metadata().map_err(|e| FormatError::io("stat", e))?.len();
    if file_len < 22 {
        return Err(FormatError::zip(format!(
            "not a zip archive: {file_len} bytes, no end of central directory"
        )));
    }
    let tail_len = file_len.min(22 + 0xFFFF + 20);
    let tail = read_at(f, file_len - tail_len, tail_len as usize, "zip end records")?;
    let eocd = (0..=tail.len() - 22)
        .rev()
        .find(|&i| {
            le32(&tail, i) == EOCD_SIG && i + 22 + le16(&tail, i + 20) as usize == tail.len()
        })
        .or_else(|| {
            (0..=tail.len() - 22)
                .rev()
                .find(|&i| le32(&tail, i) == EOCD_SIG)
        })
        .ok_or_else(|| FormatError::zip("not a zip archive: no end of central directory record"))?;
    let eocd_pos = file_len - tail_len + eocd as u64;
    let mut n_entries = le16(&tail, eocd + 10) as u64;
    let mut cd_size = le32(&tail, eocd + 12) as u64;
    let mut cd_offset = le32(&tail, eocd + 16) as u64;
    if eocd >= 20 && le32(&tail, eocd - 20) == ZIP64_LOCATOR_SIG {
        let z64_pos = le64(&tail, eocd - 20 + 8);
        if z64_pos.checked_add(56).is_none_or(|end| end > eocd_pos) {
            return Err(FormatError::zip(
                "corrupt zip64 end of central directory locator",
            ));
        }
        let z = read_at(f, z64_pos, 56, "zip64 end of central directory")?;
        if le32(&z, 0) != ZIP64_EOCD_SIG {
            return Err(FormatError::zip(
                "corrupt zip64 end of central directory record",
            ));
        }
        n_entries = le64(&z, 32);
        cd_size = le64(&z, 40);
        cd_offset = le64(&z, 48);
    }
    if cd_offset
        .checked_add(cd_size)
        .is_none_or(|end| end > eocd_pos)
    {
        return Err(FormatError::zip(format!(
            "truncated zip central directory: {cd_size} bytes at {cd_offset}, file has {file_len}"
        )));
    }
    // Each central entry takes at least 46 bytes: a count the directory cannot hold is a lie.
    if n_entries > cd_size / 46 {
        return Err(FormatError::zip(format!(
            "zip central directory of {cd_size} bytes cannot hold {n_entries} entries"
        )));
    }
    let cd = read_at(f, cd_offset, cd_size as usize, "zip central directory")?;
    let mut entries = Vec::with_capacity(n_entries as usize);
    // (local header offset, end of data, name) of each record, to refuse overlaps.
    let mut spans: Vec<(u64, u64, usize)> = Vec::with_capacity(n_entries as usize);
    let mut names = std::collections::HashSet::new();
    let mut p = 0usize;
    for _ in 0..n_entries {
        if p + 46 > cd.len() || le32(&cd, p) != CENTRAL_SIG {
            return Err(FormatError::zip("truncated zip central directory"));
        }
        let method = le16(&cd, p + 10);
        let crc = le32(&cd, p + 16);
        let mut csize = le32(&cd, p + 20) as u64;
        let mut usize_ = le32(&cd, p + 24) as u64;
        let name_len = le16(&cd, p + 28) as usize;
        let extra_len = le16(&cd, p + 30) as usize;
        let comment_len = le16(&cd, p + 32) as usize;
        let mut offset = le32(&cd, p + 42) as u64;
        let end = p + 46 + name_len + extra_len + comment_len;
        if end > cd.len() {
            return Err(FormatError::zip("truncated zip central directory"));
        }
        let name = String::from_utf8(cd[p + 46..p + 46 + name_len].to_vec())
            .map_err(|_| FormatError::zip("zip entry name is not UTF-8"))?;
        if let Some(why) = bad_name(&name) {
            return Err(FormatError::zip(format!(
                "refusing record {name:?}: {why}"
            )));
        }
        if !names.insert(name.clone()) {
            return Err(FormatError::zip(format!(
                "refusing record {name}: duplicate name in the zip central directory"
            )));
        }
        let extra = &cd[p + 46 + name_len..p + 46 + name_len + extra_len];
        let mut e = 0;
        while e + 4 <= extra.len() {
            let id = le16(extra, e);
            let len = le16(extra, e + 2) as usize;
            let body = extra
                .get(e + 4..e + 4 + len)
                .ok_or_else(|| FormatError::zip(format!("{name}: corrupt extra field")))?;
            if id == 1 {
                let mut q = 0;
                let mut take = |v: &mut u64| -> Result<()> {
                    if *v == U32_MAX {
                        if q + 8 > body.len() {
                            return Err(FormatError::zip(format!(
                                "{name}: short zip64 extra field"
                            )));
                        }
                        *v = le64(body, q);
                        q += 8;
                    }
                    Ok(())
                };
                take(&mut usize_)?;
                take(&mut csize)?;
                take(&mut offset)?;
            }
            e += 4 + len;
        }
        if method != 0 {
            return Err(FormatError::zip(format!(
                "{name}: compressed zip entry (method {method}); torch writes stored entries only"
            )));
        }
        if csize != usize_ {
            return Err(FormatError::zip(format!(
                "{name}: stored entry with differing sizes"
            )));
        }
        if add(offset, 30, || name.clone())? > file_len {
            return Err(FormatError::zip(format!(
                "{name}: local header offset beyond the end of the file"
            )));
        }
        let lh = read_at(f, offset, 30, "zip local header")?;
        if le32(&lh, 0) != LOCAL_SIG {
            return Err(FormatError::zip(format!(
                "{name}: corrupt zip local header"
            )));
        }
        let local_name_len = le16(&lh, 26) as u64;
        let data_offset = offset + 30 + local_name_len + le16(&lh, 28) as u64;
        let data_end = add(data_offset, usize_, || name.clone())?;
        if data_end > file_len {
            return Err(FormatError::zip(format!(
                "truncated record {name}: {usize_} bytes at {data_offset}, file has {file_len}"
            )));
        }
        // The local header must name the same record: a reader that trusts only the central
        // directory and one that walks local headers would otherwise see different files.
        if local_name_len != name_len as u64
            || read_at(f, offset + 30, name_len, "zip local header")? != name.as_bytes()
        {
            return Err(FormatError::zip(format!(
                "record {name}: its local header names a different record"
            )));
        }
        spans.push((offset, data_end, entries.len()));
        entries.push(ZipEntry {
            name,
            crc,
            size: usize_,
            data_offset,
        });
        p = end;
    }
    spans.sort_unstable();
    for w in spans.windows(2) {
        if w[1].0 < w[0].1 {
            return Err(FormatError::zip(format!(
                "records {} and {} overlap (one stored byte range read as two records)",
                entries[w[0].2].name, entries[w[1].2].name
            )));
        }
    }
    Ok(entries)
}

/// Reads an entry's bytes and checks its CRC32 when `verify_crc`.
///
/// A stored CRC of 0 is read as "no CRC was computed", not checked: that is what torch writes
/// with `torch.utils.serialization.config.save.compute_crc32 = False` (and fastsave with
/// `SaveOptions { crc32: false }`), and torch's own reader loads such files. torch in fact
/// checks no CRC at all (torch 2.1.2 and 2.13 both load a file with a flipped bit in a
/// storage record); this reader is stricter so that a corrupted file is an error, not a
/// silently different tensor. The cost: a bit flip inside a CRC-0 file is not detected (as
/// with torch), and a record whose true CRC32 is 0 (odds 2^-32) passes either way.
pub fn read_entry(f: &mut File, e: &ZipEntry, verify_crc: bool) -> Result<Vec<u8>> {
    let data = read_at(
        f,
        e.data_offset,
        e.size as usize,
        &format!("record {}", e.name),
    )?;
    if verify_crc && e.crc != 0 {
        let got = crc32fast::hash(&data);
        if got != e.crc {
            return Err(FormatError::zip(format!(
                "CRC32 mismatch in record {}: the zip directory says {:08x}, its {} bytes give {got:08x} (corrupted file)",
                e.name, e.crc, e.size
            )));
        }
    }
    Ok(data)
}
