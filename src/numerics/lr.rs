//! HF's `get_scheduler` learning-rate schedules (all `torch.optim.lr_scheduler.LambdaLR`),
//! computed in f64 with the same float operations, in the same order, as Python.
//!
//! LambdaLR semantics (torch 2.13.0 and 2.1.2): at construction every group's `initial_lr` is
//! set to its `lr`, then one step is taken, so after `k` calls of `scheduler.step()` the
//! optimizer holds `lr = base_lr * lambda(k)` (k = 0 right after construction), `last_epoch = k`,
//! `_step_count = k + 1`. See [`LambdaLrState`] for the state dict.
//!
//! Which lr HF logs as `learning_rate` (the Trainer chooses; both are provided here):
//! 5.24.0 captures the group lr after `optimizer.step()` and before `scheduler.step()`, i.e.
//! for the `t`-th optimizer step (1-based) `base_lr * lambda(t - 1)`
//! ([`Schedule::lr_during_step`]); 4.31.0 reads `get_last_lr()[0]` at log time, after
//! `scheduler.step()`: `base_lr * lambda(t)` ([`Schedule::lr_after_steps`]).

use crate::hf::behaviors::TorchLayout;
use crate::numerics::optim::PyValue;

/// The schedule shapes implemented (HF `SchedulerType` names in the docs).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ScheduleKind {
    /// `"linear"`: warmup then linear decay to 0.
    Linear,
    /// `"cosine"`: warmup then half-cosine decay (`num_cycles` default 0.5).
    Cosine { num_cycles: f64 },
    /// `"constant"`: lambda is the int 1 (warmup ignored).
    Constant,
    /// `"constant_with_warmup"`.
    ConstantWithWarmup,
    /// `"cosine_with_restarts"`: warmup then `num_cycles` (default 1) hard-restarting cosines.
    CosineHardRestarts { num_cycles: f64 },
    /// `"polynomial"`: warmup then `(lr_init - lr_end) * remaining**power + lr_end`, divided by
    /// `lr_init` (the optimizer's default lr); `lr_end / lr_init` past the last step.
    Polynomial { lr_end: f64, power: f64, lr_init: f64 },
    /// `"inverse_sqrt"`: warmup then `1 / sqrt((step + timescale - warmup) / timescale)`.
    InverseSqrt { timescale: f64 },
    /// `"cosine_with_min_lr"` (4.40+): the cosine's factor scaled into `[min_lr_rate, 1]`,
    /// `max(0, factor)`.
    CosineMinLr { num_cycles: f64, min_lr_rate: f64 },
}

/// A schedule as HF builds it: kind, warmup steps and total steps.
///
/// `warmup` is f64 because 4.31.0 passes `args.warmup_steps` through unconverted when it is
/// > 0 (so a float like 0.25 reaches the lambda); every Python expression of the lambdas gives
/// the same value with the warmup held as an exactly representable f64.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Schedule {
    pub kind: ScheduleKind,
    pub warmup: f64,
    pub num_training_steps: i64,
}

/// `TrainingArguments.get_warmup_steps(num_training_steps)` of transformers 5.24.0:
/// `int(warmup_steps) if warmup_steps >= 1 else math.ceil(num_training_steps * warmup_steps)`
/// (5.24.0 has no `warmup_ratio`; a fraction in `warmup_steps` is the ratio).
pub fn warmup_steps_v5(warmup_steps: f64, num_training_steps: i64) -> i64 {
    if warmup_steps >= 1.0 {
        warmup_steps.trunc() as i64
    } else {
        (num_training_steps as f64 * warmup_steps).ceil() as i64
    }
}

/// `TrainingArguments.get_warmup_steps(num_training_steps)` of transformers 4.31.0:
/// `warmup_steps if warmup_steps > 0 else math.ceil(num_training_steps * warmup_ratio)`
/// (`warmup_steps` returned as passed, possibly a float).
pub fn warmup_steps_v4(warmup_steps: f64, warmup_ratio: f64, num_training_steps: i64) -> f64 {
    if warmup_steps > 0.0 {
        warmup_steps
    } else {
        (num_training_steps as f64 * warmup_ratio).ceil()
    }
}

/// Python's `max(a, b)` on floats: `b` only if `b > a` (so NaN in `b` loses, `a` wins ties).
fn py_max(a: f64, b: f64) -> f64 {
    if b > a {
        b
    } else {
        a
    }
}

impl Schedule {
    /// The LambdaLR multiplier at `current_step`, as HF's lambda returns it (as f64; the
    /// constant schedule's int 1 and 5.24's `max(0, factor)` int 0 give the same products).
    pub fn lambda(&self, current_step: i64) -> f64 {
        let s = current_step as f64;
        let w = self.warmup;
        let n = self.num_training_steps as f64;
        match self.kind {
            ScheduleKind::Constant => 1.0,
            ScheduleKind::ConstantWithWarmup => {
                if s < w {
                    s / py_max(1.0, w)
                } else {
                    1.0
                }
            }
            ScheduleKind::Linear => {
                if s < w {
                    return s / py_max(1.0, w);
                }
                py_max(0.0, (n - s) / py_max(1.0, n - w))
            }
            ScheduleKind::Cosine { num_cycles } => {
                if s < w {
                    return s / py_max(1.0, w);
                }
                let progress = (s - w) / py_max(1.0, n - w);
                let c = (std::f64::consts::PI * num_cycles * 2.0 * progress).cos();
                // 5.24 adds `factor * (1 - 0.0) + 0.0` and `max(0, factor)`: identical values.
                py_max(0.0, 0.5 * (1.0 + c))
            }
            ScheduleKind::CosineHardRestarts { num_cycles } => {
                if s < w {
                    return s / py_max(1.0, w);
                }
                let progress = (s - w) / py_max(1.0, n - w);
                if progress >= 1.0 {
                    return 0.0;
                }
                // Python's `%` on positive floats is C's fmod, as Rust's.
                py_max(0.0, 0.5 * (1.0 + (std::f64::consts::PI * ((num_cycles * progress) % 1.0)).cos()))
            }
            ScheduleKind::Polynomial { lr_end, power, lr_init } => {
                if s < w {
                    return s / py_max(1.0, w);
                }
                if s > n {
                    return lr_end / lr_init;
                }
                let lr_range = lr_init - lr_end;
                let pct_remaining = 1.0 - (s - w) / (n - w);
                let decay = lr_range * std::hint::black_box(pct_remaining).powf(std::hint::black_box(power)) + lr_end;
                decay / lr_init
            }
            ScheduleKind::InverseSqrt { timescale } => {
                if s < w {
                    return s / py_max(1.0, w);
                }
                let shift = timescale - w;
                1.0 / ((s + shift) / timescale).sqrt()
            }
            ScheduleKind::CosineMinLr { num_cycles, min_lr_rate } => {
                if s < w {
                    return s / py_max(1.0, w);
                }
                let progress = (s - w) / py_max(1.0, n - w);
                let factor = 0.5 * (1.0 + (std::f64::consts::PI * num_cycles * 2.0 * progress).cos());
                let factor = factor * (1.0 - min_lr_rate) + min_lr_rate;
                py_max(0.0, factor)
            }
        }
    }

    /// The lr the optimizer holds after `k` scheduler steps: `base_lr * lambda(k)`.
    pub fn lr_after_steps(&self, base_lr: f64, k: i64) -> f64 {
        base_lr * self.lambda(k)
    }

    /// The lr used by optimizer step `t` (1-based): `base_lr * lambda(t - 1)`.
    pub fn lr_during_step(&self, base_lr: f64, t: i64) -> f64 {
        self.lr_after_steps(base_lr, t - 1)
    }

    /// What `LambdaLR.state_dict()["lr_lambdas"]` holds per group: `{}` for HF's
    /// `functools.partial` lambdas, `None` for the plain function of the constant schedule.
    pub fn lr_lambda_entry(&self) -> PyValue {
        match self.kind {
            ScheduleKind::Constant => PyValue::None,
            _ => PyValue::Dict(vec![]),
        }
    }
}

/// `LambdaLR.state_dict()` after `last_epoch` steps, for `n_groups` param groups that all
/// started at `base_lr` (HF's case: 2 groups).
#[derive(Clone, Debug, PartialEq)]
pub struct LambdaLrState {
    pub base_lrs: Vec<f64>,
    pub last_epoch: i64,
    pub step_count: i64,
    pub last_lr: Vec<f64>,
    pub lr_lambdas: Vec<PyValue>,
}

impl LambdaLrState {
    pub fn new(schedule: &Schedule, base_lr: f64, n_groups: usize, last_epoch: i64) -> Self {
        let lr = schedule.lr_after_steps(base_lr, last_epoch);
        LambdaLrState {
            base_lrs: vec![base_lr; n_groups],
            last_epoch,
            step_count: last_epoch + 1,
            last_lr: vec![lr; n_groups],
            lr_lambdas: vec![schedule.lr_lambda_entry(); n_groups],
        }
    }

    /// The dict, keys in the torch release's order (`TorchLayout::lambda_lr_keys`; `verbose`,
    /// `_is_initial` and `_get_lr_called_within_step` are False).
    ///
    /// `base_lrs`/`_last_lr` are lists of floats, `last_epoch`/`_step_count` ints.
    pub fn to_py(&self, layout: TorchLayout) -> PyValue {
        let floats = |v: &Vec<f64>| PyValue::List(v.iter().map(|x| PyValue::Float(*x)).collect());
        let e: Vec<(&str, PyValue)> = layout
            .lambda_lr_keys
            .iter()
            .map(|k| {
                let v = match *k {
                    "base_lrs" => floats(&self.base_lrs),
                    "last_epoch" => PyValue::Int(self.last_epoch),
                    "_step_count" => PyValue::Int(self.step_count),
                    "_last_lr" => floats(&self.last_lr),
                    "lr_lambdas" => PyValue::List(self.lr_lambdas.clone()),
                    _ => PyValue::Bool(false), // verbose, _is_initial, _get_lr_called_within_step
                };
                (*k, v)
            })
            .collect();
        PyValue::dict(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn linear_golden_value() {
        // golden/hf-5.24.0/final-step-not-multiple checkpoint-4: lr 3e-05 after 4 of 10 steps.
        let s = Schedule { kind: ScheduleKind::Linear, warmup: 0.0, num_training_steps: 10 };
        assert_eq!(s.lr_after_steps(5e-5, 4), 5e-5 * 0.6);
        assert_eq!(s.lr_after_steps(5e-5, 10), 0.0);
        assert_eq!(s.lr_after_steps(5e-5, 12), 0.0);
    }

    #[test]
    fn warmups() {
        assert_eq!(warmup_steps_v5(0.25, 8), 2);
        assert_eq!(warmup_steps_v5(2.7, 8), 2);
        assert_eq!(warmup_steps_v4(0.0, 0.25, 8), 2.0);
        assert_eq!(warmup_steps_v4(0.25, 0.0, 8), 0.25);
        let s = Schedule { kind: ScheduleKind::ConstantWithWarmup, warmup: 4.0, num_training_steps: 8 };
        assert_eq!(s.lambda(1), 0.25);
        assert_eq!(s.lambda(4), 1.0);
    }

    #[test]
    fn state_dict_keys() {
        let s = Schedule { kind: ScheduleKind::Linear, warmup: 0.0, num_training_steps: 10 };
        let st = LambdaLrState::new(&s, 5e-5, 2, 4);
        assert_eq!(st.to_py(TorchLayout::v2_13()).str_keys(), ["base_lrs", "last_epoch", "_step_count", "_is_initial", "_get_lr_called_within_step", "_last_lr", "lr_lambdas"]);
        assert_eq!(st.to_py(TorchLayout::v2_1()).str_keys(), ["base_lrs", "last_epoch", "verbose", "_step_count", "_get_lr_called_within_step", "_last_lr", "lr_lambdas"]);
    }
}
