//! `torch.optim.SGD` as HF builds it for `optim="sgd"` (no momentum, no weight decay): one
//! `param.add_(grad, alpha=-lr)` per parameter, in float32.

use crate::hf::behaviors::TorchLayout;
use crate::numerics::optim::{Param, PyValue};

#[derive(Debug, Clone)]
pub struct Sgd {
    pub layout: TorchLayout,
    /// HF's two groups: (parameter indices, weight_decay, lr, initial_lr).
    pub groups: Vec<(Vec<usize>, f64, f64, Option<f64>)>,
    /// Parameters that took a step (torch 2.1 records an empty momentum buffer for them).
    pub stepped: Vec<bool>,
}

impl Sgd {
    pub fn hf(layout: TorchLayout, lr: f64, weight_decay: f64, decay: &[bool]) -> Sgd {
        let on: Vec<usize> = (0..decay.len()).filter(|i| decay[*i]).collect();
        let off: Vec<usize> = (0..decay.len()).filter(|i| !decay[*i]).collect();
        Sgd { layout, groups: vec![(on, weight_decay, lr, None), (off, 0.0, lr, None)], stepped: vec![false; decay.len()] }
    }

    pub fn set_lr(&mut self, lr: f64) {
        for g in &mut self.groups {
            g.2 = lr;
        }
    }

    pub fn set_initial_lr(&mut self, lr: Option<f64>) {
        for g in &mut self.groups {
            g.3 = lr;
        }
    }

    pub fn step(&mut self, params: &mut [Param]) {
        for (idx, wd, lr, _) in &self.groups {
            let alpha = -*lr as f32;
            let wd = *wd as f32;
            for &i in idx {
                let p = &mut params[i];
                if let Some(g) = &p.grad {
                    for (x, gx) in p.data.iter_mut().zip(g) {
                        // `grad = grad.add(param, alpha=weight_decay)` when weight_decay != 0,
                        // then `param.add_(grad, alpha=-lr)`: torch's CPU add kernel, one fused
                        // multiply-add each (as the step without decay, checked against golden).
                        let gx = if wd != 0.0 { x.mul_add(wd, *gx) } else { *gx };
                        *x = gx.mul_add(alpha, *x);
                    }
                    self.stepped[i] = true;
                }
            }
        }
    }

    /// The state [`step`](Self::step) leaves, without its arithmetic (a plan: every parameter
    /// of a group stepped, as every trainable parameter of the world's models gets a gradient).
    pub fn count_step(&mut self) {
        for (idx, ..) in &self.groups {
            for &i in idx {
                self.stepped[i] = true;
            }
        }
    }

    /// `optimizer.load_state_dict(sd)` of a resumed run: each group's `lr` (the schedule's lr at
    /// the save) and which parameters stepped (torch before 2.4 keeps a `momentum_buffer: None`
    /// state for them, written again at the next save; later releases keep no state without
    /// momentum). `initial_lr` stays the scheduler's, as torch's `load_state_dict` keeps a
    /// group's keys the saved dict has.
    pub fn load_state_dict(&mut self, v: &PyValue) -> Result<(), String> {
        let groups = v.get("param_groups").and_then(|g| g.as_seq()).ok_or("no param_groups list")?;
        if groups.len() != self.groups.len() {
            return Err(format!("{} param groups, expected {}", groups.len(), self.groups.len()));
        }
        for (g, saved) in self.groups.iter_mut().zip(groups) {
            g.2 = saved.get("lr").and_then(|x| x.as_f64()).ok_or("param group without lr")?;
            // Every saved hyperparameter replaces the group's (torch's load_state_dict).
            if let Some(wd) = saved.get("weight_decay").and_then(|x| x.as_f64()) {
                g.1 = wd;
            }
            if let Some(il) = saved.get("initial_lr").and_then(|x| x.as_f64()) {
                g.3 = Some(il);
            }
        }
        let state = v.get("state").and_then(|s| s.as_dict()).ok_or("no state dict")?;
        for (k, entry) in state {
            let i = k.as_i64().ok_or("state key is not an int")? as usize;
            if i >= self.stepped.len() {
                return Err(format!("state for parameter {i} of {}", self.stepped.len()));
            }
            match entry.get("momentum_buffer") {
                Some(PyValue::None) | None => self.stepped[i] = true,
                Some(_) => return Err("a momentum buffer (SGD with momentum is not modelled)".into()),
            }
        }
        Ok(())
    }

    /// The groups' lrs.
    pub fn lrs(&self) -> Vec<f64> {
        self.groups.iter().map(|g| g.2).collect()
    }

    /// `optimizer.state_dict()`, keys in the torch release's order.
    pub fn state_dict(&self) -> PyValue {
        let state = if self.layout.sgd_state_momentum_none {
            (0..self.stepped.len())
                .filter(|i| self.stepped[*i])
                .map(|i| (PyValue::Int(i as i64), PyValue::dict(vec![("momentum_buffer", PyValue::None)])))
                .collect()
        } else {
            vec![]
        };
        let groups = self
            .groups
            .iter()
            .map(|(idx, wd, lr, initial)| {
                let mut e: Vec<(&str, PyValue)> = self
                    .layout
                    .sgd_group_keys
                    .iter()
                    .map(|k| {
                        let v = match *k {
                            "weight_decay" => PyValue::Float(*wd),
                            "lr" => PyValue::Float(*lr),
                            "momentum" | "dampening" => PyValue::Int(0),
                            "foreach" | "fused" => PyValue::None,
                            _ => PyValue::Bool(false), // nesterov, maximize, differentiable
                        };
                        (*k, v)
                    })
                    .collect();
                if let Some(il) = initial {
                    e.push(("initial_lr", PyValue::Float(*il)));
                }
                e.push(("params", PyValue::List(idx.iter().map(|i| PyValue::Int(*i as i64)).collect())));
                PyValue::dict(e)
            })
            .collect();
        PyValue::dict(vec![("state", PyValue::Dict(state)), ("param_groups", PyValue::List(groups))])
    }
}
