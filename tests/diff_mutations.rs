//! Mutation test of `diff::compare_run_dirs`: golden run directories are copied into a temporary
//! folder, one mutation is applied to each copy (a checkpoint removed, a tensor perturbed beyond
//! the float class, a key reordered, an int turned into a float, ...), and every mutation must be
//! reported. Unmutated copies, and copies changed only in what the contract ignores (runtimes,
//! the writing library's version, float noise within the float class, JSON layout, a torch file's
//! container), must compare clean.
use ckptspec::formats::pyjson::{self, DumpOptions, PyJson};
use ckptspec::formats::safetensors::{self as st, TensorRef};
use ckptspec::formats::torch_format::{self as tf, DType, Tensor, Value};
use ckptspec::harness::diff::{compare_run_dirs, Report};
use std::path::{Path, PathBuf};
use std::sync::Arc;

fn golden(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("golden").join(rel)
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let p = e.path();
        let q = to.join(e.file_name());
        if p.is_dir() {
            copy_dir(&p, &q);
        } else {
            std::fs::copy(&p, &q).unwrap();
        }
    }
}

// ------------------------------------------------------------------ JSON editing

fn edit_json(path: &Path, f: impl FnOnce(&mut PyJson)) {
    let mut v = pyjson::read_file(path).unwrap();
    f(&mut v);
    let opts = DumpOptions { indent: Some(2), ..DumpOptions::default() };
    pyjson::write_file(path, &v, &opts, false).unwrap();
}

/// `a.b.0.c`: dict keys and list indices.
fn jat<'a>(v: &'a mut PyJson, path: &str) -> &'a mut PyJson {
    let mut cur = v;
    for part in path.split('.').filter(|p| !p.is_empty()) {
        cur = match cur {
            PyJson::Dict(d) => &mut d.iter_mut().find(|(k, _)| k == part).unwrap_or_else(|| panic!("no key {part}")).1,
            PyJson::List(l) => &mut l[part.parse::<usize>().unwrap()],
            other => panic!("cannot index {other:?} with {part}"),
        };
    }
    cur
}

fn jlist<'a>(v: &'a mut PyJson, path: &str) -> &'a mut Vec<PyJson> {
    match jat(v, path) {
        PyJson::List(l) => l,
        other => panic!("not a list: {other:?}"),
    }
}

fn jdict<'a>(v: &'a mut PyJson, path: &str) -> &'a mut Vec<(String, PyJson)> {
    match jat(v, path) {
        PyJson::Dict(d) => d,
        other => panic!("not a dict: {other:?}"),
    }
}

fn jscale(v: &mut PyJson, k: f64) {
    match v {
        PyJson::Float(x) => *x *= k,
        other => panic!("not a float: {other:?}"),
    }
}

// ------------------------------------------------------------------ torch editing

fn edit_torch(path: &Path, f: impl FnOnce(&mut Value)) {
    let mut l = tf::load_with(path, &tf::LoadOptions::default()).unwrap();
    f(&mut l.value);
    tf::save_with(path, &l.value, &l.archive.save_options()).unwrap();
}

fn key(k: &str) -> Value {
    if let Ok(i) = k.parse::<i64>() {
        Value::Int(i)
    } else {
        Value::Str(k.to_string())
    }
}

/// Navigates dicts, OrderedDicts, objects' state, lists and tuples (`state.0.exp_avg`).
fn child<'a>(v: &'a mut Value, k: &Value) -> &'a mut Value {
    match v {
        Value::Shared(a) => child(Arc::make_mut(a), k),
        Value::Dict(d) => &mut d.iter_mut().find(|(q, _)| q == k).unwrap_or_else(|| panic!("no key {k:?}")).1,
        Value::Object(o) => {
            if o.class.is("collections", "OrderedDict") {
                &mut o.dict_items.iter_mut().find(|(q, _)| q == k).unwrap_or_else(|| panic!("no key {k:?}")).1
            } else {
                child(o.state.as_mut().expect("object state"), k)
            }
        }
        Value::List(x) | Value::Tuple(x) => &mut x[k.as_i64().expect("index") as usize],
        _ => panic!("cannot index with {k:?}"),
    }
}

fn vat<'a>(v: &'a mut Value, path: &str) -> &'a mut Value {
    let mut cur = v;
    for p in path.split('.').filter(|p| !p.is_empty()) {
        cur = child(cur, &key(p));
    }
    cur
}

fn resolved_mut(v: &mut Value) -> &mut Value {
    match v {
        Value::Shared(a) => resolved_mut(Arc::make_mut(a)),
        other => other,
    }
}

fn tensor_mut(v: &mut Value) -> &mut Tensor {
    match resolved_mut(v) {
        Value::Tensor(t) => t,
        other => panic!("not a tensor: {other:?}"),
    }
}

fn f32s(t: &Tensor) -> Vec<f32> {
    assert_eq!(t.dtype(), DType::Float32);
    t.contiguous_bytes().unwrap().chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect()
}

fn rebuilt(old: &Tensor, dtype: DType, shape: &[i64], bytes: Vec<u8>) -> Tensor {
    let mut t = Tensor::new(dtype, shape, Arc::new(bytes)).unwrap();
    t.requires_grad = old.requires_grad;
    t
}

fn from_f32s(old: &Tensor, xs: &[f32]) -> Tensor {
    rebuilt(old, DType::Float32, &old.shape, xs.iter().flat_map(|x| x.to_le_bytes()).collect())
}

/// Beyond the float class for any magnitude: relative 1e-3 plus an absolute 1e-6.
fn perturb(t: &mut Tensor) {
    let xs: Vec<f32> = f32s(t).iter().map(|x| x * 1.001 + 1e-6).collect();
    *t = from_f32s(t, &xs);
}

/// Well inside the float class: relative 1e-6.
fn jiggle(t: &mut Tensor) {
    let xs: Vec<f32> = f32s(t).iter().map(|x| x * (1.0 + 1e-6)).collect();
    *t = from_f32s(t, &xs);
}

fn to_f64(t: &mut Tensor) {
    let bytes: Vec<u8> = f32s(t).iter().flat_map(|x| (*x as f64).to_le_bytes()).collect();
    *t = rebuilt(t, DType::Float64, &t.shape.clone(), bytes);
}

fn reshape(t: &mut Tensor, shape: &[i64]) {
    let b = t.contiguous_bytes().unwrap();
    *t = rebuilt(t, t.dtype(), shape, b);
}

fn flip_byte(t: &mut Tensor, at: usize) {
    let mut b = t.contiguous_bytes().unwrap();
    b[at] ^= 0x01;
    *t = rebuilt(t, t.dtype(), &t.shape.clone(), b);
}

fn dict_items_mut(v: &mut Value) -> &mut Vec<(Value, Value)> {
    match resolved_mut(v) {
        Value::Dict(d) => d,
        Value::Object(o) => {
            if o.class.is("collections", "OrderedDict") {
                &mut o.dict_items
            } else {
                dict_items_mut(o.state.as_mut().unwrap())
            }
        }
        _ => panic!("not a dict"),
    }
}

// ------------------------------------------------------------------ safetensors editing

fn edit_safetensors(path: &Path, f: impl FnOnce(&mut Vec<(String, Tensor)>)) {
    let (h, mut ts) = st::load(path).unwrap();
    f(&mut ts);
    let shapes: Vec<Vec<u64>> = ts.iter().map(|(_, t)| t.shape.iter().map(|&s| s as u64).collect()).collect();
    let refs: Vec<TensorRef> = ts.iter().zip(&shapes).map(|((n, t), s)| TensorRef::from_tensor(n, t, s).unwrap()).collect();
    let md: Option<Vec<(&str, &str)>> = h.metadata.as_ref().map(|m| m.iter().map(|(a, b)| (a.as_str(), b.as_str())).collect());
    st::save(path, &refs, md.as_deref(), &st::SaveOptions::default()).unwrap();
}

fn st_tensor<'a>(ts: &'a mut [(String, Tensor)], name: &str) -> &'a mut Tensor {
    &mut ts.iter_mut().find(|(n, _)| n == name).unwrap().1
}

fn flip_storage_bit(path: &Path) {
    let mut f = std::fs::File::open(path).unwrap();
    let e = ckptspec::formats::torch_format::zip::read_directory(&mut f)
        .unwrap()
        .into_iter()
        .find(|e| e.name.ends_with("/data/1") && e.size >= 4)
        .unwrap();
    let mut b = std::fs::read(path).unwrap();
    b[e.data_offset as usize] ^= 1;
    std::fs::write(path, b).unwrap();
}

fn truncate(path: &Path) {
    let b = std::fs::read(path).unwrap();
    std::fs::write(path, &b[..b.len() / 2]).unwrap();
}

// ------------------------------------------------------------------ the catalogue

type Apply = Box<dyn Fn(&Path)>;

/// Scenario run directories the mutations apply to (relative to golden/).
const PLATEAU: &str = "hf-5.24.0/plateau-factor";
const ROT431: &str = "hf-4.31.0/rotation-limit-2-best-older";
const LOGS431: &str = "hf-4.31.0/logging-steps-train-logs";
const MISSING: &str = "hf-5.24.0/best-missing-metric";
const FINALLY: &str = "hf-5.24.0/finally-with-checkpoints";
const NO_TRAINER: &str = "hf-5.24.0/warmup-steps-negative";
const SCENARIOS: [&str; 6] = [PLATEAU, ROT431, LOGS431, MISSING, FINALLY, NO_TRAINER];

fn mutations() -> Vec<(&'static str, &'static str, Apply)> {
    let mut m: Vec<(&'static str, &'static str, Apply)> = vec![];
    macro_rules! add {
        ($name:expr, $sc:expr, $f:expr) => {
            m.push(($name, $sc, Box::new($f)))
        };
    }
    // structure
    add!("remove a checkpoint", PLATEAU, |d: &Path| std::fs::remove_dir_all(d.join("output/checkpoint-4")).unwrap());
    add!("add a checkpoint", PLATEAU, |d: &Path| copy_dir(&d.join("output/checkpoint-4"), &d.join("output/checkpoint-6")));
    add!("rename a file", PLATEAU, |d: &Path| {
        std::fs::rename(d.join("output/checkpoint-8/optimizer.pt"), d.join("output/checkpoint-8/optimizer.bin")).unwrap()
    });
    add!("drop a file", PLATEAU, |d: &Path| std::fs::remove_file(d.join("output/checkpoint-8/scheduler.pt")).unwrap());
    add!("add a file", PLATEAU, |d: &Path| std::fs::write(d.join("output/checkpoint-8/README.md"), "x").unwrap());
    add!("remove result.json", PLATEAU, |d: &Path| std::fs::remove_file(d.join("result.json")).unwrap());
    add!("write output where HF wrote none", NO_TRAINER, |d: &Path| {
        std::fs::create_dir_all(d.join("output/checkpoint-1")).unwrap();
        std::fs::write(d.join("output/checkpoint-1/config.json"), "{}").unwrap();
    });
    add!("remove the final model file", FINALLY, |d: &Path| std::fs::remove_file(d.join("output/model.safetensors")).unwrap());
    // JSON: trainer state and result
    add!("change best_model_checkpoint", PLATEAU, |d: &Path| {
        edit_json(&d.join("result.json"), |v| *jat(v, "final_state.best_model_checkpoint") = "output/checkpoint-8".into())
    });
    add!("change a scripted best_metric by 1e-7", PLATEAU, |d: &Path| {
        edit_json(&d.join("output/checkpoint-8/trainer_state.json"), |v| *jat(v, "best_metric") = PyJson::Float(0.5000001))
    });
    add!("change best_global_step", PLATEAU, |d: &Path| {
        edit_json(&d.join("result.json"), |v| *jat(v, "final_state.best_global_step") = PyJson::Int(4))
    });
    add!("change global_step", PLATEAU, |d: &Path| edit_json(&d.join("result.json"), |v| *jat(v, "final_state.global_step") = PyJson::Int(7)));
    add!("change a log entry's step", PLATEAU, |d: &Path| {
        edit_json(&d.join("result.json"), |v| *jat(v, "final_state.log_history.0.step") = PyJson::Int(2))
    });
    add!("drop a log_history entry", PLATEAU, |d: &Path| {
        edit_json(&d.join("output/checkpoint-8/trainer_state.json"), |v| {
            jlist(v, "log_history").remove(1);
        })
    });
    add!("reorder log_history entries", PLATEAU, |d: &Path| edit_json(&d.join("result.json"), |v| jlist(v, "final_state.log_history").swap(0, 1)));
    add!("change a scripted metric", PLATEAU, |d: &Path| {
        edit_json(&d.join("result.json"), |v| {
            let h = jlist(v, "final_state.log_history");
            let e = h.iter_mut().find(|e| e.get("eval_acc").is_some()).unwrap();
            *jat(e, "eval_acc") = PyJson::Float(0.55);
        })
    });
    add!("change epoch", PLATEAU, |d: &Path| {
        edit_json(&d.join("result.json"), |v| jscale(jat(v, "final_state.log_history.0.epoch"), 1.0 + 1e-9))
    });
    add!("change eval_loss beyond the float class", PLATEAU, |d: &Path| {
        edit_json(&d.join("result.json"), |v| {
            let h = jlist(v, "final_state.log_history");
            let e = h.iter_mut().find(|e| e.get("eval_loss").is_some()).unwrap();
            jscale(jat(e, "eval_loss"), 1.0 + 1e-4);
        })
    });
    add!("change a training loss beyond the float class", PLATEAU, |d: &Path| {
        edit_json(&d.join("result.json"), |v| jscale(jat(v, "final_state.log_history.0.loss"), 1.0 + 1e-4))
    });
    add!("change a logged learning_rate", PLATEAU, |d: &Path| {
        edit_json(&d.join("result.json"), |v| jscale(jat(v, "final_state.log_history.1.learning_rate"), 0.5))
    });
    add!("make eval_loss NaN", PLATEAU, |d: &Path| {
        edit_json(&d.join("output/checkpoint-8/trainer_state.json"), |v| {
            let h = jlist(v, "log_history");
            let e = h.iter_mut().find(|e| e.get("eval_loss").is_some()).unwrap();
            *jat(e, "eval_loss") = PyJson::Float(f64::NAN);
        })
    });
    add!("add a key", PLATEAU, |d: &Path| {
        edit_json(&d.join("output/checkpoint-4/trainer_state.json"), |v| jdict(v, "").push(("extra".into(), PyJson::Int(1))))
    });
    add!("drop a key", PLATEAU, |d: &Path| {
        edit_json(&d.join("output/checkpoint-4/trainer_state.json"), |v| jdict(v, "").retain(|(k, _)| k != "num_input_tokens_seen"))
    });
    add!("int to float (4 vs 4.0)", PLATEAU, |d: &Path| {
        edit_json(&d.join("output/checkpoint-4/trainer_state.json"), |v| *jat(v, "global_step") = PyJson::Float(4.0))
    });
    add!("flip a control flag", PLATEAU, |d: &Path| {
        edit_json(&d.join("output/checkpoint-4/trainer_state.json"), |v| {
            *jat(v, "stateful_callbacks.TrainerControl.args.should_save") = PyJson::Bool(false)
        })
    });
    add!("change hf_version", PLATEAU, |d: &Path| edit_json(&d.join("result.json"), |v| *jat(v, "hf_version") = "5.23.0".into()));
    add!("final_state null", PLATEAU, |d: &Path| edit_json(&d.join("result.json"), |v| *jat(v, "final_state") = PyJson::Null));
    add!("truncate trainer_state.json", PLATEAU, |d: &Path| truncate(&d.join("output/checkpoint-8/trainer_state.json")));
    add!("change a config value", PLATEAU, |d: &Path| edit_json(&d.join("output/checkpoint-4/config.json"), |v| *jat(v, "a") = PyJson::Float(0.5)));
    add!("change a config key order", PLATEAU, |d: &Path| edit_json(&d.join("output/checkpoint-4/config.json"), |v| jdict(v, "").swap(0, 1)));
    add!("change best_metric in a 4.31 checkpoint", ROT431, |d: &Path| {
        edit_json(&d.join("output/checkpoint-8/trainer_state.json"), |v| *jat(v, "best_metric") = PyJson::Float(0.7))
    });
    add!("change a 4.31 rounded training loss", LOGS431, |d: &Path| {
        edit_json(&d.join("result.json"), |v| jscale(jat(v, "final_state.log_history.0.loss"), 1.001))
    });
    // tensors and other values in torch / safetensors files
    add!("perturb a weight (safetensors)", PLATEAU, |d: &Path| {
        edit_safetensors(&d.join("output/checkpoint-8/model.safetensors"), |ts| perturb(st_tensor(ts, "a")))
    });
    add!("change a weight's shape (safetensors)", PLATEAU, |d: &Path| {
        edit_safetensors(&d.join("output/checkpoint-8/model.safetensors"), |ts| reshape(st_tensor(ts, "b"), &[1]))
    });
    add!("change a weight's dtype (safetensors)", PLATEAU, |d: &Path| {
        edit_safetensors(&d.join("output/checkpoint-4/model.safetensors"), |ts| to_f64(st_tensor(ts, "a")))
    });
    add!("truncate model.safetensors", PLATEAU, |d: &Path| truncate(&d.join("output/checkpoint-4/model.safetensors")));
    add!("perturb a weight (pytorch_model.bin)", ROT431, |d: &Path| {
        edit_torch(&d.join("output/checkpoint-2/pytorch_model.bin"), |v| perturb(tensor_mut(vat(v, "b"))))
    });
    add!("pytorch_model.bin as an OrderedDict", ROT431, |d: &Path| {
        edit_torch(&d.join("output/checkpoint-2/pytorch_model.bin"), |v| {
            let items = dict_items_mut(v).clone();
            *v = Value::ordered_dict(items);
        })
    });
    add!("perturb exp_avg", PLATEAU, |d: &Path| {
        edit_torch(&d.join("output/checkpoint-8/optimizer.pt"), |v| perturb(tensor_mut(vat(v, "state.0.exp_avg"))))
    });
    add!("perturb exp_avg_sq", PLATEAU, |d: &Path| {
        edit_torch(&d.join("output/checkpoint-8/optimizer.pt"), |v| perturb(tensor_mut(vat(v, "state.1.exp_avg_sq"))))
    });
    add!("change an optimizer moment's dtype", PLATEAU, |d: &Path| {
        edit_torch(&d.join("output/checkpoint-4/optimizer.pt"), |v| to_f64(tensor_mut(vat(v, "state.0.exp_avg"))))
    });
    add!("change an optimizer moment's shape", PLATEAU, |d: &Path| {
        edit_torch(&d.join("output/checkpoint-4/optimizer.pt"), |v| reshape(tensor_mut(vat(v, "state.1.exp_avg")), &[1, 1]))
    });
    add!("change the optimizer step", PLATEAU, |d: &Path| {
        edit_torch(&d.join("output/checkpoint-4/optimizer.pt"), |v| {
            let t = tensor_mut(vat(v, "state.0.step"));
            let xs: Vec<f32> = f32s(t).iter().map(|x| x + 1.0).collect();
            *t = from_f32s(t, &xs);
        })
    });
    add!("change a param_group lr", PLATEAU, |d: &Path| {
        edit_torch(&d.join("output/checkpoint-4/optimizer.pt"), |v| *vat(v, "param_groups.0.lr") = Value::Float(5e-5))
    });
    add!("change a param_group flag", PLATEAU, |d: &Path| {
        edit_torch(&d.join("output/checkpoint-4/optimizer.pt"), |v| *vat(v, "param_groups.0.fused") = Value::Bool(false))
    });
    add!("truncate optimizer.pt", PLATEAU, |d: &Path| truncate(&d.join("output/checkpoint-4/optimizer.pt")));
    // The lowest mantissa bit of one exp_avg value: within the float class, so only the CRC32
    // check (the file becomes unreadable) reports it.
    add!("flip a bit in an optimizer.pt storage", PLATEAU, |d: &Path| flip_storage_bit(&d.join("output/checkpoint-4/optimizer.pt")));
    add!("change scheduler state (num_bad_epochs)", PLATEAU, |d: &Path| {
        edit_torch(&d.join("output/checkpoint-8/scheduler.pt"), |v| *vat(v, "num_bad_epochs") = Value::Int(1))
    });
    add!("change scheduler _last_lr", PLATEAU, |d: &Path| {
        edit_torch(&d.join("output/checkpoint-8/scheduler.pt"), |v| *vat(v, "_last_lr.0") = Value::Float(1e-5))
    });
    add!("scheduler int to float (patience 0 vs 0.0)", PLATEAU, |d: &Path| {
        edit_torch(&d.join("output/checkpoint-8/scheduler.pt"), |v| *vat(v, "patience") = Value::Float(0.0))
    });
    add!("scheduler key order", PLATEAU, |d: &Path| edit_torch(&d.join("output/checkpoint-8/scheduler.pt"), |v| dict_items_mut(v).swap(0, 1)));
    add!("change a 4.31 LambdaLR state", LOGS431, |d: &Path| {
        edit_torch(&d.join("output/checkpoint-3/scheduler.pt"), |v| *vat(v, "_step_count") = Value::Int(5))
    });
    add!("change rng cpu bytes", PLATEAU, |d: &Path| {
        edit_torch(&d.join("output/checkpoint-4/rng_state.pth"), |v| flip_byte(tensor_mut(vat(v, "cpu")), 100))
    });
    add!("change the python rng state", PLATEAU, |d: &Path| {
        edit_torch(&d.join("output/checkpoint-4/rng_state.pth"), |v| {
            let x = vat(v, "python.1.5");
            *x = Value::Int(x.as_i64().unwrap() ^ 1);
        })
    });
    add!("change the numpy rng array bytes", PLATEAU, |d: &Path| {
        edit_torch(&d.join("output/checkpoint-4/rng_state.pth"), |v| match resolved_mut(vat(v, "numpy.1.4")) {
            Value::Bytes(b) => b[7] ^= 0x80,
            other => panic!("numpy array state: {other:?}"),
        })
    });
    add!("change the numpy rng position", PLATEAU, |d: &Path| {
        edit_torch(&d.join("output/checkpoint-4/rng_state.pth"), |v| *vat(v, "numpy.2") = Value::Int(1))
    });
    add!("change a training_args.bin float", PLATEAU, |d: &Path| {
        edit_torch(&d.join("output/checkpoint-4/training_args.bin"), |v| *vat(v, "learning_rate") = Value::Float(6e-5))
    });
    add!("change a training_args.bin enum", PLATEAU, |d: &Path| {
        edit_torch(&d.join("output/checkpoint-4/training_args.bin"), |v| {
            *vat(v, "save_strategy") = Value::enum_member("transformers.trainer_utils", "SaveStrategy", "epoch".into())
        })
    });
    add!("change the training_args.bin class", PLATEAU, |d: &Path| {
        edit_torch(&d.join("output/checkpoint-4/training_args.bin"), |v| {
            if let Value::Object(o) = resolved_mut(v) {
                o.class.name = "Seq2SeqTrainingArguments".into();
            }
        })
    });
    add!("change output_dir in training_args.bin", FINALLY, |d: &Path| {
        edit_torch(&d.join("output/training_args.bin"), |v| *vat(v, "output_dir") = Value::str("elsewhere"))
    });
    // errors
    add!("change an error message", MISSING, |d: &Path| {
        edit_json(&d.join("result.json"), |v| {
            let PyJson::Str(s) = jat(v, "error.message") else { panic!() };
            *s = s.replace("'eval_f1'", "'eval_f2'");
        })
    });
    add!("change an error type", MISSING, |d: &Path| edit_json(&d.join("result.json"), |v| *jat(v, "error.type") = "ValueError".into()));
    add!("drop an error", MISSING, |d: &Path| edit_json(&d.join("result.json"), |v| *jat(v, "error") = PyJson::Null));
    add!("change the error of an unbuilt Trainer", NO_TRAINER, |d: &Path| {
        edit_json(&d.join("result.json"), |v| *jat(v, "error.message") = "Got warmup_steps = -2, Expected value warmup_steps >= 0".into())
    });
    m
}

/// Changes the contract ignores: they must compare clean.
fn harmless() -> Vec<(&'static str, &'static str, Apply)> {
    let mut m: Vec<(&'static str, &'static str, Apply)> = vec![];
    macro_rules! add {
        ($name:expr, $sc:expr, $f:expr) => {
            m.push(($name, $sc, Box::new($f)))
        };
    }
    add!("runtimes and throughputs", PLATEAU, |d: &Path| {
        edit_json(&d.join("result.json"), |v| {
            for e in jlist(v, "final_state.log_history") {
                if let PyJson::Dict(items) = e {
                    for (k, x) in items.iter_mut() {
                        if k.ends_with("_runtime") || k.ends_with("_per_second") {
                            *x = PyJson::Float(123.0);
                        }
                    }
                }
            }
        })
    });
    add!("transformers_version in config.json (a note)", PLATEAU, |d: &Path| {
        edit_json(&d.join("output/checkpoint-4/config.json"), |v| *jat(v, "transformers_version") = "5.23.0".into())
    });
    add!("a loss within the float class", PLATEAU, |d: &Path| {
        edit_json(&d.join("result.json"), |v| jscale(jat(v, "final_state.log_history.0.loss"), 1.0 + 1e-7))
    });
    add!("a weight within the float class", PLATEAU, |d: &Path| {
        edit_safetensors(&d.join("output/checkpoint-8/model.safetensors"), |ts| jiggle(st_tensor(ts, "a")))
    });
    add!("a moment within the float class", PLATEAU, |d: &Path| {
        edit_torch(&d.join("output/checkpoint-8/optimizer.pt"), |v| jiggle(tensor_mut(vat(v, "state.0.exp_avg_sq"))))
    });
    add!("JSON layout (one line)", PLATEAU, |d: &Path| {
        let p = d.join("output/checkpoint-8/trainer_state.json");
        let v = pyjson::read_file(&p).unwrap();
        pyjson::write_file(&p, &v, &DumpOptions::default(), false).unwrap();
    });
    add!("torch container (new serialization id)", PLATEAU, |d: &Path| {
        let p = d.join("output/checkpoint-8/optimizer.pt");
        let v = tf::load(&p).unwrap();
        tf::save(&p, &v).unwrap();
    });
    m
}

fn run(name: &str, sc: &str, f: &Apply, tmp: &Path, i: usize) -> Report {
    let dir = tmp.join(format!("m{i}"));
    copy_dir(&golden(sc), &dir);
    f(&dir);
    compare_run_dirs(&golden(sc), &dir).unwrap_or_else(|e| panic!("{name}: diff failed: {e}"))
}

#[test]
fn unmutated_copies_compare_clean() {
    let tmp = tempfile::tempdir().unwrap();
    for (i, sc) in SCENARIOS.iter().enumerate() {
        let dir = tmp.path().join(format!("c{i}"));
        copy_dir(&golden(sc), &dir);
        let rep = compare_run_dirs(&golden(sc), &dir).unwrap();
        assert!(rep.is_clean(), "{sc}: {:?}", rep.differences);
        assert!(rep.notes.is_empty(), "{sc}: {:?}", rep.notes);
        assert!(rep.files_compared > 0, "{sc}");
    }
}

#[test]
fn every_mutation_is_reported() {
    let tmp = tempfile::tempdir().unwrap();
    let all = mutations();
    let mut survivors = vec![];
    for (i, (name, sc, f)) in all.iter().enumerate() {
        let rep = run(name, sc, f, tmp.path(), i);
        match rep.first() {
            Some(d) => println!("killed  {name} [{sc}]: [{}] {d}", d.stage.label()),
            None => {
                println!("SURVIVED {name} [{sc}]");
                survivors.push(*name);
            }
        }
    }
    println!("mutation kill count: {}/{}", all.len() - survivors.len(), all.len());
    assert!(all.len() >= 30, "only {} kinds of mutation", all.len());
    assert!(survivors.is_empty(), "mutations not reported by compare_run_dirs: {survivors:?}");
}

#[test]
fn ignored_changes_compare_clean() {
    let tmp = tempfile::tempdir().unwrap();
    for (i, (name, sc, f)) in harmless().iter().enumerate() {
        let rep = run(name, sc, f, tmp.path(), 1000 + i);
        assert!(rep.is_clean(), "{name}: {:?}", rep.differences);
        if name.contains("transformers_version") {
            assert_eq!(rep.notes.len(), 1, "{name}: the version is reported as a note: {:?}", rep.notes);
        }
    }
}

#[test]
fn bare_output_folders_compare_relative_to_output_dir() {
    // Two bare HF output folders (no result.json): the tree alone is compared, and a path field
    // naming the folder's own output_dir compares equal wherever the folder lives.
    let tmp = tempfile::tempdir().unwrap();
    let (a, b) = (tmp.path().join("a/out1"), tmp.path().join("b/out2"));
    copy_dir(&golden(PLATEAU).join("output"), &a);
    copy_dir(&golden(PLATEAU).join("output"), &b);
    for (dir, od) in [(&a, "/abs/somewhere/out1"), (&b, "out2")] {
        for ck in ["checkpoint-4", "checkpoint-8"] {
            edit_json(&dir.join(ck).join("trainer_state.json"), |v| {
                if let PyJson::Str(s) = jat(v, "best_model_checkpoint") {
                    *s = s.replace("output/", &format!("{od}/"));
                }
            });
            edit_torch(&dir.join(ck).join("training_args.bin"), |v| *vat(v, "output_dir") = Value::str(od));
        }
    }
    let rep = compare_run_dirs(&a, &b).unwrap();
    assert!(rep.bare);
    assert!(rep.is_clean(), "{:?}", rep.differences);
    // ... but a different checkpoint name under it is a difference.
    edit_json(&b.join("checkpoint-8/trainer_state.json"), |v| *jat(v, "best_model_checkpoint") = "out2/checkpoint-8".into());
    let rep = compare_run_dirs(&a, &b).unwrap();
    let first = rep.first().expect("reported");
    assert!(first.place.ends_with("best_model_checkpoint"), "{first}");
}

#[test]
fn the_report_puts_the_first_difference_on_top_and_caps_the_list() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("r");
    copy_dir(&golden(PLATEAU), &dir);
    std::fs::remove_dir_all(dir.join("output/checkpoint-4")).unwrap();
    edit_json(&dir.join("result.json"), |v| {
        for e in jlist(v, "final_state.log_history") {
            if let PyJson::Dict(items) = e {
                items.push(("extra".into(), PyJson::Int(0)));
            }
        }
    });
    let rep = compare_run_dirs(&golden(PLATEAU), &dir).unwrap();
    let text = rep.render(&golden(PLATEAU), &dir, 3);
    let first = text.lines().find(|l| l.starts_with("FIRST DIFFERENCE")).expect(&text);
    assert!(first.contains("(structure)") && first.contains("output/checkpoint-4/"), "{text}");
    assert!(text.contains(&format!("... and {} more", rep.differences.len() - 3)), "{text}");
    // the folder is one difference, not one per file
    assert_eq!(rep.count(ckptspec::harness::diff::Stage::Structure), 1, "{text}");
}

#[test]
fn the_diff_command_exits_0_when_equal_and_1_when_different() {
    let bin = env!("CARGO_BIN_EXE_ckptspec");
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("copy");
    copy_dir(&golden(ROT431), &dir);
    let run = |b: &Path| std::process::Command::new(bin).arg("diff").arg(golden(ROT431)).arg(b).output().unwrap();
    let out = run(&dir);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stdout));
    assert!(String::from_utf8_lossy(&out.stdout).contains("no differences"));
    edit_torch(&dir.join("output/checkpoint-8/optimizer.pt"), |v| perturb(tensor_mut(vat(v, "state.0.exp_avg"))));
    let out = run(&dir);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(text.contains("FIRST DIFFERENCE (tensor): output/checkpoint-8/optimizer.pt ['state'][0]['exp_avg']"), "{text}");
    let out = std::process::Command::new(bin).arg("diff").arg(golden(ROT431)).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "one folder is a usage error");
}
