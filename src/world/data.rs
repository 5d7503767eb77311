//! The contract's data sets (conformance/README.md, "The world a scenario runs in"): row `i` of
//! a set with offset `o`, computed in f64 and stored as f32, as the generator builds them.

use tch::Tensor;

/// A data set of the contract: `x = sin(i + o + 1)`, `y = 2x + 3 + 0.1 cos(3 (i + o))`, computed
/// in f64 and stored as f32.
#[derive(Debug, Clone)]
pub struct DataSet {
    pub name: Option<String>,
    pub x: Vec<f32>,
    pub y: Vec<f32>,
}

impl DataSet {
    pub fn new(name: Option<String>, n: usize, offset: usize) -> DataSet {
        let (mut x, mut y) = (Vec::with_capacity(n), Vec::with_capacity(n));
        for k in 0..n {
            let i = (k + offset) as f64;
            let xv = (i + 1.0).sin();
            x.push(xv as f32);
            y.push((2.0 * xv + 3.0 + 0.1 * (3.0 * i).cos()) as f32);
        }
        DataSet { name, x, y }
    }
    pub fn batch(&self, rows: &[usize]) -> (Tensor, Tensor) {
        let xs: Vec<f32> = rows.iter().map(|&r| self.x[r]).collect();
        let ys: Vec<f32> = rows.iter().map(|&r| self.y[r]).collect();
        (Tensor::from_slice(&xs), Tensor::from_slice(&ys))
    }
}
