//! `torch.optim.RMSprop` as HF builds it for `optim="rmsprop"` (4.34+:
//! `RMSprop(groups, lr=learning_rate)`, 5.3+ also `momentum`, `alpha`, `eps`, `weight_decay`,
//! `centered` from `optim_args`), run on CPU by `_single_tensor_rmsprop`.
//!
//! State, created at a parameter's first step: `step` (a Python int before torch 2.4, a 0-dim
//! float32 tensor after: [`TorchLayout::rmsprop_step_tensor`]), `square_avg`, and
//! `momentum_buffer` with momentum > 0, `grad_avg` when centered.
//!
//! One element of a step, in torch's op order (float32): `grad = grad.add(param,
//! alpha=weight_decay)` when weight_decay != 0; `square_avg.mul_(alpha).addcmul_(grad, grad,
//! value=1 - alpha)`; centered: `grad_avg.lerp_(grad, 1 - alpha)`, `avg =
//! square_avg.addcmul(grad_avg, grad_avg, value=-1).sqrt_()`, else `avg = square_avg.sqrt()`;
//! `avg.add_(eps)`; momentum > 0: `buf.mul_(momentum).addcdiv_(grad, avg)`, `param.add_(buf,
//! alpha=-lr)`; else `param.addcdiv_(grad, avg, value=-lr)`. The same in torch 2.1 and 2.13.

use crate::hf::behaviors::TorchLayout;
use crate::numerics::optim::{self, add_alpha_f32, addcdiv_f32, addcmul_f32, lerp_f32, torch_sqrt_f32, Param, ParamGroup, PyValue};

#[derive(Clone, Debug, PartialEq)]
pub struct RmspropState {
    pub shape: Vec<i64>,
    /// Steps taken (an int, or the float32 tensor's value).
    pub step: f32,
    pub square_avg: Vec<f32>,
    pub momentum_buffer: Option<Vec<f32>>,
    pub grad_avg: Option<Vec<f32>>,
}

/// RMSprop's own hyperparameters (the same in every group HF builds).
#[derive(Clone, Debug, PartialEq)]
pub struct RmspropHyper {
    /// As the group holds it: the default is the int 0, `optim_args` gives a float.
    pub momentum: PyValue,
    pub alpha: f64,
    pub eps: f64,
    pub centered: bool,
}

impl Default for RmspropHyper {
    fn default() -> Self {
        RmspropHyper { momentum: PyValue::Int(0), alpha: 0.99, eps: 1e-8, centered: false }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct Rmsprop {
    pub layout: TorchLayout,
    pub groups: Vec<ParamGroup>,
    pub hyper: RmspropHyper,
    pub state: Vec<Option<RmspropState>>,
}

impl Rmsprop {
    pub fn hf(layout: TorchLayout, lr: f64, weight_decay: f64, decay: &[bool], hyper: RmspropHyper) -> Rmsprop {
        Rmsprop { layout, groups: optim::hf_param_groups(lr, weight_decay, decay), hyper, state: vec![None; decay.len()] }
    }

    /// The constructor's checks, in its order (`weight_decay`: the default HF passes only
    /// through 5.3+'s `optim_args`; the groups' own are never checked).
    pub fn constructor_error(lr: f64, hyper: &RmspropHyper, weight_decay: Option<f64>) -> Option<String> {
        use crate::formats::pyjson::float_repr as r;
        let momentum = hyper.momentum.as_f64().unwrap_or(0.0);
        if !(lr >= 0.0) {
            Some(format!("Invalid learning rate: {}", r(lr)))
        } else if !(hyper.eps >= 0.0) {
            Some(format!("Invalid epsilon value: {}", r(hyper.eps)))
        } else if !(momentum >= 0.0) {
            Some(format!("Invalid momentum value: {}", r(momentum)))
        } else if let Some(wd) = weight_decay.filter(|x| !(*x >= 0.0)) {
            Some(format!("Invalid weight_decay value: {}", r(wd)))
        } else if !(hyper.alpha >= 0.0) {
            Some(format!("Invalid alpha value: {}", r(hyper.alpha)))
        } else {
            None
        }
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

    fn first(&self, p: &Param) -> RmspropState {
        let n = p.data.len();
        let momentum = self.hyper.momentum.as_f64().unwrap_or(0.0);
        RmspropState {
            shape: p.shape.clone(),
            step: 0.0,
            square_avg: vec![0.0; n],
            momentum_buffer: (momentum > 0.0).then(|| vec![0.0; n]),
            grad_avg: self.hyper.centered.then(|| vec![0.0; n]),
        }
    }

    pub fn step(&mut self, params: &mut [Param]) {
        let h = self.hyper.clone();
        let momentum = h.momentum.as_f64().unwrap_or(0.0);
        let (alpha, eps) = (h.alpha as f32, h.eps as f32);
        let one_minus_alpha = (1.0 - h.alpha) as f32;
        for gi in 0..self.groups.len() {
            let (lr, wd) = (self.groups[gi].lr, self.groups[gi].weight_decay);
            for pi in self.groups[gi].params.clone() {
                let p = &mut params[pi];
                let Some(grad) = p.grad.clone() else { continue };
                if self.state[pi].is_none() {
                    self.state[pi] = Some(self.first(p));
                }
                let st = self.state[pi].as_mut().unwrap();
                st.step += 1.0;
                for k in 0..p.data.len() {
                    let g = if wd != 0.0 { p.data[k].mul_add(wd as f32, grad[k]) } else { grad[k] };
                    let v = addcmul_f32(st.square_avg[k] * alpha, g, g, one_minus_alpha);
                    st.square_avg[k] = v;
                    let avg = match st.grad_avg.as_mut() {
                        Some(ga) => {
                            ga[k] = lerp_f32(ga[k], g, one_minus_alpha);
                            torch_sqrt_f32(addcmul_f32(v, ga[k], ga[k], -1.0))
                        }
                        None => torch_sqrt_f32(v),
                    } + eps;
                    match st.momentum_buffer.as_mut().filter(|_| momentum > 0.0) {
                        Some(buf) => {
                            buf[k] = addcdiv_f32(buf[k] * momentum as f32, g, avg, 1.0);
                            p.data[k] = add_alpha_f32(p.data[k], buf[k], (-lr) as f32);
                        }
                        None => p.data[k] = addcdiv_f32(p.data[k], g, avg, (-lr) as f32),
                    }
                }
            }
        }
    }

    /// A plan's step: every parameter of a group gets its first state and one more step.
    pub fn count_step(&mut self, params: &[Param]) {
        for gi in 0..self.groups.len() {
            for pi in self.groups[gi].params.clone() {
                if self.state[pi].is_none() {
                    self.state[pi] = Some(self.first(&params[pi]));
                }
                self.state[pi].as_mut().unwrap().step += 1.0;
            }
        }
    }

    pub fn state_dict(&self) -> PyValue {
        let mut state = vec![];
        for (i, s) in self.state.iter().enumerate() {
            let Some(s) = s else { continue };
            let step = if self.layout.rmsprop_step_tensor { PyValue::f32_tensor(vec![], vec![s.step]) } else { PyValue::Int(s.step as i64) };
            let mut e = vec![("step", step), ("square_avg", PyValue::f32_tensor(s.shape.clone(), s.square_avg.clone()))];
            if let Some(b) = &s.momentum_buffer {
                e.push(("momentum_buffer", PyValue::f32_tensor(s.shape.clone(), b.clone())));
            }
            if let Some(ga) = &s.grad_avg {
                e.push(("grad_avg", PyValue::f32_tensor(s.shape.clone(), ga.clone())));
            }
            state.push((PyValue::Int(i as i64), PyValue::dict(e)));
        }
        let groups = self
            .groups
            .iter()
            .map(|g| {
                let mut e: Vec<(&str, PyValue)> = self
                    .layout
                    .rmsprop_group_keys
                    .iter()
                    .map(|k| {
                        let v = match *k {
                            "weight_decay" => PyValue::Float(g.weight_decay),
                            "lr" => PyValue::Float(g.lr),
                            "momentum" => self.hyper.momentum.clone(),
                            "alpha" => PyValue::Float(self.hyper.alpha),
                            "eps" => PyValue::Float(self.hyper.eps),
                            "centered" => PyValue::Bool(self.hyper.centered),
                            "foreach" => PyValue::None,
                            _ => PyValue::Bool(false), // capturable, maximize, differentiable
                        };
                        (*k, v)
                    })
                    .collect();
                if let Some(il) = g.initial_lr {
                    e.push(("initial_lr", PyValue::Float(il)));
                }
                e.push(("params", optim::params_list(g)));
                PyValue::dict(e)
            })
            .collect();
        PyValue::dict(vec![("state", PyValue::Dict(state)), ("param_groups", PyValue::List(groups))])
    }

    pub fn load_state_dict(&mut self, v: &PyValue) -> Result<(), String> {
        let saved = optim::load_groups(&mut self.groups, v)?;
        if let Some(first) = saved.first() {
            if let Some(m) = first.get("momentum") {
                self.hyper.momentum = m.clone();
            }
            if let Some(a) = first.get("alpha").and_then(|x| x.as_f64()) {
                self.hyper.alpha = a;
            }
            if let Some(e) = first.get("eps").and_then(|x| x.as_f64()) {
                self.hyper.eps = e;
            }
            if let Some(c) = first.get("centered").and_then(|x| x.as_bool()) {
                self.hyper.centered = c;
            }
        }
        for (i, entry) in optim::loaded_states(v, self.state.len())? {
            let (shape, square_avg) = optim::loaded_f32(entry.get("square_avg").ok_or("no square_avg")?, "square_avg")?;
            let opt = |k: &str| entry.get(k).map(|t| optim::loaded_f32(t, k).map(|x| x.1)).transpose();
            let step = optim::loaded_step(entry)? as f32;
            self.state[i] = Some(RmspropState { shape, step, square_avg, momentum_buffer: opt("momentum_buffer")?, grad_avg: opt("grad_avg")? });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn step_type_and_keys_follow_the_torch_line() {
        let mut o = Rmsprop::hf(TorchLayout::v2_1(), 0.01, 0.0, &[true], RmspropHyper::default());
        let mut ps = vec![Param { shape: vec![], data: vec![1.0], grad: Some(vec![2.0]) }];
        o.step(&mut ps);
        let sd = o.state_dict();
        let st = &sd.get("state").unwrap().as_dict().unwrap()[0].1;
        assert_eq!(st.get("step"), Some(&PyValue::Int(1)));
        assert_eq!(st.str_keys(), ["step", "square_avg"]);
        let g = &sd.get("param_groups").unwrap().as_seq().unwrap()[0];
        assert_eq!(g.str_keys(), ["weight_decay", "lr", "momentum", "alpha", "eps", "centered", "foreach", "maximize", "differentiable", "params"]);
        let mut o = Rmsprop::hf(TorchLayout::v2_13(), 0.01, 0.0, &[true], RmspropHyper { momentum: PyValue::Float(0.9), centered: true, ..Default::default() });
        o.step(&mut ps);
        let sd = o.state_dict();
        let st = &sd.get("state").unwrap().as_dict().unwrap()[0].1;
        assert_eq!(st.str_keys(), ["step", "square_avg", "momentum_buffer", "grad_avg"]);
        assert!(st.get("step").unwrap().as_tensor().is_some());
        assert!(sd.get("param_groups").unwrap().as_seq().unwrap()[0].str_keys().contains(&"capturable".to_string()));
    }
}
