//! `evaluate()` over every eval set (`evaluation_loop`: the eval loss as numpy averages it, the
//! scripted compute_metrics, the prefixing and speed keys), `_determine_best_metric`, and the
//! ReduceLROnPlateau / GreedyLR step after an evaluation round.

use crate::formats::pyjson::PyJson;
use crate::hf::args::Interval;
use crate::hf::behaviors::BestTiming;
use crate::hf::error::HfError;
use crate::hf::state::{is_log_context, is_volatile};
use crate::numerics::py_math::{numpy_mean_f32, py_round};
use crate::numerics::shard;
use crate::policy::best;
use std::time::Instant;
use super::optimizer::Scheduler;
use super::Trainer;

impl<'a> Trainer<'a> {
    /// `_determine_best_metric` (4.47+): after every training evaluation.
    pub(super) fn determine_best(&mut self, metrics: &[(String, PyJson)]) -> Result<bool, HfError> {
        let p = self.profile;
        let Some(key) = self.args.metric_to_check() else { return Ok(false) };
        let v = best::lookup(metrics, &key, p.missing_metric_best)?;
        let greater = self.args.greater_is_better.unwrap_or(true);
        let records = p.best_timing == BestTiming::EveryEvalByStep
            && match self.args.save_strategy {
                Interval::Steps | Interval::Epoch => true,
                Interval::Best => p.best_strategy_records_step,
                Interval::No => false,
            };
        let step = self.state.global_step;
        Ok(if p.best_timing == BestTiming::EveryEvalByPath {
            let folder = format!("{}/checkpoint-{step}", self.output_rel());
            self.state.best.after_eval_by_path(&v, greater, &folder)
        } else {
            self.state.best.after_eval(&v, greater, step, records)
        })
    }

    /// One evaluation round (every eval set), with the plateau step and early stopping.
    /// Returns the merged metrics.
    pub(super) fn evaluate_round(&mut self, on_start: bool) -> Result<Vec<(String, PyJson)>, HfError> {
        if self.evals.is_empty() {
            return Err(HfError::value("Trainer: evaluation requires an eval_dataset."));
        }
        let mut merged: Vec<(String, PyJson)> = vec![];
        for k in 0..self.evals.len() {
            let m = self.evaluate_set(k)?;
            for (key, v) in m {
                if let Some(slot) = merged.iter_mut().find(|(kk, _)| *kk == key) {
                    slot.1 = v;
                } else {
                    merged.push((key, v));
                }
            }
        }
        // on_evaluate callbacks (early stopping) ran inside evaluate_set for each set; HF's
        // ReduceLROnPlateau step follows the whole round.
        if !on_start {
            if matches!(self.sched, Scheduler::Plateau(_) | Scheduler::Greedy(_)) {
                let key = self.args.metric_to_check().unwrap_or_else(|| "eval_loss".into());
                let v = best::lookup(&merged, &key, self.profile.missing_metric_plateau)?;
                let metric = best::as_f64(&v).unwrap_or(f64::NAN);
                let new_lr = match &mut self.sched {
                    Scheduler::Plateau(pl) => {
                        pl.step(metric);
                        pl.lrs_f64()[0]
                    }
                    Scheduler::Greedy(g) => {
                        g.try_step(metric).map_err(|e| HfError::new(&e.type_name, e.message))?;
                        g.lrs_f64()[0]
                    }
                    Scheduler::Lambda(_) => unreachable!("matched above"),
                };
                self.current_lr = new_lr;
                self.opt.set_lr(new_lr);
            }
        }
        Ok(merged)
    }

    /// `evaluate()` of one set: eval loss, scripted metrics, prefixing, speed keys, the log.
    pub(super) fn evaluate_set(&mut self, k: usize) -> Result<Vec<(String, PyJson)>, HfError> {
        let start = Instant::now();
        self.rng.begin_eval_loop();
        if let Some(o) = &mut self.other_rng {
            o.begin_eval_loop();
        }
        // jit_mode_eval: `_wrap_model` traces the model on `next(iter(dataloader))` before the
        // loop, a second iterator of the evaluation DataLoader (another `_base_seed` draw), and
        // the loop then reports `self.jit_compilation_time` (wall-clock) after the loss.
        let jit = self.args.is_true("jit_mode_eval");
        if jit && self.sc.model.kind != crate::world::scenario::ModelKind::Regression {
            return Err(HfError::not_modelled("jit_mode_eval with this model kind (its trace is golden-checked for the regression model only)"));
        }
        if jit && self.profile.jit_eval_call_fails {
            return Err(HfError::new(
                "RuntimeError",
                "forward() expected at most 3 argument(s) but received 4 argument(s). Declaration: forward(__torch__.___torch_mangle_1.RegressionModel self, Tensor input_x, Tensor labels) -> ((Tensor, Tensor))",
            ));
        }
        if jit {
            self.rng.begin_eval_loop();
            if let Some(o) = &mut self.other_rng {
                o.begin_eval_loop();
            }
        }
        if self.args.is_true("use_legacy_prediction_loop") && self.profile.legacy_prediction_loop_fails {
            return Err(HfError::new(
                "TypeError",
                "repeat(): argument 'repeats' (position 1) must be tuple of ints, but found element of type NoneType at pos 0",
            ));
        }
        let set = &self.evals[k];
        let prefix = match &set.name {
            Some(n) => format!("eval_{n}"),
            None => "eval".to_string(),
        };
        let bs = self.args.per_device_eval_batch_size;
        let n = set.x.len();
        self.check_eval_inputs(n)?;
        self.check_eval_concat()?;
        let given = self.plan.as_mut().and_then(|f| f.given.pop_front());
        let mut metrics = match given {
            Some(entry) => entry.into_iter().filter(|(k, _)| !is_volatile(k) && !is_log_context(k)).collect(),
            None if self.plan.is_some() => self.assumed_metrics(k, &prefix),
            None => self.computed_metrics(k, &prefix),
        };
        if jit {
            let at = metrics.iter().position(|(k, _)| *k == format!("{prefix}_loss")).map_or(metrics.len(), |i| i + 1);
            let t = py_round(start.elapsed().as_secs_f64(), 4);
            metrics.insert(at, (format!("{prefix}_jit_compilation_time"), PyJson::Float(t)));
        }
        // Keys not already prefixed move to the end under the prefix, in order.
        let (mut done, rest): (Vec<_>, Vec<_>) = metrics.drain(..).partition(|(k, _)| k.starts_with(&format!("{prefix}_")));
        for (k, v) in rest {
            done.push((format!("{prefix}_{k}"), v));
        }
        let mut metrics = done;
        let rt = start.elapsed().as_secs_f64();
        let steps = n.div_ceil(bs);
        metrics.push((format!("{prefix}_runtime"), PyJson::Float(py_round(rt, 4))));
        metrics.push((format!("{prefix}_samples_per_second"), PyJson::Float(py_round(n as f64 / rt, 3))));
        metrics.push((format!("{prefix}_steps_per_second"), PyJson::Float(py_round(steps as f64 / rt, 3))));
        self.log(metrics.clone());
        if let Some(e) = self.state.epoch {
            metrics.push(("epoch".into(), self.log_epoch(e)));
        }
        self.early_stopping_on_evaluate(&metrics)?;
        Ok(metrics)
    }

    /// The scripted compute_metrics entry of this call for eval set `k` (its keys as scripted).
    pub(super) fn scripted_metrics(&mut self, k: usize) -> Vec<(String, PyJson)> {
        let mut metrics = vec![];
        // prediction_loss_only: the loop gathers no predictions, so compute_metrics is not
        // called (and its script does not advance).
        if self.args.prediction_loss_only {
            return metrics;
        }
        if let Some(script) = &self.sc.metrics {
            if self.metric_calls.len() <= k {
                self.metric_calls.resize(k + 1, 0);
            }
            let call = self.metric_calls[k];
            self.metric_calls[k] += 1;
            if let Some(entry) = script.get(call) {
                let part: Option<&serde_json::Map<String, serde_json::Value>> = match &self.evals[k].name {
                    Some(name) => entry.get(name).and_then(|v| v.as_object()),
                    None => Some(entry),
                };
                if let Some(part) = part {
                    for (mk, mv) in part {
                        metrics.push((mk.clone(), PyJson::from(mv)));
                    }
                }
            }
        }
        metrics
    }


    /// A trained run's metrics of one eval set: the eval loss of the model and the scripted
    /// metrics.
    pub(super) fn computed_metrics(&mut self, k: usize, prefix: &str) -> Vec<(String, PyJson)> {
        if !self.evaluation_has_labels() {
            // `prediction_step` returns no loss and no labels: no eval loss, no compute_metrics.
            return vec![];
        }
        let set = &self.evals[k];
        let bs = self.args.per_device_eval_batch_size;
        let n = set.x.len();
        let rows: Vec<usize> = (0..n).collect();
        let mut losses: Vec<f32> = vec![];
        let chunks: Vec<Vec<usize>> = rows.chunks(bs).filter(|c| !(self.args.dataloader_drop_last && c.len() < bs)).map(|c| c.to_vec()).collect();
        let world = self.launch.world_size();
        if world == 1 {
            let nbatches = chunks.len();
            for (bi, c) in chunks.iter().enumerate() {
                let (x, y) = set.batch(c);
                let l = tch::no_grad(|| self.model.loss(&x, &y));
                let l = f32::try_from(&l).unwrap();
                // losses.repeat(eval_batch_size), then gather_for_metrics drops the padding of the
                // last batch.
                let keep = if bi + 1 == nbatches { c.len() } else { bs };
                losses.extend(std::iter::repeat_n(l, keep));
            }
        } else {
            // Each process evaluates its shard (the last batches completed from the first rows);
            // each step's losses are gathered in rank order, and `gather_for_metrics` with
            // `all_losses[:num_samples]` keeps the first `len(eval_dataset)` of them.
            for step in shard::steps_of(&chunks, bs, world, self.args.dataloader_drop_last) {
                for c in &step {
                    let (x, y) = set.batch(c);
                    let l = tch::no_grad(|| self.model.loss(&x, &y));
                    let l = if self.profile.launch_rules().eval_loss_times_world { l * world as f64 } else { l };
                    losses.extend(std::iter::repeat_n(f32::try_from(&l).unwrap(), c.len()));
                }
            }
            losses.truncate(n);
        }
        let mut metrics = self.scripted_metrics(k);
        if !losses.is_empty() {
            let finite: Vec<f32> = losses.iter().copied().filter(|l| l.is_finite()).collect();
            let use_ = if self.profile.eval_loss_skips_nonfinite && !finite.is_empty() { finite } else { losses };
            metrics.push((format!("{prefix}_loss"), PyJson::Float(numpy_mean_f32(&use_) as f64)));
        }
        metrics
    }
}
