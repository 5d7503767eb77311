//! The hostile corpus (`tests/hostile/`, written by `scripts/make_hostile.py`): every file is
//! refused with a message that says what is wrong and where, and nothing panics. The pickles are
//! read with the restricted unpickler, which never imports or calls anything; the refusals of
//! globals (`os.system`, `builtins.eval`, ...) are checked by message, and since the reader has no
//! way to call a global, "nothing executed" holds by construction (`echo pwned` would print).

use ckptspec::formats::safetensors as st;
use ckptspec::formats::torch_format::{self as tf, LoadOptions, SaveOptions, Value};
use std::path::{Path, PathBuf};

fn hostile(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/hostile").join(name)
}

/// Runs `f` and returns its error text; a panic or a success fails the test.
fn refusal<T: std::fmt::Debug>(what: &str, f: impl FnOnce() -> Result<T, tf::FormatError>) -> String {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
        Ok(Ok(v)) => panic!("{what}: accepted, got {v:?}"),
        Ok(Err(e)) => e.to_string(),
        Err(_) => panic!("{what}: the reader panicked"),
    }
}

/// (file, fragments its refusal must contain). Bare pickles go through `unpickle`.
const PICKLES: &[(&str, &[&str])] = &[
    ("os_system.pkl", &["pickle: refusing global os.system at byte 0"]),
    ("builtins_eval.pkl", &["refusing global builtins.eval at byte 2"]),
    ("builtins_exec_stack_global.pkl", &["refusing global builtins.exec"]),
    ("getattr_chain.pkl", &["refusing global builtins.getattr at byte 2"]),
    ("copyreg_reconstructor.pkl", &["refusing global copyreg._reconstructor"]),
    ("copyreg_ext1.pkl", &["unsupported opcode 0x82 at byte 2"]),
    ("functools_partial.pkl", &["refusing global functools.partial"]),
    ("allowed_wrapping_refused.pkl", &["refusing global subprocess.Popen"]),
    ("inst_opcode.pkl", &["unsupported opcode 0x69"]),
    ("nested_10000.pkl", &["nesting deeper than 1000 levels"]),
];

/// Zip files go through `torch_format::load`; every message starts with the file's path.
const TORCH: &[(&str, &[&str])] = &[
    ("tensor_offset_past_storage.pt", &["tensor view (shape [2], stride [1], offset 10) exceeds its storage of 4 elements"]),
    ("tensor_stride_past_storage.pt", &["tensor view (shape [3], stride [100], offset 0) exceeds its storage of 4 elements"]),
    ("tensor_stride_overflow.pt", &["overflows 64-bit element counts"]),
    ("tensor_negative_shape.pt", &["negative size"]),
    ("tensor_storage_size_lie.pt", &["record archive/data/0 has 16 bytes, data.pkl says 4294967296"]),
    ("tensor_missing_record.pt", &["data.pkl refers to storage 7 but there is no record archive/data/7"]),
    ("crc_mismatch.pt", &["CRC32 mismatch in record archive/data/0", "corrupted file"]),
    ("zip_dotdot_name.pt", &["refusing record \"archive/../../etc/cron.d/evil\": `..` in record name"]),
    ("zip_absolute_name.pt", &["refusing record \"/etc/passwd\": absolute path"]),
    ("zip_duplicate_name.pt", &["refusing record archive/data/0: duplicate name"]),
    ("zip_deflate_bomb.pt", &["archive/data/0: compressed zip entry (method 8)"]),
    ("zip_overlapping_records.pt", &["records archive/data/0 and archive/data/1 overlap"]),
    ("zip64_size_past_end.pt", &["truncated record archive/data/0: 1099511627776 bytes at"]),
    ("zip64_size_wraps.pt", &["archive/data/0: offset overflows"]),
    ("zip64_directory_past_end.pt", &["truncated zip central directory: 1125899906842624 bytes"]),
    ("zip64_entry_count_lie.pt", &["cannot hold 1099511627776 entries"]),
];

const SAFETENSORS: &[(&str, &[&str])] = &[
    ("st_overlap.safetensors", &["tensor b: data_offsets do not follow the previous tensor (gap or overlap)"]),
    ("st_past_end.safetensors", &["truncated data: header needs 1024 bytes, file has 8"]),
    ("st_header_len_huge.safetensors", &["header length 9223372036854775808 exceeds the limit"]),
    ("st_header_past_end.safetensors", &["truncated header: 50000 bytes announced, file has 16"]),
    ("st_duplicate_name.safetensors", &["tensor a: named twice in the header"]),
    ("st_huge_dim.safetensors", &["tensor a: shape is not a list of non-negative 64-bit ints"]),
    ("st_offsets_wrap.safetensors", &["tensor a: data_offsets end before begin"]),
];

fn check(file: &str, msg: &str, want: &[&str]) {
    for w in want {
        assert!(msg.contains(w), "{file}: refusal {msg:?} does not say {w:?}");
    }
}

#[test]
fn hostile_pickles_are_refused_without_executing_anything() {
    for (file, want) in PICKLES {
        let bytes = std::fs::read(hostile(file)).unwrap();
        let msg = refusal(file, || tf::unpickle(&bytes));
        println!("{file}: {msg}");
        check(file, &msg, want);
    }
}

#[test]
fn hostile_torch_files_are_refused_naming_the_file() {
    // The well-formed twin of the tensor files loads: the refusals come from the one field each
    // file breaks, not from the generator.
    let ok = tf::load(hostile("tensor_ok.pt")).unwrap();
    assert!(matches!(&ok, Value::Dict(d) if d.len() == 1), "{ok:?}");
    for (file, want) in TORCH {
        let path = hostile(file);
        let msg = refusal(file, || tf::load(&path));
        println!("{file}: {msg}");
        assert!(msg.starts_with(&format!("{}: ", path.display())), "{file}: {msg:?} does not name the file");
        check(file, &msg, want);
        // the lazy reader checks the same bounds (only the CRC needs the bytes)
        if *file != "crc_mismatch.pt" {
            let lazy = LoadOptions { lazy: true, ..LoadOptions::default() };
            let msg = refusal(file, || tf::load_with(&path, &lazy));
            check(file, &msg, want);
        }
    }
}

#[test]
fn hostile_safetensors_are_refused_naming_the_file() {
    for (file, want) in SAFETENSORS {
        let path = hostile(file);
        let msg = refusal(file, || st::load(&path));
        println!("{file}: {msg}");
        assert!(msg.starts_with(&format!("{}: ", path.display())), "{file}: {msg:?} does not name the file");
        check(file, &msg, want);
    }
}

#[test]
fn every_corpus_file_is_checked() {
    let listed: std::collections::BTreeSet<&str> = PICKLES
        .iter()
        .chain(TORCH)
        .chain(SAFETENSORS)
        .map(|(f, _)| *f)
        .chain(["tensor_ok.pt"])
        .collect();
    let on_disk: std::collections::BTreeSet<String> = std::fs::read_dir(hostile(""))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    let on_disk: std::collections::BTreeSet<&str> = on_disk.iter().map(|s| s.as_str()).collect();
    assert_eq!(listed, on_disk, "tests/hostile/ and this test's tables differ");
}

/// A 1 MB string fetched from the memo 70 times asks for 70 MB of copies: refused once the
/// copies pass the budget (64 MiB for a small pickle), before they are all made.
#[test]
fn memo_references_cannot_expand_a_pickle_without_bound() {
    let mut p = b"\x80\x02(X".to_vec();
    p.extend_from_slice(&(1u32 << 20).to_le_bytes());
    p.extend(std::iter::repeat_n(b'x', 1 << 20));
    p.extend_from_slice(b"q\x00");
    for _ in 0..70 {
        p.extend_from_slice(b"h\x00");
    }
    p.extend_from_slice(b"l.");
    let msg = refusal("memo expansion", || tf::unpickle(&p));
    check("memo expansion", &msg, &["expands to more than 67108864 bytes"]);
    // 30 references stay under the budget and load
    let mut q = b"\x80\x02(X".to_vec();
    q.extend_from_slice(&(1u32 << 20).to_le_bytes());
    q.extend(std::iter::repeat_n(b'x', 1 << 20));
    q.extend_from_slice(b"q\x00");
    for _ in 0..30 {
        q.extend_from_slice(b"h\x00");
    }
    q.extend_from_slice(b"l.");
    assert!(matches!(tf::unpickle(&q).unwrap(), Value::List(l) if l.len() == 31));
}

/// Depth is bounded at MAX_DEPTH, not below it: 1000 nested lists still load (and drop) on a
/// test thread's stack.
#[test]
fn nesting_up_to_the_bound_loads() {
    let n = tf::MAX_DEPTH;
    let mut p = b"\x80\x02".to_vec();
    p.extend(std::iter::repeat_n(b'(', n - 1));
    p.push(b']');
    p.extend(std::iter::repeat_n(b'l', n - 1));
    p.push(b'.');
    let mut v = tf::unpickle(&p).unwrap();
    let mut depth = 1;
    while let Value::List(l) = v {
        if l.is_empty() {
            break;
        }
        v = l.into_iter().next().unwrap();
        depth += 1;
    }
    assert_eq!(depth, n);
}

fn golden(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("golden").join(rel)
}

/// A flipped bit in any record of a real checkpoint is a CRC error naming the file and the
/// record (torch itself would load it: it checks no CRC).
#[test]
fn a_flipped_bit_in_any_record_is_a_crc_error() {
    let src = golden("hf-5.24.0/logging-steps-train-logs/output/checkpoint-3/optimizer.pt");
    let bytes = std::fs::read(&src).unwrap();
    let mut f = std::fs::File::open(&src).unwrap();
    let entries = tf::zip::read_directory(&mut f).unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("optimizer.pt");
    for e in &entries {
        if e.size == 0 {
            continue;
        }
        let mut b = bytes.clone();
        b[(e.data_offset + e.size / 2) as usize] ^= 0x10;
        std::fs::write(&path, &b).unwrap();
        let msg = refusal(&e.name, || tf::load(&path));
        check(&e.name, &msg, &[&path.display().to_string(), &format!("CRC32 mismatch in record {}", e.name)]);
    }
    assert!(entries.iter().filter(|e| e.name.contains("/data/")).count() >= 2);
}

/// A file written with CRC 0 (torch's `compute_crc32 = False`, fastsave's `crc32: false`)
/// loads, and to the same value as the CRC'd file; flipping a bit in it goes unseen (as in torch).
#[test]
fn crc_zero_files_load() {
    let src = golden("hf-5.24.0/logging-steps-train-logs/output/checkpoint-3/optimizer.pt");
    let loaded = tf::load_with(&src, &LoadOptions::default()).unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("optimizer.pt");
    let opts = SaveOptions { crc32: false, ..loaded.archive.save_options() };
    tf::save_with(&path, &loaded.value, &opts).unwrap();
    let mut f = std::fs::File::open(&path).unwrap();
    assert!(tf::zip::read_directory(&mut f).unwrap().iter().all(|e| e.crc == 0));
    assert_eq!(tf::load(&path).unwrap(), loaded.value);
}
