//! The file-format layer against real files and real Python:
//! golden checkpoints of HF 5.24.0 and 4.31.0 read and written back byte for byte, files written
//! here loaded by torch / safetensors / json in the project's venv (and re-saved there to the
//! same bytes), a refused malicious pickle, Python's float repr, and the writer's memory bound.

use ckptspec::formats::pyjson::{self, DumpOptions, PyJson};
use ckptspec::formats::safetensors::{self as st, Dtype, TensorRef};
use ckptspec::formats::torch_format::{
    self as tf, ArchiveStyle, Construct, DType, FnSource, Global, LoadOptions, Object, SaveOptions,
    SerializationId, Tensor, Value,
};
use serde_json::{json, Value as Json};
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::collections::HashSet;
use std::sync::{Arc, Mutex, OnceLock};

// ---------------------------------------------------------------- per-thread allocation meter

struct Meter;
thread_local! {
    static LIVE: Cell<isize> = const { Cell::new(0) };
    static PEAK: Cell<isize> = const { Cell::new(0) };
}
fn note(delta: isize) {
    let _ = LIVE.try_with(|l| {
        let v = l.get() + delta;
        l.set(v);
        let _ = PEAK.try_with(|p| {
            if v > p.get() {
                p.set(v)
            }
        });
    });
}
unsafe impl GlobalAlloc for Meter {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        note(l.size() as isize);
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        note(-(l.size() as isize));
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, n: usize) -> *mut u8 {
        note(n as isize - l.size() as isize);
        unsafe { System.realloc(p, l, n) }
    }
}
#[global_allocator]
static GLOBAL: Meter = Meter;

// ---------------------------------------------------------------- helpers

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn python() -> PathBuf {
    let p = root().join(".venv/bin/python");
    assert!(
        p.exists(),
        "{} is missing: the format tests need the project venv",
        p.display()
    );
    p
}

fn run_python(args: &[&str], stdin: Option<&str>) -> String {
    use std::io::Write;
    let mut cmd = Command::new(python());
    cmd.args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    cmd.stdin(if stdin.is_some() {
        std::process::Stdio::piped()
    } else {
        std::process::Stdio::null()
    });
    let mut child = cmd.spawn().expect("start python");
    if let Some(s) = stdin {
        let mut i = child.stdin.take().unwrap();
        let s = s.to_string();
        std::thread::spawn(move || i.write_all(s.as_bytes()));
    }
    let out = child.wait_with_output().expect("python output");
    assert!(
        out.status.success(),
        "python {args:?} failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn tmpdir() -> tempfile::TempDir {
    // CKPTSPEC_KEEP_TMP=1 keeps the files for inspection.
    let keep = std::env::var_os("CKPTSPEC_KEEP_TMP").is_some();
    let d = tempfile::Builder::new()
        .prefix("ckptspec-formats")
        .disable_cleanup(keep)
        .tempdir()
        .unwrap();
    if keep {
        eprintln!("keeping {}", d.path().display());
    }
    d
}

/// Checkpoint folders of every golden version: golden/hf-*/*/output/checkpoint-*/. HF 4.31.0
/// checkpoints are generated with the 4.31.0 venv when golden/hf-4.31.0 is not committed.
fn checkpoints() -> &'static Vec<(String, PathBuf)> {
    static C: OnceLock<Vec<(String, PathBuf)>> = OnceLock::new();
    C.get_or_init(|| {
        let golden = root().join("golden");
        let mut out = Vec::new();
        let mut versions: Vec<(String, PathBuf)> = std::fs::read_dir(&golden)
            .expect("golden/ exists")
            .map(|e| e.unwrap().path())
            .filter(|p| p.file_name().unwrap().to_string_lossy().starts_with("hf-"))
            .map(|p| (p.file_name().unwrap().to_string_lossy().into_owned(), p))
            .collect();
        assert!(
            golden.join("hf-5.24.0").is_dir(),
            "golden/hf-5.24.0 is missing"
        );
        if !golden.join("hf-4.31.0").is_dir() {
            let venv = root().join(".venv-hf-4.31.0/bin/python");
            assert!(
                venv.exists(),
                "neither golden/hf-4.31.0 nor {} exists",
                venv.display()
            );
            let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("formats-hf-4.31.0");
            let _ = std::fs::remove_dir_all(&dir);
            let st = Command::new(&venv)
                .arg(root().join("conformance/generate.py"))
                .args(["--hf", "4.31.0", "--out"])
                .arg(&dir)
                .args(["--only", "final-step-not-multiple"])
                .output()
                .expect("run generate.py");
            assert!(
                st.status.success(),
                "generate.py --hf 4.31.0 failed: {}",
                String::from_utf8_lossy(&st.stderr)
            );
            versions.push(("hf-4.31.0".to_string(), dir));
        }
        versions.sort();
        for (label, v) in versions {
            let mut found = 0;
            for scen in std::fs::read_dir(&v)
                .unwrap()
                .map(|e| e.unwrap().path())
                .filter(|p| p.is_dir())
            {
                let outdir = scen.join("output");
                let Ok(rd) = std::fs::read_dir(&outdir) else {
                    continue;
                };
                let mut final_save = false;
                for ck in rd.map(|e| e.unwrap().path()) {
                    if earlier().contains(&ck) {
                        continue; // the scenario's `earlier`: there before HF ran
                    }
                    final_save |= ck.is_file();
                    if ck.is_dir()
                        && ck
                            .file_name()
                            .unwrap()
                            .to_string_lossy()
                            .starts_with("checkpoint-")
                    {
                        out.push((label.clone(), ck));
                        found += 1;
                    }
                }
                if final_save {
                    // what save_model / save_state wrote at the end of training
                    out.push((label.clone(), outdir));
                }
            }
            assert!(
                found > 0,
                "{} holds no */output/checkpoint-*/ folder",
                v.display()
            );
        }
        out.sort();
        out
    })
}

/// Golden files a contract-v2 scenario's `resume.damage` truncated (every profile's copy):
/// they are the scenario's, not HF's, so no round trip holds for them.
fn damaged() -> &'static std::collections::HashSet<PathBuf> {
    static D: OnceLock<std::collections::HashSet<PathBuf>> = OnceLock::new();
    D.get_or_init(|| {
        let mut out = std::collections::HashSet::new();
        for (_, sc) in ckptspec::world::scenario::Scenario::load_dir(&root().join("conformance/scenarios")).unwrap() {
            for d in sc.resume.iter().flat_map(|r| &r.damage) {
                for e in std::fs::read_dir(root().join("golden")).unwrap().flatten() {
                    out.insert(e.path().join(&sc.name).join(d.path()));
                }
            }
        }
        out
    })
}

/// What a contract-v3 scenario's `earlier` put in output/ before the run (every profile's
/// copy, and the folders above a file): the scenario's, not HF's.
fn earlier() -> &'static std::collections::HashSet<PathBuf> {
    static E: OnceLock<std::collections::HashSet<PathBuf>> = OnceLock::new();
    E.get_or_init(|| {
        let mut out = std::collections::HashSet::new();
        for (_, sc) in ckptspec::world::scenario::Scenario::load_dir(&root().join("conformance/scenarios")).unwrap() {
            for e in &sc.earlier {
                for g in std::fs::read_dir(root().join("golden")).unwrap().flatten() {
                    let mut p = g.path().join(&sc.name).join(e.path());
                    while p.file_name().is_some_and(|n| n != "output") {
                        out.insert(p.clone());
                        p.pop();
                    }
                }
            }
        }
        out
    })
}

fn files_with_ext(dir: &Path, exts: &[&str]) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.extension()
                .is_some_and(|e| exts.contains(&e.to_str().unwrap()))
        })
        .collect();
    v.sort();
    v
}

fn first_difference(a: &[u8], b: &[u8]) -> String {
    let i = a
        .iter()
        .zip(b)
        .position(|(x, y)| x != y)
        .unwrap_or(a.len().min(b.len()));
    format!(
        "lengths {} vs {}, first difference at byte {i}",
        a.len(),
        b.len()
    )
}

// ---------------------------------------------------------------- golden round trips

#[test]
fn golden_checkpoints_round_trip_byte_for_byte() {
    // Most golden files recur byte for byte in other releases (and scenarios): a round trip
    // depends on the bytes alone, so each content is read and written back once.
    let seen: Mutex<HashSet<u64>> = Mutex::new(HashSet::new());
    let first_time = |bytes: &[u8]| {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        std::hash::Hash::hash(bytes, &mut h);
        seen.lock().unwrap().insert(std::hash::Hasher::finish(&h))
    };
    let cks = checkpoints();
    let per_checkpoint = ckptspec::harness::par::map(cks.len(), ckptspec::harness::par::cores(), |k| {
        let (version, ck) = &cks[k];
        let mut checked = Vec::new();
        // every file of a checkpoint is one this layer reads and writes: none is skipped
        for e in std::fs::read_dir(ck).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                continue; // checkpoint-* folders inside output/ are entries of their own
            }
            let ext = p
                .extension()
                .map(|x| x.to_string_lossy().into_owned())
                .unwrap_or_default();
            assert!(
                // md: peft's model card (the `lora` kind), text as golden/hf-V/PEFT.json holds it
                ["pt", "pth", "bin", "safetensors", "json", "md"].contains(&ext.as_str()),
                "{}: a file this test does not know",
                p.display()
            );
        }
        for f in files_with_ext(ck, &["pt", "pth", "bin"]) {
            if damaged().contains(&f) {
                continue; // cut by the scenario's resume.damage, not written by HF
            }
            let orig = std::fs::read(&f).unwrap();
            checked.push(format!(
                "{version} {}",
                f.file_name().unwrap().to_string_lossy()
            ));
            if !first_time(&orig) {
                continue;
            }
            for lazy in [false, true] {
                let loaded = tf::load_with(
                    &f,
                    &LoadOptions {
                        lazy,
                        ..LoadOptions::default()
                    },
                )
                .unwrap_or_else(|e| panic!("{e}"));
                let (again, n) =
                    tf::save_to_writer(Vec::new(), &loaded.value, &loaded.archive.save_options())
                        .unwrap();
                assert_eq!(n as usize, again.len());
                assert!(
                    again == orig,
                    "{}: not byte-identical after read+write: {}",
                    f.display(),
                    first_difference(&again, &orig)
                );
            }
        }
        for f in files_with_ext(ck, &["safetensors"]) {
            if damaged().contains(&f) {
                continue; // cut by the scenario's resume.damage, not written by HF
            }
            let orig = std::fs::read(&f).unwrap();
            checked.push(format!(
                "{version} {}",
                f.file_name().unwrap().to_string_lossy()
            ));
            if !first_time(&orig) {
                continue;
            }
            let (hdr, tensors) = st::load(&f).unwrap();
            let shapes: Vec<Vec<u64>> = tensors.iter().map(|(_, t)| st::shape_u64(t)).collect();
            let refs: Vec<TensorRef> = tensors
                .iter()
                .zip(&shapes)
                .map(|((n, t), s)| TensorRef::from_tensor(n, t, s).unwrap())
                .collect();
            let md: Option<Vec<(&str, &str)>> = hdr
                .metadata
                .as_ref()
                .map(|m| m.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect());
            let (again, _) = st::save_to_writer(Vec::new(), &refs, md.as_deref()).unwrap();
            assert!(
                again == orig,
                "{}: {}",
                f.display(),
                first_difference(&again, &orig)
            );
        }
        for f in files_with_ext(ck, &["json"]) {
            if damaged().contains(&f) {
                continue; // cut by the scenario's resume.damage, not written by HF
            }
            let profile = ckptspec::hf::profile::Profile::get(version.trim_start_matches("hf-")).unwrap();
            let name = f.file_name().unwrap().to_string_lossy();
            if profile.tokenizer_files.iter().any(|(n, _)| *n == name) {
                // the tokenizer library's own JSON, copied as its save_pretrained wrote it
                // (TOKENIZER.json); the other side of this round trip is HF's JSON writer
                continue;
            }
            let text = std::fs::read_to_string(&f).unwrap();
            checked.push(format!(
                "{version} {}",
                f.file_name().unwrap().to_string_lossy()
            ));
            // (the name decides the line end below: adapter_config.json's content is its own)
            if !first_time(format!("{name}\n{text}").as_bytes()) {
                continue;
            }
            let v = pyjson::read_file(&f).unwrap();
            // peft writes adapter_config.json without the newline HF's writers end with.
            let end = if name == "adapter_config.json" { "" } else { "\n" };
            let again = pyjson::dumps(&v, &DumpOptions::hf()).unwrap() + end;
            assert_eq!(again, text, "{}", f.display());
        }
        checked
    });
    let checked: Vec<String> = per_checkpoint.into_iter().flatten().collect();
    for v in ["hf-5.24.0", "hf-4.31.0"] {
        for f in [
            "optimizer.pt",
            "scheduler.pt",
            "rng_state.pth",
            "training_args.bin",
            "trainer_state.json",
        ] {
            assert!(
                checked.iter().any(|c| c.contains(v) && c.ends_with(f)),
                "{v} {f} was not checked: {checked:?}"
            );
        }
    }
    eprintln!(
        "{} golden files read and written back byte for byte",
        checked.len()
    );
    assert!(checked.iter().any(|c| c.ends_with("model.safetensors")));
    assert!(checked.iter().any(|c| c.ends_with("pytorch_model.bin")));
}

#[test]
fn golden_values_read_as_expected() {
    let ck = root().join("golden/hf-5.24.0/final-step-not-multiple/output/checkpoint-4");
    let opt = tf::load(ck.join("optimizer.pt")).unwrap();
    let groups = opt.get("param_groups").unwrap().as_seq().unwrap();
    assert_eq!(groups[0].get("lr").unwrap().as_f64(), Some(3e-5));
    assert_eq!(
        groups[0].get("betas").unwrap(),
        &Value::Tuple(vec![Value::Float(0.9), Value::Float(0.999)])
    );
    let state = opt.get("state").unwrap().as_dict().unwrap();
    let step = state[0].1.get("step").unwrap().as_tensor().unwrap();
    assert_eq!((step.dtype(), step.shape.len()), (DType::Float32, 0));
    assert_eq!(
        f32::from_le_bytes(step.contiguous_bytes().unwrap().try_into().unwrap()),
        4.0
    );

    let args = tf::load(ck.join("training_args.bin")).unwrap();
    let o = args.as_object().unwrap();
    assert_eq!(
        o.class,
        Global::new("transformers.training_args", "TrainingArguments")
    );
    assert_eq!(o.construct, Construct::NewObj);
    assert_eq!(args.get("learning_rate").unwrap().as_f64(), Some(5e-5));
    assert_eq!(args.get("save_steps").unwrap().as_i64(), Some(4));
    let sched = args.get("lr_scheduler_type").unwrap().as_object().unwrap();
    assert_eq!(sched.class.name, "SchedulerType");
    assert_eq!(sched.args, vec![Value::str("linear")]);

    let rng = tf::load(ck.join("rng_state.pth")).unwrap();
    let cpu = rng.get("cpu").unwrap().as_tensor().unwrap();
    assert_eq!((cpu.dtype(), cpu.shape.clone()), (DType::UInt8, vec![5056]));
    let py = rng.get("python").unwrap().as_seq().unwrap();
    assert_eq!(py[0].as_i64(), Some(3));
    assert_eq!(py[1].as_seq().unwrap().len(), 625);
}

// ---------------------------------------------------------------- values built in Rust

fn f32_tensor(shape: &[i64], vals: Vec<f32>) -> Tensor {
    Tensor::from_vec(shape, vals).unwrap()
}

fn adam_state(n: &[i64], seed: f32) -> Value {
    let k: i64 = n.iter().product();
    Value::dict([
        ("step", Value::Tensor(Tensor::scalar(4.0f32))),
        (
            "exp_avg",
            Value::Tensor(f32_tensor(
                n,
                (0..k).map(|i| seed + i as f32 * 0.25).collect(),
            )),
        ),
        (
            "exp_avg_sq",
            Value::Tensor(f32_tensor(
                n,
                (0..k).map(|i| seed * 1e-3 + i as f32).collect(),
            )),
        ),
    ])
}

fn optimizer_value() -> Value {
    let group = |lr: f64, params: Vec<i64>| {
        Value::dict([
            ("weight_decay", Value::Float(0.0)),
            ("lr", Value::Float(lr)),
            (
                "betas",
                Value::Tuple(vec![Value::Float(0.9), Value::Float(0.999)]),
            ),
            ("eps", Value::Float(1e-8)),
            ("amsgrad", Value::Bool(false)),
            ("foreach", Value::None),
            ("fused", Value::Bool(true)),
            ("initial_lr", Value::Float(5e-5)),
            (
                "params",
                Value::List(params.into_iter().map(Value::Int).collect()),
            ),
        ])
    };
    Value::dict([
        (
            "state",
            Value::Dict(vec![
                (Value::Int(0), adam_state(&[2, 3], 1.5)),
                (Value::Int(1), adam_state(&[3], -2.0)),
            ]),
        ),
        (
            "param_groups",
            Value::List(vec![group(3e-5, vec![0]), group(1e-4, vec![1])]),
        ),
    ])
}

fn scheduler_value() -> Value {
    Value::dict([
        (
            "base_lrs",
            Value::List(vec![Value::Float(5e-5), Value::Float(5e-5)]),
        ),
        ("last_epoch", Value::Int(4)),
        ("_step_count", Value::Int(5)),
        ("_is_initial", Value::Bool(false)),
        ("_get_lr_called_within_step", Value::Bool(false)),
        (
            "_last_lr",
            Value::List(vec![Value::Float(3e-5), Value::Float(3e-5)]),
        ),
        (
            "lr_lambdas",
            Value::List(vec![Value::Dict(vec![]), Value::Dict(vec![])]),
        ),
    ])
}

/// A pytorch_model.bin-style state dict: many dtypes, views sharing a storage, a transposed
/// (non-contiguous) view, 0-dim and empty tensors, an unsigned dtype saved with
/// `_rebuild_tensor_v3`, more than ten storages (key order "10" < "2" matters for torch 2.1).
fn model_value() -> Value {
    let w = f32_tensor(&[2, 3], vec![1.0, -2.5, 3.25, 0.0, 1e-8, -0.0]);
    let mut row1 = w.clone();
    row1.storage_offset = 3;
    row1.shape = vec![3];
    row1.stride = vec![1];
    let mut wt = w.clone();
    wt.shape = vec![3, 2];
    wt.stride = vec![1, 3];
    let bf16: Vec<u16> = [1.0f32, -3.5, 0.125]
        .iter()
        .map(|x| (x.to_bits() >> 16) as u16)
        .collect();
    let mut items = vec![
        ("w", Value::Tensor(w)),
        ("w.row1", Value::Tensor(row1)),
        ("w.t", Value::Tensor(wt)),
        (
            "b",
            Value::Tensor(Tensor::new(DType::BFloat16, &[3], Arc::new(bf16)).unwrap()),
        ),
        (
            "i",
            Value::Tensor(Tensor::from_vec(&[4], vec![1i64, -1, i64::MAX, i64::MIN]).unwrap()),
        ),
        (
            "u8",
            Value::Tensor(Tensor::from_vec(&[2], vec![0u8, 255]).unwrap()),
        ),
        (
            "mask",
            Value::Tensor(Tensor::new(DType::Bool, &[3], Arc::new(vec![1u8, 0, 1])).unwrap()),
        ),
        (
            "f64",
            Value::Tensor(Tensor::from_vec(&[1], vec![std::f64::consts::PI]).unwrap()),
        ),
        (
            "half",
            Value::Tensor(
                Tensor::new(DType::Float16, &[2], Arc::new(vec![0x3c00u16, 0xc000])).unwrap(),
            ),
        ),
        ("scalar", Value::Tensor(Tensor::scalar(7i32))),
        ("empty", Value::Tensor(f32_tensor(&[0, 4], vec![]))),
        (
            "u16",
            Value::Tensor(Tensor::from_vec(&[3], vec![1u16, 2, 65535]).unwrap()),
        ),
        (
            "grad",
            Value::Tensor(f32_tensor(&[2], vec![0.5, 0.25]).with_requires_grad(true)),
        ),
    ];
    items.push((
        "i16",
        Value::Tensor(Tensor::from_vec(&[2], vec![-3i16, 300]).unwrap()),
    ));
    Value::ordered_dict(items.into_iter().map(|(k, v)| (Value::str(k), v)).collect())
}

/// Python types only torch.load(weights_only=False) takes, to check the pickler's details.
fn misc_value() -> Value {
    let shared = Arc::new(Value::List(vec![Value::str("x"), Value::Int(1)]));
    Value::dict([
        ("set", Value::Set(vec![Value::Int(1), Value::Int(2)])),
        ("frozenset", Value::FrozenSet(vec![Value::str("a")])),
        ("bytes", Value::Bytes(b"\x00\x01\xffhello".to_vec())),
        ("one_byte", Value::Bytes(b"b".to_vec())),
        ("no_bytes", Value::Bytes(vec![])),
        ("big", Value::from_u64(u64::MAX)),
        ("neg", Value::Int(i64::MIN)),
        (
            "floats",
            Value::List(vec![
                Value::Float(f64::NAN),
                Value::Float(f64::INFINITY),
                Value::Float(-0.0),
            ]),
        ),
        ("unicode", Value::str("é 😀 \n")),
        ("shared_a", Value::Shared(shared.clone())),
        ("shared_b", Value::Shared(shared)),
        ("device", Value::torch_device("cpu")),
        ("cpu", Value::str("cpu")),
        ("long", Value::List((0..2100).map(Value::Int).collect())),
        (
            "wide",
            Value::Dict(
                (0..1000)
                    .map(|i| (Value::Int(i), Value::Bool(i % 2 == 0)))
                    .collect(),
            ),
        ),
        (
            "nested",
            Value::Tuple(vec![
                Value::Tuple(vec![]),
                Value::Tuple(vec![Value::None; 5]),
            ]),
        ),
    ])
}

fn np_u32_array(values: &[u32]) -> Value {
    let dtype = Value::Object(Box::new(Object {
        class: Global::new("numpy", "dtype"),
        construct: Construct::Reduce,
        args: vec![Value::str("u4"), Value::Bool(false), Value::Bool(true)],
        state: Some(Value::Tuple(vec![
            Value::Int(3),
            Value::str("<"),
            Value::None,
            Value::None,
            Value::None,
            Value::Int(-1),
            Value::Int(-1),
            Value::Int(0),
        ])),
        list_items: vec![],
        dict_items: vec![],
    }));
    let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
    Value::Object(Box::new(Object {
        class: Global::new("numpy._core.multiarray", "_reconstruct"),
        construct: Construct::Reduce,
        args: vec![
            Value::Global(Global::new("numpy", "ndarray")),
            Value::Tuple(vec![Value::Int(0)]),
            Value::Bytes(b"b".to_vec()),
        ],
        state: Some(Value::Tuple(vec![
            Value::Int(1),
            Value::Tuple(vec![Value::Int(values.len() as i64)]),
            dtype,
            Value::Bool(false),
            Value::Bytes(bytes),
        ])),
        list_items: vec![],
        dict_items: vec![],
    }))
}

/// rng_state.pth as HF 5.24 writes it, rebuilt from the parts of a golden file.
fn rng_value_from(golden: &Value) -> Value {
    let py = golden.get("python").unwrap().clone();
    let np = golden.get("numpy").unwrap().as_seq().unwrap();
    let arr = np[1]
        .as_object()
        .unwrap()
        .state
        .as_ref()
        .unwrap()
        .as_seq()
        .unwrap();
    let Value::Bytes(raw) = arr[4].resolved() else {
        panic!("numpy bytes")
    };
    let words: Vec<u32> = raw
        .chunks(4)
        .map(|c| u32::from_le_bytes(c.try_into().unwrap()))
        .collect();
    let numpy = Value::Tuple(vec![
        Value::str("MT19937"),
        np_u32_array(&words),
        np[2].clone(),
        np[3].clone(),
        np[4].clone(),
    ]);
    let cpu = golden
        .get("cpu")
        .unwrap()
        .as_tensor()
        .unwrap()
        .contiguous_bytes()
        .unwrap();
    Value::dict([
        ("python", py),
        ("numpy", numpy),
        (
            "cpu",
            Value::Tensor(Tensor::from_vec(&[cpu.len() as i64], cpu).unwrap()),
        ),
    ])
}

// ---------------------------------------------------------------- description shared with Python

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn big_int_string(b: &[u8]) -> String {
    assert!(b.len() <= 16);
    let neg = b[b.len() - 1] & 0x80 != 0;
    let mut full = [if neg { 0xff } else { 0 }; 16];
    full[..b.len()].copy_from_slice(b);
    i128::from_le_bytes(full).to_string()
}

/// The same description the Python side prints for a loaded object.
fn describe(v: &Value) -> Json {
    match v.resolved() {
        Value::None => Json::Null,
        Value::Bool(b) => json!({ "bool": b }),
        Value::Int(i) => json!({ "int": i.to_string() }),
        Value::BigInt(b) => json!({ "int": big_int_string(b) }),
        Value::Float(f) => json!({ "float": pyjson::float_repr(*f) }),
        Value::Str(s) => json!({ "str": s }),
        Value::Bytes(b) => json!({ "bytes": hex(b) }),
        Value::List(x) => json!({ "list": x.iter().map(describe).collect::<Vec<_>>() }),
        Value::Tuple(x) => json!({ "tuple": x.iter().map(describe).collect::<Vec<_>>() }),
        Value::Set(x) | Value::FrozenSet(x) => {
            let mut d: Vec<Json> = x.iter().map(describe).collect();
            d.sort_by_key(|j| j.to_string());
            json!({ "set": d })
        }
        Value::Dict(d) => {
            json!({ "dict": d.iter().map(|(k, v)| json!([describe(k), describe(v)])).collect::<Vec<_>>() })
        }
        Value::Tensor(t) => json!({ "T": [
            t.dtype().torch_name(), t.shape, t.stride, t.storage_offset,
            hex(&t.contiguous_bytes().unwrap()), t.requires_grad
        ]}),
        Value::Object(o) if o.class.is("collections", "OrderedDict") => {
            json!({ "dict": o.dict_items.iter().map(|(k, v)| json!([describe(k), describe(v)])).collect::<Vec<_>>() })
        }
        Value::Object(o) if o.class.is("torch", "device") => {
            json!({ "device": o.args[0].as_str().unwrap() })
        }
        Value::Object(o) if o.class.name == "_reconstruct" => {
            let st = o.state.as_ref().unwrap().as_seq().unwrap();
            let shape: Vec<i64> = st[1]
                .as_seq()
                .unwrap()
                .iter()
                .map(|x| x.as_i64().unwrap())
                .collect();
            let dt = st[2].as_object().unwrap();
            let order = dt.state.as_ref().unwrap().as_seq().unwrap()[1]
                .as_str()
                .unwrap()
                .to_string();
            let Value::Bytes(b) = st[4].resolved() else {
                panic!()
            };
            json!({ "nd": [order + dt.args[0].as_str().unwrap(), shape, hex(b)] })
        }
        Value::Global(g) => json!({ "global": g.to_string() }),
        other => json!({ "other": format!("{other:?}") }),
    }
}

const PY_CHECK: &str = r#"
import json, sys, io, random, collections
import numpy as np, torch
from safetensors.torch import load_file, save_file

def d(x):
    if isinstance(x, torch.Tensor):
        flat = x.reshape(-1).contiguous()
        return {"T": [str(x.dtype)[6:], list(x.shape), list(x.stride()), x.storage_offset(),
                      flat.view(torch.uint8).numpy().tobytes().hex() if flat.numel() else "", x.requires_grad]}
    if isinstance(x, np.ndarray):
        return {"nd": [x.dtype.str, list(x.shape), x.tobytes().hex()]}
    if isinstance(x, dict):
        return {"dict": [[d(k), d(v)] for k, v in x.items()]}
    if isinstance(x, list):
        return {"list": [d(v) for v in x]}
    if isinstance(x, tuple):
        return {"tuple": [d(v) for v in x]}
    if isinstance(x, (set, frozenset)):
        return {"set": sorted((d(v) for v in x), key=lambda j: json.dumps(j, separators=(",", ":")))}
    if isinstance(x, bool):
        return {"bool": x}
    if isinstance(x, int):
        return {"int": str(x)}
    if isinstance(x, float):
        return {"float": repr(x)}
    if isinstance(x, str):
        return {"str": x}
    if isinstance(x, bytes):
        return {"bytes": x.hex()}
    if x is None:
        return None
    if isinstance(x, torch.device):
        return {"device": str(x)}
    return {"other": repr(type(x))}

def hf_safe_globals():
    np_core = np._core if np.__version__ >= "2" else np.core
    return torch.serialization.safe_globals(
        [np_core.multiarray._reconstruct, np.ndarray, np.dtype, type(np.dtype(np.uint32))])

out = {}
for kind, path in json.loads(sys.stdin.read()):
    if kind == "weights_only":
        obj = torch.load(path, weights_only=True)
        torch.save(obj, path + ".resaved")
    elif kind == "rng":
        with hf_safe_globals():
            obj = torch.load(path, weights_only=True)
        random.setstate(obj["python"]); np.random.set_state(obj["numpy"]); torch.random.set_rng_state(obj["cpu"])
        torch.save(obj, path + ".resaved")
    elif kind == "full":
        obj = torch.load(path, weights_only=False)
        assert obj["shared_a"] is obj["shared_b"]
        torch.save(obj, path + ".resaved")
    elif kind == "safetensors":
        obj = load_file(path)
        save_file(obj, path + ".resaved", metadata={"format": "pt"})
    if kind in ("weights_only", "full") and isinstance(obj, dict) and "w" in obj:
        assert obj["w.row1"].untyped_storage().data_ptr() == obj["w"].untyped_storage().data_ptr()
    out[path] = d(obj)
print(json.dumps(out))
"#;

#[test]
fn python_loads_what_rust_writes_and_resaves_the_same_bytes() {
    let dir = tmpdir();
    let p = |n: &str| dir.path().join(n);
    let ck = root().join("golden/hf-5.24.0/final-step-not-multiple/output/checkpoint-4");
    let golden_rng = tf::load(ck.join("rng_state.pth")).unwrap();

    let mut jobs: Vec<(&str, PathBuf, Value, ArchiveStyle)> = vec![
        (
            "weights_only",
            p("optimizer.pt"),
            optimizer_value(),
            ArchiveStyle::Torch2_13,
        ),
        (
            "weights_only",
            p("scheduler.pt"),
            scheduler_value(),
            ArchiveStyle::Torch2_13,
        ),
        (
            "weights_only",
            p("pytorch_model.bin"),
            model_value(),
            ArchiveStyle::Torch2_13,
        ),
        (
            "weights_only",
            p("legacy_model.bin"),
            model_value(),
            ArchiveStyle::Torch2_1,
        ),
        (
            "rng",
            p("rng_state.pth"),
            rng_value_from(&golden_rng),
            ArchiveStyle::Torch2_13,
        ),
        ("full", p("misc.pt"), misc_value(), ArchiveStyle::Torch2_13),
    ];
    for (_, path, v, style) in &jobs {
        tf::save_with(
            path,
            v,
            &SaveOptions {
                style: *style,
                fsync: true,
                ..SaveOptions::default()
            },
        )
        .unwrap();
    }
    // The rng file built from parts equals HF's own file but for the serialization id.
    let sid = tf::load_with(ck.join("rng_state.pth"), &LoadOptions::default())
        .unwrap()
        .archive
        .serialization_id;
    let opts = SaveOptions {
        serialization_id: SerializationId::Fixed(sid.unwrap()),
        ..SaveOptions::default()
    };
    let (rebuilt, _) = tf::save_to_writer(
        Vec::new(),
        &jobs[4].2,
        &SaveOptions {
            archive_name: Some("rng_state".into()),
            ..opts
        },
    )
    .unwrap();
    let golden_bytes = std::fs::read(ck.join("rng_state.pth")).unwrap();
    assert!(
        rebuilt == golden_bytes,
        "rebuilt rng_state.pth: {}",
        first_difference(&rebuilt, &golden_bytes)
    );

    // safetensors
    let a: Vec<f32> = vec![0.5, -1.0, 2.0, 1e-3, 7.0, 8.5];
    let bf: Vec<u16> = vec![0x3f80, 0xc060];
    let ids: Vec<i64> = vec![3, -4];
    let (sa, sb, si) = ([2u64, 3], [2u64], [1u64, 2]);
    let tensors = [
        TensorRef::new("layer.weight", Dtype::F32, &sa, tf::pod_bytes(&a)),
        TensorRef::new("layer.bias", Dtype::BF16, &sb, tf::pod_bytes(&bf)),
        TensorRef::new("ids", Dtype::I64, &si, tf::pod_bytes(&ids)),
    ];
    let stp = p("model.safetensors");
    st::save(
        &stp,
        &tensors,
        Some(&[("format", "pt")]),
        &st::SaveOptions {
            fsync: true,
            ..Default::default()
        },
    )
    .unwrap();
    jobs.push((
        "safetensors",
        stp.clone(),
        Value::None,
        ArchiveStyle::Torch2_13,
    ));

    let req: Vec<(String, String)> = jobs
        .iter()
        .map(|(k, p, _, _)| (k.to_string(), p.display().to_string()))
        .collect();
    let out = run_python(
        &["-c", PY_CHECK],
        Some(&serde_json::to_string(&req).unwrap()),
    );
    let got: Json = serde_json::from_str(out.trim()).unwrap();

    for (kind, path, v, style) in &jobs {
        let key = path.display().to_string();
        if *kind == "safetensors" {
            let want = json!({ "dict": [
                [{"str": "ids"}, {"T": ["int64", [1, 2], [2, 1], 0, hex(tf::pod_bytes(&ids)), false]}],
                [{"str": "layer.bias"}, {"T": ["bfloat16", [2], [1], 0, hex(tf::pod_bytes(&bf)), false]}],
                [{"str": "layer.weight"}, {"T": ["float32", [2, 3], [3, 1], 0, hex(tf::pod_bytes(&a)), false]}],
            ]});
            let mut g = got[&key].clone();
            g["dict"]
                .as_array_mut()
                .unwrap()
                .sort_by_key(|x| x[0]["str"].as_str().unwrap().to_string());
            assert_eq!(g, want, "{key}");
        } else {
            assert_eq!(got[&key], describe(v), "{key}: python's view differs");
        }
        // Python's own save of what it loaded is our file, byte for byte.
        let resaved = PathBuf::from(format!("{key}.resaved"));
        let theirs = std::fs::read(&resaved).unwrap();
        let ours = std::fs::read(path).unwrap();
        if *kind == "safetensors" {
            assert!(
                ours == theirs,
                "{key}: {}",
                first_difference(&ours, &theirs)
            );
        } else if *style == ArchiveStyle::Torch2_13 && *kind != "rng" {
            // (Not rng_state.pth: after torch.load its key 'cpu' is no longer the interned
            // string torch's location tag is, so torch's re-save writes 'cpu' twice where HF's
            // original, and ours, reference it; the rebuilt-equals-golden check above covers it.)
            let info = tf::load_with(&resaved, &LoadOptions::default())
                .unwrap()
                .archive;
            let same = SaveOptions {
                archive_name: Some(info.archive_name.clone()),
                serialization_id: SerializationId::Fixed(info.serialization_id.unwrap()),
                ..SaveOptions::default()
            };
            let (ours_again, _) = tf::save_to_writer(Vec::new(), v, &same).unwrap();
            assert!(
                ours_again == theirs,
                "{key}: torch re-saved different bytes: {}",
                first_difference(&ours_again, &theirs)
            );
        }
    }
}

#[test]
fn refuses_malicious_pickles_with_a_clear_error() {
    let dir = tmpdir();
    // protocol 2: os.system('ls')
    let p2 = b"\x80\x02cos\nsystem\nq\x00X\x02\x00\x00\x00lsq\x01\x85q\x02Rq\x03.".to_vec();
    // protocol 4: builtins.eval('1+1') via STACK_GLOBAL
    let p4 = b"\x80\x04\x8c\x08builtins\x94\x8c\x04eval\x94\x93\x94\x8c\x031+1\x94\x85\x94R\x94."
        .to_vec();
    for (name, pkl, global) in [
        ("evil.pt", &p2, "os.system"),
        ("eval.pt", &p4, "builtins.eval"),
    ] {
        let path = dir.path().join(name);
        let script = format!(
            "import zipfile,sys\nz=zipfile.ZipFile(sys.argv[1],'w')\nz.writestr('evil/data.pkl', bytes.fromhex('{}'))\nz.writestr('evil/version','3\\n')\nz.close()",
            hex(pkl)
        );
        run_python(&["-c", &script, path.to_str().unwrap()], None);
        let err = tf::load(&path).unwrap_err().to_string();
        assert!(err.starts_with(&path.display().to_string()), "{err}");
        assert!(
            err.contains(&format!("data.pkl: refusing global {global} at byte")),
            "{err}"
        );
        let bare = tf::unpickle(pkl).unwrap_err().to_string();
        assert!(
            bare.contains(&format!("refusing global {global}")),
            "{bare}"
        );
    }
    // and a truncated archive names its problem
    let good = dir.path().join("ok.pt");
    tf::save(&good, &scheduler_value()).unwrap();
    let bytes = std::fs::read(&good).unwrap();
    let cut = dir.path().join("cut.pt");
    std::fs::write(&cut, &bytes[..bytes.len() - 30]).unwrap();
    let err = tf::load(&cut).unwrap_err().to_string();
    assert!(
        err.contains("cut.pt: ") && (err.contains("zip") || err.contains("truncated")),
        "{err}"
    );
}

// ---------------------------------------------------------------- Python's json

#[test]
fn json_matches_python_dumps() {
    // floats: random bit patterns, short decimals, powers of ten, edge values
    let mut s = 0x9E3779B97F4A7C15u64;
    let mut next = || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        s
    };
    let mut floats: Vec<f64> = Vec::new();
    for _ in 0..12000 {
        let f = f64::from_bits(next());
        if f.is_finite() {
            floats.push(f);
        }
    }
    for _ in 0..6000 {
        let mant = (next() % 100000) as f64;
        let exp = (next() % 50) as i32 - 25;
        floats.push(mant * 10f64.powi(exp));
        floats.push((next() % 1000) as f64 / 1000.0 * 10f64.powi(exp));
    }
    for e in -330..310 {
        floats.push(10f64.powi(e));
        floats.push(-1.5 * 10f64.powi(e));
    }
    floats.extend([
        0.0,
        -0.0,
        1e-4,
        1e-5,
        0.0001234,
        1e15,
        1e16,
        1e17,
        9999999999999998.0,
        5e-324,
        f64::MAX,
        f64::MIN_POSITIVE,
        f64::EPSILON,
        0.1 + 0.2,
        2.0,
        3e-5,
        5e-5,
        123456789012345680.0,
    ]);
    let v = PyJson::List(
        floats
            .iter()
            .map(|&f| PyJson::Float(f))
            .chain([f64::NAN, f64::INFINITY, f64::NEG_INFINITY].map(PyJson::Float))
            .collect(),
    );
    let bits: Vec<String> = floats
        .iter()
        .map(|f| format!("{:016x}", f.to_bits()))
        .collect();

    let doc = r#"{"z": [1, -2, 3.0, true, false, null, "tab\there", "quote\" back\\ slash /"], "a": {"é": "日本語 😀 \u0001 \u007f", "": [], "e": {}}, "big": 123456789012345678901234567890, "m": -0.0}"#;
    let parsed = pyjson::loads(doc).unwrap();
    let script = r#"
import json, struct, sys
inp = json.loads(sys.stdin.read())
fl = [struct.unpack('>d', bytes.fromhex(h))[0] for h in inp["bits"]] + [float('nan'), float('inf'), float('-inf')]
doc = json.loads(inp["doc"])
print(json.dumps({
  "floats": json.dumps(fl),
  "plain": json.dumps(doc),
  "hf": json.dumps(doc, indent=2, sort_keys=True),
  "i0": json.dumps(doc, indent=0),
  "raw": json.dumps(doc, ensure_ascii=False, indent=4),
}))
"#;
    let input = json!({ "bits": bits, "doc": doc }).to_string();
    let out: Json = serde_json::from_str(run_python(&["-c", script], Some(&input)).trim()).unwrap();
    let ours = pyjson::dumps(&v, &DumpOptions::default()).unwrap();
    if ours != out["floats"].as_str().unwrap() {
        let theirs: Vec<&str> = out["floats"]
            .as_str()
            .unwrap()
            .trim_matches(['[', ']'])
            .split(", ")
            .collect();
        let mine: Vec<&str> = ours.trim_matches(['[', ']']).split(", ").collect();
        let bad: Vec<_> = mine
            .iter()
            .zip(&theirs)
            .filter(|(a, b)| a != b)
            .take(10)
            .collect();
        panic!("float reprs differ from Python: {bad:?}");
    }
    let check = |name: &str, opts: DumpOptions| {
        assert_eq!(
            pyjson::dumps(&parsed, &opts).unwrap(),
            out[name].as_str().unwrap(),
            "{name}"
        );
    };
    check("plain", DumpOptions::default());
    check("hf", DumpOptions::hf());
    check(
        "i0",
        DumpOptions {
            indent: Some(0),
            ..DumpOptions::default()
        },
    );
    check(
        "raw",
        DumpOptions {
            indent: Some(4),
            ensure_ascii: false,
            ..DumpOptions::default()
        },
    );
    // reading back what Python wrote gives the same values
    assert_eq!(
        pyjson::loads(out["plain"].as_str().unwrap()).unwrap(),
        parsed
    );
    let nan = pyjson::loads("[NaN, Infinity, -Infinity, 1e400]").unwrap();
    let PyJson::List(x) = &nan else { panic!() };
    assert!(matches!(x[0], PyJson::Float(f) if f.is_nan()));
    assert_eq!(
        x[1..],
        [
            PyJson::Float(f64::INFINITY),
            PyJson::Float(f64::NEG_INFINITY),
            PyJson::Float(f64::INFINITY)
        ]
    );
    assert!(
        pyjson::loads("[1,]").is_err()
            && pyjson::loads("nan").is_err()
            && pyjson::loads("01").is_err()
    );
    assert_eq!(
        pyjson::dumps_value(
            &json!({"a": 1.0, "b": 1, "c": [0.1]}),
            &DumpOptions::default()
        ),
        r#"{"a": 1.0, "b": 1, "c": [0.1]}"#
    );
}

// ---------------------------------------------------------------- streaming and memory

#[test]
fn writes_stream_tensors_without_buffering_them() {
    let dir = tmpdir();
    const N: usize = 48 << 20; // 48 Mi floats = 192 MiB
    let big: Vec<f32> = (0..N).map(|i| i as f32).collect();
    let big = Arc::new(big);
    let src = big.clone();
    let gen = FnSource {
        len: 64 << 20,
        f: |sink: &mut dyn FnMut(&[u8]) -> std::io::Result<()>| {
            let chunk = vec![7u8; 1 << 20];
            for _ in 0..64 {
                sink(&chunk)?;
            }
            Ok(())
        },
    };
    let t1 = Tensor::new(DType::Float32, &[N as i64], src).unwrap();
    let t2 = Tensor::new(DType::UInt8, &[64 << 20], Arc::new(gen)).unwrap();
    let v = Value::dict([("big", Value::Tensor(t1)), ("gen", Value::Tensor(t2))]);
    let path = dir.path().join("big.pt");
    PEAK.with(|p| p.set(LIVE.with(|l| l.get())));
    let base = LIVE.with(|l| l.get());
    let n = tf::save_with(
        &path,
        &v,
        &SaveOptions {
            fsync: true,
            ..SaveOptions::default()
        },
    )
    .unwrap();
    let peak = PEAK.with(|p| p.get()) - base;
    assert!(
        peak < 24 << 20,
        "writing 256 MiB of tensors allocated {peak} bytes at peak"
    );
    assert_eq!(n, std::fs::metadata(&path).unwrap().len());

    // a lazy load keeps the bytes in the file, and writes back identically from there
    let base = LIVE.with(|l| l.get());
    PEAK.with(|p| p.set(base));
    let loaded = tf::load_with(
        &path,
        &LoadOptions {
            lazy: true,
            ..LoadOptions::default()
        },
    )
    .unwrap();
    let out2 = dir.path().join("big2.pt");
    tf::save_with(&out2, &loaded.value, &loaded.archive.save_options()).unwrap();
    let peak = PEAK.with(|p| p.get()) - base;
    assert!(
        peak < 40 << 20,
        "lazy load + write allocated {peak} bytes at peak"
    );
    let (a, b) = (std::fs::read(&path).unwrap(), std::fs::read(&out2).unwrap());
    assert!(a == b, "{}", first_difference(&a, &b));
    let t = loaded.value.get("big").unwrap().as_tensor().unwrap();
    assert_eq!(t.storage.nbytes(), (N * 4) as u64);
    drop(big);
}

#[test]
fn borrowed_slices_stream_and_cannot_escape() {
    let params: Vec<f32> = (0..1000).map(|i| i as f32 * 0.5).collect();
    let ids = [1i64, 2, 3];
    let dir = tmpdir();
    let p = dir.path().join("borrowed.pt");
    let escaped = tf::with_borrowed(&[tf::pod_bytes(&params), tf::pod_bytes(&ids)], |src| {
        let v = Value::dict([
            (
                "w",
                Value::Tensor(Tensor::new(DType::Float32, &[10, 100], src[0].clone()).unwrap()),
            ),
            (
                "ids",
                Value::Tensor(Tensor::new(DType::Int64, &[3], src[1].clone()).unwrap()),
            ),
        ]);
        tf::save(&p, &v).unwrap();
        v
    });
    let back = tf::load(&p).unwrap();
    let w = back.get("w").unwrap().as_tensor().unwrap();
    assert_eq!(w.contiguous_bytes().unwrap(), tf::pod_bytes(&params));
    let err = tf::save(dir.path().join("late.pt"), &escaped)
        .unwrap_err()
        .to_string();
    assert!(err.contains("after with_borrowed returned"), "{err}");
}

#[test]
fn tch_tensors_round_trip() {
    let t = tch::Tensor::from_slice(&[1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0]).reshape([2, 3]);
    let v = Value::dict([
        ("w", Value::Tensor(Tensor::from_tch(&t).unwrap())),
        ("t", Value::Tensor(Tensor::from_tch(&t.tr()).unwrap())),
    ]);
    let dir = tmpdir();
    let p = dir.path().join("m.bin");
    tf::save(&p, &v).unwrap();
    let back = tf::load(&p).unwrap();
    let w = back
        .get("w")
        .unwrap()
        .as_tensor()
        .unwrap()
        .to_tch()
        .unwrap();
    assert!(w.equal(&t));
    let tt = back
        .get("t")
        .unwrap()
        .as_tensor()
        .unwrap()
        .to_tch()
        .unwrap();
    assert!(tt.equal(&t.tr().contiguous()));
}

/// Round-trips any torch file named by CKPTSPEC_BIG_PT (e.g. a > 4 GiB torch.save output,
/// to check the zip64 layout): `CKPTSPEC_BIG_PT=/tmp/big.pt cargo test --test formats -- --ignored`.
#[test]
#[ignore]
fn external_torch_file_round_trips() {
    let Some(p) = std::env::var_os("CKPTSPEC_BIG_PT") else {
        panic!("set CKPTSPEC_BIG_PT")
    };
    let p = PathBuf::from(p);
    let base = LIVE.with(|l| l.get());
    PEAK.with(|x| x.set(base));
    let loaded = tf::load_with(
        &p,
        &LoadOptions {
            lazy: true,
            ..LoadOptions::default()
        },
    )
    .unwrap();
    let dir = tempfile::tempdir_in(p.parent().unwrap()).unwrap();
    let out = dir.path().join(p.file_name().unwrap());
    tf::save_with(&out, &loaded.value, &loaded.archive.save_options()).unwrap();
    let peak = PEAK.with(|x| x.get()) - base;
    eprintln!("peak allocation while reading lazily and writing: {peak} bytes");
    let same = Command::new("cmp")
        .arg(&p)
        .arg(&out)
        .status()
        .unwrap()
        .success();
    assert!(same, "{} differs from its round trip", p.display());
}
