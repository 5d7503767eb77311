//! The contract's model: HF's regression test model, two float32 scalars `a` and `b`, prediction
//! `a*x + b`, mean-squared-error loss. The executor trains it; the weights files hold it.

use crate::numerics::optim::Param;
use tch::{Reduction, Tensor};

/// The regression model: two float32 scalars.
pub struct Model {
    pub a: Tensor,
    pub b: Tensor,
}

impl Model {
    pub fn new(a: f64, b: f64) -> Model {
        Model {
            a: Tensor::from(a as f32).set_requires_grad(true),
            b: Tensor::from(b as f32).set_requires_grad(true),
        }
    }
    pub fn loss(&self, x: &Tensor, y: &Tensor) -> Tensor {
        let pred = x * &self.a + &self.b;
        pred.mse_loss(y, Reduction::Mean)
    }
    pub fn values(&self) -> (f32, f32) {
        (f32::try_from(&self.a).unwrap(), f32::try_from(&self.b).unwrap())
    }
    pub fn params(&self) -> Vec<Param> {
        vec![Param::from_tensor(&self.a), Param::from_tensor(&self.b)]
    }
    pub fn write_back(&mut self, ps: &[Param]) {
        ps[0].write_to(&mut self.a);
        ps[1].write_to(&mut self.b);
    }
    pub fn zero_grad(&mut self) {
        for t in [&mut self.a, &mut self.b] {
            let mut g = t.grad();
            if g.defined() {
                let _ = g.zero_();
            }
        }
    }
}
