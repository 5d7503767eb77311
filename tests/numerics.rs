//! Numerics of rng/sampler/optim/lr/plateau checked against the real Python implementations
//! (torch 2.13.0 + transformers 5.24.0 in `.venv`, torch 2.1.2 + transformers 4.31.0 in
//! `.venv-hf-4.31.0`). Each test runs one Python process with all its inputs as JSON on stdin.
//! Floats travel as bit patterns, so every comparison below is bit for bit.

use ckptspec::hf::behaviors::SamplerKind;
use ckptspec::hf::behaviors::TorchLayout;
use ckptspec::numerics::lr::{warmup_steps_v4, warmup_steps_v5, LambdaLrState, Schedule, ScheduleKind};
use ckptspec::numerics::optim::{clip_grad_norm, AdamW, AdamWKind, Param, PyValue};
use ckptspec::numerics::plateau::Plateau;
use ckptspec::numerics::rng::{NumpyRandomState, PythonRandomState, TorchGenerator};
use ckptspec::numerics::sampler::TrainRngTracker;
use serde_json::{json, Value};
use std::cell::RefCell;
use std::collections::HashMap;
use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::OnceLock;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Venv {
    /// torch 2.13.0, transformers 5.24.0, accelerate 1.15.0
    Hf5,
    /// torch 2.1.2, transformers 4.31.0, accelerate 0.21.0
    Hf4,
}

impl Venv {
    fn python(self) -> Option<PathBuf> {
        let p = match self {
            Venv::Hf5 => PathBuf::from(ROOT).join(".venv/bin/python"),
            Venv::Hf4 => PathBuf::from(ROOT).join(".venv-hf-4.31.0/bin/python"),
        };
        if p.exists() {
            Some(p)
        } else if self == Venv::Hf4 {
            eprintln!("SKIP: {} does not exist (the transformers 4.31.0 venv is not installed)", p.display());
            None
        } else {
            panic!("{} is missing: run ./dev setup", p.display());
        }
    }

    fn layout(self) -> TorchLayout {
        match self {
            Venv::Hf5 => TorchLayout::v2_13(),
            Venv::Hf4 => TorchLayout::v2_1(),
        }
    }
}

/// Shared Python helpers: `enc` turns a Python value into the JSON that `enc` (Rust) makes of a
/// [`PyValue`]; `f64s`/`f32s` decode bit patterns.
const PRELUDE: &str = r#"
import sys, json, struct, math, os, warnings
warnings.filterwarnings("ignore")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
import torch
torch.set_num_threads(1)
def b64(x): return str(struct.unpack('<Q', struct.pack('<d', float(x)))[0])
def f64(b): return struct.unpack('<d', struct.pack('<Q', int(b)))[0]
def b32(x): return struct.unpack('<I', struct.pack('<f', float(x)))[0]
def f32(b): return struct.unpack('<f', struct.pack('<I', int(b)))[0]
def enc(v):
    if v is None: return ['None']
    if isinstance(v, bool): return ['bool', v]
    if isinstance(v, int): return ['int', str(v)]
    if isinstance(v, float): return ['float', b64(v)]
    if isinstance(v, str): return ['str', v]
    if isinstance(v, tuple): return ['tuple', [enc(x) for x in v]]
    if isinstance(v, list): return ['list', [enc(x) for x in v]]
    if isinstance(v, dict): return ['dict', [[enc(k), enc(x)] for k, x in v.items()]]
    if isinstance(v, torch.Tensor):
        assert v.dtype == torch.float32, v.dtype
        return ['tensor', str(v.dtype), list(v.shape), [b32(x) for x in v.reshape(-1).tolist()]]
    raise TypeError(type(v))
"#;

/// Runs `sections` (script, input) in ONE Python process: each script is `exec`ed with its
/// `INPUT`, and the last line it prints is its JSON result.
fn run_python_batch(venv: Venv, sections: &[(String, Value)]) -> Option<Vec<Value>> {
    let python = venv.python()?;
    let driver = r#"
import io, contextlib
ALL = json.load(sys.stdin)
RESULTS = []
for code, inp in ALL:
    buf = io.StringIO()
    ns = dict(globals()); ns['INPUT'] = inp
    with contextlib.redirect_stdout(buf):
        exec(code, ns)
    RESULTS.append(json.loads(buf.getvalue().strip().splitlines()[-1]))
print(json.dumps(RESULTS))
"#;
    let mut child = Command::new(python)
        .arg("-c")
        .arg(format!("{PRELUDE}\n{driver}"))
        .current_dir(ROOT)
        .env("CUDA_VISIBLE_DEVICES", "")
        .env("PYTHONHASHSEED", "0")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn python");
    let input = Value::Array(sections.iter().map(|(c, i)| json!([c, i])).collect());
    child.stdin.take().unwrap().write_all(input.to_string().as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "python failed:\n{}\n{}", stdout, String::from_utf8_lossy(&out.stderr));
    let last = stdout.lines().last().unwrap_or("");
    let v: Value = serde_json::from_str(last).unwrap_or_else(|e| panic!("bad JSON from python ({e}): {last:.500}"));
    Some(v.as_array().unwrap().clone())
}

thread_local! {
    /// While set, `run_py` only records what it would run (see `oracle`).
    static COLLECTING: RefCell<Option<Vec<(String, Value)>>> = const { RefCell::new(None) };
}

type Oracle = Option<HashMap<String, (Value, Value)>>;
static ORACLE_HF5: OnceLock<Oracle> = OnceLock::new();
static ORACLE_HF4: OnceLock<Oracle> = OnceLock::new();

/// Every check of one venv, run once in "collect" mode to gather their Python inputs, so that
/// one Python process (imports paid once) answers all of them.
fn all_checks(venv: Venv) {
    check_rng(venv);
    check_trainer(venv);
    check_optim(venv);
    check_clip(venv);
    check_lr(venv);
    check_plateau(venv);
    if venv == Venv::Hf5 {
        check_golden();
    }
}

fn oracle(venv: Venv) -> &'static Oracle {
    let cell = match venv {
        Venv::Hf5 => &ORACLE_HF5,
        Venv::Hf4 => &ORACLE_HF4,
    };
    cell.get_or_init(|| {
        venv.python()?;
        COLLECTING.with(|c| *c.borrow_mut() = Some(Vec::new()));
        all_checks(venv);
        let sections = COLLECTING.with(|c| c.borrow_mut().take().unwrap());
        let outs = run_python_batch(venv, &sections)?;
        Some(sections.into_iter().zip(outs).map(|((code, input), out)| (code, (input, out))).collect())
    })
}

/// The Python answer for `script` run on `input` (`None`: skip, or collecting).
fn run_py(venv: Venv, script: &str, input: &Value) -> Option<Value> {
    let collecting = COLLECTING.with(|c| {
        if let Some(v) = c.borrow_mut().as_mut() {
            v.push((script.to_string(), input.clone()));
            true
        } else {
            false
        }
    });
    if collecting {
        return None;
    }
    let all = oracle(venv).as_ref()?;
    let (want_input, out) = all.get(script).expect("section not collected");
    assert!(want_input == input, "inputs are not deterministic");
    Some(out.clone())
}

fn enc(v: &PyValue) -> Value {
    match v {
        PyValue::None => json!(["None"]),
        PyValue::Bool(b) => json!(["bool", b]),
        PyValue::Int(i) => json!(["int", i.to_string()]),
        PyValue::Float(f) => json!(["float", f.to_bits().to_string()]),
        PyValue::Str(s) => json!(["str", s]),
        PyValue::Tuple(x) => json!(["tuple", x.iter().map(enc).collect::<Vec<_>>()]),
        PyValue::List(x) => json!(["list", x.iter().map(enc).collect::<Vec<_>>()]),
        PyValue::Dict(e) => json!(["dict", e.iter().map(|(k, v)| json!([enc(k), enc(v)])).collect::<Vec<_>>()]),
        PyValue::Tensor(t) => {
            let bytes = t.contiguous_bytes().unwrap();
            let bits: Vec<u32> = bytes.chunks(4).map(|c| u32::from_le_bytes(c.try_into().unwrap())).collect();
            json!(["tensor", "torch.float32", t.shape, bits])
        }
        other => panic!("not in a state dict: {other:?}"),
    }
}

fn f64_of(v: &Value) -> f64 {
    f64::from_bits(v.as_str().map(|s| s.parse().unwrap()).unwrap_or_else(|| v.as_u64().unwrap()))
}

fn f32_of(v: &Value) -> f32 {
    f32::from_bits(v.as_u64().unwrap() as u32)
}

/// A small deterministic generator for test inputs (splitmix64).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
    fn range(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (hi - lo) * self.unit()
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn pick<T: Clone>(&mut self, xs: &[T]) -> T {
        xs[self.below(xs.len() as u64) as usize].clone()
    }
}

// ------------------------------------------------------------------------------------ rng

const RNG_SCRIPT: &str = r#"
import random, numpy as np
out = {'torch': [], 'python': [], 'numpy': []}
for seed in INPUT['seeds']:
    g = torch.Generator(); g.manual_seed(seed)
    perms = [torch.randperm(n, generator=g).tolist() for n in INPUT['ns']]
    i64 = [str(int(torch.empty((), dtype=torch.int64).random_(generator=g).item())) for _ in range(5)]
    out['torch'].append({'perms': perms, 'int64': i64, 'state': g.get_state().numpy().tobytes().hex(), 'initial_seed': str(g.initial_seed())})
torch.manual_seed(INPUT['seeds'][2]); torch.randperm(10)
out['global'] = torch.get_rng_state().numpy().tobytes().hex()
for s in INPUT['py_seeds']:
    random.seed(s); st = random.getstate()
    out['python'].append([st[0], [str(x) for x in st[1]], st[2]])
for s in INPUT['np_seeds']:
    try:
        np.random.seed(s); st = np.random.get_state()
        out['numpy'].append(['ok', st[0], [int(x) for x in st[1]], int(st[2]), int(st[3]), b64(st[4])])
    except Exception as e:
        out['numpy'].append(['err', type(e).__name__, str(e)])
print(json.dumps(out))
"#;

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn check_rng(venv: Venv) {
    let seeds: Vec<u64> = vec![0, 1, 42, 7, 4294967301, (1 << 40) + 3, u64::MAX];
    let ns: Vec<usize> = (1..=300).collect();
    let py_seeds: Vec<i64> = vec![0, 1, 42, -42, 4294967301, i64::MAX, i64::MIN + 1];
    let np_seeds: Vec<i64> = vec![0, 42, 4294967295, 4294967296, -1];
    let Some(out) = run_py(venv, RNG_SCRIPT, &json!({"seeds": seeds, "ns": ns, "py_seeds": py_seeds, "np_seeds": np_seeds})) else { return };
    for (k, seed) in seeds.iter().enumerate() {
        let t = &out["torch"][k];
        let mut g = TorchGenerator::new(*seed);
        for (j, n) in ns.iter().enumerate() {
            let want: Vec<i64> = t["perms"][j].as_array().unwrap().iter().map(|x| x.as_i64().unwrap()).collect();
            assert_eq!(g.randperm(*n), want, "{venv:?} randperm({n}) seed {seed}");
        }
        for j in 0..5 {
            assert_eq!(g.random_int64().to_string(), t["int64"][j].as_str().unwrap(), "{venv:?} int64 draw seed {seed}");
        }
        assert_eq!(hex(&g.get_state()), t["state"].as_str().unwrap(), "{venv:?} get_state seed {seed}");
        assert_eq!(g.initial_seed().to_string(), t["initial_seed"].as_str().unwrap());
        assert_eq!(TorchGenerator::set_state(&g.get_state()).unwrap(), g);
    }
    let mut g = TorchGenerator::new(seeds[2]);
    g.randperm(10);
    assert_eq!(hex(&g.get_state()), out["global"].as_str().unwrap(), "{venv:?} torch.get_rng_state()");
    for (k, s) in py_seeds.iter().enumerate() {
        let p = &out["python"][k];
        let st = PythonRandomState::seeded(*s);
        assert_eq!(p[0].as_i64().unwrap(), st.version);
        let want: Vec<String> = p[1].as_array().unwrap().iter().map(|x| x.as_str().unwrap().to_string()).collect();
        let got: Vec<String> = st.internal_state().iter().map(|x| x.to_string()).collect();
        assert_eq!(got, want, "{venv:?} random.seed({s})");
        assert!(p[2].is_null() && st.gauss_next.is_none());
    }
    for (k, s) in np_seeds.iter().enumerate() {
        let n = &out["numpy"][k];
        match NumpyRandomState::seeded(*s) {
            Ok(st) => {
                assert_eq!(n[0], "ok", "{venv:?} numpy seed {s}: {n}");
                assert_eq!(n[1], NumpyRandomState::NAME);
                let want: Vec<u32> = n[2].as_array().unwrap().iter().map(|x| x.as_u64().unwrap() as u32).collect();
                assert_eq!(st.key.to_vec(), want);
                assert_eq!((n[3].as_i64().unwrap(), n[4].as_i64().unwrap(), f64_of(&n[5])), (st.pos, st.has_gauss, st.cached_gaussian));
            }
            Err(msg) => {
                assert_eq!(n[0], "err", "{venv:?} numpy seed {s}");
                assert_eq!((n[1].as_str().unwrap(), n[2].as_str().unwrap()), ("ValueError", msg.as_str()));
            }
        }
    }
}

#[test]
fn rng_matches_torch_python_numpy_hf5() {
    check_rng(Venv::Hf5);
}

#[test]
fn rng_matches_torch_python_numpy_hf4() {
    check_rng(Venv::Hf4);
}

// ------------------------------------------------------------------------ sampler/trainer

/// Instruments real Trainer runs: records every DataLoader iterator creation (train or eval),
/// every train row index, and the rng_state.pth of every checkpoint.
const TRAINER_SCRIPT: &str = r#"
import tempfile, contextlib, random, numpy as np
sys.path.insert(0, os.path.join(os.getcwd(), 'conformance'))
import generate
world = generate.hf_world()
import transformers
from transformers import Trainer, TrainingArguments
import torch.utils.data.dataloader as dl
RS = world['RegressionSet']
EVENTS = []
CUR = [None]
orig_getitem = RS.__getitem__
def getitem(self, k):
    if getattr(self, 'is_train', False): CUR[0].append(int(k))
    return orig_getitem(self, k)
RS.__getitem__ = getitem
orig_init = dl._BaseDataLoaderIter.__init__
def it_init(self, loader):
    EVENTS.append(['train' if getattr(loader.dataset, 'is_train', False) else 'eval', []])
    CUR[0] = EVENTS[-1][1] if EVENTS[-1][0] == 'train' else CUR[0]
    return orig_init(self, loader)
dl._BaseDataLoaderIter.__init__ = it_init
orig_save = Trainer._save_checkpoint
def save(self, *a, **k):
    r = orig_save(self, *a, **k)
    EVENTS.append(['save', 'checkpoint-%d' % self.state.global_step])
    return r
Trainer._save_checkpoint = save
v4 = transformers.__version__.startswith('4.')
results = []
for cfg in INPUT['configs']:
    EVENTS.clear()
    d = tempfile.mkdtemp(); cwd = os.getcwd(); os.chdir(d)
    args = dict(output_dir='output', report_to='none', disable_tqdm=True, per_device_train_batch_size=8)
    args.update(cfg['args'])
    if v4 and 'eval_strategy' in args: args['evaluation_strategy'] = args.pop('eval_strategy')
    if 'logging_dir' in TrainingArguments.__dataclass_fields__: args['logging_dir'] = 'output/runs'
    model = world['RegressionModel'](world['RegressionConfig'](a=0.0, b=0.0))
    tr = RS(cfg['n'], 0); tr.is_train = True
    ev = cfg.get('eval')
    if isinstance(ev, dict): ev = {k: RS(v, 10000 * (i + 1)) for i, (k, v) in enumerate(ev.items())}
    elif ev: ev = RS(ev, 10000)
    else: ev = None
    t = Trainer(model=model, args=TrainingArguments(**args), train_dataset=tr, eval_dataset=ev)
    with contextlib.redirect_stdout(open(os.devnull, 'w')):
        t.train()
    ckpts = {}
    for name in os.listdir('output'):
        p = os.path.join('output', name)
        if not name.startswith('checkpoint-'): continue
        r = torch.load(os.path.join(p, 'rng_state.pth'), weights_only=False)
        o = torch.load(os.path.join(p, 'optimizer.pt'), weights_only=False)
        s = torch.load(os.path.join(p, 'scheduler.pt'), weights_only=False)
        ckpts[name] = {
            'keys': list(r.keys()),
            'cpu': r['cpu'].numpy().tobytes().hex(),
            'python': [r['python'][0], [str(x) for x in r['python'][1]], r['python'][2]],
            'numpy': [r['numpy'][0], [int(x) for x in r['numpy'][1]], int(r['numpy'][2]), int(r['numpy'][3]), b64(r['numpy'][4])],
            'param_groups': enc(o['param_groups']),
            'step': enc(o['state'][0]['step']),
            'state_keys': [list(o['state'].keys()), list(o['state'][0].keys())],
            'scheduler': enc(s),
        }
    os.chdir(cwd)
    logged = [[h['step'], b64(h['learning_rate'])] for h in t.state.log_history if 'learning_rate' in h]
    results.append({'events': list(EVENTS), 'ckpts': ckpts, 'max_steps': t.state.max_steps, 'logged_lr': logged, 'optim': str(getattr(t.args.optim, 'value', t.args.optim))})
print(json.dumps(results))
"#;

fn check_trainer(venv: Venv) {
    let configs = json!([
        {"n": 60, "eval": 16, "args": {"num_train_epochs": 3, "gradient_accumulation_steps": 3, "eval_strategy": "steps", "eval_steps": 2, "save_steps": 2}},
        {"n": 64, "args": {"num_train_epochs": 2, "seed": 7, "data_seed": 123, "save_steps": 5}},
        {"n": 40, "eval": {"x": 16, "y": 8}, "args": {"num_train_epochs": 2, "eval_strategy": "epoch", "save_strategy": "epoch", "seed": 3}},
        {"n": 64, "args": {"max_steps": 10, "save_steps": 4}},
        {"n": 64, "args": {"max_steps": 8, "logging_steps": 1, "learning_rate": 0.001, "lr_scheduler_type": "cosine", "warmup_steps": 3, "save_steps": 4}},
        {"n": 64, "args": {"max_steps": 8, "logging_steps": 1, "learning_rate": 0.001, "lr_scheduler_type": "constant_with_warmup", "warmup_steps": 3, "save_steps": 8}},
    ]);
    let Some(out) = run_py(venv, TRAINER_SCRIPT, &json!({ "configs": configs })) else { return };
    let (kind, layout) = match venv {
        Venv::Hf5 => (SamplerKind::SeedableEpochSeed, TorchLayout::v2_13()),
        Venv::Hf4 => (SamplerKind::GlobalDrawnSeed, TorchLayout::v2_1()),
    };
    for (ci, cfg) in configs.as_array().unwrap().iter().enumerate() {
        let res = &out[ci];
        let args = &cfg["args"];
        let seed = args.get("seed").and_then(|v| v.as_u64()).unwrap_or(42);
        let data_seed = args.get("data_seed").and_then(|v| v.as_u64());
        let n = cfg["n"].as_u64().unwrap() as usize;
        let mut tracker = TrainRngTracker::new(kind, seed, data_seed);
        let max_steps = res["max_steps"].as_i64().unwrap();
        let base_lr = args.get("learning_rate").and_then(|v| v.as_f64()).unwrap_or(5e-5);
        let mut saves = 0;
        // the logged learning_rate: 5.24 the lr the step used, 4.31 the lr after the step
        let sched = schedule_of(venv, args, max_steps);
        for l in res["logged_lr"].as_array().unwrap() {
            let t = l[0].as_i64().unwrap();
            let want = match venv {
                Venv::Hf5 => sched.lr_during_step(base_lr, t),
                Venv::Hf4 => sched.lr_after_steps(base_lr, t),
            };
            assert_eq!(want.to_bits(), f64_of(&l[1]).to_bits(), "{venv:?} cfg {ci}: logged learning_rate at step {t}");
        }
        for ev in res["events"].as_array().unwrap() {
            match ev[0].as_str().unwrap() {
                "train" => {
                    let order = tracker.begin_train_epoch(n);
                    let seen: Vec<usize> = ev[1].as_array().unwrap().iter().map(|x| x.as_u64().unwrap() as usize).collect();
                    assert!(!seen.is_empty() && seen.len() <= n, "{venv:?} cfg {ci}: epoch saw {} rows", seen.len());
                    assert_eq!(&order[..seen.len()], &seen[..], "{venv:?} cfg {ci}: order of epoch {}", tracker.epochs_started - 1);
                }
                "eval" => tracker.begin_eval_loop(),
                "save" => {
                    saves += 1;
                    let name = ev[1].as_str().unwrap();
                    let ck = &res["ckpts"][name];
                    assert_eq!(ck["keys"], json!(["python", "numpy", "cpu"]));
                    assert_eq!(hex(&tracker.torch_state()), ck["cpu"].as_str().unwrap(), "{venv:?} cfg {ci} {name}: rng_state.pth cpu");
                    let py = PythonRandomState::seeded(seed as i64);
                    let want: Vec<String> = py.internal_state().iter().map(|x| x.to_string()).collect();
                    assert_eq!(ck["python"][1], json!(want), "{venv:?} cfg {ci} {name}: python state");
                    let np = NumpyRandomState::seeded(seed as i64).unwrap();
                    assert_eq!(ck["numpy"][1], json!(np.key.to_vec()));
                    assert_eq!(ck["numpy"][2], json!(624));
                    // optimizer param groups and scheduler: layout and lr values
                    let step: i64 = name.trim_start_matches("checkpoint-").parse().unwrap();
                    let sched = schedule_of(venv, args, max_steps);
                    let okind = if res["optim"].as_str().unwrap().contains("adamw_hf") {
                        AdamWKind::HfAdamW
                    } else if res["optim"].as_str().unwrap().contains("fused") {
                        AdamWKind::TorchFused
                    } else {
                        AdamWKind::TorchSingleTensor
                    };
                    let mut opt = AdamW::hf(okind, layout, sched.lr_after_steps(base_lr, step), (0.9, 0.999), 1e-8, 0.0, &[true, true]);
                    for g in opt.groups.iter_mut() {
                        g.initial_lr = Some(base_lr);
                    }
                    let sd = opt.state_dict();
                    assert_eq!(enc(sd.get("param_groups").unwrap()), ck["param_groups"], "{venv:?} cfg {ci} {name}: optimizer param_groups");
                    let want_step = match okind {
                        AdamWKind::HfAdamW => enc(&PyValue::Int(step)),
                        _ => enc(&PyValue::f32_tensor(vec![], vec![step as f32])),
                    };
                    assert_eq!(want_step, ck["step"]);
                    assert_eq!(ck["state_keys"], json!([[0, 1], ["step", "exp_avg", "exp_avg_sq"]]));
                    let st = LambdaLrState::new(&sched, base_lr, 2, step);
                    assert_eq!(enc(&st.to_py(layout)), ck["scheduler"], "{venv:?} cfg {ci} {name}: scheduler.pt");
                }
                other => panic!("event {other}"),
            }
        }
        assert!(saves > 0);
    }
}

/// The schedule HF builds for these test configs (linear/cosine/constant_with_warmup).
fn schedule_of(venv: Venv, args: &Value, max_steps: i64) -> Schedule {
    let kind = match args.get("lr_scheduler_type").and_then(|v| v.as_str()).unwrap_or("linear") {
        "linear" => ScheduleKind::Linear,
        "cosine" => ScheduleKind::Cosine { num_cycles: 0.5 },
        "constant" => ScheduleKind::Constant,
        "constant_with_warmup" => ScheduleKind::ConstantWithWarmup,
        other => panic!("{other}"),
    };
    let w = args.get("warmup_steps").and_then(|v| v.as_f64()).unwrap_or(0.0);
    let warmup = match venv {
        Venv::Hf5 => warmup_steps_v5(w, max_steps) as f64,
        Venv::Hf4 => warmup_steps_v4(w, 0.0, max_steps),
    };
    Schedule { kind, warmup, num_training_steps: max_steps }
}

#[test]
fn trainer_data_order_and_rng_state_hf5() {
    check_trainer(Venv::Hf5);
}

#[test]
fn trainer_data_order_and_rng_state_hf4() {
    check_trainer(Venv::Hf4);
}

// ------------------------------------------------------------------------------- golden

const GOLDEN_SCRIPT: &str = r#"
out = {}
root = 'golden/hf-5.24.0/final-step-not-multiple/output'
for name in sorted(os.listdir(root)):
    p = os.path.join(root, name)
    r = torch.load(os.path.join(p, 'rng_state.pth'), weights_only=False)
    o = torch.load(os.path.join(p, 'optimizer.pt'), weights_only=False)
    s = torch.load(os.path.join(p, 'scheduler.pt'), weights_only=False)
    out[name] = {'cpu': r['cpu'].numpy().tobytes().hex(), 'param_groups': enc(o['param_groups']), 'scheduler': enc(s)}
print(json.dumps(out))
"#;

/// golden/hf-5.24.0/final-step-not-multiple (max_steps=10, save_steps=4, 64 rows, batch 8):
/// checkpoints 4 and 8 lie in epoch 0 (one DataLoader draw), 10 in epoch 1 (two).
#[test]
fn golden_final_step_not_multiple_rng_optimizer_scheduler() {
    check_golden();
}

fn check_golden() {
    let Some(out) = run_py(Venv::Hf5, GOLDEN_SCRIPT, &json!({})) else { return };
    for (name, epochs, step) in [("checkpoint-4", 1, 4), ("checkpoint-8", 1, 8), ("checkpoint-10", 2, 10)] {
        let mut t = TrainRngTracker::new(SamplerKind::SeedableEpochSeed, 42, None);
        for _ in 0..epochs {
            t.begin_train_epoch(64);
        }
        assert_eq!(hex(&t.torch_state()), out[name]["cpu"].as_str().unwrap(), "{name}");
        let sched = Schedule { kind: ScheduleKind::Linear, warmup: 0.0, num_training_steps: 10 };
        let mut opt = AdamW::hf(AdamWKind::TorchFused, TorchLayout::v2_13(), sched.lr_after_steps(5e-5, step), (0.9, 0.999), 1e-8, 0.0, &[true, true]);
        for g in opt.groups.iter_mut() {
            g.initial_lr = Some(5e-5);
        }
        assert_eq!(enc(opt.state_dict().get("param_groups").unwrap()), out[name]["param_groups"], "{name}");
        assert_eq!(enc(&LambdaLrState::new(&sched, 5e-5, 2, step).to_py(TorchLayout::v2_13())), out[name]["scheduler"], "{name}");
    }
}

// --------------------------------------------------------------------------------- optim

const OPTIM_SCRIPT: &str = r#"
out = []
for c in INPUT['cases']:
    a = torch.nn.Parameter(torch.tensor(f32(c['p0'][0]))); b = torch.nn.Parameter(torch.tensor(f32(c['p0'][1])))
    groups = [{'params': [a, b], 'weight_decay': f64(c['wd'])}, {'params': [], 'weight_decay': 0.0}]
    betas = (f64(c['b1']), f64(c['b2'])); eps = f64(c['eps'])
    kind = c['kind']
    if kind == 'fused': o = torch.optim.AdamW(groups, lr=5e-5, betas=betas, eps=eps, fused=True)
    elif kind == 'single': o = torch.optim.AdamW(groups, lr=5e-5, betas=betas, eps=eps)
    else:
        from transformers.optimization import AdamW
        o = AdamW(groups, lr=5e-5, betas=betas, eps=eps, no_deprecation_warning=True)
    traj = []
    for t, (gs, lr) in enumerate(zip(c['grads'], c['lrs'])):
        if gs[0] is not None: a.grad = torch.tensor(f32(gs[0]))
        else: a.grad = None
        b.grad = torch.tensor(f32(gs[1]))
        for g in o.param_groups: g['lr'] = f64(lr)
        o.step()
        traj.append([b32(a.item()), b32(b.item())])
    out.append({'traj': traj, 'sd': enc(o.state_dict())})
print(json.dumps(out))
"#;

fn check_optim(venv: Venv) {
    let kinds: Vec<(&str, AdamWKind)> = match venv {
        Venv::Hf5 => vec![("fused", AdamWKind::TorchFused), ("single", AdamWKind::TorchSingleTensor)],
        Venv::Hf4 => vec![("single", AdamWKind::TorchSingleTensor), ("hf", AdamWKind::HfAdamW)],
    };
    let mut r = Rng(0xada);
    let mut cases = Vec::new();
    let mut specs = Vec::new();
    for (kname, kind) in &kinds {
        for c in 0..150 {
            let wd: f64 = r.pick(&[0.0, 0.0, 0.01, 0.1, 0.5]);
            let b1 = r.pick(&[0.9, 0.9, 0.5, 0.8, 0.3]);
            let b2 = r.pick(&[0.999, 0.999, 0.99, 0.9]);
            let eps = r.pick(&[1e-8, 1e-8, 1e-6, 1e-3]);
            let steps = 1 + r.below(25) as usize;
            let p0 = [r.range(-3.0, 3.0) as f32, r.range(-3.0, 3.0) as f32];
            let mut grads = Vec::new();
            let mut lrs = Vec::new();
            for t in 0..steps {
                let mut g = || (if r.below(2) == 0 { -1.0 } else { 1.0 } * 10f64.powf(r.range(-8.0, 3.0))) as f32;
                let ga = if c % 7 == 3 && t % 3 == 1 { None } else { Some(g()) };
                let gb = g();
                grads.push((ga, gb));
                let u = r.range(0.0, 1e-2);
                lrs.push(r.pick(&[5e-5, 1e-3, 0.1, 3.0000000000000004e-05, u]));
            }
            cases.push(json!({
                "kind": kname, "wd": wd.to_bits().to_string(), "b1": f64::to_bits(b1).to_string(), "b2": f64::to_bits(b2).to_string(), "eps": f64::to_bits(eps).to_string(),
                "p0": [p0[0].to_bits(), p0[1].to_bits()],
                "grads": grads.iter().map(|(a, b)| json!([a.map(|x| x.to_bits()), b.to_bits()])).collect::<Vec<_>>(),
                "lrs": lrs.iter().map(|x| x.to_bits().to_string()).collect::<Vec<_>>(),
            }));
            specs.push((*kind, wd, b1, b2, eps, p0, grads, lrs));
        }
    }
    let Some(out) = run_py(venv, OPTIM_SCRIPT, &json!({ "cases": cases })) else { return };
    for (ci, (kind, wd, b1, b2, eps, p0, grads, lrs)) in specs.into_iter().enumerate() {
        let mut opt = AdamW::hf(kind, venv.layout(), 5e-5, (b1, b2), eps, wd, &[true, true]);
        let mut ps = vec![Param::scalar(p0[0]), Param::scalar(p0[1])];
        for (t, ((ga, gb), lr)) in grads.iter().zip(lrs.iter()).enumerate() {
            ps[0].grad = ga.map(|x| vec![x]);
            ps[1].grad = Some(vec![*gb]);
            opt.set_lr(*lr);
            opt.step(&mut ps);
            let want = &out[ci]["traj"][t];
            assert_eq!(
                (ps[0].data[0].to_bits(), ps[1].data[0].to_bits()),
                (want[0].as_u64().unwrap() as u32, want[1].as_u64().unwrap() as u32),
                "{venv:?} {kind:?} case {ci} step {t}: params {:?} vs {} {}",
                (ps[0].data[0], ps[1].data[0]),
                f32_of(&want[0]),
                f32_of(&want[1])
            );
        }
        assert_eq!(enc(&opt.state_dict()), out[ci]["sd"], "{venv:?} {kind:?} case {ci}: state_dict");
    }
}

#[test]
fn adamw_bitwise_hf5() {
    check_optim(Venv::Hf5);
}

#[test]
fn adamw_bitwise_hf4() {
    check_optim(Venv::Hf4);
}

/// `step_tensors` on real tch tensors equals the slice API.
#[test]
fn adamw_on_tch_tensors() {
    let mut a = tch::Tensor::from(0.5f32).set_requires_grad(true);
    let mut b = tch::Tensor::from(-1.0f32).set_requires_grad(true);
    let x = tch::Tensor::from_slice(&[0.3f32, -0.7, 0.9]);
    let y = tch::Tensor::from_slice(&[3.1f32, 1.2, 4.4]);
    let loss = (&x * &a + &b - &y).square().mean(tch::Kind::Float);
    loss.backward();
    let ga = a.grad().double_value(&[]) as f32;
    let gb = b.grad().double_value(&[]) as f32;
    let mut o1 = AdamW::hf(AdamWKind::TorchFused, TorchLayout::v2_13(), 1e-2, (0.9, 0.999), 1e-8, 0.0, &[true, true]);
    let mut o2 = o1.clone();
    let mut ts = vec![a.shallow_clone(), b.shallow_clone()];
    o1.step_tensors(&mut ts);
    let mut ps = vec![Param { shape: vec![], data: vec![0.5], grad: Some(vec![ga]) }, Param { shape: vec![], data: vec![-1.0], grad: Some(vec![gb]) }];
    o2.step(&mut ps);
    assert_eq!(o1, o2);
    a = ts[0].shallow_clone();
    b = ts[1].shallow_clone();
    assert_eq!(a.double_value(&[]) as f32, ps[0].data[0]);
    assert_eq!(b.double_value(&[]) as f32, ps[1].data[0]);
}

const CLIP_SCRIPT: &str = r#"
out = []
for c in INPUT['cases']:
    ps = [torch.nn.Parameter(torch.tensor(0.0)) for _ in c['grads']]
    for p, g in zip(ps, c['grads']): p.grad = torch.tensor(f32(g))
    tot = torch.nn.utils.clip_grad_norm_(ps, f64(c['max_norm']))
    out.append([b32(tot.item()), [b32(p.grad.item()) for p in ps]])
print(json.dumps(out))
"#;

fn check_clip(venv: Venv) {
    let mut r = Rng(0xc11b);
    let mut cases = Vec::new();
    let mut specs = Vec::new();
    for _ in 0..3000 {
        let k = 1 + r.below(3) as usize;
        let grads: Vec<f32> = (0..k)
            .map(|_| match r.below(20) {
                0 => 0.0,
                1 => f32::INFINITY,
                _ => ((if r.below(2) == 0 { -1.0 } else { 1.0 }) * 10f64.powf(r.range(-9.0, 5.0))) as f32,
            })
            .collect();
        let max_norm = r.pick(&[1.0, 0.5, 1e-3, 3.7, f64::INFINITY]);
        cases.push(json!({"grads": grads.iter().map(|x| x.to_bits()).collect::<Vec<_>>(), "max_norm": max_norm.to_bits().to_string()}));
        specs.push((grads, max_norm));
    }
    let Some(out) = run_py(venv, CLIP_SCRIPT, &json!({ "cases": cases })) else { return };
    for (ci, (grads, max_norm)) in specs.into_iter().enumerate() {
        let mut ps: Vec<Param> = grads.iter().map(|g| Param { shape: vec![], data: vec![0.0], grad: Some(vec![*g]) }).collect();
        let tot = clip_grad_norm(&mut ps, max_norm);
        let want = &out[ci];
        assert_eq!(tot.to_bits(), want[0].as_u64().unwrap() as u32, "{venv:?} case {ci} {grads:?} total {tot} vs {}", f32_of(&want[0]));
        for (k, p) in ps.iter().enumerate() {
            assert_eq!(p.grad.as_ref().unwrap()[0].to_bits(), want[1][k].as_u64().unwrap() as u32, "{venv:?} case {ci} {grads:?} max_norm {max_norm}: grad {k}");
        }
    }
}

#[test]
fn clip_grad_norm_bitwise_hf5() {
    check_clip(Venv::Hf5);
}

#[test]
fn clip_grad_norm_bitwise_hf4() {
    check_clip(Venv::Hf4);
}

// ------------------------------------------------------------------------------------ lr

const LR_SCRIPT: &str = r#"
import transformers
from transformers import TrainingArguments
from transformers.optimization import get_scheduler
v4 = transformers.__version__.startswith('4.')
out = {'cases': [], 'warmup': []}
for c in INPUT['cases']:
    if v4 and c.get('num_cycles') is not None:
        out['cases'].append(None); continue
    p = torch.nn.Parameter(torch.tensor(0.0))
    base = f64(c['base_lr'])
    o = torch.optim.AdamW([{'params': [p], 'weight_decay': 0.0}, {'params': [], 'weight_decay': 0.0}], lr=base)
    w = c['warmup']
    w = float(w) if isinstance(w, float) else int(w)
    kw = {}
    if c.get('num_cycles') is not None: kw['scheduler_specific_kwargs'] = {'num_cycles': f64(c['num_cycles'])}
    s = get_scheduler(c['name'], o, num_warmup_steps=w, num_training_steps=c['n'], **kw)
    lrs = [b64(o.param_groups[0]['lr'])]
    for k in range(c['n'] + 2):
        o.step(); s.step()
        lrs.append(b64(o.param_groups[0]['lr']))
    out['cases'].append({'lrs': lrs, 'sd': enc(s.state_dict()), 'last': b64(s.get_last_lr()[0])})
for c in INPUT['warmups']:
    kw = dict(output_dir='/tmp/unused', report_to='none')
    kw['warmup_steps'] = c['steps']
    if v4 or c['ratio'] != 0: kw['warmup_ratio'] = c['ratio']
    try:
        a = TrainingArguments(**kw)
        out['warmup'].append(['ok', b64(a.get_warmup_steps(c['n']))])
    except Exception as e:
        out['warmup'].append(['err', type(e).__name__, str(e)])
print(json.dumps(out))
"#;

fn check_lr(venv: Venv) {
    let mut r = Rng(0x1f);
    let mut cases = Vec::new();
    let mut specs = Vec::new();
    for _ in 0..400 {
        let n = 1 + r.below(40) as i64;
        let (name, kind, nc) = match r.below(5) {
            0 => ("linear", ScheduleKind::Linear, None),
            1 => ("cosine", ScheduleKind::Cosine { num_cycles: 0.5 }, None),
            2 => {
                let nc = r.pick(&[1.3, 0.25, 2.0]);
                ("cosine", ScheduleKind::Cosine { num_cycles: nc }, Some(nc))
            }
            3 => ("constant", ScheduleKind::Constant, None),
            _ => ("constant_with_warmup", ScheduleKind::ConstantWithWarmup, None),
        };
        // warmup: an int, or (4.31 passes it through) a float
        let (wjson, w) = match r.below(4) {
            0 => (json!(0), 0.0),
            1 | 2 => {
                let k = r.below(n as u64 + 3) as i64;
                (json!(k), k as f64)
            }
            _ => {
                let f = r.pick(&[0.25, 2.5, 0.5]);
                (json!(f), f)
            }
        };
        let base: f64 = r.pick(&[5e-5, 1e-3, 0.1, 3e-4, 7.7e-6]);
        cases.push(json!({"name": name, "n": n, "warmup": wjson, "base_lr": base.to_bits().to_string(), "num_cycles": nc.map(|x: f64| x.to_bits().to_string())}));
        specs.push((Schedule { kind, warmup: w, num_training_steps: n }, base));
    }
    let mut warmups = Vec::new();
    for (steps, ratio, n) in [(0.0, 0.0, 8), (3.0, 0.0, 8), (0.25, 0.0, 8), (2.5, 0.0, 8), (0.0, 0.25, 8), (0.0, 0.3, 7), (0.1, 0.0, 33), (1.0, 0.0, 5)] {
        warmups.push(json!({"steps": steps, "ratio": ratio, "n": n}));
    }
    let Some(out) = run_py(venv, LR_SCRIPT, &json!({"cases": cases, "warmups": warmups})) else { return };
    for (ci, (sched, base)) in specs.iter().enumerate() {
        let o = &out["cases"][ci];
        if o.is_null() {
            continue;
        }
        for (k, want) in o["lrs"].as_array().unwrap().iter().enumerate() {
            let got = sched.lr_after_steps(*base, k as i64);
            assert_eq!(got.to_bits(), f64_of(want).to_bits(), "{venv:?} case {ci} {sched:?} base {base} after {k} steps: {got} vs {}", f64_of(want));
        }
        let last = sched.num_training_steps + 2;
        let st = LambdaLrState::new(sched, *base, 2, last);
        assert_eq!(enc(&st.to_py(venv.layout())), o["sd"], "{venv:?} case {ci} {sched:?}: state_dict");
        assert_eq!(f64_of(&o["last"]).to_bits(), sched.lr_after_steps(*base, last).to_bits());
    }
    for (k, w) in warmups.iter().enumerate() {
        let (steps, ratio, n) = (w["steps"].as_f64().unwrap(), w["ratio"].as_f64().unwrap(), w["n"].as_i64().unwrap());
        let o = &out["warmup"][k];
        if o[0] == "err" {
            // 5.24 has no warmup_ratio; only its tests pass a ratio
            assert!(venv == Venv::Hf5 && ratio != 0.0, "{venv:?} warmup {w}: {o}");
            continue;
        }
        let got = match venv {
            Venv::Hf5 => warmup_steps_v5(steps, n) as f64,
            Venv::Hf4 => warmup_steps_v4(steps, ratio, n),
        };
        assert_eq!(got, f64_of(&o[1]), "{venv:?} warmup {w}");
    }
}

#[test]
fn lr_schedules_bitwise_hf5() {
    check_lr(Venv::Hf5);
}

#[test]
fn lr_schedules_bitwise_hf4() {
    check_lr(Venv::Hf4);
}

// ------------------------------------------------------------------------------- plateau

const PLATEAU_SCRIPT: &str = r#"
from torch.optim.lr_scheduler import ReduceLROnPlateau
out = []
def py(v):
    if isinstance(v, list): return [py(x) for x in v]
    if isinstance(v, dict) and '__f' in v: return f64(v['__f'])
    return v
for c in INPUT['cases']:
    p = torch.nn.Parameter(torch.tensor(0.0))
    base = f64(c['base_lr'])
    o = torch.optim.AdamW([{'params': [p], 'weight_decay': 0.0}, {'params': [], 'weight_decay': 0.0}], lr=base)
    kw = {k: py(v) for k, v in c['kwargs'].items()}
    try:
        s = ReduceLROnPlateau(o, **kw)
    except Exception as e:
        out.append({'err': [type(e).__name__, str(e)]}); continue
    traj = []
    for m in c['metrics']:
        s.step(f64(m))
        traj.append([enc(g['lr']) for g in o.param_groups])
    out.append({'traj': traj, 'sd': enc(s.state_dict()), 'sd0': None})
print(json.dumps(out))
"#;

/// A kwargs value: floats travel as {"__f": bits} so that Python gets exactly this float.
fn kw_float(x: f64) -> Value {
    json!({"__f": x.to_bits().to_string()})
}

/// The same kwargs as plain JSON for [`Plateau::from_kwargs`].
fn kw_plain(v: &Value) -> Value {
    match v {
        Value::Object(m) if m.contains_key("__f") => json!(f64_of(&m["__f"])),
        Value::Object(m) => Value::Object(m.iter().map(|(k, v)| (k.clone(), kw_plain(v))).collect()),
        Value::Array(a) => Value::Array(a.iter().map(kw_plain).collect()),
        other => other.clone(),
    }
}

fn check_plateau(venv: Venv) {
    let mut r = Rng(0x91a7);
    let mut cases = Vec::new();
    for ci in 0..400 {
        let mut kw = serde_json::Map::new();
        if r.below(2) == 0 {
            kw.insert("mode".into(), json!(r.pick(&["min", "max"])));
        }
        if r.below(2) == 0 {
            kw.insert("factor".into(), kw_float(r.pick(&[0.1, 0.5, 0.9, 0.0, 0.33])));
        }
        if r.below(2) == 0 {
            kw.insert("patience".into(), json!(r.below(4)));
        }
        if r.below(2) == 0 {
            kw.insert("threshold".into(), if r.below(5) == 0 { json!(0) } else { kw_float(r.pick(&[1e-4, 0.1, 0.01, 0.5])) });
        }
        if r.below(2) == 0 {
            kw.insert("threshold_mode".into(), json!(r.pick(&["rel", "abs"])));
        }
        if r.below(2) == 0 {
            kw.insert("cooldown".into(), if r.below(6) == 0 { kw_float(1.0) } else { json!(r.below(3)) });
        }
        match r.below(5) {
            0 => {
                kw.insert("min_lr".into(), kw_float(r.pick(&[1e-6, 1e-4, 2e-5])));
            }
            1 => {
                kw.insert("min_lr".into(), json!([kw_float(1e-6), 0]));
            }
            _ => {}
        }
        if r.below(4) == 0 {
            kw.insert("eps".into(), kw_float(r.pick(&[1e-8, 1e-5, 0.0])));
        }
        // some invalid ones
        match ci % 40 {
            5 => {
                kw.insert("factor".into(), kw_float(1.0));
            }
            6 => {
                kw.insert("mode".into(), json!("mean"));
            }
            7 => {
                kw.insert("threshold_mode".into(), json!("pct"));
            }
            8 => {
                kw.insert("bogus".into(), json!(1));
            }
            9 => {
                kw.insert("min_lr".into(), json!([kw_float(1e-6)]));
            }
            10 => {
                kw.insert("mode".into(), json!(3));
            }
            11 => {
                kw.insert("factor".into(), json!("a"));
            }
            12 => {
                kw.insert("verbose".into(), json!(false));
            }
            _ => {}
        }
        let len = 1 + r.below(40) as usize;
        let style = r.below(3);
        let mut cur = r.range(-1.0, 2.0);
        let metrics: Vec<f64> = (0..len)
            .map(|_| match style {
                0 => 0.5,
                1 => {
                    cur += r.range(-0.1, 0.1);
                    cur
                }
                _ => match r.below(12) {
                    0 => f64::NAN,
                    1 => f64::INFINITY,
                    _ => r.pick(&[0.5, 0.49, 0.51, 0.4999, 1.0, -3.0]),
                },
            })
            .collect();
        let base: f64 = r.pick(&[5e-5, 1e-3, 0.1]);
        cases.push(json!({"kwargs": Value::Object(kw), "metrics": metrics.iter().map(|m| m.to_bits().to_string()).collect::<Vec<_>>(), "base_lr": base.to_bits().to_string()}));
    }
    let Some(out) = run_py(venv, PLATEAU_SCRIPT, &json!({ "cases": cases })) else { return };
    let mut errors = 0;
    for (ci, c) in cases.iter().enumerate() {
        let o = &out[ci];
        let base = f64_of(&c["base_lr"]);
        let res = Plateau::from_kwargs(&kw_plain(&c["kwargs"]), &[base, base], venv.layout());
        if let Some(e) = o.get("err") {
            let err = res.expect_err(&format!("{venv:?} case {ci}: python raised {e}"));
            assert_eq!(json!([err.type_name, err.message]), *e, "{venv:?} case {ci}");
            errors += 1;
            continue;
        }
        let mut p = res.unwrap_or_else(|e| panic!("{venv:?} case {ci}: {e} but python accepted {}", c["kwargs"]));
        for (k, m) in c["metrics"].as_array().unwrap().iter().enumerate() {
            p.step(f64_of(m));
            let got: Vec<Value> = p.lrs.iter().map(|x| enc(&x.to_py())).collect();
            assert_eq!(json!(got), o["traj"][k], "{venv:?} case {ci} step {k} kwargs {}", c["kwargs"]);
        }
        assert_eq!(enc(&p.state_dict(venv.layout())), o["sd"], "{venv:?} case {ci}: state_dict");
    }
    assert!(errors >= 40, "too few error cases exercised: {errors}");
}

#[test]
fn plateau_matches_torch_hf5() {
    check_plateau(Venv::Hf5);
}

#[test]
fn plateau_matches_torch_hf4() {
    check_plateau(Venv::Hf4);
}

/// torch 2.1.2's state dict before the first step has no `_last_lr`; 2.13's has it.
#[test]
fn plateau_initial_state_dict_keys() {
    let p = Plateau::from_kwargs(&json!({}), &[5e-5, 5e-5], TorchLayout::v2_1()).unwrap();
    assert_eq!(
        p.state_dict(TorchLayout::v2_1()).str_keys(),
        ["factor", "min_lrs", "patience", "verbose", "cooldown", "cooldown_counter", "mode", "threshold", "threshold_mode", "best", "num_bad_epochs", "mode_worse", "eps", "last_epoch"]
    );
    let p = Plateau::from_kwargs(&json!({}), &[5e-5, 5e-5], TorchLayout::v2_13()).unwrap();
    assert_eq!(
        p.state_dict(TorchLayout::v2_13()).str_keys(),
        ["factor", "default_min_lr", "min_lrs", "patience", "cooldown", "eps", "last_epoch", "_last_lr", "mode_worse", "mode", "threshold", "threshold_mode", "best", "cooldown_counter", "num_bad_epochs"]
    );
}
