//! Mutation fuzzing of every reader over one real file of each golden kind (HF 5.24.0 and
//! 4.31.0): bit flips, truncation, insertion, overwrites with 0xFF and with extreme 32/64-bit
//! values (zip64 sizes, offsets, lengths). Each mutated file is loaded; an error is fine, a panic,
//! an abort or an allocation above 256 MiB is a failure. A counting global allocator (this test
//! binary only) records the largest single request and the peak of live bytes.
//!
//! Defaults: 12,000 cases, seed 1. Longer runs: `CKPTSPEC_FUZZ_CASES=200000 CKPTSPEC_FUZZ_SEED=7
//! cargo test --release --test fuzz_readers -- --nocapture`.

mod common;
use ckptspec::formats::pyjson;
use ckptspec::formats::safetensors as st;
use ckptspec::formats::torch_format::{self as tf, LoadOptions};
use std::alloc::{GlobalAlloc, Layout, System};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

const CAP: usize = 256 << 20;

struct Counting;
static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);
static LARGEST: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        self.note(l.size());
        if l.size() > CAP {
            // Refused rather than served: the test fails on LARGEST and the machine is spared.
            return std::ptr::null_mut();
        }
        System.alloc(l)
    }
    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        self.note(l.size());
        if l.size() > CAP {
            return std::ptr::null_mut();
        }
        System.alloc_zeroed(l)
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        LIVE.fetch_sub(l.size(), Relaxed);
        System.dealloc(p, l)
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        if new > CAP {
            LARGEST.fetch_max(new, Relaxed);
            return std::ptr::null_mut();
        }
        let q = System.realloc(p, l, new);
        if !q.is_null() {
            LIVE.fetch_sub(l.size(), Relaxed);
            self.note(new);
        }
        q
    }
}

impl Counting {
    fn note(&self, n: usize) {
        LARGEST.fetch_max(n, Relaxed);
        let live = LIVE.fetch_add(n, Relaxed) + n;
        PEAK.fetch_max(live, Relaxed);
    }
}

#[global_allocator]
static A: Counting = Counting;

use common::Rng;

#[derive(Clone, Copy, Debug)]
enum Kind {
    Torch,
    Safetensors,
    Json,
}

fn env_num(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|s| s.parse().ok()).unwrap_or(default)
}

/// One mutation of `b`, described for the failure message.
fn mutate(rng: &mut Rng, b: &mut Vec<u8>) -> String {
    let n = b.len();
    match rng.below(6) {
        0 => {
            let k = 1 + rng.below(4);
            let mut at = vec![];
            for _ in 0..k {
                let i = rng.below(n);
                b[i] ^= 1 << rng.below(8);
                at.push(i);
            }
            format!("bit flips at {at:?}")
        }
        1 => {
            let len = rng.below(n);
            b.truncate(len);
            format!("truncated to {len}")
        }
        2 => {
            let i = rng.below(n + 1);
            let k = 1 + rng.below(16);
            let ins: Vec<u8> = (0..k).map(|_| rng.next() as u8).collect();
            b.splice(i..i, ins);
            format!("{k} bytes inserted at {i}")
        }
        3 => {
            let i = rng.below(n);
            let k = (1 + rng.below(8)).min(n - i);
            b[i..i + k].fill(0xFF);
            format!("{k} bytes of 0xFF at {i}")
        }
        4 => {
            // an extreme little-endian 32- or 64-bit field: sizes, offsets, counts, lengths
            let vals: [u64; 6] = [u64::MAX, u32::MAX as u64, 1 << 40, 1 << 31, 0, n as u64 * 2];
            let v = vals[rng.below(vals.len())];
            let w = if rng.below(2) == 0 { 4 } else { 8 };
            let i = rng.below(n.saturating_sub(w) + 1);
            let bytes = v.to_le_bytes();
            let k = w.min(n - i);
            b[i..i + k].copy_from_slice(&bytes[..k]);
            format!("{w}-byte field {v:#x} at {i}")
        }
        _ => {
            let i = rng.below(n);
            let k = (1 + rng.below(64)).min(n - i);
            b.drain(i..i + k);
            format!("{k} bytes removed at {i}")
        }
    }
}

fn load(kind: Kind, path: &Path, lazy: bool) -> bool {
    match kind {
        Kind::Torch => {
            let opts = LoadOptions { lazy, ..LoadOptions::default() };
            tf::load_with(path, &opts).is_ok()
        }
        Kind::Safetensors => match st::load(path) {
            Ok((h, ts)) => {
                // stream every tensor too, as the diff and the writers do
                for t in &h.tensors {
                    let _ = h.read(t);
                }
                drop(ts);
                true
            }
            Err(_) => false,
        },
        Kind::Json => pyjson::read_file(path).is_ok(),
    }
}

#[test]
fn readers_survive_mutated_golden_files() {
    let cases = env_num("CKPTSPEC_FUZZ_CASES", 12_000);
    let seed = env_num("CKPTSPEC_FUZZ_SEED", 1);
    let golden = Path::new(env!("CARGO_MANIFEST_DIR")).join("golden");
    let c5 = "hf-5.24.0/logging-steps-train-logs/output/checkpoint-3";
    let c4 = "hf-4.31.0/logging-steps-train-logs/output/checkpoint-3";
    let mut files: Vec<(Kind, PathBuf)> = vec![];
    for (dir, names) in [
        (c5, &["model.safetensors", "optimizer.pt", "scheduler.pt", "rng_state.pth", "training_args.bin", "trainer_state.json"][..]),
        (c4, &["pytorch_model.bin", "optimizer.pt", "scheduler.pt", "rng_state.pth", "training_args.bin", "trainer_state.json"][..]),
    ] {
        for n in names {
            let kind = if n.ends_with(".safetensors") {
                Kind::Safetensors
            } else if n.ends_with(".json") {
                Kind::Json
            } else {
                Kind::Torch
            };
            files.push((kind, golden.join(dir).join(n)));
        }
    }
    let originals: Vec<Vec<u8>> = files.iter().map(|(_, p)| std::fs::read(p).unwrap()).collect();
    // Every original loads: the mutations start from valid files.
    for (kind, p) in &files {
        assert!(load(*kind, p, false), "{} does not load", p.display());
    }

    let tmp = tempfile::tempdir().unwrap();
    let start = std::time::Instant::now();
    let mut rng = Rng(seed);
    let (mut ok, mut refused) = (0u64, 0u64);
    let mut failures: Vec<String> = vec![];
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {})); // panics are collected and reported below
    for case in 0..cases {
        let i = (case as usize) % files.len();
        let (kind, src) = &files[i];
        let mut b = originals[i].clone();
        let mut what = vec![];
        for _ in 0..1 + rng.below(3) {
            if b.is_empty() {
                break;
            }
            what.push(mutate(&mut rng, &mut b));
        }
        let path = tmp.path().join(src.file_name().unwrap());
        std::fs::write(&path, &b).unwrap();
        let lazy = case % 5 == 4;
        match std::panic::catch_unwind(|| load(*kind, &path, lazy)) {
            Ok(true) => ok += 1,
            Ok(false) => refused += 1,
            Err(p) => {
                let msg = p
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_default();
                let keep = tmp.path().join(format!("panic-{case}"));
                std::fs::write(&keep, &b).unwrap();
                failures.push(format!("case {case} ({}; {}): panic {msg:?}", src.display(), what.join(", ")));
            }
        }
    }
    std::panic::set_hook(hook);
    let secs = start.elapsed().as_secs_f64();
    let largest = LARGEST.load(Relaxed);
    let peak = PEAK.load(Relaxed);
    println!(
        "fuzz: {cases} cases (seed {seed}) over {} files in {secs:.1} s: {ok} loaded, {refused} refused, {} panics; largest allocation {} bytes, peak live {} bytes",
        files.len(),
        failures.len(),
        largest,
        peak
    );
    assert!(failures.is_empty(), "{} panics:\n{}", failures.len(), failures.join("\n"));
    assert!(largest <= CAP, "an allocation of {largest} bytes (cap {CAP})");
    assert!(peak <= CAP, "peak live memory {peak} bytes (cap {CAP})");
    // The mutations reach both outcomes: a fuzzer whose every case fails at the first byte
    // (or loads untouched) would test nothing.
    assert!(refused > cases / 4 && ok > cases / 100, "{ok} loaded, {refused} refused");
}
