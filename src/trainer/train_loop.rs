//! `_inner_training_loop`: the epochs and their batches as the release fetches them, the
//! micro-batch (`training_step`), the optimizer step with clipping and the scheduler step,
//! `_maybe_log_save_evaluate`, and the end of training (`_load_best_model`, the end-of-train
//! `_sorted_checkpoints` and the save_total_limit=1 cleanup).

use crate::formats::pyjson::PyJson;
use crate::hf::args::{self, Interval};
use crate::hf::behaviors::{BestTiming, CallbackRefresh, GaLoss, LoggedLr, Prefetch, SchedulerCreated};
use crate::hf::error::HfError;
use crate::hf::state::{Intervals, LogEntry};
use crate::numerics::optim;
use crate::numerics::py_math::py_round;
use crate::numerics::shard;
use crate::policy::{rotation, schedule};
use crate::save::{shards, store};
use crate::world::scenario::ModelKind;
use std::time::Instant;
use super::{io_err, DeleteRule, DiskEvent, Trainer};
use super::optimizer::{Optim, Scheduler};

impl<'a> Trainer<'a> {
    /// `train()` → `_inner_training_loop`.
    pub(super) fn train(&mut self) -> Result<(), HfError> {
        let p = self.profile;
        self.train_called = true;
        self.check_train_sampler()?;
        self.check_dataloader_workers()?;
        self.check_autocast()?;
        let a = &self.args;
        let bs = self.state_batch_size.unwrap_or(a.per_device_train_batch_size);
        let n = self.train.x.len();
        let world = self.launch.world_size();
        if world > 2 {
            return Err(HfError::not_modelled("a launch of more than 2 processes (the order in which gloo sums their gradients)"));
        }
        // accelerate's BatchSamplerShard: each process's share of the epoch's batches.
        let len_dl = shard::sharded_len(if a.dataloader_drop_last { n / bs } else { n.div_ceil(bs) }, world, a.dataloader_drop_last);
        let ga = a.gradient_accumulation_steps;
        let nupe = if p.ceil_update_steps {
            (len_dl / ga + usize::from(len_dl % ga > 0)).max(1)
        } else {
            (len_dl / ga).max(1)
        };
        let (max_steps, num_train_epochs) = if len_dl == 0 && p.empty_dataloader_runs_on_max_steps {
            // 4.49+ treat a dataloader of length 0 like one without a length.
            if a.max_steps <= 0 {
                return Err(HfError::value(format!(
                    "args.max_steps must be set to a positive value if dataloader does not have a length, was {}",
                    a.max_steps
                )));
            }
            (a.max_steps, i64::MAX)
        } else if a.max_steps > 0 {
            let ms = a.max_steps;
            (ms, ms / nupe as i64 + i64::from(ms % nupe as i64 > 0))
        } else {
            ((a.num_train_epochs * nupe as f64).ceil() as i64, a.num_train_epochs.ceil() as i64)
        };
        // include_tokens_per_second: `num_tokens(train_dataloader)` starts an iterator of the
        // training DataLoader and fetches its first batch (the world's batches have no input_ids:
        // the KeyError ends the count at 0), in every process, before the first epoch.
        let count_tokens = self.args.is_true("include_tokens_per_second");
        if count_tokens {
            self.rng.extra_train_iterator(n);
            if let Some(o) = &mut self.other_rng {
                o.extra_train_iterator(n);
            }
        }
        if p.optimizer_created == SchedulerCreated::BeforeState {
            self.check_optimizer_args()?;
        }
        if p.scheduler_created == SchedulerCreated::BeforeState {
            self.create_scheduler(max_steps)?;
        }
        if p.gradient_checkpointing_enabled == SchedulerCreated::BeforeState {
            self.enable_gradient_checkpointing()?;
        }
        let a = &self.args;
        self.iv = Intervals::resolve(a, max_steps);
        if p.ratio_into_args {
            // 4.31 writes the resolved intervals back into the arguments (and training_args.bin).
            let iv = self.iv;
            let set = |all: &mut Vec<(String, PyJson)>, name: &str, v: args::Num| {
                if let Some(slot) = all.iter_mut().find(|(n, _)| n == name) {
                    slot.1 = v.to_json();
                }
            };
            let a = &mut self.args;
            if a.logging_steps.f() > 0.0 && a.logging_steps.f() < 1.0 {
                set(&mut a.all, "logging_steps", iv.logging);
            }
            if let (Some(e), Some(ie)) = (a.eval_steps, iv.eval) {
                if e.f() > 0.0 && e.f() < 1.0 {
                    set(&mut a.all, "eval_steps", ie);
                }
            }
            if a.save_steps.f() > 0.0 && a.save_steps.f() < 1.0 {
                set(&mut a.all, "save_steps", iv.save);
            }
        }
        self.state.intervals = Some(self.iv);
        self.state.train_batch_size = Some(bs);
        if p.stateful_callbacks != CallbackRefresh::Absent {
            self.init_stateful_callbacks();
        }
        if p.gradient_checkpointing_enabled == SchedulerCreated::AfterIntervals {
            self.enable_gradient_checkpointing()?;
        }
        if p.optimizer_created == SchedulerCreated::AfterIntervals {
            self.check_optimizer_args()?;
        }
        if p.scheduler_created == SchedulerCreated::AfterIntervals {
            self.create_scheduler(max_steps)?;
        }
        // A resume loads the checkpoint's optimizer/scheduler and trainer_state.json in the
        // release's order (`ResumeBehaviors::state_before_optimizer`): before 5.3 the optimizer
        // first, into the fresh state, then `epoch = 0`, then the state, and `max_steps` after it.
        let resumed = self.resume.clone();
        let state_first = self.resume_rules().state_before_optimizer;
        if let (Some(r), false) = (&resumed, state_first) {
            self.load_optimizer_and_scheduler(r)?;
            self.state.epoch = Some(args::Num::Int(0));
            self.load_trainer_state(r, max_steps, num_train_epochs)?;
        }
        self.state.max_steps = max_steps;
        self.state.num_train_epochs = num_train_epochs;
        if let (Some(r), true) = (&resumed, state_first) {
            // `_init_training_state` (its TrainerState starts at epoch 0).
            self.state.epoch = Some(args::Num::Int(0));
            self.load_trainer_state(r, max_steps, num_train_epochs)?;
        }
        if p.optimizer_created == SchedulerCreated::AfterState {
            self.check_optimizer_args()?;
        }
        if p.scheduler_created == SchedulerCreated::AfterState {
            self.create_scheduler(max_steps)?;
        }
        if let (Some(r), true) = (&resumed, state_first) {
            self.load_optimizer_and_scheduler(r)?;
        }
        if resumed.is_none() {
            // `self.state.epoch = 0` comes after create_optimizer_and_scheduler.
            self.state.epoch = Some(args::Num::Int(0));
        }
        let (epochs_trained, steps_trained_in_epoch) = match &resumed {
            // `ignore_data_skip`: the epochs already trained are still skipped, the batches
            // already trained in the resumed epoch are not (it trains from its first batch).
            Some(_) if self.args.ignore_data_skip => (self.resume_position(nupe).0, 0),
            Some(_) => self.resume_position(nupe),
            None => (0, 0),
        };
        if resumed.is_some() && !self.args.ignore_data_skip {
            // HF's pass over the epochs already trained ("to get the random state of the
            // dataloader at the right point"); the draws matter to a sampler seeded from the
            // global generator when the resume is inside an epoch.
            let how = self.resume_rules().skip_trained_epochs;
            for _ in 0..epochs_trained {
                self.rng.skip_trained_epoch(n, how);
            }
        }
        if let Some(es) = &self.sc.early_stopping {
            self.early_stopping_checks(es.patience)?;
        }
        let start = Instant::now();
        if self.args.eval_on_start {
            self.evaluate_round(true)?;
        }
        let steps_in_epoch = len_dl;
        let mut total_batched = 0usize;
        let mut grad_norm: Option<f32> = None;
        let mut learning_rate: Option<f64> = None;
        for epoch in epochs_trained..num_train_epochs as usize {
            // `on_epoch_begin`: CallbackHandler clears `should_epoch_stop`.
            self.control.should_epoch_stop = false;
            let resumed_epoch = self.resume.is_some() && epoch == epochs_trained;
            let reordered = resumed_epoch && steps_trained_in_epoch > 0 && self.resume_rules().mid_epoch_resume_reorders;
            if resumed_epoch {
                self.rng.epochs_started = if reordered { 0 } else { epoch };
                if steps_trained_in_epoch == 0 {
                    self.load_rng_state()?;
                }
            }
            let order = self.rng.begin_train_epoch(n);
            // The second process's own order where its generator is its own.
            let other_order = self.other_rng.as_mut().map(|o| {
                o.epochs_started = epoch;
                o.begin_train_epoch(n)
            });
            if reordered {
                self.rng.epochs_started = epoch + 1;
            }
            let global: Vec<Vec<usize>> = order
                .chunks(bs)
                .filter(|c| !(self.args.dataloader_drop_last && c.len() < bs))
                .map(|c| c.to_vec())
                .collect();
            // Step s of the epoch: every process's batch (one process: the batch itself).
            let mut batches: Vec<Vec<Vec<usize>>> = shard::steps_of(&global, bs, world, self.args.dataloader_drop_last);
            if let Some(o) = &other_order {
                let mine: Vec<Vec<usize>> = o.chunks(bs).filter(|c| !(self.args.dataloader_drop_last && c.len() < bs)).map(|c| c.to_vec()).collect();
                for (step, b) in batches.iter_mut().zip(shard::shard_batches(&mine, bs, world, 1, self.args.dataloader_drop_last)) {
                    step[1] = b;
                }
            }
            let mut step: i64 = -1;
            if let (true, Some(message)) = (batches.is_empty(), self.profile.empty_dataloader_none_error) {
                // accelerate's DataLoaderShard (before 1.3) yields one None from an empty
                // dataloader, and the Trainer's first use of the batch fails on it.
                return Err(HfError::new("TypeError", message));
            }
            // A resumed epoch skips the batches already trained (`skip_first_batches`); before 5.3
            // its updates are then cut from what is left (`resumed_updates_from_skip_point`).
            let skip = if resumed_epoch { steps_trained_in_epoch.min(batches.len()) } else { 0 };
            let rules = self.resume_rules();
            let from_skip_point = skip > 0 && rules.resumed_updates_from_skip_point;
            let source: &[Vec<Vec<usize>>] = if from_skip_point { &batches[skip..] } else { &batches };
            // HF's own `step` in the sync test restarts after the skip before 4.57.
            let step_offset = if skip > 0 && rules.resumed_step_restarts { skip as i64 } else { 0 };
            // The batches of each optimizer update, as the version fetches them.
            let chunks: Vec<&[Vec<Vec<usize>>]> = match p.ga_prefetch {
                Prefetch::None => source.chunks(1).collect(),
                Prefetch::ExamplesRemainder | Prefetch::BatchesRemainder => {
                    // 4.46-4.51 size the last chunk by the examples (`num_examples % GA`), 4.52+
                    // by the batches; a chunk past the end of the epoch takes what is left.
                    let basis = if p.ga_prefetch == Prefetch::ExamplesRemainder { n } else { steps_in_epoch };
                    let remainder = if basis % ga == 0 { ga } else { basis % ga };
                    let total_updates = if p.ga_prefetch == Prefetch::ExamplesRemainder {
                        steps_in_epoch / ga + 1
                    } else {
                        steps_in_epoch / ga + usize::from(remainder < ga)
                    };
                    let mut at = 0;
                    (0..total_updates)
                        .map(|u| {
                            let num = if u != total_updates - 1 { ga } else { remainder };
                            let end = (at + num).min(source.len());
                            let c = &source[at..end];
                            at = end;
                            c
                        })
                        .collect()
                }
            };
            // How the loss of a micro-batch is scaled for backward and for the logged loss.
            // (accelerate's `backward` divides by its plugin's num_steps: the Trainer's GA, or
            // gradient_accumulation_kwargs' in 4.40-4.45.)
            let accel_div = self.accel_num_steps.unwrap_or(ga) as f64;
            let (grad_scale, log_scale) = match p.ga_loss {
                GaLoss::Divided => (1.0 / accel_div, 1.0 / ga as f64),
                GaLoss::Undivided => (1.0, 1.0),
                GaLoss::GradsDivided => (1.0 / ga as f64, 1.0),
                GaLoss::LogDivided => (1.0, 1.0 / ga as f64),
            };
            // 5.3+ drop the updates already trained (`range(steps_trained // GA, ...)`): whole
            // windows, since steps_trained is a multiple of GA. The rng state is restored at the
            // first batch trained (`rng_to_sync`).
            let mut chunks = chunks.into_iter();
            let mut rng_to_sync = false;
            if skip > 0 {
                if !from_skip_point {
                    let mut skipped = 0;
                    while skipped < skip {
                        match chunks.next() {
                            Some(c) => skipped += c.len(),
                            None => break,
                        }
                    }
                }
                step = skip as i64 - 1;
                total_batched += skip;
                rng_to_sync = true;
            }
            'outer: for chunk in chunks {
                // `on_step_begin` at an update window's first micro-batch.
                self.jit_checkpoint_event(false)?;
                for (i, rows) in chunk.iter().enumerate() {
                    step += 1;
                    total_batched += 1;
                    if rng_to_sync {
                        self.load_rng_state()?;
                        rng_to_sync = false;
                    }
                    self.micro_step(rows, grad_scale, log_scale)?;
                    self.accel_batches += 1;
                    // HF's `step` in its own sync test (restarted at the skip point before 4.57).
                    let hf_step = step - step_offset;
                    // HF's `is_last_step_and_steps_less_than_grad_acc`: the end of an epoch
                    // shorter than GA, where the Trainer syncs whatever accelerate counted.
                    let short_epoch_end = steps_in_epoch <= ga && hf_step + 1 == steps_in_epoch as i64;
                    let sync = if p.ga_sync_per_epoch {
                        (hf_step + 1) % ga as i64 == 0 || hf_step + 1 == steps_in_epoch as i64
                    } else {
                        // A global batch counter; a partial window carries into the next epoch.
                        total_batched % ga == 0 || short_epoch_end
                    };
                    // DDP all-reduces where the backward runs outside `no_sync`: at the sync
                    // steps (accelerator.accumulate, 4.31-4.45), or at the last micro-batch of
                    // each fetched window (4.46+: `no_sync` for every other one), which are the
                    // sync steps too except in 4.46's windows carried across epochs.
                    let reduced = if p.ga_prefetch == Prefetch::None { sync } else { i + 1 == chunk.len() };
                    if world > 1 && reduced && !sync {
                        self.all_reduce_stash();
                    }
                    self.reduced_at_last_micro = reduced;
                    if sync {
                        // accelerate's `accumulate` syncs at every num_steps-th batch it counted;
                        // the Trainer forces it only where an epoch is shorter than GA.
                        let skip_update = self.accel_num_steps.is_some_and(|n| self.accel_batches % n as u64 != 0) && !short_epoch_end;
                        (grad_norm, learning_rate) = self.sync_step(epoch, step, steps_in_epoch, skip_update)?;
                    }
                    if self.control.should_epoch_stop || self.control.should_training_stop {
                        break 'outer;
                    }
                }
            }
            if step + 1 >= batches.len() as i64 {
                self.rng.end_train_epoch(n);
                if let Some(o) = &mut self.other_rng {
                    o.end_train_epoch(n);
                }
            }
            if step - step_offset < 0 {
                self.control.should_training_stop = true;
            }
            schedule::on_epoch_end(&self.args, self.state.epoch.map(|e| e.f()).unwrap_or(0.0), &mut self.control);
            self.jit_checkpoint_event(true)?;
            self.maybe_log_save_evaluate(grad_norm, learning_rate)?;
            if self.control.should_training_stop {
                break;
            }
        }
        self.finalize(start)
    }

    /// One micro-batch of every process (`ranks[p]`: process p's rows): forward, backward
    /// (gradients accumulate per process until the optimizer step reduces them), training-loss
    /// bookkeeping per process.
    pub(super) fn micro_step(&mut self, ranks: &[Vec<usize>], grad_scale: f64, log_scale: f64) -> Result<(), HfError> {
        self.check_batch_columns()?;
        self.check_label_smoothing()?;
        if self.model.params.iter().all(|p| !p.trainable) {
            // Every parameter frozen: the loss has no graph to go back through.
            return Err(HfError::new("RuntimeError", "element 0 of tensors does not require grad and does not have a grad_fn"));
        }
        // floating_point_ops is 0.0 for a model without `input_ids`, but it is a float.
        self.current_flos = args::Num::Float(self.current_flos.f() + 0.0);
        if !self.numerics {
            return Ok(());
        }
        let world = ranks.len();
        if self.ranks_diverged {
            return Err(HfError::not_modelled(
                "training on after the processes' parameters parted ways (an optimizer step without DDP's all-reduce: 4.46's gradient-accumulation windows carried across epochs)",
            ));
        }
        // `loss *= num_processes` where the release scales it (a power of two here: exact).
        let times = if world > 1 && self.profile.launch_rules().loss_times_world { world as f64 } else { 1.0 };
        for (r, rows) in ranks.iter().enumerate() {
            let (x, y) = self.train.batch(rows);
            let raw = self.model.loss(&x, &y);
            let raw = if times != 1.0 { raw * times } else { raw };
            let scaled = |s: f64| if s != 1.0 { &raw / s.recip() } else { raw.shallow_clone() };
            let loss = scaled(grad_scale);
            loss.backward();
            if world > 1 {
                self.stash_grads(r);
            }
            let l = f32::try_from(&scaled(log_scale).detach()).unwrap();
            if !l.is_finite() && self.args.debug_underflow_overflow {
                return Err(HfError::not_modelled("debug underflow_overflow with a non-finite value (DebugUnderflowOverflow's report and error)"));
            }
            let tr = &mut self.tr_loss[r];
            if !l.is_finite() && self.args.logging_nan_inf_filter {
                // logging_nan_inf_filter: add the average of the losses logged so far.
                let denom = (1 + self.state.global_step - self.last_logged) as f32;
                *tr += *tr / denom;
            } else {
                *tr += l;
            }
        }
        Ok(())
    }

    /// Moves the gradients of process `r`'s micro-batch into its own accumulator (DDP's
    /// `no_sync`: each process accumulates its gradients alone, as `grad += g` does).
    fn stash_grads(&mut self, r: usize) {
        let mut taken = vec![];
        for p in self.model.params.iter_mut().filter(|p| p.trainable) {
            let mut g = p.tensor.grad();
            taken.push(g.copy());
            let _ = g.zero_();
        }
        if self.rank_grads.len() <= r {
            self.rank_grads.resize_with(r + 1, Vec::new);
        }
        let acc = &mut self.rank_grads[r];
        if acc.is_empty() {
            *acc = taken;
        } else {
            for (a, t) in acc.iter_mut().zip(&taken) {
                *a = &*a + t;
            }
        }
    }

    /// DDP's all-reduce at a backward that is no optimizer step (4.46's window end inside a
    /// carried window): each process's accumulated gradients become their mean, and they
    /// accumulate on from there.
    fn all_reduce_stash(&mut self) {
        let stashed = std::mem::take(&mut self.rank_grads);
        let Some(mean) = mean_grads(&stashed) else { return };
        self.rank_grads = (0..stashed.len()).map(|_| mean.iter().map(|t| t.copy()).collect()).collect();
    }

    /// The optimizer step's gradients in a launch: after an all-reduce at the last micro-batch
    /// every process's accumulated gradients averaged (summed in rank order, then divided by the
    /// world size: with 2 processes a halving, exact); without one, the main process's own
    /// (each process steps with its own, and their parameters part ways).
    fn reduce_grads(&mut self) {
        if !self.reduced_at_last_micro {
            let stashed = std::mem::take(&mut self.rank_grads);
            if let Some(own) = stashed.first() {
                for (p, g) in self.model.params.iter_mut().filter(|p| p.trainable).zip(own) {
                    let _ = p.tensor.grad().copy_(g);
                }
            }
            self.ranks_diverged = true;
            return;
        }
        let stashed = std::mem::take(&mut self.rank_grads);
        let Some(mean) = mean_grads(&stashed) else { return };
        for (p, g) in self.model.params.iter_mut().filter(|p| p.trainable).zip(&mean) {
            let _ = p.tensor.grad().copy_(g);
        }
    }

    /// `_nested_gather(tr_loss).mean().item()`: the processes' training losses averaged (one
    /// process: its own).
    fn gathered_tr_loss(&self) -> f64 {
        match self.tr_loss.as_slice() {
            [one] => *one as f64,
            all => (all.iter().map(|&t| t as f64).sum::<f64>() / all.len() as f64) as f32 as f64,
        }
    }

    /// Clip, optimizer step, scheduler step. Returns (grad_norm, lr used by the step).
    /// `skip_update`: accelerate's optimizer wrapper skips the update (`sync_gradients` is
    /// False); the gradients are still clipped and measured, the scheduler still steps and the
    /// gradients are still zeroed.
    pub(super) fn optimizer_step(&mut self, skip_update: bool) -> Result<(Option<f32>, Option<f64>), HfError> {
        if self.numerics && self.launch.world_size() > 1 {
            self.reduce_grads();
        }
        let mut ps = self.model.params();
        let norm = if !self.numerics {
            None
        } else if self.args.max_grad_norm > 0.0 {
            Some(optim::clip_grad_norm(&mut ps, self.args.max_grad_norm))
        } else if self.profile.grad_norm_without_clipping {
            // `_get_grad_norm` measures through clip_grad_norm_(max_norm=inf).
            Some(optim::clip_grad_norm(&mut ps, f64::INFINITY))
        } else {
            None
        };
        if !skip_update {
            // A resumed optimizer's moments of another shape fail the step, planned or trained.
            if let Optim::AdamW(o) = &self.opt {
                if let Some(m) = o.step_shape_error(&ps) {
                    return Err(HfError::new("RuntimeError", m));
                }
            }
            if self.numerics {
                self.opt.step(&mut ps);
                self.model.write_back(&ps);
            } else {
                self.opt.count_step(&ps);
            }
        }
        let used_lr = self.current_lr;
        if let Scheduler::Lambda(s) = &self.sched {
            self.sched_steps += 1;
            self.current_lr = s.lr_after_steps(self.args.learning_rate, self.sched_steps);
            self.opt.set_lr(self.current_lr);
        }
        self.model.zero_grad();
        Ok((norm.filter(|_| self.profile.logs_grad_norm), Some(used_lr)))
    }

    /// An optimizer step and what follows it: the step count, the epoch, the flow callback, and
    /// `_maybe_log_save_evaluate`. Returns the step's (grad_norm, learning rate) for the epoch-end
    /// call.
    pub(super) fn sync_step(&mut self, epoch: usize, step: i64, steps_in_epoch: usize, skip_update: bool) -> Result<(Option<f32>, Option<f64>), HfError> {
        let (grad_norm, learning_rate) = self.optimizer_step(skip_update)?;
        self.state.global_step += 1;
        self.state.epoch = Some(args::Num::Float(epoch as f64 + (step + 1) as f64 / steps_in_epoch as f64));
        schedule::on_step_end(&self.args, &self.iv, self.profile, self.state.global_step, self.state.max_steps, &mut self.control);
        self.control_on_step_end();
        self.signal_on_step_end();
        self.maybe_log_save_evaluate(grad_norm, learning_rate)?;
        Ok((grad_norm, learning_rate))
    }

    /// The epoch a log shows: `round(epoch, 2)` in older versions (an int stays an int).
    pub(super) fn log_epoch(&self, e: args::Num) -> PyJson {
        match e {
            args::Num::Float(x) if self.profile.round_epoch => PyJson::Float(py_round(x, 2)),
            other => other.to_json(),
        }
    }

    pub(super) fn log(&mut self, mut logs: LogEntry) {
        if let Some(e) = self.state.epoch {
            logs.push(("epoch".into(), self.log_epoch(e)));
        }
        if self.args.include_num_input_tokens_seen {
            // Stays 0: the world's batches have no `input_ids` to count (a warning says so).
            logs.push(("num_input_tokens_seen".into(), PyJson::Int(0)));
        }
        logs.push(("step".into(), PyJson::Int(self.state.global_step as i128)));
        self.state.log_history.push(logs);
    }

    /// `store_flos`: `total_flos += current_flos; current_flos = 0` (Python int/float arithmetic).
    pub(super) fn store_flos(&mut self) {
        self.state.total_flos = match (self.state.total_flos, self.current_flos) {
            (args::Num::Int(a), args::Num::Int(b)) => args::Num::Int(a + b),
            (a, b) => args::Num::Float(a.f() + b.f()),
        };
        self.current_flos = args::Num::Int(0);
    }

    /// `_maybe_log_save_evaluate`: log, then evaluate, then save.
    pub(super) fn maybe_log_save_evaluate(&mut self, grad_norm: Option<f32>, learning_rate: Option<f64>) -> Result<(), HfError> {
        let p = self.profile;
        let should_log = self.control.should_log
            && (!self.profile.log_requires_new_step || self.state.global_step > self.last_logged);
        if should_log {
            let steps = (self.state.global_step - self.last_logged) as f64;
            let tr = self.gathered_tr_loss();
            self.tr_loss.iter_mut().for_each(|t| *t = 0.0);
            let loss = tr / steps;
            let mut logs: LogEntry = vec![("loss".into(), PyJson::Float(if p.round_loss { py_round(loss, 4) } else { loss }))];
            if let Some(g) = grad_norm {
                logs.push(("grad_norm".into(), PyJson::Float(g as f64)));
            }
            let lr = match (p.logged_lr, learning_rate, &self.sched) {
                (_, _, Scheduler::Plateau(_) | Scheduler::Greedy(_)) => self.current_lr,
                (LoggedLr::UsedByStep, Some(lr), _) => lr,
                _ => self.current_lr,
            };
            logs.push(("learning_rate".into(), PyJson::Float(lr)));
            self.total_loss_scalar += tr;
            self.last_logged = self.state.global_step;
            self.store_flos();
            self.log(logs);
            self.control.should_log = false;
        }
        let mut metrics = None;
        if self.control.should_evaluate {
            let m = self.evaluate_round(false)?;
            if p.best_timing != BestTiming::OnSaveWithMetrics {
                let is_new = self.determine_best(&m)?;
                if self.args.save_strategy == Interval::Best {
                    self.control.should_save = is_new;
                }
            }
            metrics = Some(m);
            self.control.should_evaluate = false;
        }
        if self.control.should_save {
            self.save_checkpoint(metrics.as_ref())?;
            self.control.should_save = false;
        }
        Ok(())
    }

    pub(super) fn finalize(&mut self, start: Instant) -> Result<(), HfError> {
        // `tr_loss.item()`: the main process's own, not gathered.
        let tr = self.tr_loss[0] as f64;
        self.total_loss_scalar += tr;
        let steps = if self.resume_rules().train_loss_per_call { self.state.global_step - self.initial_global_step } else { self.state.global_step } as f64;
        let train_loss = if self.profile.train_loss_zero_division && steps == 0.0 {
            return Err(HfError::new("ZeroDivisionError", "float division by zero"));
        } else {
            self.total_loss_scalar / steps.max(0.001)
        };
        self.store_flos();
        let rt = start.elapsed().as_secs_f64();
        let num_samples = self.state.max_steps as f64 * self.args.per_device_train_batch_size as f64 * self.args.gradient_accumulation_steps as f64;
        let mut logs: LogEntry = vec![
            ("train_runtime".into(), PyJson::Float(py_round(rt, 4))),
            ("train_samples_per_second".into(), PyJson::Float(py_round(num_samples / rt, 3))),
            ("train_steps_per_second".into(), PyJson::Float(py_round(self.state.max_steps as f64 / rt, 3))),
            ("total_flos".into(), self.state.total_flos.to_json()),
            ("train_loss".into(), PyJson::Float(train_loss)),
        ];
        if self.args.is_true("include_tokens_per_second") {
            // speed_metrics' `train_tokens_per_second`: the counted tokens (0 here) per second.
            logs.insert(3, ("train_tokens_per_second".into(), PyJson::Float(0.0)));
        }
        self.log(logs);
        if self.args.load_best_model_at_end {
            if let Some(best) = self.state.best.best_model_checkpoint.clone() {
                let dir = self.run_dir.join(&best);
                let path = dir.join(self.best_weights_file(&dir));
                let sharded = |f: &str| f == shards::INDEX_FILES[0] || self.profile.best_model_reads_safetensors_index;
                let index = shards::INDEX_FILES.into_iter().rev().filter(|f| sharded(f)).find(|f| dir.join(f).is_file());
                let loaded = match index {
                    // No full weights file (nor adapter), an index the release looks for:
                    // `load_sharded_checkpoint` (prefer_safe: the safetensors index first).
                    Some(f) if !path.exists() && self.sc.model.kind != ModelKind::Lora => {
                        Some(shards::read_sharded(&dir, f).map_err(|e| HfError::not_modelled(format!("HF's error for damaged sharded weights in {best}: {e}")))?)
                    }
                    _ => store::read_state_dict(&path).map_err(|e| io_err(&path, e))?,
                };
                if let Some(sd) = loaded {
                    self.model.load(&sd);
                }
            }
        }
        // `checkpoints_sorted = self._sorted_checkpoints(use_mtime=False, ...)` at the end of
        // every train() (whatever save_total_limit says).
        {
            let mut names: Vec<String> = std::fs::read_dir(self.output_abs())
                .map(|rd| {
                    rd.flatten()
                        .filter(|e| e.path().is_dir())
                        .map(|e| e.file_name().to_string_lossy().into_owned())
                        .filter(|n| n.starts_with("checkpoint-"))
                        .collect()
                })
                .unwrap_or_default();
            names.sort();
            let sorted: Vec<String> = names.iter().map(|n| format!("{}/{n}", self.output_rel())).collect();
            rotation::protect_best(&sorted, self.state.best.best_model_checkpoint.as_deref(), self.profile.rotation_protection)?;
        }
        self.end_of_train_cleanup()?;
        // Each other process that saves (a node's first with save_on_each_node) cleans its own
        // node's disk the same way; its events stay its own (the main process's are the run's).
        for r in self.launch.ranks().into_iter().skip(1) {
            if self.args.should_save(r.rank, r.local_rank) {
                let events = self.events.len();
                let node_dir = self.launch.node_dir(&self.root_dir, r.node);
                let main_dir = std::mem::replace(&mut self.run_dir, node_dir);
                let res = self.end_of_train_cleanup();
                self.run_dir = main_dir;
                self.events.truncate(events);
                res?;
            }
        }
        Ok(())
    }


    /// The save_total_limit=1 cleanup at the end of train() (`if self.args.should_save and
    /// best_model_checkpoint is not None and save_total_limit == 1`), on the disk of the process
    /// `self.run_dir` stands for: every folder but the best goes.
    fn end_of_train_cleanup(&mut self) -> Result<(), HfError> {
        if let (Some(best), Some(1)) = (self.state.best.best_model_checkpoint.clone(), self.args.save_total_limit) {
            let out = self.output_abs();
            if let Ok(rd) = std::fs::read_dir(&out) {
                let best_abs = self.run_dir.join(&best);
                if !best_abs.exists() && self.profile.cleanup_uses_samefile {
                    return Err(HfError::new(
                        "FileNotFoundError",
                        format!("[Errno 2] No such file or directory: {}", crate::formats::pyjson::py_str_repr(&best)),
                    ));
                }
                let mut entries: Vec<_> = rd.flatten().collect();
                entries.sort_by_key(|e| rotation::step_of(&e.file_name().to_string_lossy()));
                for e in entries {
                    let name = e.file_name().to_string_lossy().into_owned();
                    if name.starts_with("checkpoint-") && e.path().is_dir() && e.path() != best_abs {
                        self.delete_checkpoint(&name);
                        self.events.push(DiskEvent::Deleted {
                            step: self.state.global_step,
                            folder: name,
                            why: DeleteRule::EndOfTrainCleanup,
                        });
                    }
                }
            }
        }
        Ok(())
    }

}

/// DDP's all-reduce of the processes' accumulated gradients (one list per process, parameter by
/// parameter): summed in rank order, then divided by the world size (with 2 processes a
/// halving, exact). None without any process.
fn mean_grads(stashed: &[Vec<tch::Tensor>]) -> Option<Vec<tch::Tensor>> {
    let first = stashed.first()?;
    let world = stashed.len() as f64;
    Some(
        (0..first.len())
            .map(|i| {
                let mut sum = first[i].copy();
                for other in &stashed[1..] {
                    sum = &sum + &other[i];
                }
                sum / world
            })
            .collect(),
    )
}
