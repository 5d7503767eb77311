//! `cargo bench --bench save`: how long one HF-layout checkpoint takes to write with
//! `ckptspec::save::fastsave`, for P float32 parameters with AdamW state (P in 1M, 10M, 100M):
//!
//! * `save/checkpoint/P`: the whole `checkpoint-N/` folder (model.safetensors, optimizer.pt,
//!   scheduler.pt, rng_state.pth, trainer_state.json, training_args.bin, config.json);
//! * `save/model.safetensors/P` and `save/optimizer.pt/P`: each big file on its own;
//! * `save/raw/P`: the same tensor bytes with nothing else, one thread (the bound);
//! * `save/async_stall/P` and `save/async_total/P`: an async save, the part the training loop
//!   waits for (copy into reused snapshot buffers) and the whole (until the background write ends).
//!
//! Each iteration writes to a fresh folder; deleting the previous one and `sync` happen outside
//! the timing. Throughput is in bytes of the files. `save_cuda/...` repeats the group for tensors
//! on the GPU when tch sees CUDA, and prints that it was skipped otherwise.
//!
//! Environment: `CKPTSPEC_BENCH_SIZES=1M,10M` (default all three), `CKPTSPEC_BENCH_DIR`
//! (default `target/bench-save`, on the same disk as the repository). torch threads are pinned
//! to 1 (`tch::set_num_threads(1)`); fastsave itself uses 2 writer threads.
//! See README "Save speed" for how long it takes and what it measures.
use ckptspec::save::bench_model::{self, Mlp};
use ckptspec::save::fastsave::{self, SaveOptions};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, SamplingMode, Throughput};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

fn sizes() -> Vec<(&'static str, u64)> {
    let all = [("1M", 1_000_000u64), ("10M", 10_000_000), ("100M", 100_000_000)];
    match std::env::var("CKPTSPEC_BENCH_SIZES") {
        Ok(s) => all.iter().copied().filter(|(n, _)| s.split(',').any(|x| x.trim() == *n)).collect(),
        Err(_) => all.to_vec(),
    }
}

fn bench_dir() -> PathBuf {
    std::env::var_os("CKPTSPEC_BENCH_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("target/bench-save"))
}

fn clean(dir: &Path) {
    let _ = std::fs::remove_dir_all(dir);
    // SAFETY: sync(2) has no arguments and cannot fail.
    unsafe { libc::sync() };
}

/// `iters` timed runs of `f(dir)`, each into a fresh `dir`, cleanup and sync untimed.
fn timed(dir: &Path, iters: u64, mut f: impl FnMut(&Path)) -> Duration {
    let mut total = Duration::ZERO;
    for _ in 0..iters {
        clean(dir);
        std::fs::create_dir_all(dir).unwrap();
        let t = Instant::now();
        f(dir);
        total += t.elapsed();
    }
    clean(dir);
    total
}

fn run_group(c: &mut Criterion, group_name: &str, device: tch::Device) {
    let root = bench_dir().join(group_name);
    let mut g = c.benchmark_group(group_name);
    g.sample_size(10).sampling_mode(SamplingMode::Flat);
    for (label, p) in sizes() {
        let (h, l) = bench_model::mlp_shape(p);
        let mlp = Mlp::new(h, l, device);
        let dir = root.join(format!("checkpoint-{label}"));
        let (warm, measure) = if p >= 50_000_000 { (1, 4) } else { (1, 2) };
        g.warm_up_time(Duration::from_secs(warm)).measurement_time(Duration::from_secs(measure));
        // One save to learn the sizes (and warm the path up).
        clean(&dir);
        let ck = mlp.checkpoint("5.24.0").unwrap();
        let rep = fastsave::save(&dir, &ck, &SaveOptions::default()).unwrap();
        let size = |name: &str| rep.files.iter().find(|(n, _)| n == name).map(|(_, b)| *b).unwrap_or(0);
        let (model_b, opt_b) = (size("model.safetensors"), size("optimizer.pt"));
        drop(ck);

        g.throughput(Throughput::Bytes(rep.bytes));
        g.bench_function(BenchmarkId::new("checkpoint", label), |b| {
            b.iter_custom(|iters| {
                timed(&dir, iters, |d| {
                    let ck = mlp.checkpoint("5.24.0").unwrap();
                    fastsave::save(d, &ck, &SaveOptions::default()).unwrap();
                })
            })
        });
        g.throughput(Throughput::Bytes(model_b));
        g.bench_function(BenchmarkId::new("model.safetensors", label), |b| {
            let ck = mlp.checkpoint("5.24.0").unwrap();
            b.iter_custom(|iters| {
                timed(&dir, iters, |d| {
                    fastsave::write_safetensors(&d.join("model.safetensors"), &ck.weights, &ck.weights_metadata, false, false)
                        .unwrap();
                })
            })
        });
        g.throughput(Throughput::Bytes(opt_b));
        g.bench_function(BenchmarkId::new("optimizer.pt", label), |b| {
            let ck = mlp.checkpoint("5.24.0").unwrap();
            let v = fastsave::optimizer_value(ck.optimizer.as_ref().unwrap(), fastsave::CRC_CHUNK).unwrap();
            b.iter_custom(|iters| {
                timed(&dir, iters, |d| {
                    fastsave::write_torch(&d.join("optimizer.pt"), &v, &SaveOptions::default()).unwrap();
                })
            })
        });
        // Async: the stall (copy into reused snapshot buffers, then hand the write to a thread)
        // and the total (until the background write is done).
        let mut snap = fastsave::Snapshot::new(&mlp.all_tensors());
        for (name, stall_only) in [("async_stall", true), ("async_total", false)] {
            g.throughput(Throughput::Bytes(rep.bytes));
            g.bench_function(BenchmarkId::new(name, label), |b| {
                b.iter_custom(|iters| {
                    let mut total = Duration::ZERO;
                    for _ in 0..iters {
                        clean(&dir);
                        let t = Instant::now();
                        snap.capture(&mlp.all_tensors()).unwrap();
                        let view = Mlp::from_snapshot(&mlp, &snap);
                        let pending =
                            fastsave::save_owned(dir.clone(), view, |v: &Mlp| v.checkpoint("5.24.0"), SaveOptions::default());
                        let stall = t.elapsed();
                        pending.wait().1.unwrap();
                        total += if stall_only { stall } else { t.elapsed() };
                    }
                    clean(&dir);
                    total
                })
            });
        }
        drop(snap);
        if device == tch::Device::Cpu {
            let raw_b = mlp.all_tensors().iter().map(|t| t.numel() as u64 * 4).sum();
            g.throughput(Throughput::Bytes(raw_b));
            g.bench_function(BenchmarkId::new("raw", label), |b| {
                b.iter_custom(|iters| {
                    timed(&dir, iters, |d| {
                        fastsave::raw_write(&mlp.raw_groups(d), false).unwrap();
                    })
                })
            });
        }
    }
    g.finish();
    let _ = std::fs::remove_dir_all(&root);
}

fn save(c: &mut Criterion) {
    tch::set_num_threads(1);
    run_group(c, "save", tch::Device::Cpu);
}

fn save_cuda(c: &mut Criterion) {
    if tch::Cuda::is_available() {
        run_group(c, "save_cuda", tch::Device::Cuda(0));
    } else {
        println!("save_cuda: skipped (tch sees no CUDA device: tch::Cuda::is_available() is false)");
    }
}

criterion_group!(benches, save, save_cuda);
criterion_main!(benches);
