//! `create_optimizer_and_scheduler`: the optimizer HF builds for `optim` (AdamW in its kinds, SGD)
//! and the scheduler for `lr_scheduler_type` (LambdaLR schedules, ReduceLROnPlateau, GreedyLR),
//! with `lr_scheduler_kwargs` checked as `get_scheduler` passes them on.

use crate::hf::args::Args;
use crate::hf::error::HfError;
use crate::numerics::greedy::Greedy;
use crate::numerics::lr::{self, Schedule, ScheduleKind};
use crate::numerics::optim::{AdamW, AdamWKind, Param, PyValue};
use crate::numerics::plateau::Plateau;
use crate::numerics::sgd::Sgd;
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
}

impl Optim {
    pub(super) fn set_lr(&mut self, lr: f64) {
        match self {
            Optim::AdamW(o) => o.set_lr(lr),
            Optim::Sgd(o) => o.set_lr(lr),
        }
    }
    pub(super) fn step(&mut self, ps: &mut [Param]) {
        match self {
            Optim::AdamW(o) => o.step(ps),
            Optim::Sgd(o) => o.step(ps),
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
        }
    }
    pub(super) fn state_dict(&self) -> PyValue {
        match self {
            Optim::AdamW(o) => o.state_dict(),
            Optim::Sgd(o) => o.state_dict(),
        }
    }
}

impl<'a> Trainer<'a> {
    pub(super) fn create_scheduler(&mut self, max_steps: i64) -> Result<(), HfError> {
        let a = &self.args;
        let kind = match a.lr_scheduler_type.as_str() {
            "linear" => ScheduleKind::Linear,
            "cosine" => ScheduleKind::Cosine { num_cycles: 0.5 },
            "constant" => ScheduleKind::Constant,
            "constant_with_warmup" => ScheduleKind::ConstantWithWarmup,
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
        let kind = self.check_schedule_kwargs(kind)?;
        let a = &self.args;
        let warmup = if self.profile.warmup_steps_ratio {
            lr::warmup_steps_v5(a.warmup_steps.f(), max_steps) as f64
        } else {
            lr::warmup_steps_v4(a.warmup_steps.f(), a.warmup_ratio, max_steps)
        };
        let s = Schedule { kind, warmup, num_training_steps: max_steps };
        self.current_lr = s.lr_after_steps(a.learning_rate, 0);
        self.opt.set_lr(self.current_lr);
        self.sched = Scheduler::Lambda(s);
        self.set_initial_lr();
        Ok(())
    }

    /// `get_scheduler(..., scheduler_specific_kwargs=lr_scheduler_kwargs)`: constant schedules
    /// drop the kwargs; linear and cosine pass them to their schedule function, which takes
    /// `last_epoch` (and cosine `num_cycles`) and raises Python's TypeError for anything else.
    pub(super) fn check_schedule_kwargs(&self, kind: ScheduleKind) -> Result<ScheduleKind, HfError> {
        if !self.profile.plateau_kwargs {
            return Ok(kind);
        }
        let (func, accepted): (&str, &[&str]) = match kind {
            ScheduleKind::Linear => ("get_linear_schedule_with_warmup", &["last_epoch"]),
            ScheduleKind::Cosine { .. } => ("get_cosine_schedule_with_warmup", &["num_cycles", "last_epoch"]),
            _ => return Ok(kind),
        };
        let mut kind = kind;
        for (k, v) in &self.args.lr_scheduler_kwargs {
            if ["optimizer", "num_warmup_steps", "num_training_steps"].contains(&k.as_str()) {
                return Err(HfError::not_modelled(format!("lr_scheduler_kwargs {k} repeats a positional argument")));
            }
            if !accepted.contains(&k.as_str()) {
                return Err(HfError::new("TypeError", format!("{func}() got an unexpected keyword argument '{k}'")));
            }
            match (k.as_str(), v.as_f64()) {
                ("num_cycles", Some(c)) => kind = ScheduleKind::Cosine { num_cycles: c },
                ("last_epoch", Some(e)) if e == -1.0 => {}
                _ => return Err(HfError::not_modelled(format!("lr_scheduler_kwargs {k}={v}"))),
            }
        }
        Ok(kind)
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

pub(super) fn optim_kind(args: &Args) -> Result<AdamWKind, HfError> {
    match args.optim.as_str() {
        "adamw_torch_fused" => Ok(AdamWKind::TorchFused),
        "adamw_torch" => Ok(AdamWKind::TorchSingleTensor),
        "adamw_hf" => Ok(AdamWKind::HfAdamW),
        other => Err(HfError::not_modelled(format!("optim {other}"))),
    }
}
