//! The files of a checkpoint folder, as the version writes them. Only the executor calls this;
//! formats live in `torch_format`, `safetensors` and `pyjson`.

use crate::formats::pyjson::{self, DumpOptions, PyJson};
use crate::formats::safetensors;
use crate::formats::torch_format::{self, Tensor, Value};
use crate::hf::args::Args;
use crate::hf::profile::Profile;
use crate::numerics::optim::PyValue;
use crate::numerics::rng::{NumpyRandomState, PythonRandomState};
use crate::save::fastsave;
use std::path::Path;

pub type Result<T> = std::result::Result<T, String>;

fn e<E: std::fmt::Display>(x: E) -> String {
    x.to_string()
}

/// Every file goes through the fast path's writers (`fastsave`): the conformance suite runs on it.
fn save_opts(profile: &Profile) -> fastsave::SaveOptions {
    fastsave::SaveOptions { style: profile.archive_style, ..Default::default() }
}

fn save_torch(path: &Path, v: &Value, profile: &Profile) -> Result<()> {
    fastsave::write_torch(path, v, &save_opts(profile)).map(|_| ())
}

/// How a torch-saved weights file holds its state dict.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StateDictContainer {
    /// A plain dict: what `save_pretrained` (transformers and peft) hands `torch.save`.
    Dict,
    /// `nn.Module.state_dict()` itself: an `OrderedDict` with `_metadata` `{"": {"version": 1}}`
    /// (`_save`'s "only saving its state dict" branch).
    ModuleStateDict,
}

/// A weights file: safetensors (`metadata` `{"format": "pt"}` or none) when the name ends in
/// `.safetensors`, else a torch-saved state dict. `tensors`: (key, shape, values).
pub fn write_state_dict(
    path: &Path,
    profile: &Profile,
    tensors: &[(String, Vec<i64>, Vec<f32>)],
    container: StateDictContainer,
    format_metadata: bool,
) -> Result<()> {
    if path.extension().is_some_and(|x| x == "safetensors") {
        let ts: Vec<tch::Tensor> = tensors.iter().map(|(_, shape, v)| tch::Tensor::from_slice(v).reshape(shape.as_slice())).collect();
        let named: Vec<(String, &tch::Tensor)> = tensors.iter().zip(&ts).map(|((k, _, _), t)| (k.clone(), t)).collect();
        let md: Vec<(String, String)> = if format_metadata { vec![("format".into(), "pt".into())] } else { vec![] };
        fastsave::write_safetensors(path, &named, &md, false, false)?;
    } else {
        let mut items = vec![];
        for (k, shape, v) in tensors {
            items.push((Value::str(k.clone()), Value::Tensor(Tensor::from_vec(shape, v.clone()).map_err(e)?)));
        }
        let sd = match container {
            StateDictContainer::Dict => Value::Dict(items),
            StateDictContainer::ModuleStateDict => {
                let mut od = Value::ordered_dict(items);
                if let Value::Object(o) = &mut od {
                    let version = Value::dict([("version", Value::Int(1))]);
                    let meta = Value::ordered_dict(vec![(Value::str(""), version)]);
                    o.state = Some(Value::dict([("_metadata", meta)]));
                }
                od
            }
        };
        save_torch(path, &sd, profile)?;
    }
    Ok(())
}

/// A small text file of a checkpoint (`trainer_state.json`, `config.json`): one place for every
/// such write (a [`crate::save::failpoint`] file event).
pub fn write_text(path: &Path, text: &str) -> Result<()> {
    crate::save::failpoint::write_file(path, text.as_bytes()).map_err(e)
}

/// `config.json`: the model's config class (`RegressionConfig` or `LinearConfig`, named by
/// `model_type` and `architecture`) as `to_json_string` writes it (sorted, indent 2).
/// `pad_token_id`: set where `train()` aligned the config with a tokenizer (None: unset, not
/// written, as `to_diff_dict` leaves defaults out).
/// `use_cache`: where the config has the key (`config_use_cache`, 5.0+), the value
/// `Trainer.__init__` copies from `args.use_cache` into `model.config.use_cache`.
pub fn write_config(dir: &Path, profile: &Profile, (architecture, model_type): (&str, &str), a: f64, b: f64, pad_token_id: Option<i64>, use_cache: bool) -> Result<()> {
    let mut d: Vec<(String, PyJson)> = vec![
        ("a".into(), PyJson::Float(a)),
        ("architectures".into(), PyJson::List(vec![PyJson::Str(architecture.into())])),
        ("b".into(), PyJson::Float(b)),
        (profile.config_dtype_key.into(), PyJson::Str("float32".into())),
        ("model_type".into(), PyJson::Str(model_type.into())),
    ];
    if let Some(id) = pad_token_id {
        d.push(("pad_token_id".into(), PyJson::Int(id as i128)));
    }
    d.push(("transformers_version".into(), PyJson::Str(profile.version.into())));
    if profile.config_use_cache {
        d.push(("use_cache".into(), PyJson::Bool(use_cache)));
    }
    let text = pyjson::dumps(&PyJson::Dict(d), &DumpOptions::hf()).map_err(e)? + "\n";
    write_text(&dir.join("config.json"), &text)
}

/// `training_args.bin`: the pickled TrainingArguments object. The version's own object for a
/// scenario without arguments (golden/hf-V/TRAINING_ARGS.pkl, pickled by the real HF through
/// the generator) carries HF's private state; the fields this scenario resolves differently are
/// patched in, enum-typed ones as enum members.
pub fn write_training_args(dir: &Path, profile: &Profile, args: &Args) -> Result<()> {
    write_training_args_of(dir, profile, args, None)
}

/// The writing process's place in a launch of several processes, as accelerate's `PartialState`
/// (pickled inside the arguments as `distributed_state`) records it.
#[derive(Debug, Clone, Copy)]
pub struct ProcessPlace {
    pub num_processes: usize,
    pub process_index: usize,
    pub local_process_index: usize,
}

/// [`write_training_args`] as a process of a launch pickles its arguments (`None`: one process).
pub fn write_training_args_of(dir: &Path, profile: &Profile, args: &Args, place: Option<ProcessPlace>) -> Result<()> {
    let mut obj = torch_format::unpickle(profile.training_args_template).map_err(e)?;
    let Value::Object(o) = &mut obj else { return Err("TRAINING_ARGS.pkl is not an object".into()) };
    let Some(Value::Dict(state)) = o.state.as_mut() else { return Err("TRAINING_ARGS.pkl has no __dict__".into()) };
    if let Some(pl) = place {
        launch_state(state, profile, pl)?;
        // `_setup_devices` sets `_n_gpu = 1` first and 0 only for use_cpu (or a one-process
        // world: `torch.cuda.device_count()`); a launch that forms its world without use_cpu
        // (`LaunchBehaviors::without_use_cpu`) keeps the 1.
        if !args.use_cpu {
            match state.iter_mut().find(|(k, _)| k.as_str() == Some("_n_gpu")) {
                Some(slot) => slot.1 = Value::Int(1),
                None => return Err("TRAINING_ARGS.pkl: no _n_gpu".into()),
            }
        }
    }
    for (name, v) in &args.all {
        if name == "accelerator_config" {
            // What `__post_init__` (and the Trainer's accelerator) made of it, not the value given.
            if let Some(ac) = &args.accelerator_config {
                accelerator_config_state(state, ac)?;
            }
            continue;
        }
        if profile.default_of(name).map(PyJson::from).as_ref() == Some(v) {
            continue;
        }
        let value = match (profile.enum_class_of(name), v) {
            (Some((module, class)), PyJson::Str(s)) => Value::enum_member(module, class, Value::str(s.clone())),
            // `debug`: a list of DebugOption members.
            (Some((module, class)), PyJson::List(l)) => Value::List(
                l.iter()
                    .map(|x| match x {
                        PyJson::Str(s) => Value::enum_member(module, class, Value::str(s.clone())),
                        other => pyjson_to_value(other),
                    })
                    .collect(),
            ),
            _ => pyjson_to_value(v),
        };
        match state.iter_mut().find(|(k, _)| k.as_str() == Some(name.as_str())) {
            Some(slot) => slot.1 = value,
            None => state.push((Value::str(name.clone()), value)),
        }
    }
    // 5.x's `__post_init__` records accelerate's mixed precision in `mixed_precision` (not an
    // init field: the template holds "no"), fp16 before bf16.
    let mixed = if args.fp16 { Some("fp16") } else if args.bf16 { Some("bf16") } else { None };
    if let (Some(m), Some(slot)) = (mixed, state.iter_mut().find(|(k, _)| k.as_str() == Some("mixed_precision"))) {
        slot.1 = Value::str(m.to_string());
    }
    // `use_cpu`: `_setup_devices` builds `PartialState(cpu=True)`, which the pickled arguments
    // keep as `distributed_state._cpu`.
    if args.use_cpu {
        if let Some((_, Value::Object(ds))) = state.iter_mut().find(|(k, _)| k.as_str() == Some("distributed_state")) {
            if let Some(Value::Dict(ds_state)) = ds.state.as_mut() {
                match ds_state.iter_mut().find(|(k, _)| k.as_str() == Some("_cpu")) {
                    Some(slot) => slot.1 = Value::Bool(true),
                    None => return Err("TRAINING_ARGS.pkl: distributed_state has no _cpu".into()),
                }
            }
        }
    }
    save_torch(&dir.join("training_args.bin"), &obj, profile)
}

/// `accelerator_config` as the arguments hold it: the template's `AcceleratorConfig` object with
/// this run's fields as its `__dict__`, or (4.38) the dict as given.
fn accelerator_config_state(state: &mut [(Value, Value)], ac: &crate::hf::accelerator::AcceleratorConfig) -> Result<()> {
    let Some(slot) = state.iter_mut().find(|(k, _)| k.as_str() == Some("accelerator_config")) else {
        return Err("TRAINING_ARGS.pkl: no accelerator_config".into());
    };
    let fields = Value::Dict(ac.fields.iter().map(|(k, v)| (Value::str(k.clone()), pyjson_to_value(v))).collect());
    if !ac.object {
        slot.1 = fields;
        return Ok(());
    }
    match &mut slot.1 {
        Value::Object(o) => o.state = Some(fields),
        _ => return Err("TRAINING_ARGS.pkl: accelerator_config is not an AcceleratorConfig object".into()),
    }
    Ok(())
}

/// The arguments' `distributed_state` (and what hangs on it) as a process of a launch pickles
/// it: `MULTI_CPU`, its process numbers, the gloo backend (a launch's first Trainer initialises
/// the process group itself), and per release an indexed device and the order of the keys
/// (`LaunchBehaviors`).
fn launch_state(state: &mut [(Value, Value)], profile: &Profile, pl: ProcessPlace) -> Result<()> {
    let rules = profile.launch_rules();
    let device = rules.state_device_indexed.then(|| Value::reduce("torch", "device", vec![Value::str("cpu"), Value::Int(pl.local_process_index as i64)]));
    for (k, v) in state.iter_mut() {
        match k.as_str() {
            Some("local_rank") if *v == Value::Int(0) => *v = Value::Int(pl.local_process_index as i64),
            Some("average_tokens_across_devices") if rules.average_tokens_on_in_launch => *v = Value::Bool(true),
            Some("_setup_devices") | Some("__cached__setup_devices") => {
                if let Some(d) = &device {
                    *v = d.clone();
                }
            }
            _ => {}
        }
    }
    let Some((_, Value::Object(ds))) = state.iter_mut().find(|(k, _)| k.as_str() == Some("distributed_state")) else {
        return Err("TRAINING_ARGS.pkl: no distributed_state".into());
    };
    let Some(Value::Dict(d)) = ds.state.as_mut() else { return Err("TRAINING_ARGS.pkl: distributed_state has no __dict__".into()) };
    let set = |d: &mut Vec<(Value, Value)>, key: &str, v: Value| match d.iter_mut().find(|(k, _)| k.as_str() == Some(key)) {
        Some(slot) => {
            slot.1 = v;
            Ok(())
        }
        None => Err(format!("TRAINING_ARGS.pkl: distributed_state has no {key}")),
    };
    set(d, "distributed_type", Value::enum_member("accelerate.utils.dataclasses", "DistributedType", Value::str("MULTI_CPU")))?;
    set(d, "num_processes", Value::Int(pl.num_processes as i64))?;
    set(d, "process_index", Value::Int(pl.process_index as i64))?;
    set(d, "local_process_index", Value::Int(pl.local_process_index as i64))?;
    set(d, "backend", Value::str("gloo"))?;
    if let Some(dev) = device {
        set(d, "device", dev)?;
    }
    if rules.state_local_index_first {
        // local_process_index moves to just before num_processes.
        if let Some(i) = d.iter().position(|(k, _)| k.as_str() == Some("local_process_index")) {
            let entry = d.remove(i);
            let at = d.iter().position(|(k, _)| k.as_str() == Some("num_processes")).unwrap_or(d.len());
            d.insert(at, entry);
        }
    }
    Ok(())
}

pub fn pyjson_to_value(v: &PyJson) -> Value {
    match v {
        PyJson::Null => Value::None,
        PyJson::Bool(b) => Value::Bool(*b),
        PyJson::Int(i) => Value::Int(*i as i64),
        PyJson::BigInt(s) => Value::Str(s.clone()),
        PyJson::Float(f) => Value::Float(*f),
        PyJson::Str(s) => Value::Str(s.clone()),
        PyJson::List(l) => Value::List(l.iter().map(pyjson_to_value).collect()),
        PyJson::Dict(d) => Value::Dict(d.iter().map(|(k, v)| (Value::str(k.clone()), pyjson_to_value(v))).collect()),
    }
}

pub fn write_pyvalue(path: &Path, v: &PyValue, profile: &Profile) -> Result<()> {
    save_torch(path, v, profile)
}

/// `rng_state.pth`: `{"python": random.getstate(), "numpy": np.random.get_state(), "cpu":
/// torch.get_rng_state()}` (CPU runs have no cuda entry).
pub fn write_rng(dir: &Path, profile: &Profile, seed: i64, torch_state: &[u8]) -> Result<()> {
    write_rng_named(dir, "rng_state.pth", profile, seed, torch_state)
}

/// [`write_rng`] under another name: `rng_state_{process_index}.pth` in a launch of several
/// processes (the archive's record prefix follows the file name, as torch.save makes it).
pub fn write_rng_named(dir: &Path, file: &str, profile: &Profile, seed: i64, torch_state: &[u8]) -> Result<()> {
    let py = PythonRandomState::seeded(seed);
    let python = Value::Tuple(vec![
        Value::Int(py.version),
        Value::Tuple(py.internal_state().into_iter().map(Value::from_u64).collect()),
        Value::None,
    ]);
    let np = NumpyRandomState::seeded(seed)?;
    let key_bytes: Vec<u8> = np.key.iter().flat_map(|w| w.to_le_bytes()).collect();
    let ndarray = numpy_u32_array(profile, &key_bytes, np.key.len());
    let numpy = Value::Tuple(vec![
        Value::str(NumpyRandomState::NAME),
        ndarray,
        Value::Int(np.pos),
        Value::Int(np.has_gauss),
        Value::Float(np.cached_gaussian),
    ]);
    let cpu = Value::Tensor(Tensor::from_vec(&[torch_state.len() as i64], torch_state.to_vec()).map_err(e)?);
    let d = Value::dict([("python", python), ("numpy", numpy), ("cpu", cpu)]);
    save_torch(&dir.join(file), &d, profile)
}

/// A 1-d little-endian uint32 numpy array as `ndarray.__reduce__` pickles it.
fn numpy_u32_array(profile: &Profile, bytes: &[u8], n: usize) -> Value {
    let module = profile.numpy_core_module;
    let latin1: String = bytes.iter().map(|&b| b as char).collect();
    let encoded = Value::reduce("_codecs", "encode", vec![Value::Str(latin1), Value::str("latin1")]);
    let dtype = {
        let mut o = Value::reduce("numpy", "dtype", vec![Value::str("u4"), Value::Bool(false), Value::Bool(true)]);
        if let Value::Object(obj) = &mut o {
            obj.state = Some(Value::Tuple(vec![
                Value::Int(3),
                Value::str("<"),
                Value::None,
                Value::None,
                Value::None,
                Value::Int(-1),
                Value::Int(-1),
                Value::Int(0),
            ]));
        }
        o
    };
    let mut arr = Value::reduce(
        module,
        "_reconstruct",
        vec![Value::Global(torch_format::Global::new("numpy", "ndarray")), Value::Tuple(vec![Value::Int(0)]), encoded_b()],
    );
    if let Value::Object(obj) = &mut arr {
        obj.state = Some(Value::Tuple(vec![
            Value::Int(1),
            Value::Tuple(vec![Value::Int(n as i64)]),
            dtype,
            Value::Bool(false),
            encoded,
        ]));
    }
    arr
}

/// `_codecs.encode('b', 'latin1')`: the byte string numpy passes to `_reconstruct`.
fn encoded_b() -> Value {
    Value::reduce("_codecs", "encode", vec![Value::str("b"), Value::str("latin1")])
}

/// A weights file's float32 tensors by key (`None` when it is missing: HF's `_load_best_model`
/// then warns and keeps the current weights).
pub fn read_state_dict(path: &Path) -> Result<Option<Vec<(String, Vec<f32>)>>> {
    Ok(read_tensors(path)?.map(|ts| ts.into_iter().map(|(k, _, v)| (k, v)).collect()))
}

/// A weights file's float32 tensors in the file's order, (key, shape, values): a torch-saved
/// dict's order, or safetensors' (the names sorted, as its `load_file` gives them). `None` when
/// the file is missing.
pub fn read_tensors(path: &Path) -> Result<Option<Vec<(String, Vec<i64>, Vec<f32>)>>> {
    if !path.exists() {
        return Ok(None);
    }
    let tensors: Vec<(String, Tensor)> = if path.extension().is_some_and(|x| x == "safetensors") {
        safetensors::load(path).map_err(e)?.1
    } else {
        let v = torch_format::load(path).map_err(e)?;
        let items = v.as_dict().ok_or_else(|| format!("{}: not a state dict", path.display()))?;
        items
            .iter()
            .filter_map(|(k, v)| match (k.as_str().map(str::to_string), v.resolved()) {
                (Some(k), Value::Tensor(t)) => Some((k, t.clone())),
                _ => None,
            })
            .collect()
    };
    let mut out = vec![];
    for (k, t) in tensors {
        let b = t.contiguous_bytes().map_err(e)?;
        out.push((k, t.shape.clone(), b.chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().expect("4 bytes"))).collect()));
    }
    Ok(Some(out))
}
