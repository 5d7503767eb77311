//! Plan mode (`ckptspec plan`, `ckptspec inspect`'s replay): the same executor, the same
//! policies and the same files on disk, without tensor math; each evaluation's metrics are given
//! (a real run's logged ones) or assumed (improving at every evaluation).

use crate::formats::pyjson::PyJson;
use crate::hf::profile::Profile;
use crate::world::scenario::Scenario;
use std::path::Path;
use super::{run_scenario, DiskEvent, Phase, RunError, SaveMode, Trainer};

/// What feeds a plan's evaluations (`ckptspec plan`, `ckptspec inspect`): the executor runs as
/// for a trained scenario, with the same policies and the same files on disk, but without tensor
/// math, and each `evaluate()` call's metrics come from here instead of a model.
#[derive(Debug, Clone, PartialEq)]
pub enum PlanMetrics {
    /// The metrics of each `evaluate()` call (one eval set each), in order, as HF logs them
    /// (`eval_loss`, `eval_f1`, ...; `epoch`, `step`, runtimes and throughputs are ignored).
    /// Calls past the end of the list are assumed as below (with unknown metric keys).
    Given(Vec<Vec<(String, PyJson)>>),
    /// None given. The scenario's scripted compute_metrics gives its keys and values; the eval
    /// loss (a model's output) is assumed, and so is the metric for best model when
    /// `metric_keys_unknown` (a user's config: its compute_metrics is not known) and nothing
    /// gives it. An assumed value improves strictly at every evaluation, in the direction
    /// `greater_is_better` says for the metric for best model, downwards for the others.
    Assumed { metric_keys_unknown: bool },
}

/// What a plan did beyond a trained run's [`DiskEvent`]s.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct PlanTrace {
    pub events: Vec<DiskEvent>,
    /// Every assumed metric value, as (global_step of the evaluation, metric key).
    pub assumed: Vec<(u64, String)>,
    /// A resume scenario's second run, when it started (the first run succeeded).
    pub resume: Option<ResumeTrace>,
}

/// What `train(resume_from_checkpoint=...)` of a plan's second run did before its loop: the
/// answers name the checkpoint it resumed from also when loading it raised.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ResumeTrace {
    /// The folder it picked (`output/checkpoint-N`, as HF's paths are); None when it raised
    /// before picking one (no `checkpoint-N` in output_dir, or output_dir gone).
    pub checkpoint: Option<String>,
    /// The global step its loop started from (`_initial_global_step`); None when it raised
    /// before the loop.
    pub start_step: Option<u64>,
    /// How many log_history entries its state started with (the checkpoint's history): the
    /// entries past these are the resumed run's own.
    pub inherited: usize,
    /// How many of [`PlanTrace::assumed`] the first run assumed.
    pub assumed_before: usize,
}

type Call = Vec<(String, PyJson)>;

#[derive(Debug, Clone, Default)]
pub(super) struct PlanFeed {
    pub(super) given: std::collections::VecDeque<Call>,
    pub(super) metric_keys_unknown: bool,
    /// Assumed values handed out so far, per key (the next value improves on the last).
    pub(super) counts: Vec<(String, u64)>,
    pub(super) assumed: Vec<(u64, String)>,
    /// The resumed run's own evaluations, as its trainer_state.json logs them (see
    /// [`plan_resumed`]); taken at the second run's start, cut when its checkpoint is loaded.
    resume_given: Option<Vec<Call>>,
    /// Set by the second run's start until its checkpoint's state is loaded.
    resume_pending: Option<Vec<Call>>,
    pub(super) resume: Option<ResumeTrace>,
}

impl PlanFeed {
    /// The second Trainer of a resume scenario starts: its evaluations continue the given list
    /// where the first run left it, unless the resumed run's own metrics were given.
    pub(super) fn begin_second_run(&mut self) {
        self.resume = Some(ResumeTrace { assumed_before: self.assumed.len(), ..ResumeTrace::default() });
        if let Some(list) = self.resume_given.take() {
            self.given.clear();
            self.resume_pending = Some(list);
        }
    }

    /// The resumed run's checkpoint picked (`output/checkpoint-N`).
    pub(super) fn picked(&mut self, rel: &str) {
        if let Some(r) = self.resume.as_mut() {
            r.checkpoint = Some(rel.to_string());
        }
    }

    /// The resumed run's loop starts at `step`, its state holding `history` (the checkpoint's
    /// log_history; empty where the release resumed without a trainer_state.json). HF's resumed
    /// log_history is that history followed by the new entries, so the resumed run's own
    /// evaluations are the given ones past the evaluations the history already holds.
    pub(super) fn resumed_at(&mut self, step: u64, history: &[crate::hf::state::LogEntry]) {
        if let Some(r) = self.resume.as_mut() {
            r.start_step = Some(step);
            r.inherited = history.len();
        }
        if let Some(list) = self.resume_pending.take() {
            let held = history.iter().filter(|e| e.iter().any(|(k, _)| k.starts_with("eval_"))).count();
            self.given = list.into_iter().skip(held).collect();
        }
    }
}

impl<'a> Trainer<'a> {
    /// A plan's metrics without given values: the scripted ones, and assumed values for the eval
    /// loss (and for the metric for best model when the config's compute_metrics is unknown).
    pub(super) fn assumed_metrics(&mut self, k: usize, prefix: &str) -> Vec<(String, PyJson)> {
        let mut metrics = self.scripted_metrics(k);
        let loss_key = format!("{prefix}_loss");
        let mut keys = vec![];
        if !self.evals[k].x.is_empty() {
            keys.push(loss_key);
        }
        let feed = self.plan.as_ref().expect("a plan");
        if let Some(m) = self.args.metric_to_check() {
            let known = keys.contains(&m) || metrics.iter().any(|(mk, _)| *mk == m || format!("{prefix}_{mk}") == m);
            if feed.metric_keys_unknown && !known && m.starts_with(&format!("{prefix}_")) {
                keys.push(m);
            }
        }
        let best_key = self.args.metric_to_check();
        let greater = self.args.greater_is_better.unwrap_or(true);
        let step = self.state.global_step;
        let feed = self.plan.as_mut().expect("a plan");
        for key in keys {
            let c = match feed.counts.iter_mut().find(|(kk, _)| *kk == key) {
                Some((_, c)) => {
                    *c += 1;
                    *c
                }
                None => {
                    feed.counts.push((key.clone(), 1));
                    1
                }
            };
            // Strictly better at every evaluation, by 1 (past any threshold of early stopping
            // or ReduceLROnPlateau's relative test).
            let up = best_key.as_deref() == Some(key.as_str()) && greater;
            let v = if up { c as f64 } else { -(c as f64) };
            feed.assumed.push((step, key.clone()));
            metrics.push((key, PyJson::Float(v)));
        }
        metrics
    }

}

/// A plan: the executor run on `sc` into `run_dir` as [`run`](super::run) does (`result.json`,
/// `output/checkpoint-N/` with the same files, rotation on the real folders; for a resume
/// scenario the first run, the damage and the resumed run), without tensor math, its
/// evaluations fed by `metrics` (both runs' `evaluate()` calls in order: the resumed run's
/// continue where the first run's left the list). The checkpoints it leaves are the plan's.
pub fn plan(sc: &Scenario, profile: &Profile, run_dir: &Path, metrics: PlanMetrics) -> Result<PlanTrace, RunError> {
    plan_resumed(sc, profile, run_dir, metrics, None)
}

/// [`plan`], with the resumed run's evaluations given apart: `resumed` is the log_history of
/// the resumed run's trainer_state.json (one entry per `evaluate()` call, as [`PlanMetrics::Given`]),
/// which HF starts with the checkpoint's own history; the evaluations that history already holds
/// are skipped (counted on the checkpoint the plan's resume loads), the rest feed the resumed
/// run in order, and any later evaluation is assumed.
pub fn plan_resumed(sc: &Scenario, profile: &Profile, run_dir: &Path, metrics: PlanMetrics, resumed: Option<Vec<Call>>) -> Result<PlanTrace, RunError> {
    let (given, metric_keys_unknown) = match metrics {
        PlanMetrics::Given(list) => (list.into(), true),
        PlanMetrics::Assumed { metric_keys_unknown } => (Default::default(), metric_keys_unknown),
    };
    let mut feed = PlanFeed { given, metric_keys_unknown, resume_given: resumed, ..PlanFeed::default() };
    let events = run_scenario(sc, profile, run_dir, SaveMode::HfCompatible, Phase::All, Some(&mut feed))?;
    Ok(PlanTrace { events, assumed: feed.assumed, resume: feed.resume })
}
