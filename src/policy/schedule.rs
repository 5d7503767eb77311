//! When to log, evaluate, save and stop: HF's DefaultFlowCallback as pure functions of the step
//! and the resolved intervals. The executor ORs the result into its control flags.

use crate::hf::args::{Args, Interval, Num};
use crate::hf::behaviors::FinalSave;
use crate::hf::profile::Profile;
use crate::hf::state::{Control, Intervals};

/// Python's `a % b == 0` for a step and an interval.
fn divides(step: u64, n: Num) -> bool {
    let b = n.f();
    if b == 0.0 {
        // Python raises ZeroDivisionError; HF's validation keeps every checked interval nonzero.
        return false;
    }
    (step as f64) % b == 0.0
}

/// `DefaultFlowCallback.on_step_end`.
pub fn on_step_end(args: &Args, iv: &Intervals, profile: &Profile, global_step: u64, max_steps: i64, c: &mut Control) {
    if global_step == 1 && args.logging_first_step {
        c.should_log = true;
    }
    if args.logging_strategy == Interval::Steps && divides(global_step, iv.logging) {
        c.should_log = true;
    }
    let eval_due = |step: u64| {
        args.eval_strategy == Interval::Steps && iv.eval.is_some_and(|e| divides(step, e)) && args.eval_delay.f() <= step as f64
    };
    if eval_due(global_step) {
        c.should_evaluate = true;
    }
    if args.save_strategy == Interval::Steps && iv.save.f() > 0.0 && divides(global_step, iv.save) {
        c.should_save = true;
    }
    if global_step as i64 >= max_steps {
        c.should_training_stop = true;
        if profile.final_step_eval
            && args.eval_strategy == Interval::Steps
            && !iv.eval.is_some_and(|e| divides(global_step, e))
            && args.eval_delay.f() <= global_step as f64
        {
            c.should_evaluate = true;
        }
        let forced = match profile.final_step_save {
            FinalSave::Never => false,
            FinalSave::AnyStrategy => args.save_strategy != Interval::No,
            FinalSave::NotBest => !matches!(args.save_strategy, Interval::No | Interval::Best),
            FinalSave::StepsOnly => args.save_strategy == Interval::Steps,
        };
        if forced {
            c.should_save = true;
        }
    }
}

/// `DefaultFlowCallback.on_epoch_end`.
pub fn on_epoch_end(args: &Args, epoch: f64, c: &mut Control) {
    if args.logging_strategy == Interval::Epoch {
        c.should_log = true;
    }
    if args.eval_strategy == Interval::Epoch && args.eval_delay.f() <= epoch {
        c.should_evaluate = true;
    }
    if args.save_strategy == Interval::Epoch {
        c.should_save = true;
    }
}
