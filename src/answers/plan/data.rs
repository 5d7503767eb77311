//! The data a plan trains on: only the number of rows matters (no model is trained), and only
//! through the dataloader's length: the optimizer steps per epoch, hence the epochs, the epoch
//! ends and `max_steps` when training runs on `num_train_epochs`.

use crate::hf::args::Args;
use crate::world::scenario::EvalSpec;
use serde_json::{Map, Value};

/// The size of the eval set(s) assumed when none is given (it does not change a plan: the
/// metrics are given or assumed; only an empty set, which has no eval loss, would).
pub const ASSUMED_EVAL_ROWS: usize = 16;

/// The most training rows a plan builds (the executor holds the row order of an epoch).
pub const MAX_TRAIN_ROWS: usize = 20_000_000;

/// `--eval-rows M` or `--eval-rows a=8,b=4` (names in the order given).
pub fn parse_eval_rows(spec: &str) -> Result<EvalSpec, String> {
    let spec = spec.trim();
    let hint = "write a number of rows (--eval-rows 16) or named eval sets (--eval-rows a=8,b=4)";
    if !spec.contains('=') {
        return spec
            .parse::<usize>()
            .map(EvalSpec::Single)
            .map_err(|_| format!("--eval-rows: {spec:?} is not a number of rows; {hint}"));
    }
    let mut m = Map::new();
    for part in spec.split(',') {
        let (name, n) = part
            .split_once('=')
            .ok_or_else(|| format!("--eval-rows: {part:?} has no '='; {hint}"))?;
        let (name, n) = (name.trim(), n.trim());
        if name.is_empty() {
            return Err(format!("--eval-rows: {part:?} has no set name before '='; {hint}"));
        }
        let rows: usize = n.parse().map_err(|_| format!("--eval-rows: the rows of set {name:?} ({n:?}) are not a number; {hint}"))?;
        if m.insert(name.to_string(), Value::from(rows)).is_some() {
            return Err(format!("--eval-rows: the set name {name:?} is given twice"));
        }
    }
    Ok(EvalSpec::Named(m))
}

/// The eval sets' names (empty for one unnamed set or none).
pub fn set_names(eval: &EvalSpec) -> Vec<String> {
    eval.sets().into_iter().filter_map(|(n, _, _)| n).collect()
}

/// How many training rows to build for one version, and the sentence that says why.
pub fn train_rows(
    args: Option<&Args>,
    train_rows: Option<usize>,
    steps_per_epoch: Option<usize>,
    scenario_rows: Option<usize>,
) -> Result<(usize, String), String> {
    if let Some(n) = train_rows {
        let over = scenario_rows.map(|s| format!(" (overrides the scenario's data.train={s})")).unwrap_or_default();
        return Ok((n, format!("{n} training rows (--train-rows){over}")));
    }
    // A version that rejects the config never reaches its dataloader; its rows do not matter.
    let (bs, ga, max_steps) = match args {
        Some(a) => (a.per_device_train_batch_size.max(1), a.gradient_accumulation_steps.max(1), a.max_steps),
        None => (1, 1, 0),
    };
    if let Some(k) = steps_per_epoch {
        let n = rows_for(k, bs, ga)?;
        return Ok((n, format!(
            "{n} training rows = {k} steps per epoch (--steps-per-epoch) x per_device_train_batch_size {bs} x gradient_accumulation_steps {ga}: every version's dataloader gives exactly {k} optimizer steps per epoch (no partial accumulation window; one device)"
        )));
    }
    if let Some(s) = scenario_rows {
        return Ok((s, format!("{s} training rows (the scenario's data.train)")));
    }
    if args.is_none() {
        return Ok((0, "no training rows (this version rejects the config before training)".into()));
    }
    if max_steps <= 0 {
        return Err("the config trains for num_train_epochs (max_steps is not set), so the number of steps depends on the data size: give --train-rows N or --steps-per-epoch K".into());
    }
    let k = max_steps as usize;
    let n = rows_for(k, bs, ga)?;
    Ok((n, format!(
        "{n} training rows (assumed: no --train-rows or --steps-per-epoch given) = max_steps {k} x per_device_train_batch_size {bs} x gradient_accumulation_steps {ga}: training ends within its first epoch; give --train-rows or --steps-per-epoch to see epoch boundaries"
    )))
}

fn rows_for(steps: usize, bs: usize, ga: usize) -> Result<usize, String> {
    steps
        .checked_mul(bs)
        .and_then(|x| x.checked_mul(ga))
        .filter(|n| *n <= MAX_TRAIN_ROWS)
        .ok_or_else(|| format!(
            "{steps} steps x batch size {bs} x gradient accumulation {ga} needs more than {MAX_TRAIN_ROWS} training rows; give --steps-per-epoch K with a smaller K (several epochs) or --train-rows N"
        ))
}

/// The eval sets, and the sentence that says where they came from.
pub fn eval_sets(
    kwargs: &Map<String, Value>,
    eval_rows: Option<&EvalSpec>,
    scenario_eval: Option<&EvalSpec>,
) -> (EvalSpec, String) {
    if let Some(e) = eval_rows {
        let over = scenario_eval.map(|_| " (overrides the scenario's data.eval)").unwrap_or("");
        return (e.clone(), format!("{} (--eval-rows){over}", describe(e)));
    }
    if let Some(e) = scenario_eval {
        return (e.clone(), format!("{} (the scenario's data.eval)", describe(e)));
    }
    let strategy_on = ["eval_strategy", "evaluation_strategy"]
        .iter()
        .any(|k| kwargs.get(*k).and_then(|v| v.as_str()).is_some_and(|s| s != "no"));
    let on_start = kwargs.get("eval_on_start").and_then(|v| v.as_bool()).unwrap_or(false);
    if strategy_on || on_start {
        let e = EvalSpec::Single(ASSUMED_EVAL_ROWS);
        (e, format!("assumed: one eval set ({ASSUMED_EVAL_ROWS} rows; its size does not change the plan), since the config evaluates and no --eval-rows was given"))
    } else {
        (EvalSpec::Single(0), "no eval set (the config does not evaluate; give --eval-rows to pass one)".into())
    }
}

fn describe(e: &EvalSpec) -> String {
    match e {
        EvalSpec::Single(0) => "no eval set".into(),
        EvalSpec::Single(n) => format!("one eval set of {n} rows"),
        EvalSpec::Named(m) => {
            let parts: Vec<String> = m.iter().map(|(k, v)| format!("{k}={v}")).collect();
            format!("named eval sets {}", parts.join(", "))
        }
    }
}
