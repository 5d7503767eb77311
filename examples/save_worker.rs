//! The Rust side of `scripts/side_by_side.py`: a long-lived process that holds one model's
//! tensors and saves checkpoints on command, so the Python driver can interleave it with the
//! real HF Trainer's `_save_checkpoint` in one run.
//!
//! Protocol: one command per line on stdin, one JSON object per line on stdout.
//!   setup HIDDEN LAYERS        allocate `layers` x Linear(hidden, hidden) + AdamW state (CPU)
//!   save DIR                   fastsave (CRC on, 2 writer threads)       -> {"s": .., "bytes": .., "hwm_delta": ..}
//!   save_durable DIR           same, fsync of every file and the folders
//!   save_atomic DIR            atomic mode (src/save/atomic.rs): DIR is the output_dir (made before the
//!                              clock starts); the durable save into atomic::staging_dir(DIR,
//!                              "checkpoint-1"), then atomic::publish (one rename, DIR fsynced)
//!   save_atomic_tree DIR       the same in the executor's order: page-cache save into the staging
//!                              folder, atomic::sync_tree (fsync of every file, then the folder),
//!                              atomic::publish
//!   save_nocrc DIR             same as save with CRC32 off
//!   save_serial DIR            same as save on one thread
//!   plain DIR                  the format layer's ordinary path (BufWriter 8 MiB, whole-tensor CRC, one thread)
//!   raw DIR / raw_durable DIR  the bound: the tensor bytes alone, one thread (+ fsync per file)
//!   raw2 DIR                   the tensor bytes alone, one thread per file
//!   async DIR                  snapshot into reused buffers (the stall), write in the background -> {"stall": .., "s": ..}
//!   quit
//! Times are measured here around the call (like `_save_checkpoint` on the Python side); the
//! driver deletes DIR and syncs between commands. `hwm_delta` is VmHWM after the save minus
//! VmRSS before it (VmHWM reset with /proc/self/clear_refs first).
use ckptspec::formats::{safetensors as st, torch_format as tf};
use ckptspec::save::atomic;
use ckptspec::save::bench_model::{self, Mlp};
use ckptspec::save::fastsave::{self, SaveOptions, Snapshot};
use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::time::Instant;

fn plain_save(dir: &Path, mlp: &Mlp) -> Result<u64, String> {
    // What store.rs does for a checkpoint, with tch tensors wrapped by the format layer's
    // TchBytes: safetensors::save and torch_format::save_with, one after the other.
    std::fs::create_dir_all(dir).map_err(|e| e.to_string())?;
    let ck = mlp.checkpoint("5.24.0")?;
    let tensors: Vec<tf::Tensor> = ck.weights.iter().map(|(_, t)| tf::Tensor::from_tch(t)).collect::<Result<_, _>>().map_err(|e| e.to_string())?;
    let shapes: Vec<Vec<u64>> = tensors.iter().map(st::shape_u64).collect();
    let refs: Vec<st::TensorRef> = ck
        .weights
        .iter()
        .zip(&tensors)
        .zip(&shapes)
        .map(|(((n, _), t), s)| st::TensorRef::from_tensor(n, t, s))
        .collect::<Result<_, _>>()
        .map_err(|e| e.to_string())?;
    let mut n = st::save(dir.join("model.safetensors"), &refs, Some(&[("format", "pt")]), &Default::default()).map_err(|e| e.to_string())?;
    let opt = ck.optimizer.as_ref().unwrap();
    let mut entries = Vec::new();
    for (i, a) in opt.entries.iter().enumerate() {
        entries.push((
            tf::Value::Int(i as i64),
            tf::Value::dict([
                ("step", tf::Value::Tensor(tf::Tensor::scalar(a.step))),
                ("exp_avg", tf::Value::Tensor(tf::Tensor::from_tch(a.exp_avg).map_err(|e| e.to_string())?)),
                ("exp_avg_sq", tf::Value::Tensor(tf::Tensor::from_tch(a.exp_avg_sq).map_err(|e| e.to_string())?)),
            ]),
        ));
    }
    let v = tf::Value::dict([("state", tf::Value::Dict(entries)), ("param_groups", opt.param_groups.clone())]);
    n += tf::save_with(dir.join("optimizer.pt"), &v, &Default::default()).map_err(|e| e.to_string())?;
    // The small files through fastsave's writer of them (a few KB; same cost either way).
    let small = fastsave::Checkpoint { weights: vec![], weights_metadata: vec![], optimizer: None, small: ck.small };
    n += fastsave::save(dir, &small, &SaveOptions { parallel: false, ..Default::default() })?.bytes;
    Ok(n)
}

fn main() {
    tch::set_num_threads(1);
    let stdin = std::io::stdin();
    let mut out = std::io::stdout().lock();
    let mut mlp: Option<Mlp> = None;
    let mut snap: Option<Snapshot> = None;
    for line in stdin.lock().lines() {
        let line = line.expect("stdin");
        let parts: Vec<&str> = line.split_whitespace().collect();
        let Some(&cmd) = parts.first() else { continue };
        let arg = parts.get(1).map(PathBuf::from);
        let reply = (|| -> Result<String, String> {
            match cmd {
                "quit" => std::process::exit(0),
                "setup" => {
                    let h: i64 = parts.get(1).ok_or("hidden")?.parse().map_err(|_| "hidden")?;
                    let l: i64 = parts.get(2).ok_or("layers")?.parse().map_err(|_| "layers")?;
                    drop(mlp.take());
                    drop(snap.take());
                    let m = Mlp::new(h, l, tch::Device::Cpu);
                    let s = Snapshot::new(&m.all_tensors());
                    let p = m.num_params();
                    mlp = Some(m);
                    snap = Some(s);
                    Ok(format!(
                        "{{\"params\": {p}, \"tch_threads\": {}, \"writer_threads\": 2, \"rss\": {}}}",
                        tch::get_num_threads(),
                        bench_model::current_rss().unwrap_or(0)
                    ))
                }
                "async" => {
                    let m = mlp.as_ref().ok_or("no setup")?;
                    let dir = arg.ok_or("no DIR")?;
                    let mut s = snap.take().ok_or("no snapshot")?;
                    let t0 = Instant::now();
                    s.capture(&m.all_tensors())?;
                    let stall = t0.elapsed().as_secs_f64();
                    let view = Mlp::from_snapshot(m, &s);
                    let pending = fastsave::save_owned(dir, view, |v: &Mlp| v.checkpoint("5.24.0"), SaveOptions::default());
                    let (_view, r) = pending.wait();
                    let total = t0.elapsed().as_secs_f64();
                    snap = Some(s);
                    let r = r?;
                    Ok(format!("{{\"stall\": {stall:.6}, \"s\": {total:.6}, \"bytes\": {}}}", r.bytes))
                }
                _ => {
                    let m = mlp.as_ref().ok_or("no setup")?;
                    let dir = arg.ok_or("no DIR")?;
                    if cmd.starts_with("save_atomic") {
                        // The output_dir exists before a run's saves; the staging folder and
                        // checkpoint-1 are the save's own.
                        std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
                    }
                    let rss0 = bench_model::current_rss().unwrap_or(0);
                    let reset = bench_model::reset_peak_rss();
                    let t0 = Instant::now();
                    let bytes = match cmd {
                        "save" | "save_durable" | "save_nocrc" | "save_serial" => {
                            let opts = SaveOptions {
                                durable: cmd == "save_durable",
                                crc32: cmd != "save_nocrc",
                                parallel: cmd != "save_serial",
                                ..Default::default()
                            };
                            let ck = m.checkpoint("5.24.0")?;
                            fastsave::save(&dir, &ck, &opts)?.bytes
                        }
                        "save_atomic" | "save_atomic_tree" => {
                            let ck = m.checkpoint("5.24.0")?;
                            let err = |e: std::io::Error| format!("{}: {e}", dir.display());
                            if cmd == "save_atomic" {
                                // SaveOptions::atomic: the durable save into the staging folder, then the publish.
                                fastsave::save(&dir.join("checkpoint-1"), &ck, &SaveOptions::atomic())?.bytes
                            } else {
                                atomic::remove_leftovers(&dir).map_err(err)?;
                                let staging = atomic::staging_dir(&dir, "checkpoint-1");
                                let n = fastsave::save(&staging, &ck, &SaveOptions::default())?.bytes;
                                atomic::sync_tree(&staging).map_err(err)?;
                                atomic::publish(&dir, &staging, "checkpoint-1").map_err(err)?;
                                n
                            }
                        }
                        "plain" => plain_save(&dir, m)?,
                        "raw" | "raw_durable" => {
                            std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
                            fastsave::raw_write(&m.raw_groups(&dir), cmd == "raw_durable")?
                        }
                        "raw2" => {
                            std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
                            fastsave::raw_write_parallel(&m.raw_groups(&dir), false)?
                        }
                        other => return Err(format!("unknown command {other}")),
                    };
                    let s = t0.elapsed().as_secs_f64();
                    let hwm = if reset { bench_model::peak_rss().unwrap_or(0) as i64 - rss0 as i64 } else { -1 };
                    Ok(format!("{{\"s\": {s:.6}, \"bytes\": {bytes}, \"hwm_delta\": {hwm}}}"))
                }
            }
        })();
        let text = match reply {
            Ok(j) => j,
            Err(m) => format!("{{\"error\": {}}}", serde_json::Value::String(m)),
        };
        writeln!(out, "{text}").unwrap();
        out.flush().unwrap();
    }
}
