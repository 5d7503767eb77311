//! The contract's models (conformance/README.md "Model kinds"): HF's regression test model (two
//! float32 scalars `a` and `b`, prediction `a*x + b`), the same as a plain `nn.Module`, a
//! `PreTrainedModel` whose prediction is an `nn.Linear(1, 1)`, and that model wrapped by a peft
//! LoRA adapter; mean-squared-error loss for all. The executor trains one; the weights files hold
//! its state dict.
//!
//! Every kind is a list of named float32 parameters, some frozen (the LoRA's base weights): the
//! optimizer sees the trainable ones in `named_parameters()` order, as HF's
//! `get_decay_parameter_names` groups do; the weights files hold [`Model::state_dict`]. The
//! forward passes use torch's own ops in peft's order (`F.linear`, then `lora_B(lora_A(x)) *
//! scaling` added), so that the floats are torch's.

use crate::numerics::optim::Param;
use crate::world::scenario::{ModelKind, ModelSpec};
use tch::{Reduction, Tensor};

/// One parameter as `named_parameters()` lists it.
pub struct NamedParam {
    /// The key its state dict (and the weights file) uses.
    pub key: String,
    pub tensor: Tensor,
    pub trainable: bool,
}

/// A model of one of the contract's kinds.
pub struct Model {
    pub kind: ModelKind,
    pub params: Vec<NamedParam>,
    /// `lora` only: `lora_alpha / r` (peft's `scaling`, `use_rslora=False`).
    scaling: f64,
}

/// peft's state-dict keys of the LoRA factors (`get_peft_model_state_dict` drops the adapter
/// name `default`), in every release the profiles pin.
pub const LORA_A_KEY: &str = "base_model.model.linear.lora_A.weight";
pub const LORA_B_KEY: &str = "base_model.model.linear.lora_B.weight";

fn param(key: &str, t: Tensor, trainable: bool) -> NamedParam {
    NamedParam { key: key.into(), tensor: if trainable { t.set_requires_grad(true) } else { t }, trainable }
}

impl Model {
    pub fn new(spec: &ModelSpec) -> Model {
        let (a, b) = (spec.a as f32, spec.b as f32);
        let scalar = |v: f32| Tensor::from(v);
        let linear = |trainable: bool| {
            vec![
                param("linear.weight", Tensor::from_slice(&[a]).reshape([1, 1]), trainable),
                param("linear.bias", Tensor::from_slice(&[b]), trainable),
            ]
        };
        let (params, scaling) = match spec.kind {
            ModelKind::Regression | ModelKind::Module => (vec![param("a", scalar(a), true), param("b", scalar(b), true)], 1.0),
            ModelKind::Linear => (linear(true), 1.0),
            ModelKind::Lora => {
                let r = spec.lora.r;
                let mut ps = linear(false);
                ps.push(param(LORA_A_KEY, Tensor::full([r, 1], spec.lora.lora_a, (tch::Kind::Float, tch::Device::Cpu)), true));
                ps.push(param(LORA_B_KEY, Tensor::full([1, r], spec.lora.lora_b, (tch::Kind::Float, tch::Device::Cpu)), true));
                // `self.scaling[adapter] = lora_alpha / r` (Python's true division).
                (ps, spec.lora.alpha / r as f64)
            }
        };
        // `requires_grad_(False)` on the frozen ones: no gradient, not in the optimizer's
        // groups, still in the weights.
        let params = params
            .into_iter()
            .map(|p| if spec.frozen.contains(&p.key) { NamedParam { tensor: p.tensor.detach(), trainable: false, ..p } } else { p })
            .collect();
        Model { kind: spec.kind, params, scaling }
    }

    fn get(&self, key: &str) -> &Tensor {
        &self.params.iter().find(|p| p.key == key).expect("the kind has this parameter").tensor
    }

    /// The forward pass's prediction for a batch `x` of shape [n].
    pub fn predict(&self, x: &Tensor) -> Tensor {
        match self.kind {
            ModelKind::Regression | ModelKind::Module => x * self.get("a") + self.get("b"),
            ModelKind::Linear => x.unsqueeze(-1).linear(self.get("linear.weight"), Some(self.get("linear.bias"))).squeeze_dim(-1),
            ModelKind::Lora => {
                let col = x.unsqueeze(-1);
                let base = col.linear(self.get("linear.weight"), Some(self.get("linear.bias")));
                let lora = col.linear::<&Tensor>(self.get(LORA_A_KEY), None).linear::<&Tensor>(self.get(LORA_B_KEY), None) * self.scaling;
                (base + lora).squeeze_dim(-1)
            }
        }
    }

    pub fn loss(&self, x: &Tensor, y: &Tensor) -> Tensor {
        self.predict(x).mse_loss(y, Reduction::Mean)
    }

    /// The trainable parameters' names, in order (what the optimizer's groups are built from).
    pub fn trainable_names(&self) -> Vec<&str> {
        self.params.iter().filter(|p| p.trainable).map(|p| p.key.as_str()).collect()
    }

    /// The trainable parameters with their gradients.
    pub fn params(&self) -> Vec<Param> {
        self.params.iter().filter(|p| p.trainable).map(|p| Param::from_tensor(&p.tensor)).collect()
    }

    /// Writes the optimizer's values back into the trainable parameters.
    pub fn write_back(&mut self, ps: &[Param]) {
        for (p, v) in self.params.iter_mut().filter(|p| p.trainable).zip(ps) {
            v.write_to(&mut p.tensor);
        }
    }

    pub fn zero_grad(&mut self) {
        for p in self.params.iter_mut().filter(|p| p.trainable) {
            let mut g = p.tensor.grad();
            if g.defined() {
                let _ = g.zero_();
            }
        }
    }

    /// What the weights file of this kind holds (`state_dict()`, or peft's adapter state dict):
    /// (key, shape, values), in the model's order.
    pub fn state_dict(&self) -> Vec<(String, Vec<i64>, Vec<f32>)> {
        self.params
            .iter()
            .filter(|p| self.kind != ModelKind::Lora || p.trainable)
            .map(|p| {
                let data = Vec::<f32>::try_from(&p.tensor.detach().reshape([-1])).expect("float tensor");
                (p.key.clone(), p.tensor.size(), data)
            })
            .collect()
    }

    /// `load_state_dict` (or peft's `set_peft_model_state_dict`) from a weights file's tensors,
    /// by key; keys the model does not have are ignored and missing ones keep their values, as
    /// HF's `strict=False` loads and peft's loads do. Returns the keys it set.
    pub fn load(&mut self, tensors: &[(String, Vec<f32>)]) -> Vec<String> {
        let mut set = vec![];
        let kind = self.kind;
        for p in self.params.iter_mut().filter(|p| kind != ModelKind::Lora || p.trainable) {
            if let Some((_, v)) = tensors.iter().find(|(k, v)| *k == p.key && v.len() as i64 == p.tensor.numel() as i64) {
                let src = Tensor::from_slice(v).reshape(p.tensor.size().as_slice());
                tch::no_grad(|| {
                    p.tensor.copy_(&src);
                });
                set.push(p.key.clone());
            }
        }
        set
    }
}
