//! The fast save path writes the same files as the ordinary one, and real torch / safetensors /
//! zipfile (the project's venv) read them back with the same values and valid CRC32s.
//! (Speed is measured by `cargo bench --bench save` and scripts/side_by_side.sh, never here.)

use ckptspec::formats::safetensors as st;
use ckptspec::formats::torch_format::{self as tf, SerializationId};
use ckptspec::save::bench_model::Mlp;
use ckptspec::save::fastsave::{self, SaveOptions};
use serde_json::Value as Json;
use std::path::{Path, PathBuf};
use std::process::Command;

fn python() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(".venv/bin/python")
}

fn f32s(t: &tch::Tensor) -> Vec<f32> {
    Vec::<f32>::try_from(&t.reshape([-1])).unwrap()
}

const FIXED_ID: &str = "1234567890123456789012345678901234567890";

fn fixed() -> SaveOptions {
    SaveOptions { serialization_id: SerializationId::Fixed(FIXED_ID.into()), ..Default::default() }
}

/// The same checkpoint through the format layer's ordinary writers (BufWriter, whole-tensor
/// sources), for a byte-for-byte comparison.
fn ordinary(dir: &Path, mlp: &Mlp) {
    std::fs::create_dir_all(dir).unwrap();
    let ck = mlp.checkpoint("5.24.0").unwrap();
    let tensors: Vec<tf::Tensor> = ck.weights.iter().map(|(_, t)| tf::Tensor::from_tch(t).unwrap()).collect();
    let shapes: Vec<Vec<u64>> = tensors.iter().map(st::shape_u64).collect();
    let refs: Vec<st::TensorRef> = ck
        .weights
        .iter()
        .zip(&tensors)
        .zip(&shapes)
        .map(|(((n, _), t), s)| st::TensorRef::from_tensor(n, t, s).unwrap())
        .collect();
    st::save(dir.join("model.safetensors"), &refs, Some(&[("format", "pt")]), &Default::default()).unwrap();
    let v = fastsave::optimizer_value(ck.optimizer.as_ref().unwrap(), usize::MAX).unwrap();
    let opts = tf::SaveOptions { serialization_id: SerializationId::Fixed(FIXED_ID.into()), ..Default::default() };
    tf::save_with(dir.join("optimizer.pt"), &v, &opts).unwrap();
}

#[test]
fn fastsave_writes_what_torch_and_safetensors_read() {
    let tmp = tempfile::tempdir().unwrap();
    let mlp = Mlp::new(24, 3, tch::Device::Cpu);
    let ck = mlp.checkpoint("5.24.0").unwrap();

    // Every mode writes the same set of files; CRC on and the ordinary path give the same bytes.
    let modes: Vec<(&str, SaveOptions)> = vec![
        ("fast", fixed()),
        ("durable", SaveOptions { durable: true, ..fixed() }),
        ("serial", SaveOptions { parallel: false, ..fixed() }),
        ("tiny_chunks", SaveOptions { crc_chunk: 4096, ..fixed() }),
        ("nocrc", SaveOptions { crc32: false, ..fixed() }),
    ];
    for (name, opts) in &modes {
        let rep = fastsave::save(&tmp.path().join(name).join("checkpoint-2"), &ck, opts).unwrap();
        let mut got: Vec<&str> = rep.files.iter().map(|(n, _)| n.as_str()).collect();
        got.sort();
        assert_eq!(
            got,
            ["config.json", "model.safetensors", "optimizer.pt", "rng_state.pth", "scheduler.pt", "trainer_state.json", "training_args.bin"],
            "{name}"
        );
        for (f, n) in &rep.files {
            assert_eq!(std::fs::metadata(tmp.path().join(name).join("checkpoint-2").join(f)).unwrap().len(), *n, "{name}/{f}");
        }
    }
    let ord = tmp.path().join("ordinary");
    ordinary(&ord, &mlp);
    let read = |p: PathBuf| std::fs::read(p).unwrap();
    for mode in ["fast", "durable", "serial", "tiny_chunks"] {
        for f in ["model.safetensors", "optimizer.pt"] {
            assert!(read(tmp.path().join(mode).join("checkpoint-2").join(f)) == read(ord.join(f)), "{mode}/{f} differs from the ordinary writer's");
        }
    }
    let nocrc = read(tmp.path().join("nocrc/checkpoint-2/optimizer.pt"));
    assert_eq!(nocrc.len(), read(ord.join("optimizer.pt")).len());
    // Our own reader checks every CRC.
    tf::load_with(tmp.path().join("fast/checkpoint-2/optimizer.pt"), &tf::LoadOptions::default()).unwrap();

    // Real torch / safetensors / zipfile.
    let script = r#"
import json, sys, zipfile, warnings
warnings.filterwarnings("ignore")
import numpy as np, torch
from safetensors.torch import load_file
out = {}
for d in sys.argv[1:]:
    r = {}
    w = load_file(f"{d}/model.safetensors")
    r["weights"] = {k: [list(v.shape), str(v.dtype), v.reshape(-1).tolist()] for k, v in w.items()}
    o = torch.load(f"{d}/optimizer.pt", weights_only=True)
    r["state"] = {str(k): {"step": [str(s["step"].dtype), s["step"].item()],
                           "exp_avg": [list(s["exp_avg"].shape), s["exp_avg"].reshape(-1).tolist()],
                           "exp_avg_sq": [list(s["exp_avg_sq"].shape), s["exp_avg_sq"].reshape(-1).tolist()]}
                  for k, s in o["state"].items()}
    r["param_groups"] = [{k: v for k, v in g.items() if k != "betas"} for g in o["param_groups"]]
    r["sched"] = torch.load(f"{d}/scheduler.pt", weights_only=True)
    np_core = np._core if np.__version__ >= "2" else np.core
    with torch.serialization.safe_globals([np_core.multiarray._reconstruct, np.ndarray, np.dtype, type(np.dtype(np.uint32))]):
        rng = torch.load(f"{d}/rng_state.pth", weights_only=True)
    r["rng"] = sorted(rng.keys())
    r["args_class"] = type(torch.load(f"{d}/training_args.bin", weights_only=False)).__name__
    r["trainer_state_step"] = json.load(open(f"{d}/trainer_state.json"))["global_step"]
    r["config"] = json.load(open(f"{d}/config.json"))["model_type"]
    r["testzip"] = {f: zipfile.ZipFile(f"{d}/{f}").testzip() for f in ("optimizer.pt", "scheduler.pt", "rng_state.pth", "training_args.bin")}
    out[d] = r
print(json.dumps(out))
"#;
    let dirs: Vec<String> =
        ["fast", "nocrc"].iter().map(|m| tmp.path().join(m).join("checkpoint-2").display().to_string()).collect();
    let o = Command::new(python()).arg("-c").arg(script).args(&dirs).output().expect("venv python");
    assert!(o.status.success(), "python failed:\n{}", String::from_utf8_lossy(&o.stderr));
    let all: Json = serde_json::from_slice(&o.stdout).unwrap();

    for (d, mode) in dirs.iter().zip(["fast", "nocrc"]) {
        let r = &all[d.as_str()];
        // Weights: every tensor, same shape and values.
        let w = r["weights"].as_object().unwrap();
        assert_eq!(w.len(), mlp.weights.len());
        for (name, t) in &mlp.weights {
            let e = &w[name.as_str()];
            let shape: Vec<i64> = e[0].as_array().unwrap().iter().map(|x| x.as_i64().unwrap()).collect();
            assert_eq!(shape, t.size(), "{mode}: {name}");
            assert_eq!(e[1], "torch.float32");
            let vals: Vec<f32> = e[2].as_array().unwrap().iter().map(|x| x.as_f64().unwrap() as f32).collect();
            assert_eq!(vals, f32s(t), "{mode}: {name}");
        }
        // Optimizer: state 0.. in torch's numbering, step, both moments.
        let s = r["state"].as_object().unwrap();
        assert_eq!(s.len(), mlp.exp_avg.len());
        for i in 0..mlp.exp_avg.len() {
            let e = &s[&i.to_string()];
            assert_eq!(e["step"][0], "torch.float32");
            assert_eq!(e["step"][1].as_f64().unwrap(), mlp.step as f64);
            for (key, t) in [("exp_avg", &mlp.exp_avg[i]), ("exp_avg_sq", &mlp.exp_avg_sq[i])] {
                let shape: Vec<i64> = e[key][0].as_array().unwrap().iter().map(|x| x.as_i64().unwrap()).collect();
                assert_eq!(shape, t.size(), "{mode}: state {i} {key}");
                let vals: Vec<f32> = e[key][1].as_array().unwrap().iter().map(|x| x.as_f64().unwrap() as f32).collect();
                assert_eq!(vals, f32s(t), "{mode}: state {i} {key}");
            }
        }
        let groups = r["param_groups"].as_array().unwrap();
        assert_eq!(groups.len(), 2);
        assert_eq!(groups[0]["params"], serde_json::json!([0, 1, 2]));
        assert_eq!(groups[1]["params"], serde_json::json!([3, 4, 5]));
        assert_eq!(r["sched"]["last_epoch"], 2);
        assert_eq!(r["rng"], serde_json::json!(["cpu", "numpy", "python"]));
        assert_eq!(r["args_class"], "TrainingArguments");
        assert_eq!(r["trainer_state_step"], 2);
        assert_eq!(r["config"], "perf_mlp");
        // zipfile checks each record's CRC32: all good with CRC on; with it off, only the
        // big file's records carry CRC 0 (torch.load above accepted it all the same).
        let tz = r["testzip"].as_object().unwrap();
        if mode == "fast" {
            assert!(tz.values().all(|v| v.is_null()), "bad CRC: {tz:?}");
        } else {
            assert!(!tz["optimizer.pt"].is_null(), "CRC off should leave CRC 0 in optimizer.pt: {tz:?}");
        }
    }
}

#[test]
fn raw_write_writes_the_tensor_bytes() {
    let tmp = tempfile::tempdir().unwrap();
    let mlp = Mlp::new(16, 2, tch::Device::Cpu);
    let groups = mlp.raw_groups(tmp.path());
    let n = fastsave::raw_write(&groups, true).unwrap();
    assert_eq!(n, mlp.all_tensors().iter().map(|t| t.numel() as u64 * 4).sum::<u64>());
    let model = std::fs::read(tmp.path().join("model.raw")).unwrap();
    let first = f32s(&mlp.weights[0].1);
    assert_eq!(&model[..4], &first[0].to_le_bytes());
    let n2 = fastsave::raw_write_parallel(&groups, false).unwrap();
    assert_eq!(n, n2);
}

#[test]
fn async_save_writes_the_snapshot_not_later_changes() {
    let tmp = tempfile::tempdir().unwrap();
    let mut mlp = Mlp::new(16, 2, tch::Device::Cpu);
    let mut snap = fastsave::Snapshot::new(&mlp.all_tensors());
    snap.capture(&mlp.all_tensors()).unwrap();
    let before = f32s(&mlp.weights[0].1);
    let view = Mlp::from_snapshot(&mlp, &snap);
    let pending = fastsave::save_owned(tmp.path().join("c"), view, |v: &Mlp| v.checkpoint("5.24.0"), SaveOptions::default());
    // The training loop moves on and changes the live weights in place.
    tch::no_grad(|| {
        let _ = mlp.weights[0].1.fill_(7.0);
    });
    let (_view, rep) = pending.wait();
    rep.unwrap();
    let (_, ts) = st::load(tmp.path().join("c/model.safetensors")).unwrap();
    let w0 = ts.iter().find(|(n, _)| n == "layers.0.weight").unwrap();
    let bytes = w0.1.storage.data.to_vec().unwrap();
    let vals: Vec<f32> = bytes.chunks(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect();
    assert_eq!(vals, before);
}

#[test]
fn device_chunks_stream_every_byte_in_order() {
    // The staging loop of the GPU path, run here on a CPU tensor (copy into the staging buffer,
    // hand it on, next chunk): more than one 16 MiB staging buffer's worth, odd length.
    use ckptspec::formats::torch_format::ByteSource;
    let t = tch::Tensor::arange(4 * 1024 * 1024 + 3, (tch::Kind::Float, tch::Device::Cpu));
    let src = fastsave::DeviceChunks::new(&t).unwrap();
    assert_eq!(src.len(), (4 * 1024 * 1024 + 3) * 4);
    let mut got = Vec::new();
    let mut chunks = 0;
    src.stream(&mut |c| {
        chunks += 1;
        got.extend_from_slice(c);
        Ok(())
    })
    .unwrap();
    assert_eq!(chunks, 2);
    let want: Vec<u8> = f32s(&t).iter().flat_map(|x| x.to_le_bytes()).collect();
    assert!(got == want);
}

/// `SaveOptions::atomic`: the same bytes as the durable save, published by one rename; a
/// leftover staging folder of a killed save is removed, nothing else of the parent is touched.
#[test]
fn atomic_save_publishes_the_same_files() {
    let mlp = Mlp::new(8, 2, tch::Device::Cpu);
    let tmp = tempfile::tempdir().unwrap();
    let (plain, out) = (tmp.path().join("plain"), tmp.path().join("out"));
    let ck = mlp.checkpoint("5.24.0").unwrap();
    fastsave::save(&plain.join("checkpoint-1"), &ck, &fixed()).unwrap();
    let leftover = ckptspec::save::atomic::staging_dir(&out, "checkpoint-0");
    std::fs::create_dir_all(&leftover).unwrap();
    std::fs::write(out.join("user-notes.txt"), "mine").unwrap();
    let opts = SaveOptions { atomic: true, durable: true, ..fixed() };
    fastsave::save(&out.join("checkpoint-1"), &ck, &opts).unwrap();
    let mut names: Vec<String> = std::fs::read_dir(&out).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    names.sort();
    assert_eq!(names, ["checkpoint-1", "user-notes.txt"], "the leftover is gone, the user's file stays, nothing staged is left");
    // Bytes, but for the torch files written through `store` (training_args.bin, rng_state.pth),
    // whose writer draws a fresh serialization id: loaded values.
    for e in std::fs::read_dir(plain.join("checkpoint-1")).unwrap() {
        let name = e.unwrap().file_name();
        let (a, b) = (plain.join("checkpoint-1").join(&name), out.join("checkpoint-1").join(&name));
        if name == "training_args.bin" || name == "rng_state.pth" {
            assert_eq!(format!("{:?}", tf::load(&a).unwrap()), format!("{:?}", tf::load(&b).unwrap()));
        } else {
            assert!(std::fs::read(&a).unwrap() == std::fs::read(&b).unwrap(), "{name:?} differs");
        }
    }
}
