//! `create_optimizer_and_scheduler`: the optimizer HF builds for `optim` (AdamW in its kinds, SGD,
//! Adagrad, RMSprop, transformers' Adafactor)
//! and the scheduler for `lr_scheduler_type` (LambdaLR schedules, ReduceLROnPlateau, GreedyLR),
//! with `lr_scheduler_kwargs` checked as `get_scheduler` passes them on.

use crate::hf::args::Args;
use crate::formats::pyjson::float_repr;
use crate::hf::error::HfError;
use crate::numerics::greedy::Greedy;
use crate::numerics::lr::{self, Schedule, ScheduleKind};
use crate::numerics::optim::{AdamW, AdamWKind, Param, PyValue};
use crate::numerics::plateau::Plateau;
use crate::numerics::sgd::Sgd;
use crate::numerics::adafactor::Adafactor;
use crate::numerics::adagrad::Adagrad;
use crate::numerics::rmsprop::{Rmsprop, RmspropHyper};
use crate::hf::profile::Profile;
use super::Trainer;

/// The learning-rate scheduler HF built.
pub(super) enum Scheduler {
    Lambda(Schedule),
    Plateau(Plateau),
    /// transformers' GreedyLR (5.4+): stepped after evaluations like ReduceLROnPlateau.
    Greedy(Greedy),
}

/// The optimizer HF built.
pub(super) enum Optim {
    AdamW(AdamW),
    Sgd(Sgd),
    Adagrad(Adagrad),
    Rmsprop(Rmsprop),
    Adafactor(Adafactor),
}

impl Optim {
    pub(super) fn set_lr(&mut self, lr: f64) {
        match self {
            Optim::AdamW(o) => o.set_lr(lr),
            Optim::Sgd(o) => o.set_lr(lr),
            Optim::Adagrad(o) => o.set_lr(lr),
            Optim::Rmsprop(o) => o.set_lr(lr),
            Optim::Adafactor(o) => o.set_lr(lr),
        }
    }
    pub(super) fn step(&mut self, ps: &mut [Param]) {
        match self {
            Optim::AdamW(o) => o.step(ps),
            Optim::Sgd(o) => o.step(ps),
            Optim::Adagrad(o) => o.step(ps),
            Optim::Rmsprop(o) => o.step(ps),
            Optim::Adafactor(o) => o.step(ps),
        }
    }
    /// A plan's step: the state a step leaves, without the arithmetic.
    pub(super) fn count_step(&mut self, ps: &[Param]) {
        match self {
            Optim::AdamW(o) => o.count_step(ps),
            Optim::Sgd(o) => o.count_step(),
            Optim::Adagrad(o) => o.count_step(),
            Optim::Rmsprop(o) => o.count_step(ps),
            Optim::Adafactor(o) => o.count_step(ps),
        }
    }
    pub(super) fn set_initial_lr(&mut self, lr: Option<f64>) {
        match self {
            Optim::AdamW(o) => {
                for g in o.groups.iter_mut() {
                    g.initial_lr = lr;
                }
            }
            Optim::Sgd(o) => o.set_initial_lr(lr),
            Optim::Adagrad(o) => o.set_initial_lr(lr),
            Optim::Rmsprop(o) => o.set_initial_lr(lr),
            Optim::Adafactor(o) => o.set_initial_lr(lr),
        }
    }
    pub(super) fn state_dict(&self) -> PyValue {
        match self {
            Optim::AdamW(o) => o.state_dict(),
            Optim::Sgd(o) => o.state_dict(),
            Optim::Adagrad(o) => o.state_dict(),
            Optim::Rmsprop(o) => o.state_dict(),
            Optim::Adafactor(o) => o.state_dict(),
        }
    }
    /// The number of parameters in each group (torch's `load_state_dict` checks them).
    pub(super) fn group_sizes(&self) -> Vec<usize> {
        match self {
            Optim::AdamW(o) => o.groups.iter().map(|g| g.params.len()).collect(),
            Optim::Sgd(o) => o.groups.iter().map(|g| g.0.len()).collect(),
            Optim::Adagrad(o) => o.groups.iter().map(|g| g.params.len()).collect(),
            Optim::Rmsprop(o) => o.groups.iter().map(|g| g.params.len()).collect(),
            Optim::Adafactor(o) => o.groups.iter().map(|g| g.params.len()).collect(),
        }
    }
    /// `optimizer.load_state_dict(...)` of a resume; returns the groups' lrs after it.
    pub(super) fn load_state_dict(&mut self, v: &PyValue) -> Result<Vec<f64>, String> {
        match self {
            Optim::AdamW(o) => o.load_state_dict(v).map(|_| o.groups.iter().map(|g| g.lr).collect()),
            Optim::Sgd(o) => o.load_state_dict(v).map(|_| o.lrs()),
            Optim::Adagrad(o) => o.load_state_dict(v).map(|_| o.groups.iter().map(|g| g.lr).collect()),
            Optim::Rmsprop(o) => o.load_state_dict(v).map(|_| o.groups.iter().map(|g| g.lr).collect()),
            Optim::Adafactor(o) => o.load_state_dict(v).map(|_| o.groups.iter().map(|g| g.lr).collect()),
        }
    }

    /// The optimizer `create_optimizer` builds for the arguments: HF's two parameter groups
    /// (`decay` from `hf_decay_mask`, over parameters of these shapes) and the keywords
    /// `get_optimizer_cls_and_kwargs` passes. Values the constructor rejects are built as given:
    /// `check_optimizer_args` raises its error where the release builds the optimizer.
    pub(super) fn build(args: &Args, profile: &Profile, decay: &[bool], shapes: &[Vec<i64>]) -> Result<Optim, HfError> {
        let (lr, wd, layout) = (args.learning_rate, args.weight_decay, profile.torch_layout);
        // A value optim_args cannot give is left to check_optimizer_args (its ValueError).
        let given = torch_optim_args(args, profile).unwrap_or_default();
        let kw = |k: &str| given.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
        let float = |k: &str| kw(k).and_then(|v| v.parse::<f64>().ok());
        Ok(match args.optim.as_str() {
            "sgd" => {
                if let Some(k) = ["momentum", "dampening", "nesterov"].into_iter().find(|k| kw(k).is_some()) {
                    return Err(HfError::not_modelled(format!("optim_args {k} for SGD (its momentum is not modelled)")));
                }
                Optim::Sgd(Sgd::hf(layout, lr, wd, decay))
            }
            "adagrad" => Optim::Adagrad(Adagrad::hf(layout, lr, wd, decay, shapes, float("lr_decay"), float("eps"))),
            "rmsprop" => {
                let d = RmspropHyper::default();
                let hyper = RmspropHyper {
                    momentum: float("momentum").map_or(d.momentum, PyValue::Float),
                    alpha: float("alpha").unwrap_or(d.alpha),
                    eps: float("eps").unwrap_or(d.eps),
                    centered: kw("centered").map_or(d.centered, |v| ["true", "1", "yes"].contains(&v.to_lowercase().as_str())),
                };
                Optim::Rmsprop(Rmsprop::hf(layout, lr, wd, decay, hyper))
            }
            "adafactor" => {
                if let Some(s) = shapes.iter().find(|s| !Adafactor::supports(s)) {
                    return Err(HfError::not_modelled(format!("Adafactor's factored step for a parameter of shape {s:?}")));
                }
                Optim::Adafactor(Adafactor::hf(lr, wd, decay))
            }
            _ => Optim::AdamW(AdamW::hf(optim_kind(args)?, layout, lr, (args.adam_beta1, args.adam_beta2), args.adam_epsilon, wd, decay)),
        })
    }
}

/// The keys torch's SGD, Adagrad and RMSprop take from `optim_args` (the releases that pass
/// them: `torch_optimizers_take_optim_args`), in the order HF reads them; the booleans.
fn optim_args_keys(optim: &str) -> (&'static [&'static str], &'static [&'static str]) {
    match optim {
        "sgd" => (&["momentum", "dampening", "weight_decay"], &["nesterov"]),
        "adagrad" => (&["lr_decay", "weight_decay", "eps"], &[]),
        "rmsprop" => (&["momentum", "alpha", "eps", "weight_decay"], &["centered"]),
        _ => (&[], &[]),
    }
}

/// `get_optimizer_cls_and_kwargs`'s `optim_args` (spaces removed, "k=v" pairs; a later key
/// replaces an earlier one's value in place, as a dict does) that reach this optimizer, in the
/// order the release reads them, with `float(value)`'s ValueError for a float key.
fn torch_optim_args(args: &Args, profile: &Profile) -> Result<Vec<(String, String)>, HfError> {
    let Some(s) = args.optim_args.as_ref().filter(|_| profile.torch_optimizers_take_optim_args) else { return Ok(vec![]) };
    let mut map: Vec<(String, String)> = vec![];
    for mapping in s.replace(' ', "").split(',') {
        let mut kv = mapping.split('=');
        let (Some(k), Some(v), None) = (kv.next(), kv.next(), kv.next()) else { continue };
        match map.iter_mut().find(|(n, _)| n == k) {
            Some(e) => e.1 = v.to_string(),
            None => map.push((k.to_string(), v.to_string())),
        }
    }
    let (floats, bools) = optim_args_keys(&args.optim);
    let mut out = vec![];
    for k in floats.iter().chain(bools) {
        if let Some((_, v)) = map.iter().find(|(n, _)| n == k) {
            // Python's float() of the text (Rust's parse takes the same decimal, inf and nan
            // spellings; float()'s digit underscores are not modelled).
            if floats.contains(k) && v.parse::<f64>().is_err() {
                if v.contains('_') {
                    return Err(HfError::not_modelled(format!("optim_args {k}={v} (float() with underscores)")));
                }
                return Err(HfError::value(format!("could not convert string to float: {}", crate::formats::pyjson::py_str_repr(v))));
            }
            out.push((k.to_string(), v.clone()));
        }
    }
    Ok(out)
}

impl<'a> Trainer<'a> {
    pub(super) fn create_scheduler(&mut self, max_steps: i64) -> Result<(), HfError> {
        let a = &self.args;
        let kind = match a.lr_scheduler_type.as_str() {
            "linear" => ScheduleKind::Linear,
            "cosine" => ScheduleKind::Cosine { num_cycles: 0.5 },
            "constant" => ScheduleKind::Constant,
            "constant_with_warmup" => ScheduleKind::ConstantWithWarmup,
            "cosine_with_restarts" => ScheduleKind::CosineHardRestarts { num_cycles: 1.0 },
            // `lr_init = optimizer.defaults["lr"]`: the learning rate HF built the optimizer with.
            "polynomial" => ScheduleKind::Polynomial { lr_end: 1e-7, power: 1.0, lr_init: a.learning_rate },
            // The timescale is settled below, once the warmup is known.
            "inverse_sqrt" => ScheduleKind::InverseSqrt { timescale: f64::NAN },
            // NaN: neither min_lr nor min_lr_rate given (settled below).
            "cosine_with_min_lr" => ScheduleKind::CosineMinLr { num_cycles: 0.5, min_lr_rate: f64::NAN },
            "reduce_lr_on_plateau" => {
                let kwargs = if self.profile.plateau_kwargs { a.lr_scheduler_kwargs.clone() } else { Default::default() };
                let pl = Plateau::from_kwargs(&serde_json::Value::Object(kwargs), &[a.learning_rate, a.learning_rate], self.profile.torch_layout)
                    .map_err(|e| HfError::new(&e.type_name, e.message))?;
                self.sched = Scheduler::Plateau(pl);
                self.set_initial_lr();
                return Ok(());
            }
            "greedy" => {
                let g = Greedy::from_kwargs(
                    &serde_json::Value::Object(a.lr_scheduler_kwargs.clone()),
                    &[a.learning_rate, a.learning_rate],
                )
                .map_err(|e| HfError::new(&e.type_name, e.message))?;
                self.sched = Scheduler::Greedy(g);
                self.set_initial_lr();
                return Ok(());
            }
            other => return Err(HfError::not_modelled(format!("lr_scheduler_type {other}"))),
        };
        let a = &self.args;
        let warmup = if self.profile.warmup_steps_ratio {
            lr::warmup_steps_v5(a.warmup_steps.f(), max_steps) as f64
        } else {
            lr::warmup_steps_v4(a.warmup_steps.f(), a.warmup_ratio, max_steps)
        };
        let kind = self.check_schedule_kwargs(kind, warmup)?;
        let a = &self.args;
        let s = Schedule { kind, warmup, num_training_steps: max_steps };
        self.current_lr = s.lr_after_steps(a.learning_rate, 0);
        self.opt.set_lr(self.current_lr);
        self.sched = Scheduler::Lambda(s);
        self.set_initial_lr();
        Ok(())
    }

    /// `get_scheduler(..., scheduler_specific_kwargs=lr_scheduler_kwargs)`: constant schedules
    /// drop the kwargs; the others pass them to their schedule function, which raises Python's
    /// TypeError for a keyword it does not take, then checks its own values (polynomial's
    /// `lr_end`, cosine_with_min_lr's `min_lr`/`min_lr_rate`). Where the release has no
    /// `lr_scheduler_kwargs` every schedule gets its defaults.
    pub(super) fn check_schedule_kwargs(&self, kind: ScheduleKind, warmup: f64) -> Result<ScheduleKind, HfError> {
        let (func, accepted): (&str, &[&str]) = match kind {
            ScheduleKind::Linear => ("get_linear_schedule_with_warmup", &["last_epoch"]),
            ScheduleKind::Cosine { .. } => ("get_cosine_schedule_with_warmup", &["num_cycles", "last_epoch"]),
            ScheduleKind::CosineHardRestarts { .. } => ("get_cosine_with_hard_restarts_schedule_with_warmup", &["num_cycles", "last_epoch"]),
            ScheduleKind::Polynomial { .. } => ("get_polynomial_decay_schedule_with_warmup", &["lr_end", "power", "last_epoch"]),
            ScheduleKind::InverseSqrt { .. } => ("get_inverse_sqrt_schedule", &["timescale", "last_epoch"]),
            ScheduleKind::CosineMinLr { .. } => ("get_cosine_with_min_lr_schedule_with_warmup", &["num_cycles", "last_epoch", "min_lr", "min_lr_rate"]),
            ScheduleKind::Constant | ScheduleKind::ConstantWithWarmup => return Ok(kind),
        };
        let empty = serde_json::Map::new();
        let dropped = matches!(kind, ScheduleKind::InverseSqrt { .. }) && !self.profile.inverse_sqrt_takes_kwargs;
        let kwargs = if self.profile.plateau_kwargs && !dropped { &self.args.lr_scheduler_kwargs } else { &empty };
        let mut given: Vec<(&str, f64)> = vec![];
        for (k, v) in kwargs {
            if ["optimizer", "num_warmup_steps", "num_training_steps"].contains(&k.as_str()) {
                return Err(HfError::not_modelled(format!("lr_scheduler_kwargs {k} repeats a positional argument")));
            }
            if !accepted.contains(&k.as_str()) {
                return Err(HfError::new("TypeError", format!("{func}() got an unexpected keyword argument '{k}'")));
            }
            match (k.as_str(), v.as_f64()) {
                ("last_epoch", Some(e)) if e == -1.0 => {}
                (_, Some(x)) if k != "last_epoch" && !v.is_null() => given.push((k.as_str(), x)),
                _ => return Err(HfError::not_modelled(format!("lr_scheduler_kwargs {k}={v}"))),
            }
        }
        let get = |name: &str| given.iter().find(|(k, _)| *k == name).map(|(_, x)| *x);
        let lr = self.args.learning_rate;
        Ok(match kind {
            ScheduleKind::Cosine { num_cycles } => ScheduleKind::Cosine { num_cycles: get("num_cycles").unwrap_or(num_cycles) },
            ScheduleKind::CosineHardRestarts { num_cycles } => {
                ScheduleKind::CosineHardRestarts { num_cycles: get("num_cycles").unwrap_or(num_cycles) }
            }
            ScheduleKind::Polynomial { lr_end, power, lr_init } => {
                let lr_end = get("lr_end").unwrap_or(lr_end);
                if !(lr_init > lr_end) {
                    let be = if self.profile.polynomial_lr_end_typo { "be be" } else { "be" };
                    return Err(HfError::value(format!("lr_end ({}) must {be} smaller than initial lr ({})", float_repr(lr_end), float_repr(lr_init))));
                }
                ScheduleKind::Polynomial { lr_end, power: get("power").unwrap_or(power), lr_init }
            }
            ScheduleKind::InverseSqrt { .. } => {
                // `timescale = num_warmup_steps` (4.39: `or 10_000`); with both 0 the lambda's
                // first call, in LambdaLR's constructor, divides by zero.
                let timescale = match get("timescale") {
                    Some(t) => t,
                    None if warmup == 0.0 => self.profile.inverse_sqrt_timescale_fallback.map_or(0.0, |t| t as f64),
                    None => warmup,
                };
                if timescale == 0.0 {
                    if warmup == 0.0 {
                        return Err(HfError::new("ZeroDivisionError", "division by zero"));
                    }
                    return Err(HfError::not_modelled("inverse_sqrt with timescale 0 after a warmup"));
                }
                ScheduleKind::InverseSqrt { timescale }
            }
            ScheduleKind::CosineMinLr { num_cycles, .. } => {
                let min_lr_rate = match (get("min_lr"), get("min_lr_rate")) {
                    (Some(_), Some(_)) => return Err(HfError::value("Only one of min_lr or min_lr_rate should be set")),
                    (Some(m), None) => m / lr,
                    (None, Some(r)) => r,
                    (None, None) => {
                        return Err(HfError::value("One of min_lr or min_lr_rate should be set through the `lr_scheduler_kwargs`"))
                    }
                };
                ScheduleKind::CosineMinLr { num_cycles: get("num_cycles").unwrap_or(num_cycles), min_lr_rate }
            }
            other => other,
        })
    }

    /// `create_optimizer`: the optimizer's constructor checks what HF hands it (called where the
    /// release builds the optimizer, `optimizer_created`, so its error leaves the state as HF's).
    pub(super) fn check_optimizer_args(&self) -> Result<(), HfError> {
        let a = &self.args;
        // `get_optimizer_cls_and_kwargs` first parses `optim_args` ("k=v,k=v", spaces removed):
        // `key, value = mapping.split("=")` is Python's unpacking, with its ValueError.
        if let Some(s) = &a.optim_args {
            for mapping in s.replace(' ', "").split(',') {
                let parts = mapping.split('=').count();
                if parts < 2 {
                    return Err(HfError::value(format!("not enough values to unpack (expected 2, got {parts})")));
                }
                if parts > 2 {
                    return Err(HfError::value("too many values to unpack (expected 2)"));
                }
            }
        }
        if is_bnb(&a.optim) {
            let (type_, message) = self.profile.bnb_missing_error;
            return Err(HfError::new(type_, message));
        }
        if let Optim::AdamW(o) = &self.opt {
            if o.kind == AdamWKind::TorchFused && !self.profile.torch_layout.fused_adamw_on_cpu {
                return Err(HfError::new(
                    "RuntimeError",
                    "`fused=True` requires all the params to be floating point Tensors of supported devices: ['cuda', 'xpu', 'privateuseone'].",
                ));
            }
        }
        // The optimizer's own `optim_args` (5.3+ for torch's SGD, Adagrad, RMSprop): `float()`
        // of each, then its constructor's checks of what it got (`weight_decay` there is the
        // constructor's default only: HF's groups carry their own).
        let kw = torch_optim_args(a, self.profile)?;
        let given = |k: &str| kw.iter().find(|(n, _)| n == k).and_then(|(_, v)| v.parse::<f64>().ok());
        let lr = a.learning_rate;
        let msg = match &self.opt {
            Optim::AdamW(o) => crate::numerics::optim::constructor_error(o.kind, lr, (a.adam_beta1, a.adam_beta2), a.adam_epsilon),
            Optim::Sgd(_) => {
                if lr < 0.0 {
                    Some(format!("Invalid learning rate: {}", float_repr(lr)))
                } else {
                    given("weight_decay").filter(|w| *w < 0.0).map(|w| format!("Invalid weight_decay value: {}", float_repr(w)))
                }
            }
            Optim::Adagrad(o) => Adagrad::constructor_error(lr, given("lr_decay"), given("weight_decay"), Some(o.eps)),
            Optim::Rmsprop(o) => Rmsprop::constructor_error(lr, &o.hyper, given("weight_decay")),
            // HF passes `lr` with `relative_step=False`, which Adafactor accepts whatever it is.
            Optim::Adafactor(_) => None,
        };
        msg.map_or(Ok(()), |m| Err(HfError::value(m)))
    }

    /// LambdaLR records `initial_lr` in every group; ReduceLROnPlateau and GreedyLR do not.
    pub(super) fn set_initial_lr(&mut self) {
        let lr = match self.sched {
            Scheduler::Lambda(_) => Some(self.args.learning_rate),
            Scheduler::Plateau(_) | Scheduler::Greedy(_) => None,
        };
        self.opt.set_initial_lr(lr);
    }

}

/// The bitsandbytes optimizers the spec runs: `create_optimizer` raises for them, as no profile
/// pins bitsandbytes (`bnb_missing_error`); the seed config's one is golden-checked.
fn is_bnb(optim: &str) -> bool {
    optim == "paged_adamw_32bit"
}

pub(super) fn optim_kind(args: &Args) -> Result<AdamWKind, HfError> {
    match args.optim.as_str() {
        // Never stepped: `check_optimizer_args` raises HF's error where the release builds it.
        o if is_bnb(o) => Ok(AdamWKind::TorchSingleTensor),
        "adamw_torch_fused" => Ok(AdamWKind::TorchFused),
        "adamw_torch" => Ok(AdamWKind::TorchSingleTensor),
        "adamw_hf" => Ok(AdamWKind::HfAdamW),
        other => Err(HfError::not_modelled(format!("optim {other}"))),
    }
}
