//! AdamW as the HF Trainer runs it on CPU, gradient clipping, and the optimizer state dict.
//!
//! Which optimizer HF builds by default:
//!
//! * transformers 5.24.0 (torch 2.13.0): `optim` defaults to `"adamw_torch_fused"` (torch >= 2.8),
//!   i.e. `torch.optim.AdamW(groups, lr, betas, eps, fused=True)`, which on CPU runs the
//!   `_fused_adamw_` CPU kernel ([`AdamWKind::TorchFused`]). `optim="adamw_torch"` gives
//!   `fused=None, foreach=None`, which on CPU resolves to the single-tensor path
//!   ([`AdamWKind::TorchSingleTensor`]; `_default_to_fused_or_foreach` has no CPU foreach).
//! * transformers 4.31.0 (torch 2.1.2): `optim` defaults to `"adamw_hf"`, transformers' own
//!   `transformers.optimization.AdamW` ([`AdamWKind::HfAdamW`]); `"adamw_torch"` is the torch
//!   single-tensor path; `"adamw_torch_fused"` fails on CPU in torch 2.1.2.
//!
//! Parameter groups (both versions): group 0 holds the parameters whose names are "decay"
//! parameters (5.24: not matching `bias|layernorm|rmsnorm|(^|\.)norm($|\.)|_norm($|\.)` and not
//! inside a LayerNorm; 4.31: names without `bias`, not inside a LayerNorm) with
//! `weight_decay = args.weight_decay`; group 1 holds the rest with `weight_decay = 0.0`.
//! For the contract's model `a` and `b` both decay: groups are `[a, b]` and `[]`. The empty group
//! is NOT dropped: it appears in `param_groups` with `"params": []`.
//!
//! Arithmetic: all updates happen in f32 with the same operations, in the same order, as the
//! CPU kernels torch runs for a 0-dim (one element) parameter, including the fused
//! multiply-adds that GCC contracted in torch's AVX2/AVX512 kernel builds (found by testing
//! against the real optimizer, see `tests/numerics.rs`). The square root of `exp_avg_sq` in
//! the non-fused paths is torch's own `Tensor.sqrt` (MKL-VML, NOT correctly rounded: it
//! differs from IEEE sqrt in ~20% of inputs), called through tch on the linked libtorch.
//! Bitwise equality is verified for parameters with one element (the contract's model);
//! multi-element tensors go through torch's vectorized loops, which this module does not model.

use tch::Tensor;

/// State dicts are values of the pickle layer (`torch_format::Value`): what `torch.save` writes.
pub use crate::formats::torch_format::Value as PyValue;

use crate::hf::behaviors::TorchLayout;


/// The update rule (named after the implementation that runs, not the HF version).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AdamWKind {
    /// `torch.optim.AdamW(..., fused=True)` on CPU: the `_fused_adamw_` CPU kernel.
    TorchFused,
    /// `torch.optim.AdamW` with `foreach`/`fused` unset (or False) on CPU: `_single_tensor_adam(w)`.
    TorchSingleTensor,
    /// `transformers.optimization.AdamW` (`optim="adamw_hf"`, the 4.31.0 default).
    HfAdamW,
}

/// One parameter: shape, data (row major) and its gradient (None = `p.grad is None`).
#[derive(Clone, Debug, PartialEq)]
pub struct Param {
    pub shape: Vec<i64>,
    pub data: Vec<f32>,
    pub grad: Option<Vec<f32>>,
}

impl Param {
    /// A 0-dim parameter.
    pub fn scalar(value: f32) -> Param {
        Param { shape: vec![], data: vec![value], grad: None }
    }

    /// Reads a float32 tensor's data and `.grad()` (if defined).
    pub fn from_tensor(t: &Tensor) -> Param {
        let shape = t.size();
        let data = tensor_f32(t);
        let g = t.grad();
        let grad = if g.defined() { Some(tensor_f32(&g)) } else { None };
        Param { shape, data, grad }
    }

    /// Writes `data` back into `t` in place (under no_grad), leaving its grad alone.
    pub fn write_to(&self, t: &mut Tensor) {
        let src = Tensor::from_slice(&self.data).reshape(self.shape.as_slice());
        tch::no_grad(|| {
            t.copy_(&src);
        });
    }
}

fn tensor_f32(t: &Tensor) -> Vec<f32> {
    let flat = t.detach().to_kind(tch::Kind::Float).reshape([-1]);
    Vec::<f32>::try_from(&flat).expect("float tensor")
}

/// torch's CPU `Tensor.sqrt` of one float32 (MKL-VML; not always the correctly rounded root).
pub fn torch_sqrt_f32(x: f32) -> f32 {
    let t = Tensor::from_slice(&[x]).sqrt();
    Vec::<f32>::try_from(&t).expect("float tensor")[0]
}

/// torch's CPU `Tensor.rsqrt` of one float32 (through tch, as [`torch_sqrt_f32`]).
pub fn torch_rsqrt_f32(x: f32) -> f32 {
    let t = Tensor::from_slice(&[x]).rsqrt();
    Vec::<f32>::try_from(&t).expect("float tensor")[0]
}

/// HF's two parameter groups (`create_optimizer`): the decaying parameters with
/// `weight_decay`, then the rest with 0.0, all at `lr` (torch numbers the parameters group by
/// group, so the decaying ones must come first).
pub fn hf_param_groups(lr: f64, weight_decay: f64, decay: &[bool]) -> Vec<ParamGroup> {
    let g0: Vec<usize> = (0..decay.len()).filter(|i| decay[*i]).collect();
    let g1: Vec<usize> = (0..decay.len()).filter(|i| !decay[*i]).collect();
    vec![ParamGroup { params: g0, lr, weight_decay, initial_lr: None }, ParamGroup { params: g1, lr, weight_decay: 0.0, initial_lr: None }]
}

/// A loaded float32 tensor's shape and values (a state entry of optimizer.pt).
pub fn loaded_f32(t: &PyValue, what: &str) -> Result<(Vec<i64>, Vec<f32>), String> {
    let t = t.as_tensor().ok_or(format!("{what} is not a tensor"))?;
    let b = t.contiguous_bytes().map_err(|e| e.to_string())?;
    Ok((t.shape.clone(), b.chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect()))
}

/// A group's `params` list as torch writes it.
pub fn params_list(g: &ParamGroup) -> PyValue {
    PyValue::List(g.params.iter().map(|i| PyValue::Int(*i as i64)).collect())
}

/// torch's `load_state_dict` for the keys every optimizer here shares: each group's `lr` and
/// `weight_decay` (every saved hyperparameter replaces the group's) and `initial_lr` where the
/// saved group has one. Returns the saved groups for the optimizer's own keys.
pub fn load_groups<'v>(groups: &mut [ParamGroup], v: &'v PyValue) -> Result<&'v [PyValue], String> {
    let saved = v.get("param_groups").and_then(|g| g.as_seq()).ok_or("no param_groups list")?;
    if saved.len() != groups.len() {
        return Err(format!("{} param groups, expected {}", saved.len(), groups.len()));
    }
    for (g, s) in groups.iter_mut().zip(saved) {
        g.lr = s.get("lr").and_then(|x| x.as_f64()).ok_or("param group without lr")?;
        if let Some(wd) = s.get("weight_decay").and_then(|x| x.as_f64()) {
            g.weight_decay = wd;
        }
        if let Some(il) = s.get("initial_lr").and_then(|x| x.as_f64()) {
            g.initial_lr = Some(il);
        }
    }
    Ok(saved)
}

/// The loaded `state` entries: (parameter index, entry), the index checked against `n`.
pub fn loaded_states(v: &PyValue, n: usize) -> Result<Vec<(usize, &PyValue)>, String> {
    let state = v.get("state").and_then(|s| s.as_dict()).ok_or("no state dict")?;
    state
        .iter()
        .map(|(k, e)| {
            let i = k.as_i64().ok_or("state key is not an int")? as usize;
            if i >= n {
                return Err(format!("state for parameter {i} of {n}"));
            }
            Ok((i, e))
        })
        .collect()
}

/// A loaded `step`: a Python int or a 0-dim float32 tensor, as f64.
pub fn loaded_step(entry: &PyValue) -> Result<f64, String> {
    let step = entry.get("step").ok_or("no step")?;
    match step.as_i64() {
        Some(n) if step.as_tensor().is_none() => Ok(n as f64),
        _ => Ok(*loaded_f32(step, "step")?.1.first().ok_or("empty step tensor")? as f64),
    }
}

/// Python's `x ** y` for floats (C `pow`), kept away from constant folding / pow->sqrt rewrites.
pub(crate) fn py_pow(x: f64, y: f64) -> f64 {
    std::hint::black_box(x).powf(std::hint::black_box(y))
}

/// A parameter group as HF builds it.
#[derive(Clone, Debug, PartialEq)]
pub struct ParamGroup {
    /// Indices into the parameter list (torch numbers parameters across groups in order).
    pub params: Vec<usize>,
    pub lr: f64,
    pub weight_decay: f64,
    /// Set by the LR scheduler (`initial_lr` = the lr at scheduler creation); `None` if no
    /// scheduler was built.
    pub initial_lr: Option<f64>,
}

/// Per-parameter optimizer state.
#[derive(Clone, Debug, PartialEq)]
pub struct ParamState {
    /// The parameter's shape (`exp_avg`/`exp_avg_sq` have it too).
    pub shape: Vec<i64>,
    /// torch's AdamW: the value of the 0-dim float32 `step` tensor (incremented in f32).
    pub step_f32: f32,
    /// Number of steps taken: what HF's AdamW stores as a Python int `step`.
    pub step_int: i64,
    pub exp_avg: Vec<f32>,
    pub exp_avg_sq: Vec<f32>,
}

impl ParamState {
    /// The state torch creates at a parameter's first step: zero moments of its shape.
    fn first(p: &Param) -> ParamState {
        ParamState { shape: p.shape.clone(), step_f32: 0.0, step_int: 0, exp_avg: vec![0.0; p.data.len()], exp_avg_sq: vec![0.0; p.data.len()] }
    }
}

/// AdamW with HF's parameter groups.
#[derive(Clone, Debug, PartialEq)]
pub struct AdamW {
    pub kind: AdamWKind,
    /// The torch whose kernels/layout to follow (affects [`AdamWKind::TorchSingleTensor`]
    /// arithmetic slightly and the state-dict keys).
    pub layout: TorchLayout,
    pub betas: (f64, f64),
    pub eps: f64,
    pub groups: Vec<ParamGroup>,
    /// Indexed like the parameters; `None` until a parameter's first step with a grad.
    pub state: Vec<Option<ParamState>>,
}

/// Which of the named parameters HF puts in the weight-decay group (`true`) for the given
/// Trainer (both versions give the same answer unless a name contains `bias`, a norm pattern
/// (5.24 only) or the parameter sits in a LayerNorm; the contract's `a`, `b` both decay).
pub fn hf_decay_mask(names: &[&str], norm_patterns: bool) -> Vec<bool> {
    names
        .iter()
        .map(|n| {
            if n.contains("bias") {
                return false;
            }
            if norm_patterns {
                if n.contains("layernorm") || n.contains("rmsnorm") {
                    return false;
                }
                let parts: Vec<&str> = n.split('.').collect();
                if parts.iter().any(|p| *p == "norm") {
                    return false;
                }
                // `_norm(?:$|\.)`: a component ending in `_norm`.
                if parts.iter().any(|p| p.ends_with("_norm")) {
                    return false;
                }
            }
            true
        })
        .collect()
}

/// The checks of the optimizer's constructor, in its order, as `ValueError` messages. HF passes
/// `lr`, `betas` and `eps` to the constructor and `weight_decay` only inside its parameter
/// groups, so a negative weight_decay is never checked (the constructor checks its own default).
/// torch's AdamW (every torch line here) and transformers' AdamW word them differently.
pub fn constructor_error(kind: AdamWKind, lr: f64, betas: (f64, f64), eps: f64) -> Option<String> {
    use crate::formats::pyjson::float_repr as r;
    let beta_ok = |b: f64| (0.0..1.0).contains(&b);
    match kind {
        AdamWKind::HfAdamW => {
            if lr < 0.0 {
                Some(format!("Invalid learning rate: {} - should be >= 0.0", r(lr)))
            } else if !beta_ok(betas.0) {
                Some(format!("Invalid beta parameter: {} - should be in [0.0, 1.0)", r(betas.0)))
            } else if !beta_ok(betas.1) {
                Some(format!("Invalid beta parameter: {} - should be in [0.0, 1.0)", r(betas.1)))
            } else if !(eps >= 0.0) {
                Some(format!("Invalid epsilon value: {} - should be >= 0.0", r(eps)))
            } else {
                None
            }
        }
        AdamWKind::TorchFused | AdamWKind::TorchSingleTensor => {
            if !(lr >= 0.0) {
                Some(format!("Invalid learning rate: {}", r(lr)))
            } else if !(eps >= 0.0) {
                Some(format!("Invalid epsilon value: {}", r(eps)))
            } else if !beta_ok(betas.0) {
                Some(format!("Invalid beta parameter at index 0: {}", r(betas.0)))
            } else if !beta_ok(betas.1) {
                Some(format!("Invalid beta parameter at index 1: {}", r(betas.1)))
            } else {
                None
            }
        }
    }
}

impl AdamW {
    /// HF's two groups for parameters `0..n` with `decay[i]` from [`hf_decay_mask`]:
    /// `[{params: decaying, weight_decay}, {params: the rest, weight_decay: 0.0}]`, all at `lr`.
    pub fn hf(kind: AdamWKind, layout: TorchLayout, lr: f64, betas: (f64, f64), eps: f64, weight_decay: f64, decay: &[bool]) -> AdamW {
        let g0: Vec<usize> = (0..decay.len()).filter(|i| decay[*i]).collect();
        let g1: Vec<usize> = (0..decay.len()).filter(|i| !decay[*i]).collect();
        // torch numbers parameters group by group, in order.
        let mut order = g0.clone();
        order.extend(g1.iter().copied());
        assert!(order.iter().enumerate().all(|(k, i)| k == *i), "parameters must be ordered decay-first");
        AdamW {
            kind,
            layout,
            betas,
            eps,
            groups: vec![
                ParamGroup { params: g0, lr, weight_decay, initial_lr: None },
                ParamGroup { params: g1, lr, weight_decay: 0.0, initial_lr: None },
            ],
            state: vec![None; decay.len()],
        }
    }

    /// Sets every group's `lr` (what a LambdaLR step does).
    pub fn set_lr(&mut self, lr: f64) {
        for g in self.groups.iter_mut() {
            g.lr = lr;
        }
    }

    /// `optimizer.step()`: updates `params` in place (parameters without grad are skipped and
    /// get no state, as in torch).
    pub fn step(&mut self, params: &mut [Param]) {
        let (b1, b2) = self.betas;
        let eps = self.eps;
        for gi in 0..self.groups.len() {
            let (lr, wd) = (self.groups[gi].lr, self.groups[gi].weight_decay);
            for &pi in &self.groups[gi].params.clone() {
                let p = &mut params[pi];
                let Some(grad) = p.grad.clone() else { continue };
                let st = self.state[pi].get_or_insert_with(|| ParamState::first(p));
                st.step_f32 += 1.0;
                st.step_int += 1;
                for k in 0..p.data.len() {
                    let (np, nm, nv) = match self.kind {
                        AdamWKind::TorchFused => fused_adamw_elem(p.data[k], st.exp_avg[k], st.exp_avg_sq[k], grad[k], st.step_f32 as f64, lr, b1, b2, wd, eps),
                        AdamWKind::TorchSingleTensor => single_tensor_adamw_elem(self.layout, p.data[k], st.exp_avg[k], st.exp_avg_sq[k], grad[k], st.step_f32 as f64, lr, b1, b2, wd, eps),
                        AdamWKind::HfAdamW => hf_adamw_elem(p.data[k], st.exp_avg[k], st.exp_avg_sq[k], grad[k], st.step_int, lr, b1, b2, wd, eps),
                    };
                    p.data[k] = np;
                    st.exp_avg[k] = nm;
                    st.exp_avg_sq[k] = nv;
                }
            }
        }
    }

    /// The state [`step`](Self::step) leaves, without its arithmetic (a plan: no gradients):
    /// every parameter of a group gets its state as at its first step (its shape, zero moments)
    /// and one more step counted. So a plan's optimizer.pt holds the state a trained run's does
    /// (the moments' shapes decide whether a resume into another model kind can step), where
    /// every trainable parameter gets a gradient at every step, as in every model of the world.
    pub fn count_step(&mut self, params: &[Param]) {
        for gi in 0..self.groups.len() {
            for &pi in &self.groups[gi].params.clone() {
                let p = &params[pi];
                let st = self.state[pi].get_or_insert_with(|| ParamState::first(p));
                st.step_f32 += 1.0;
                st.step_int += 1;
            }
        }
    }

    /// [`step`](Self::step) on tch tensors (float32, grads in `.grad()`), updated in place.
    pub fn step_tensors(&mut self, tensors: &mut [Tensor]) {
        let mut ps: Vec<Param> = tensors.iter().map(Param::from_tensor).collect();
        self.step(&mut ps);
        for (p, t) in ps.iter().zip(tensors.iter_mut()) {
            p.write_to(t);
        }
    }

    /// `optimizer.state_dict()` as torch (and HF's AdamW) build it:
    ///
    /// ```text
    /// {"state": {<param index: int>: {"step": <see below>, "exp_avg": Tensor, "exp_avg_sq": Tensor}, ...},
    ///  "param_groups": [{<group keys, below>, "params": [int, ...]}, ...]}
    /// ```
    /// `state` has entries only for parameters that took a step, keyed by their index, in the
    /// order of their first step (torch's `self.state` insertion order; this struct emits
    /// ascending index order, which is the same whenever parameter 0 has a grad at the first
    /// step, always the case in HF's Trainer). `step` is a 0-dim float32
    /// tensor for torch's AdamW and a Python int for HF's AdamW. `exp_avg`/`exp_avg_sq` have
    /// the parameter's shape.
    ///
    /// Group keys, in order (`weight_decay` first because HF's group dict is
    /// `{"params", "weight_decay"}` and torch `setdefault`s the defaults after it; the scheduler
    /// adds `initial_lr`; torch moves `params` last):
    /// * torch 2.13 AdamW: `weight_decay, lr, betas, eps, amsgrad (False), maximize (False),
    ///   foreach (None), capturable (False), differentiable (False), fused (True for
    ///   TorchFused, None otherwise), decoupled_weight_decay (True), [initial_lr], params`.
    /// * torch 2.1.2 AdamW: `weight_decay, lr, betas, eps, amsgrad, foreach (None), maximize,
    ///   capturable, differentiable, fused (None), [initial_lr], params`.
    /// * HF AdamW (any torch): `weight_decay, lr, betas, eps, correct_bias (True), [initial_lr],
    ///   params`.
    /// `betas` is a tuple of two floats; `lr`, `eps`, `weight_decay`, `initial_lr` floats.
    /// `initial_lr` exists only when a LambdaLR scheduler was built (HF's `get_scheduler`
    /// schedules); `ReduceLROnPlateau` does not add it.
    /// `TorchFused` with `TorchLayout::v2_1()` is not a real combination (torch 2.1.2 rejects
    /// `fused=True` for CPU tensors).
    pub fn state_dict(&self) -> PyValue {
        let mut state = Vec::new();
        for (i, s) in self.state.iter().enumerate() {
            let Some(s) = s else { continue };
            let shape = s.shape.clone();
            let step = match self.kind {
                AdamWKind::HfAdamW => PyValue::Int(s.step_int),
                _ => PyValue::f32_tensor(vec![], vec![s.step_f32]),
            };
            state.push((
                PyValue::Int(i as i64),
                PyValue::dict(vec![
                    ("step", step),
                    ("exp_avg", PyValue::f32_tensor(shape.clone(), s.exp_avg.clone())),
                    ("exp_avg_sq", PyValue::f32_tensor(shape, s.exp_avg_sq.clone())),
                ]),
            ));
        }
        let groups = self.groups.iter().map(|g| self.group_dict(g)).collect();
        PyValue::dict(vec![("state", PyValue::Dict(state)), ("param_groups", PyValue::List(groups))])
    }

    /// The RuntimeError torch's non-fused AdamW step raises when a loaded state's moments have
    /// a shape the parameter's gradient does not broadcast into (`exp_avg.lerp_(grad, ...)` in
    /// place: a checkpoint of another model kind); the fused CPU kernel works on the flat
    /// storage and raises nothing.
    pub fn step_shape_error(&self, params: &[Param]) -> Option<String> {
        if self.kind == AdamWKind::TorchFused {
            return None;
        }
        for (st, p) in self.state.iter().zip(params) {
            let Some(st) = st else { continue };
            let out = broadcast_shape(&st.shape, &p.shape);
            if out.as_deref() != Some(st.shape.as_slice()) {
                let show = |s: &[i64]| format!("[{}]", s.iter().map(|d| d.to_string()).collect::<Vec<_>>().join(", "));
                return Some(format!("output with shape {} doesn't match the broadcast shape {}", show(&st.shape), show(out.as_deref().unwrap_or(&p.shape))));
            }
        }
        None
    }

    /// `optimizer.load_state_dict(torch.load("optimizer.pt"))`: the per-parameter state and
    /// each group's current lr (the inverse of [`state_dict`](Self::state_dict)).
    pub fn load_state_dict(&mut self, v: &PyValue) -> Result<(), String> {
        let groups = v.get("param_groups").and_then(|g| g.as_seq()).ok_or("no param_groups list")?;
        if groups.len() != self.groups.len() {
            return Err(format!("{} param groups, expected {}", groups.len(), self.groups.len()));
        }
        // torch's `load_state_dict` replaces every hyperparameter of a group with the saved one
        // (only `params` stays): a resume keeps the first run's weight_decay, betas and eps even
        // when the resumed run's arguments name others. HF builds every group with the same
        // betas and eps, so the first group's stand for all.
        for (g, saved) in self.groups.iter_mut().zip(groups) {
            g.lr = saved.get("lr").and_then(|x| x.as_f64()).ok_or("param group without lr")?;
            if let Some(wd) = saved.get("weight_decay").and_then(|x| x.as_f64()) {
                g.weight_decay = wd;
            }
        }
        if let Some(first) = groups.first() {
            if let Some(PyValue::Tuple(b)) = first.get("betas") {
                if let [Some(b1), Some(b2)] = [b.first().and_then(|x| x.as_f64()), b.get(1).and_then(|x| x.as_f64())] {
                    self.betas = (b1, b2);
                }
            }
            if let Some(eps) = first.get("eps").and_then(|x| x.as_f64()) {
                self.eps = eps;
            }
        }
        let state = v.get("state").and_then(|s| s.as_dict()).ok_or("no state dict")?;
        let floats = |t: &PyValue, what: &str| -> Result<(Vec<i64>, Vec<f32>), String> {
            let t = t.as_tensor().ok_or(format!("{what} is not a tensor"))?;
            let b = t.contiguous_bytes().map_err(|e| e.to_string())?;
            let vals = b.chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect();
            Ok((t.shape.clone(), vals))
        };
        for (k, entry) in state {
            let i = k.as_i64().ok_or("state key is not an int")? as usize;
            if i >= self.state.len() {
                return Err(format!("state for parameter {i} of {}", self.state.len()));
            }
            let (shape, exp_avg) = floats(entry.get("exp_avg").ok_or("no exp_avg")?, "exp_avg")?;
            let (_, exp_avg_sq) = floats(entry.get("exp_avg_sq").ok_or("no exp_avg_sq")?, "exp_avg_sq")?;
            let step = entry.get("step").ok_or("no step")?;
            let (step_f32, step_int) = match step.as_i64() {
                Some(n) if step.as_tensor().is_none() => (n as f32, n),
                _ => {
                    let (_, s) = floats(step, "step")?;
                    let f = *s.first().ok_or("empty step tensor")?;
                    (f, f as i64)
                }
            };
            self.state[i] = Some(ParamState { shape, step_f32, step_int, exp_avg, exp_avg_sq });
        }
        Ok(())
    }

    fn group_dict(&self, g: &ParamGroup) -> PyValue {
        let f = PyValue::Float;
        let b = PyValue::Bool;
        let mut e: Vec<(&str, PyValue)> = vec![
            ("weight_decay", f(g.weight_decay)),
            ("lr", f(g.lr)),
            ("betas", PyValue::Tuple(vec![f(self.betas.0), f(self.betas.1)])),
            ("eps", f(self.eps)),
        ];
        if self.kind == AdamWKind::HfAdamW {
            e.push(("correct_bias", b(true)));
        } else {
            // The first four are written above, in every release's order.
            for key in &self.layout.adamw_group_keys[4..] {
                let v = match *key {
                    "foreach" => PyValue::None,
                    "fused" if self.kind == AdamWKind::TorchFused => b(true),
                    "fused" => PyValue::None,
                    "decoupled_weight_decay" => b(true),
                    _ => b(false), // amsgrad, maximize, capturable, differentiable
                };
                e.push((key, v));
            }
        }
        if let Some(il) = g.initial_lr {
            e.push(("initial_lr", f(il)));
        }
        e.push(("params", PyValue::List(g.params.iter().map(|i| PyValue::Int(*i as i64)).collect())));
        PyValue::dict(e)
    }
}

/// One element of torch's CPU `_fused_adamw_` kernel (`adam_math`, ADAMW mode, the scalar tail
/// loop that a one-element tensor takes). `step` is the already incremented step.
/// Returns `(param, exp_avg, exp_avg_sq)`.
#[allow(clippy::too_many_arguments)]
pub fn fused_adamw_elem(p: f32, m: f32, v: f32, g: f32, step: f64, lr: f64, beta1: f64, beta2: f64, weight_decay: f64, eps: f64) -> (f32, f32, f32) {
    let bias_correction1 = 1.0 - beta1.powf(step);
    let bias_correction2 = 1.0 - beta2.powf(step);
    let exp_avg_grad_coefficient = 1.0 - beta1;
    let exp_avg_sq_grad_coefficient = 1.0 - beta2;
    let bias_correction2_sqrt = bias_correction2.sqrt();
    let step_size = lr / bias_correction1;
    let mut p = p;
    if weight_decay != 0.0 {
        p *= (1.0 - lr * weight_decay) as f32;
    }
    let m = lerp_f32(m, g, exp_avg_grad_coefficient as f32);
    // exp_avg_sq * beta2 + coeff * grad * grad, contracted to fma(exp_avg_sq, beta2, coeff*grad*grad)
    let v = v.mul_add(beta2 as f32, (exp_avg_sq_grad_coefficient as f32) * g * g);
    let denom = v.sqrt() / (bias_correction2_sqrt as f32) + eps as f32;
    let p = p - (step_size as f32) * m / denom;
    (p, m, v)
}

/// torch's scalar `lerp(self, end, weight)` as compiled (fma-contracted):
/// small weight: `self + w * (end - self)`; else `end - (end - self) * (1 - w)`.
pub(crate) fn lerp_f32(s: f32, e: f32, w: f32) -> f32 {
    if w.abs() < 0.5 {
        w.mul_add(e - s, s)
    } else {
        (-(e - s)).mul_add(1.0 - w, e)
    }
}

/// One element of torch's `_single_tensor_adam(w)` (decoupled weight decay) on CPU.
#[allow(clippy::too_many_arguments)]
pub fn single_tensor_adamw_elem(layout: TorchLayout, p: f32, m: f32, v: f32, g: f32, step: f64, lr: f64, beta1: f64, beta2: f64, weight_decay: f64, eps: f64) -> (f32, f32, f32) {
    let mut p = p;
    // 2.13: `if weight_decay != 0: param.mul_(1 - lr * weight_decay)`; 2.1.2 always multiplies
    // (by 1.0 when weight_decay == 0, which changes nothing).
    if weight_decay != 0.0 || layout.adamw_always_decays {
        p *= (1.0 - lr * weight_decay) as f32;
    }
    let m = lerp_f32(m, g, (1.0 - beta1) as f32);
    let v = addcmul_f32(v * beta2 as f32, g, g, (1.0 - beta2) as f32);
    let bias_correction1 = 1.0 - py_pow(beta1, step);
    let bias_correction2 = 1.0 - py_pow(beta2, step);
    let step_size = lr / bias_correction1;
    let bias_correction2_sqrt = if layout.adamw_pow_half { py_pow(bias_correction2, 0.5) } else { bias_correction2.sqrt() };
    let denom = torch_sqrt_f32(v) / (bias_correction2_sqrt as f32) + eps as f32;
    let p = addcdiv_f32(p, m, denom, (-step_size) as f32);
    (p, m, v)
}

/// torch's scalar `addcmul`: `self + value * t1 * t2`, contracted to `fma(value*t1, t2, self)`.
pub(crate) fn addcmul_f32(s: f32, t1: f32, t2: f32, value: f32) -> f32 {
    (value * t1).mul_add(t2, s)
}

/// torch's scalar `addcdiv`: `self + value * t1 / t2`.
pub(crate) fn addcdiv_f32(s: f32, t1: f32, t2: f32, value: f32) -> f32 {
    s + value * t1 / t2
}

/// torch's scalar `add(self, other, alpha)`: `self + alpha * other`, contracted to an fma.
pub(crate) fn add_alpha_f32(s: f32, other: f32, alpha: f32) -> f32 {
    alpha.mul_add(other, s)
}

/// One element of `transformers.optimization.AdamW.step` (HF 4.31.0's default optimizer).
/// `step` is the already incremented Python int.
#[allow(clippy::too_many_arguments)]
pub fn hf_adamw_elem(p: f32, m: f32, v: f32, g: f32, step: i64, lr: f64, beta1: f64, beta2: f64, weight_decay: f64, eps: f64) -> (f32, f32, f32) {
    // exp_avg.mul_(beta1).add_(grad, alpha=1.0 - beta1)
    let m = add_alpha_f32(m * beta1 as f32, g, (1.0 - beta1) as f32);
    // exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1.0 - beta2)
    let v = addcmul_f32(v * beta2 as f32, g, g, (1.0 - beta2) as f32);
    // denom = exp_avg_sq.sqrt().add_(eps)
    let denom = torch_sqrt_f32(v) + eps as f32;
    let bias_correction1 = 1.0 - py_pow(beta1, step as f64);
    let bias_correction2 = 1.0 - py_pow(beta2, step as f64);
    let step_size = lr * bias_correction2.sqrt() / bias_correction1;
    let mut p = addcdiv_f32(p, m, denom, (-step_size) as f32);
    if weight_decay > 0.0 {
        // p.add_(p, alpha=-lr * weight_decay)
        p = add_alpha_f32(p, p, (-lr * weight_decay) as f32);
    }
    (p, m, v)
}

/// torch's broadcast of two shapes (None where they do not broadcast).
fn broadcast_shape(a: &[i64], b: &[i64]) -> Option<Vec<i64>> {
    let n = a.len().max(b.len());
    let mut out = vec![0; n];
    for i in 0..n {
        let da = if i < n - a.len() { 1 } else { a[i - (n - a.len())] };
        let db = if i < n - b.len() { 1 } else { b[i - (n - b.len())] };
        out[i] = if da == db || db == 1 { da } else if da == 1 { db } else { return None };
    }
    Some(out)
}

/// torch's `Optimizer.load_state_dict` checks before it reads anything: the number of groups,
/// then each group's number of parameters (its ValueError messages). `ours`: our groups' sizes.
pub fn check_saved_groups(saved: &PyValue, ours: &[usize]) -> Result<(), String> {
    let Some(groups) = saved.get("param_groups").and_then(|g| g.as_seq()) else { return Ok(()) };
    if groups.len() != ours.len() {
        return Err("loaded state dict has a different number of parameter groups".into());
    }
    for (g, n) in groups.iter().zip(ours) {
        if g.get("params").and_then(|p| p.as_seq()).is_some_and(|p| p.len() != *n) {
            return Err("loaded state dict contains a parameter group that doesn't match the size of optimizer's group".into());
        }
    }
    Ok(())
}

/// `torch.nn.utils.clip_grad_norm_(params, max_norm, norm_type=2.0)` on CPU for one-element
/// gradients (torch 2.13 and 2.1.2 agree): per-grad norms via `_foreach_norm` (= |g|), the
/// total as `linalg.vector_norm(stack(norms))` (float accumulation, the last square fused:
/// `sqrt(fma(n_k, n_k, sum_{<k}))`), `clip_coef = reciprocal(total + 1e-6) * max_norm`
/// (Python's `float / Tensor`), clamped to at most 1.0 (NaN stays NaN), and every grad
/// multiplied by it (also when it is 1.0). Returns the pre-clip total norm (what HF 5.24 logs
/// as `grad_norm`, via `.item()`; with `max_grad_norm <= 0` HF calls it with `max_norm = inf`
/// just to get the norm). Grads that are `None` are skipped; none at all gives 0.0.
pub fn clip_grad_norm(params: &mut [Param], max_norm: f64) -> f32 {
    let mut norms: Vec<f32> = Vec::new();
    for p in params.iter() {
        if let Some(g) = &p.grad {
            norms.push(if g.len() == 1 { g[0].abs() } else { vector_norm_f32(g) });
        }
    }
    if norms.is_empty() {
        return 0.0;
    }
    let total = vector_norm_f32(&norms);
    let coef = (1.0f32 / (total + 1e-6f64 as f32)) * (max_norm as f32);
    let coef = if coef.is_nan() { coef } else { coef.min(1.0) };
    for p in params.iter_mut() {
        if let Some(g) = &mut p.grad {
            for x in g.iter_mut() {
                *x *= coef;
            }
        }
    }
    total
}

/// `torch.linalg.vector_norm(t, 2)` of a short float32 vector on CPU (fewer elements than one
/// SIMD register: the scalar tail `acc += x * x`, fma-contracted, then IEEE sqrt).
pub fn vector_norm_f32(xs: &[f32]) -> f32 {
    let mut acc = 0.0f32;
    for x in xs {
        acc = x.mul_add(*x, acc);
    }
    acc.sqrt()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decay_mask() {
        assert_eq!(hf_decay_mask(&["a", "b"], true), vec![true, true]);
        assert_eq!(hf_decay_mask(&["l.bias", "l.weight", "x.norm.w", "y_norm", "ln.layernorm.w"], true), vec![false, true, false, false, false]);
        assert_eq!(hf_decay_mask(&["x.norm.w"], false), vec![true]);
    }

    #[test]
    fn param_groups_layout() {
        let mut o = AdamW::hf(AdamWKind::TorchFused, TorchLayout::v2_13(), 5e-5, (0.9, 0.999), 1e-8, 0.0, &[true, true]);
        for g in o.groups.iter_mut() {
            g.initial_lr = Some(5e-5);
        }
        let sd = o.state_dict();
        let groups = match sd.get("param_groups") { Some(PyValue::List(g)) => g.clone(), _ => panic!() };
        assert_eq!(groups.len(), 2);
        assert_eq!(
            groups[0].str_keys(),
            ["weight_decay", "lr", "betas", "eps", "amsgrad", "maximize", "foreach", "capturable", "differentiable", "fused", "decoupled_weight_decay", "initial_lr", "params"]
        );
        assert_eq!(groups[1].get("params"), Some(&PyValue::List(vec![])));
        assert_eq!(sd.get("state"), Some(&PyValue::Dict(vec![])));
    }

    #[test]
    fn clip_scales_and_returns_norm() {
        let mut ps = vec![Param { shape: vec![], data: vec![0.0], grad: Some(vec![3.0]) }, Param { shape: vec![], data: vec![0.0], grad: Some(vec![4.0]) }];
        let n = clip_grad_norm(&mut ps, 1.0);
        assert_eq!(n, 5.0);
        let g0 = ps[0].grad.as_ref().unwrap()[0];
        assert!((g0 - 0.6).abs() < 1e-6);
    }
}
