//! `ckptspec::numerics::greedy::Greedy` against transformers 5.24.0's `GreedyLR`, built the way HF builds
//! it (`get_scheduler("greedy", opt, scheduler_specific_kwargs=kwargs)` on an AdamW with two
//! param groups at the same lr): random kwargs (some invalid) and metric sequences, all in ONE
//! Python process; the lrs after every step, the final state dict (floats bitwise, Python types
//! kept) and the error type/text are compared exactly.

use ckptspec::numerics::greedy::Greedy;
use ckptspec::numerics::optim::PyValue;
use serde_json::{json, Value};
use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

const SCRIPT: &str = r#"
import sys, json, struct, os, warnings
warnings.filterwarnings("ignore")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
import io, contextlib
import torch
torch.set_num_threads(1)
from transformers.optimization import get_scheduler
def b64(x): return str(struct.unpack('<Q', struct.pack('<d', float(x)))[0])
def f64(b): return struct.unpack('<d', struct.pack('<Q', int(b)))[0]
def enc(v):
    if v is None: return ['None']
    if isinstance(v, bool): return ['bool', v]
    if isinstance(v, int): return ['int', str(v)]
    if isinstance(v, float): return ['float', b64(v)]
    if isinstance(v, str): return ['str', v]
    if isinstance(v, tuple): return ['tuple', [enc(x) for x in v]]
    if isinstance(v, list): return ['list', [enc(x) for x in v]]
    if isinstance(v, dict): return ['dict', [[enc(k), enc(x)] for k, x in v.items()]]
    raise TypeError(type(v))
def py(v):
    if isinstance(v, list): return [py(x) for x in v]
    if isinstance(v, dict) and '__f' in v: return f64(v['__f'])
    if isinstance(v, dict): return {k: py(x) for k, x in v.items()}
    return v
INPUT = json.load(sys.stdin)
out = []
for c in INPUT:
    p = torch.nn.Parameter(torch.tensor(0.0))
    base = f64(c['base_lr'])
    o = torch.optim.AdamW([{'params': [p], 'weight_decay': 0.0}, {'params': [], 'weight_decay': 0.0}], lr=base)
    kw = py(c['kwargs'])
    try:
        s = get_scheduler('greedy', o, scheduler_specific_kwargs=kw)
    except Exception as e:
        out.append({'err': [type(e).__name__, str(e)]}); continue
    traj = []
    step_err = None
    for m in c['metrics']:
        try:
            with contextlib.redirect_stdout(io.StringIO()):
                s.step(f64(m))
        except Exception as e:
            step_err = [len(traj), type(e).__name__, str(e)]
            break
        traj.append([enc(g['lr']) for g in o.param_groups])
    out.append({'traj': traj, 'step_err': step_err, 'last_lr': enc(s.get_last_lr()), 'sd': enc(s.state_dict())})
print(json.dumps(out))
"#;

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
        other => panic!("not in a state dict: {other:?}"),
    }
}

fn f64_of(v: &Value) -> f64 {
    f64::from_bits(v.as_str().map(|s| s.parse().unwrap()).unwrap_or_else(|| v.as_u64().unwrap()))
}

fn bits(x: f64) -> Value {
    json!(x.to_bits().to_string())
}

/// A kwargs float: {"__f": bits} so that Python gets exactly this float.
fn kf(x: f64) -> Value {
    json!({"__f": x.to_bits().to_string()})
}

/// The kwargs as plain JSON for [`Greedy::from_kwargs`].
fn plain(v: &Value) -> Value {
    match v {
        Value::Object(m) if m.contains_key("__f") => json!(f64_of(&m["__f"])),
        Value::Object(m) => Value::Object(m.iter().map(|(k, v)| (k.clone(), plain(v))).collect()),
        Value::Array(a) => Value::Array(a.iter().map(plain).collect()),
        other => other.clone(),
    }
}

/// splitmix64.
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
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn pick<T: Clone>(&mut self, xs: &[T]) -> T {
        xs[self.below(xs.len() as u64) as usize].clone()
    }
    fn coin(&mut self) -> bool {
        self.below(2) == 0
    }
}

fn gen_case(r: &mut Rng, ci: usize) -> Value {
    let mut kw = serde_json::Map::new();
    if r.coin() {
        kw.insert("mode".into(), json!(r.pick(&["min", "max"])));
    }
    if r.coin() {
        kw.insert("factor".into(), match r.below(8) {
            0 => json!(0),
            1 => kf(-0.5),
            2 => kf(0.0),
            _ => kf(r.pick(&[0.5, 0.9, 0.95, 0.1, 0.33, 0.999])),
        });
    }
    if r.below(4) != 0 {
        kw.insert("patience".into(), if r.below(8) == 0 { kf(1.5) } else { json!(r.below(4)) });
    }
    if r.coin() {
        kw.insert("threshold".into(), if r.below(5) == 0 { json!(0) } else { kf(r.pick(&[1e-6, 0.1, 0.01, 0.5, 1.0])) });
    }
    if r.coin() {
        kw.insert("threshold_mode".into(), json!(r.pick(&["rel", "abs"])));
    }
    if r.coin() {
        kw.insert("cooldown".into(), if r.below(5) == 0 { kf(1.0) } else { json!(r.below(3)) });
    }
    if r.coin() {
        kw.insert("warmup".into(), if r.below(5) == 0 { kf(2.0) } else { json!(r.below(3)) });
    }
    match r.below(6) {
        0 => {
            kw.insert("min_lr".into(), kf(r.pick(&[1e-6, 1e-4, 2e-5, 0.0])));
        }
        1 => {
            kw.insert("min_lr".into(), json!([kf(1e-5), 0]));
        }
        2 => {
            kw.insert("min_lr".into(), json!(0));
        }
        _ => {}
    }
    match r.below(6) {
        0 => {
            kw.insert("max_lr".into(), kf(r.pick(&[1e-2, 2e-3, 0.5])));
        }
        1 => {
            kw.insert("max_lr".into(), json!([kf(3e-3), 1]));
        }
        2 => {
            kw.insert("max_lr".into(), json!(1));
        }
        _ => {}
    }
    if r.below(4) == 0 {
        kw.insert("eps".into(), if r.below(4) == 0 { json!(0) } else { kf(r.pick(&[1e-8, 1e-4, 0.0])) });
    }
    if r.below(3) == 0 {
        kw.insert("smooth".into(), if r.below(6) == 0 { json!(1) } else { json!(r.coin()) });
        if r.coin() {
            kw.insert("window_size".into(), match r.below(8) {
                0 => json!(0),
                1 => kf(2.5),
                _ => json!(1 + r.below(5)),
            });
        }
    }
    if r.below(3) == 0 {
        kw.insert("reset_start".into(), match r.below(6) {
            0 => kf(2.0),
            1 => json!(0),
            _ => json!(1 + r.below(4)),
        });
    }
    if r.below(6) == 0 {
        kw.insert("verbose".into(), json!(r.coin()));
    }
    // invalid ones
    match ci % 30 {
        3 => {
            kw.insert("factor".into(), kf(r.pick(&[1.0, 1.5])));
        }
        4 => {
            kw.insert("mode".into(), json!(r.pick(&[json!("mean"), json!(3), json!(null)])));
        }
        5 => {
            kw.insert("threshold_mode".into(), json!(r.pick(&[json!("pct"), kf(2.0)])));
        }
        6 => {
            kw.insert(r.pick(&["bogus", "lr", "num_warmup_steps"]).into(), json!(1));
        }
        7 => {
            kw.insert("min_lr".into(), json!([kf(1e-6)]));
        }
        8 => {
            kw.insert("max_lr".into(), json!([1, 2, 3]));
        }
        9 => {
            kw.insert("factor".into(), r.pick(&[json!("0.5"), json!(null)]));
        }
        10 => {
            kw.insert("optimizer".into(), json!(1));
        }
        _ => {}
    }
    let base = r.pick(&[5e-5, 1e-3, 1e-4, 2e-5, 1e-6]);
    let n = 1 + r.below(60) as usize;
    let mut metrics = Vec::with_capacity(n);
    let mut level = r.unit() * 4.0;
    let style = r.below(4);
    for _ in 0..n {
        let m = match r.below(40) {
            0 => f64::NAN,
            1 => f64::INFINITY,
            2 => f64::NEG_INFINITY,
            _ => match style {
                0 => {
                    level -= r.unit() * 0.1;
                    level
                }
                1 => {
                    level += r.unit() * 0.1;
                    level
                }
                2 => r.pick(&[0.5, 0.5, 0.25, 1.0]),
                _ => r.unit() * 3.0 - 1.0,
            },
        };
        metrics.push(bits(m));
    }
    let kwargs = if ci % 97 == 11 { json!([1]) } else if ci % 97 == 12 { json!(null) } else { Value::Object(kw) };
    json!({"base_lr": bits(base), "kwargs": kwargs, "metrics": metrics})
}

#[test]
fn greedy_matches_transformers() {
    let python = PathBuf::from(ROOT).join(".venv/bin/python");
    assert!(python.exists(), "{} is missing: run ./dev setup", python.display());
    let mut r = Rng(0x6eed_d1);
    let cases: Vec<Value> = (0..600).map(|ci| gen_case(&mut r, ci)).collect();
    // Python's kwargs: the JSON object (floats as {"__f"}); a non-object is passed as is.
    let mut child = Command::new(python)
        .arg("-c")
        .arg(SCRIPT)
        .current_dir(ROOT)
        .env("CUDA_VISIBLE_DEVICES", "")
        .env("PYTHONHASHSEED", "0")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn python");
    child.stdin.take().unwrap().write_all(Value::Array(cases.clone()).to_string().as_bytes()).unwrap();
    let res = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&res.stdout);
    assert!(res.status.success(), "python failed:\n{stdout}\n{}", String::from_utf8_lossy(&res.stderr));
    let last = stdout.lines().last().unwrap_or("");
    let out: Vec<Value> = serde_json::from_str(last).unwrap_or_else(|e| panic!("bad JSON from python ({e}): {last:.500}"));
    assert_eq!(out.len(), cases.len());

    let (mut errors, mut step_errors, mut smoothed, mut resets, mut rises, mut int_lrs) = (0, 0, 0, 0, 0, 0);
    for (ci, c) in cases.iter().enumerate() {
        let o = &out[ci];
        let base = f64_of(&c["base_lr"]);
        let kw = plain(&c["kwargs"]);
        let made = Greedy::from_kwargs(&kw, &[base, base]);
        if let Some(e) = o.get("err") {
            let err = made.expect_err(&format!("case {ci}: python raised {e} for {kw}"));
            assert_eq!(json!([err.type_name, err.message]), *e, "case {ci} kwargs {kw}");
            errors += 1;
            continue;
        }
        let mut g = made.unwrap_or_else(|e| panic!("case {ci}: {e} but python accepted {kw}"));
        if g.streaming_avg.is_some() {
            smoothed += 1;
        }
        let traj = o["traj"].as_array().unwrap();
        let mut prev = g.lrs_f64();
        let mut saw_reset = false;
        for (k, m) in c["metrics"].as_array().unwrap().iter().enumerate() {
            let before = g.reset_start;
            match g.try_step(f64_of(m)) {
                Ok(()) => {
                    let got: Vec<Value> = g.lrs.iter().map(|x| enc(&x.to_py())).collect();
                    assert_eq!(json!(got), traj[k], "case {ci} step {k} kwargs {kw}");
                }
                Err(e) => {
                    assert_eq!(json!([k, e.type_name, e.message]), o["step_err"], "case {ci} step {k} kwargs {kw}");
                    step_errors += 1;
                    break;
                }
            }
            let now = g.lrs_f64();
            if now.iter().zip(&prev).any(|(a, b)| a > b) {
                rises += 1;
            }
            if g.reset_start == g.reset_start_original && before != g.reset_start && g.lrs_f64() == vec![base, base] {
                saw_reset = true;
            }
            if g.lrs.iter().any(|x| matches!(x, ckptspec::numerics::plateau::PyNum::Int(_))) {
                int_lrs += 1;
            }
            prev = now;
        }
        if o["step_err"].is_null() {
            assert_eq!(traj.len(), c["metrics"].as_array().unwrap().len(), "case {ci}");
        }
        resets += saw_reset as usize;
        let last_lr = PyValue::List(g.last_lr.iter().map(|x| x.to_py()).collect());
        assert_eq!(enc(&last_lr), o["last_lr"], "case {ci}: get_last_lr");
        assert_eq!(enc(&g.state_dict()), o["sd"], "case {ci}: state_dict kwargs {kw}");
    }
    eprintln!("errors {errors}, step errors {step_errors}, smoothed {smoothed}, resets {resets}, rises {rises}, int lrs {int_lrs}");
    assert!(errors >= 80, "too few error cases: {errors}");
    assert!(step_errors >= 3, "too few step errors: {step_errors}");
    assert!(smoothed >= 50, "too few smoothed cases: {smoothed}");
    assert!(resets >= 3, "too few resets: {resets}");
    assert!(rises >= 50, "too few lr increases: {rises}");
}

#[test]
fn greedy_default_state_dict_keys() {
    let g = Greedy::from_kwargs(&json!({}), &[5e-5, 5e-5]).unwrap();
    assert_eq!(
        g.state_dict().str_keys(),
        [
            "factor", "min_lrs", "max_lrs", "patience", "verbose", "cooldown", "warmup", "cooldown_counter", "warmup_counter", "mode",
            "threshold", "threshold_mode", "best", "num_bad_epochs", "num_good_epochs", "eps", "last_epoch", "smooth", "window_size",
            "reset_start", "reset_start_original", "_last_lr", "_init_lrs"
        ]
    );
    let g = Greedy::from_kwargs(&json!({"smooth": true}), &[5e-5, 5e-5]).unwrap();
    assert_eq!(g.state_dict().str_keys().last().map(|s| s.as_str()), Some("_streaming_avg"));
}
