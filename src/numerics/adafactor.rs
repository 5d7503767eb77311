//! transformers' own `Adafactor` (`transformers.optimization`) as the Trainer builds it for
//! `optim="adafactor"` (and 4.x's `adafactor=True`): `Adafactor(groups, lr=learning_rate,
//! scale_parameter=False, relative_step=False)`, every other argument its default (`eps=(1e-30,
//! 1e-3)`, `clip_threshold=1.0`, `decay_rate=-0.8`, `beta1=None`, `warmup_init=False`). No
//! release passes `optim_args` to it. The class is the same in every profile (4.31-5.24).
//!
//! State, created at a parameter's first step: `step` (a Python int), `exp_avg_sq_row` and
//! `exp_avg_sq_col` for a parameter of 2 or more dimensions (factored), else `exp_avg_sq`, and
//! `RMS` (the parameter's RMS before the step, a 0-dim float32 tensor; the int 0 until then).
//!
//! One step, in its op order (float32; `lr` is the group's, as `scale_parameter` and
//! `relative_step` are off): `step += 1`; `RMS = p.norm(2) / numel**0.5`;
//! `beta2t = 1 - step**decay_rate` (Python floats); `update = grad**2 + eps[0]`; factored:
//! `row.mul_(beta2t).add_(update.mean(-1), alpha=1-beta2t)`, the same for `col` with
//! `mean(-2)`, `update = rsqrt(row / row.mean(-1)) [:, None] * rsqrt(col)[None, :]`, else
//! `exp_avg_sq.mul_(beta2t).add_(update, alpha=1-beta2t)`, `update = exp_avg_sq.rsqrt()`;
//! `update.mul_(grad)`; `update.div_((rms(update) / clip_threshold).clamp_(min=1.0))`;
//! `update.mul_(lr)`; `p.add_(p, alpha=-weight_decay * lr)` when weight_decay != 0;
//! `p.add_(-update)`. Bit for bit for one-element parameters (the world's models: the linear
//! weight is [1, 1], so its means are the element itself and `row / row.mean()` is 1);
//! reductions over several elements are summed in order, not in torch's vectorized order.

use crate::numerics::optim::{self, add_alpha_f32, py_pow, torch_rsqrt_f32, vector_norm_f32, Param, ParamGroup, PyValue};

pub const EPS: (f64, f64) = (1e-30, 1e-3);
pub const CLIP_THRESHOLD: f64 = 1.0;
pub const DECAY_RATE: f64 = -0.8;

#[derive(Clone, Debug, PartialEq)]
pub enum SecondMoment {
    /// `exp_avg_sq_row` (shape without the last dimension), `exp_avg_sq_col` (without the
    /// second to last); 2-D parameters only here.
    Factored { row: Vec<f32>, col: Vec<f32> },
    Full(Vec<f32>),
}

#[derive(Clone, Debug, PartialEq)]
pub struct AdafactorState {
    pub shape: Vec<i64>,
    pub step: i64,
    pub moment: SecondMoment,
    /// The parameter's RMS at the last step.
    pub rms: f32,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Adafactor {
    pub groups: Vec<ParamGroup>,
    pub state: Vec<Option<AdafactorState>>,
}

/// `tensor.norm(2) / (tensor.numel() ** 0.5)`.
fn rms(xs: &[f32]) -> f32 {
    vector_norm_f32(xs) / ((xs.len() as f64).sqrt() as f32)
}

fn mean(xs: &[f32]) -> f32 {
    xs.iter().fold(0.0f32, |a, x| a + x) / xs.len() as f32
}

impl Adafactor {
    pub fn hf(lr: f64, weight_decay: f64, decay: &[bool]) -> Adafactor {
        Adafactor { groups: optim::hf_param_groups(lr, weight_decay, decay), state: vec![None; decay.len()] }
    }

    pub fn set_lr(&mut self, lr: f64) {
        for g in self.groups.iter_mut() {
            g.lr = lr;
        }
    }

    pub fn set_initial_lr(&mut self, lr: Option<f64>) {
        for g in self.groups.iter_mut() {
            g.initial_lr = lr;
        }
    }

    fn first(p: &Param) -> AdafactorState {
        let moment = if p.shape.len() >= 2 {
            let (r, c) = (p.shape[p.shape.len() - 2] as usize, p.shape[p.shape.len() - 1] as usize);
            let lead = p.data.len() / (r * c).max(1);
            SecondMoment::Factored { row: vec![0.0; lead * r], col: vec![0.0; lead * c] }
        } else {
            SecondMoment::Full(vec![0.0; p.data.len()])
        };
        AdafactorState { shape: p.shape.clone(), step: 0, moment, rms: 0.0 }
    }

    /// Whether a step reproduces torch bit for bit (see the module): a factored parameter of
    /// more than 2 dimensions is not modelled.
    pub fn supports(shape: &[i64]) -> bool {
        shape.len() <= 2
    }

    pub fn step(&mut self, params: &mut [Param]) {
        for gi in 0..self.groups.len() {
            let (lr, wd) = (self.groups[gi].lr, self.groups[gi].weight_decay);
            for pi in self.groups[gi].params.clone() {
                let p = &mut params[pi];
                let Some(grad) = p.grad.clone() else { continue };
                let st = self.state[pi].get_or_insert_with(|| Self::first(p));
                st.step += 1;
                st.rms = rms(&p.data);
                let beta2t = 1.0 - py_pow(st.step as f64, DECAY_RATE);
                let (b, a) = (beta2t as f32, (1.0 - beta2t) as f32);
                let eps0 = EPS.0 as f32;
                let sq: Vec<f32> = grad.iter().map(|g| g * g + eps0).collect();
                let mut update: Vec<f32> = match &mut st.moment {
                    SecondMoment::Full(v) => {
                        for (v, u) in v.iter_mut().zip(&sq) {
                            *v = add_alpha_f32(*v * b, *u, a);
                        }
                        v.iter().map(|x| torch_rsqrt_f32(*x)).collect()
                    }
                    SecondMoment::Factored { row, col } => {
                        let (r, c) = (row.len(), col.len());
                        for (i, x) in row.iter_mut().enumerate() {
                            *x = add_alpha_f32(*x * b, mean(&sq[i * c..(i + 1) * c]), a);
                        }
                        for (j, x) in col.iter_mut().enumerate() {
                            let column: Vec<f32> = (0..r).map(|i| sq[i * c + j]).collect();
                            *x = add_alpha_f32(*x * b, mean(&column), a);
                        }
                        let row_mean = mean(row);
                        let rf: Vec<f32> = row.iter().map(|x| torch_rsqrt_f32(x / row_mean)).collect();
                        let cf: Vec<f32> = col.iter().map(|x| torch_rsqrt_f32(*x)).collect();
                        (0..r * c).map(|k| rf[k / c] * cf[k % c]).collect()
                    }
                };
                for (u, g) in update.iter_mut().zip(&grad) {
                    *u *= g;
                }
                let d = rms(&update) / CLIP_THRESHOLD as f32;
                // clamp_(min=1.0): NaN stays NaN.
                let d = if d < 1.0 { 1.0 } else { d };
                let lr32 = lr as f32;
                for (x, u) in p.data.iter_mut().zip(&update) {
                    let u = (u / d) * lr32;
                    if wd != 0.0 {
                        *x = add_alpha_f32(*x, *x, (-wd * lr) as f32);
                    }
                    *x += -u;
                }
            }
        }
    }

    /// A plan's step: every parameter of a group gets its first state and one more step.
    pub fn count_step(&mut self, params: &[Param]) {
        for gi in 0..self.groups.len() {
            for pi in self.groups[gi].params.clone() {
                let st = self.state[pi].get_or_insert_with(|| Self::first(&params[pi]));
                st.step += 1;
            }
        }
    }

    pub fn state_dict(&self) -> PyValue {
        let mut state = vec![];
        for (i, s) in self.state.iter().enumerate() {
            let Some(s) = s else { continue };
            let mut e = vec![("step", PyValue::Int(s.step))];
            match &s.moment {
                SecondMoment::Factored { row, col } => {
                    let n = s.shape.len();
                    let mut rs = s.shape[..n - 1].to_vec();
                    let mut cs = s.shape[..n - 2].to_vec();
                    cs.push(s.shape[n - 1]);
                    if rs.is_empty() {
                        rs.push(1);
                    }
                    e.push(("exp_avg_sq_row", PyValue::f32_tensor(rs, row.clone())));
                    e.push(("exp_avg_sq_col", PyValue::f32_tensor(cs, col.clone())));
                }
                SecondMoment::Full(v) => e.push(("exp_avg_sq", PyValue::f32_tensor(s.shape.clone(), v.clone()))),
            }
            e.push(("RMS", PyValue::f32_tensor(vec![], vec![s.rms])));
            state.push((PyValue::Int(i as i64), PyValue::dict(e)));
        }
        let f = PyValue::Float;
        let groups = self
            .groups
            .iter()
            .map(|g| {
                let mut e: Vec<(&str, PyValue)> = vec![
                    ("weight_decay", f(g.weight_decay)),
                    ("lr", f(g.lr)),
                    ("eps", PyValue::Tuple(vec![f(EPS.0), f(EPS.1)])),
                    ("clip_threshold", f(CLIP_THRESHOLD)),
                    ("decay_rate", f(DECAY_RATE)),
                    ("beta1", PyValue::None),
                    ("scale_parameter", PyValue::Bool(false)),
                    ("relative_step", PyValue::Bool(false)),
                    ("warmup_init", PyValue::Bool(false)),
                ];
                if let Some(il) = g.initial_lr {
                    e.push(("initial_lr", f(il)));
                }
                e.push(("params", optim::params_list(g)));
                PyValue::dict(e)
            })
            .collect();
        PyValue::dict(vec![("state", PyValue::Dict(state)), ("param_groups", PyValue::List(groups))])
    }

    pub fn load_state_dict(&mut self, v: &PyValue) -> Result<(), String> {
        let saved = optim::load_groups(&mut self.groups, v)?;
        // The hyperparameters HF passes are the same in every release; other saved values
        // (another Adafactor's) are not modelled.
        for s in saved {
            for (k, want) in [("scale_parameter", false), ("relative_step", false), ("warmup_init", false)] {
                if s.get(k).and_then(|x| x.as_bool()).is_some_and(|b| b != want) {
                    return Err(format!("a saved Adafactor group with {k}={}", !want));
                }
            }
            if s.get("beta1").is_some_and(|b| *b != PyValue::None) {
                return Err("a saved Adafactor group with beta1".into());
            }
        }
        for (i, entry) in optim::loaded_states(v, self.state.len())? {
            let step = optim::loaded_step(entry)? as i64;
            let rms = match entry.get("RMS") {
                Some(t) if t.as_tensor().is_some() => *optim::loaded_f32(t, "RMS")?.1.first().ok_or("empty RMS")?,
                Some(x) => x.as_f64().ok_or("RMS is not a number")? as f32,
                None => return Err("no RMS".into()),
            };
            let (shape, moment) = match (entry.get("exp_avg_sq"), entry.get("exp_avg_sq_row"), entry.get("exp_avg_sq_col")) {
                (Some(v), None, None) => {
                    let (shape, v) = optim::loaded_f32(v, "exp_avg_sq")?;
                    (shape, SecondMoment::Full(v))
                }
                (None, Some(r), Some(c)) => {
                    let (rs, row) = optim::loaded_f32(r, "exp_avg_sq_row")?;
                    let (cs, col) = optim::loaded_f32(c, "exp_avg_sq_col")?;
                    let mut shape = rs.clone();
                    shape.push(*cs.last().ok_or("0-dim exp_avg_sq_col")?);
                    (shape, SecondMoment::Factored { row, col })
                }
                _ => return Err("an Adafactor state without exp_avg_sq or its factors".into()),
            };
            self.state[i] = Some(AdafactorState { shape, step, moment, rms });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn factored_state_of_a_matrix() {
        let mut o = Adafactor::hf(0.01, 0.1, &[true, false]);
        let mut ps = vec![
            Param { shape: vec![1, 1], data: vec![1.0], grad: Some(vec![2.0]) },
            Param { shape: vec![1], data: vec![0.5], grad: Some(vec![1.0]) },
        ];
        o.step(&mut ps);
        let sd = o.state_dict();
        let st = sd.get("state").unwrap().as_dict().unwrap();
        assert_eq!(st[0].1.str_keys(), ["step", "exp_avg_sq_row", "exp_avg_sq_col", "RMS"]);
        assert_eq!(st[1].1.str_keys(), ["step", "exp_avg_sq", "RMS"]);
        assert_eq!(st[0].1.get("RMS").unwrap().as_tensor().unwrap().shape, Vec::<i64>::new());
        assert_eq!(st[0].1.get("exp_avg_sq_row").unwrap().as_tensor().unwrap().shape, vec![1]);
        // The first step: beta2t = 0, so the moment is grad^2 and the update sign(grad) * lr
        // (clipped to RMS 1), the weight also decayed by lr * 0.1.
        let expect = 1.0f32 * (1.0 - 0.01 * 0.1) - 0.01;
        assert!((ps[0].data[0] - expect).abs() < 1e-6, "{}", ps[0].data[0]);
        assert!((ps[1].data[0] - 0.49).abs() < 1e-6);
        let g = &sd.get("param_groups").unwrap().as_seq().unwrap()[0];
        assert_eq!(
            g.str_keys(),
            ["weight_decay", "lr", "eps", "clip_threshold", "decay_rate", "beta1", "scale_parameter", "relative_step", "warmup_init", "params"]
        );
    }
}
