//! Plan mode (`ckptspec plan`, `ckptspec inspect`'s replay): the same executor, the same
//! policies and the same files on disk, without tensor math; each evaluation's metrics are given
//! (a real run's logged ones) or assumed (improving at every evaluation).

use crate::formats::pyjson::PyJson;
use crate::hf::profile::Profile;
use crate::world::scenario::Scenario;
use std::path::Path;
use super::{error_json, run_inner, write_result, DiskEvent, RunError, SaveMode, Trainer};

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
}

#[derive(Debug, Clone)]
pub(super) struct PlanFeed {
    pub(super) given: std::collections::VecDeque<Vec<(String, PyJson)>>,
    pub(super) metric_keys_unknown: bool,
    /// Assumed values handed out so far, per key (the next value improves on the last).
    pub(super) counts: Vec<(String, u64)>,
    pub(super) assumed: Vec<(u64, String)>,
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

/// A plan: the executor run on `sc` into `run_dir` as [`run`] does (`result.json`,
/// `output/checkpoint-N/` with the same files, rotation on the real folders), without tensor
/// math, its evaluations fed by `metrics`. The checkpoints it leaves are the plan's.
pub fn plan(sc: &Scenario, profile: &Profile, run_dir: &Path, metrics: PlanMetrics) -> Result<PlanTrace, RunError> {
    let (given, metric_keys_unknown) = match metrics {
        PlanMetrics::Given(list) => (list.into(), true),
        PlanMetrics::Assumed { metric_keys_unknown } => (Default::default(), metric_keys_unknown),
    };
    let mut feed = PlanFeed { given, metric_keys_unknown, counts: vec![], assumed: vec![] };
    let mut state_out: Option<PyJson> = None;
    let mut events = vec![];
    let outcome = run_inner(sc, profile, run_dir, SaveMode::HfCompatible, Some(&mut feed), None, &mut state_out, &mut events);
    write_result(profile, run_dir, (error_json(outcome)?, state_out.unwrap_or(PyJson::Null)), None)?;
    Ok(PlanTrace { events, assumed: feed.assumed })
}

