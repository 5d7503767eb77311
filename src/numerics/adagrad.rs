//! `torch.optim.Adagrad` as HF builds it for `optim="adagrad"`
//! (`Adagrad(groups, lr=learning_rate)`, 5.3+ also `lr_decay`, `weight_decay`, `eps` from
//! `optim_args`), run on CPU by `_single_tensor_adagrad` (`foreach=None` resolves to it for CPU
//! tensors in every torch line here).
//!
//! Unlike Adam and RMSprop, Adagrad creates its state in the constructor: every parameter of
//! every group gets `{"step": tensor(0.0), "sum": full_like(p, initial_accumulator_value)}`, so
//! optimizer.pt lists every parameter from the first save on.
//!
//! One element of a step, in torch's op order (float32; the scalars are Python floats cast
//! where the kernel takes them):
//! `step_t += 1`; `grad = grad.add(param, alpha=weight_decay)` when weight_decay != 0;
//! `clr = lr / (1 + (step - 1) * lr_decay)` (Python floats); `sum.addcmul_(grad, grad, value=1)`;
//! `std = sum.sqrt().add_(eps)`; `param.addcdiv_(grad, std, value=-clr)`.

use crate::hf::behaviors::TorchLayout;
use crate::numerics::optim::{self, addcdiv_f32, addcmul_f32, torch_sqrt_f32, Param, ParamGroup, PyValue};

/// One parameter's state.
#[derive(Clone, Debug, PartialEq)]
pub struct AdagradState {
    pub shape: Vec<i64>,
    /// The 0-dim float32 `step` tensor.
    pub step: f32,
    pub sum: Vec<f32>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Adagrad {
    pub layout: TorchLayout,
    pub groups: Vec<ParamGroup>,
    /// `lr_decay` as the group holds it: the default is the int 0, `optim_args` gives a float.
    pub lr_decay: PyValue,
    pub eps: f64,
    /// Indexed like the parameters (every parameter of a group has one from the constructor).
    pub state: Vec<Option<AdagradState>>,
}

impl Adagrad {
    /// HF's two groups over parameters of these shapes (`decay` from `hf_decay_mask`).
    pub fn hf(layout: TorchLayout, lr: f64, weight_decay: f64, decay: &[bool], shapes: &[Vec<i64>], lr_decay: Option<f64>, eps: Option<f64>) -> Adagrad {
        let groups = optim::hf_param_groups(lr, weight_decay, decay);
        let mut state = vec![None; decay.len()];
        for g in &groups {
            for &i in &g.params {
                let n = shapes[i].iter().product::<i64>().max(1) as usize;
                state[i] = Some(AdagradState { shape: shapes[i].clone(), step: 0.0, sum: vec![0.0; n] });
            }
        }
        Adagrad { layout, groups, lr_decay: lr_decay.map_or(PyValue::Int(0), PyValue::Float), eps: eps.unwrap_or(1e-10), state }
    }

    /// The constructor's checks, in its order, for what HF passes (`lr`, and 5.3+'s
    /// `optim_args` values; `initial_accumulator_value` is never passed).
    pub fn constructor_error(lr: f64, lr_decay: Option<f64>, weight_decay: Option<f64>, eps: Option<f64>) -> Option<String> {
        use crate::formats::pyjson::float_repr as r;
        if !(lr >= 0.0) {
            return Some(format!("Invalid learning rate: {}", r(lr)));
        }
        if let Some(x) = lr_decay.filter(|x| !(*x >= 0.0)) {
            return Some(format!("Invalid lr_decay value: {}", r(x)));
        }
        if let Some(x) = weight_decay.filter(|x| !(*x >= 0.0)) {
            return Some(format!("Invalid weight_decay value: {}", r(x)));
        }
        if let Some(x) = eps.filter(|x| !(*x >= 0.0)) {
            return Some(format!("Invalid epsilon value: {}", r(x)));
        }
        None
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

    fn lr_decay_f64(&self) -> f64 {
        self.lr_decay.as_f64().unwrap_or(0.0)
    }

    pub fn step(&mut self, params: &mut [Param]) {
        let lr_decay = self.lr_decay_f64();
        let eps = self.eps as f32;
        for g in &self.groups {
            for &pi in &g.params {
                let p = &mut params[pi];
                let Some(grad) = p.grad.as_ref() else { continue };
                let st = self.state[pi].as_mut().expect("Adagrad's constructor made every state");
                st.step += 1.0;
                let clr = g.lr / (1.0 + (st.step as f64 - 1.0) * lr_decay);
                for k in 0..p.data.len() {
                    let gx = if g.weight_decay != 0.0 { p.data[k].mul_add(g.weight_decay as f32, grad[k]) } else { grad[k] };
                    st.sum[k] = addcmul_f32(st.sum[k], gx, gx, 1.0);
                    let std = torch_sqrt_f32(st.sum[k]) + eps;
                    p.data[k] = addcdiv_f32(p.data[k], gx, std, (-clr) as f32);
                }
            }
        }
    }

    /// A plan's step: one more step counted for every parameter of a group.
    pub fn count_step(&mut self) {
        for st in self.state.iter_mut().flatten() {
            st.step += 1.0;
        }
    }

    pub fn state_dict(&self) -> PyValue {
        let state = self
            .state
            .iter()
            .enumerate()
            .filter_map(|(i, s)| s.as_ref().map(|s| (i, s)))
            .map(|(i, s)| {
                (
                    PyValue::Int(i as i64),
                    PyValue::dict(vec![("step", PyValue::f32_tensor(vec![], vec![s.step])), ("sum", PyValue::f32_tensor(s.shape.clone(), s.sum.clone()))]),
                )
            })
            .collect();
        let groups = self
            .groups
            .iter()
            .map(|g| {
                let mut e: Vec<(&str, PyValue)> = self
                    .layout
                    .adagrad_group_keys
                    .iter()
                    .map(|k| {
                        let v = match *k {
                            "weight_decay" => PyValue::Float(g.weight_decay),
                            "lr" => PyValue::Float(g.lr),
                            "lr_decay" => self.lr_decay.clone(),
                            "eps" => PyValue::Float(self.eps),
                            "initial_accumulator_value" => PyValue::Int(0),
                            "foreach" | "fused" => PyValue::None,
                            _ => PyValue::Bool(false), // maximize, differentiable
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

    /// `load_state_dict`: every group's hyperparameters and the per-parameter state.
    pub fn load_state_dict(&mut self, v: &PyValue) -> Result<(), String> {
        let saved = optim::load_groups(&mut self.groups, v)?;
        if let Some(first) = saved.first() {
            if let Some(d) = first.get("lr_decay") {
                self.lr_decay = d.clone();
            }
            if let Some(eps) = first.get("eps").and_then(|x| x.as_f64()) {
                self.eps = eps;
            }
        }
        for (i, entry) in optim::loaded_states(v, self.state.len())? {
            let (shape, sum) = optim::loaded_f32(entry.get("sum").ok_or("no sum")?, "sum")?;
            let step = optim::loaded_step(entry)? as f32;
            self.state[i] = Some(AdagradState { shape, step, sum });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_from_the_constructor_and_group_keys() {
        let o = Adagrad::hf(TorchLayout::v2_1(), 0.1, 0.0, &[true, true], &[vec![], vec![]], None, None);
        let sd = o.state_dict();
        assert_eq!(sd.get("state").and_then(|s| s.as_dict()).map(|s| s.len()), Some(2));
        let g = &sd.get("param_groups").unwrap().as_seq().unwrap()[0];
        assert_eq!(g.str_keys(), ["weight_decay", "lr", "lr_decay", "eps", "initial_accumulator_value", "foreach", "maximize", "differentiable", "params"]);
        assert_eq!(g.get("lr_decay"), Some(&PyValue::Int(0)));
        let o = Adagrad::hf(TorchLayout::v2_13(), 0.1, 0.0, &[true], &[vec![]], Some(0.5), None);
        let g = &o.state_dict().get("param_groups").unwrap().as_seq().unwrap()[0].clone();
        assert_eq!(g.str_keys().last().map(String::as_str), Some("params"));
        assert!(g.str_keys().contains(&"fused".to_string()));
        assert_eq!(g.get("lr_decay"), Some(&PyValue::Float(0.5)));
    }

    #[test]
    fn first_step_moves_by_lr() {
        // sum = g^2, std = |g| + eps: the first step moves each parameter by about lr.
        let mut o = Adagrad::hf(TorchLayout::v2_13(), 0.1, 0.0, &[true], &[vec![]], None, None);
        let mut ps = vec![Param { shape: vec![], data: vec![1.0], grad: Some(vec![4.0]) }];
        o.step(&mut ps);
        assert!((ps[0].data[0] - 0.9).abs() < 1e-6);
        assert_eq!(o.state[0].as_ref().unwrap().sum, vec![16.0]);
    }
}
