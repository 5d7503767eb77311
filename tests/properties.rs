//! Properties of the pure policies (rotation, flow schedule, best tracking, plateau, interval
//! resolution, numeric helpers), checked for every supported HF profile against invariants that
//! hold in each version. A shrunk failure of a flow, rotation, best or plateau property is printed
//! as a scenario file (format v1) ready to add to conformance/scenarios/, so that the real HF
//! Trainer can say what the right answer is.
//!
//! Failing seeds are persisted in proptest-regressions/properties.txt (committed; proptest
//! replays them first).
use ckptspec::formats::pyjson::PyJson;
use ckptspec::hf::args::{self, eval_prefixed, Interval, Num};
use ckptspec::hf::behaviors::{BestTiming, FinalSave, Protection, RotationOrder, TorchLayout};
use ckptspec::hf::error::HfError;
use ckptspec::hf::profile::{self as profile_table, Profile};
use ckptspec::hf::state::{resolve_ratio, Best, Control, Intervals};
use ckptspec::numerics::plateau::Plateau;
use ckptspec::numerics::py_math::{numpy_mean_f32, py_round};
use ckptspec::policy::rotation::{self, Folder};
use ckptspec::policy::schedule;
use proptest::prelude::*;
use proptest::test_runner::{Config, FileFailurePersistence};
use serde_json::{json, Value};

fn config() -> Config {
    Config {
        cases: 256,
        failure_persistence: Some(Box::new(FileFailurePersistence::Direct("proptest-regressions/properties.txt"))),
        ..Config::default()
    }
}

fn profiles() -> Vec<Profile> {
    profile_table::supported().iter().map(|v| Profile::get(v).unwrap()).collect()
}

/// A scenario file (format v1) for a failing input, to paste into conformance/scenarios/.
fn scenario(name: &str, summary: &str, args: Value, metrics: Option<Vec<Value>>) -> String {
    let mut sc = json!({"name": name, "summary": summary, "args": args});
    if let Some(m) = metrics {
        sc["metrics"] = Value::Array(m);
    }
    format!(
        "\n--- scenario file conformance/scenarios/prop/{name}.json (run it with ./dev golden VERSION --only {name}) ---\n{}\n---",
        serde_json::to_string_pretty(&sc).unwrap()
    )
}

fn resolved(given: &Value, p: &Profile) -> Option<args::Args> {
    args::resolve(given.as_object().unwrap(), p).ok()
}

fn divides(step: i64, n: Num) -> bool {
    n.f() > 0.0 && (step as f64) % n.f() == 0.0
}

// ------------------------------------------------------------------ strategies

prop_compose! {
    /// Checkpoint folders as HF lists them (distinct steps, arbitrary mtimes), a limit, and
    /// maybe a best folder among them.
    fn rotation_case()(steps in prop::collection::btree_set(1u64..60, 1..9), limit in 1i64..5,
                       mtimes in prop::collection::vec(0.0f64..5.0, 9), best_pick in prop::option::of(0usize..9))
        -> (Vec<Folder>, i64, Option<usize>)
    {
        let folders: Vec<Folder> = steps.iter().zip(&mtimes)
            .map(|(s, m)| Folder { path: format!("output/checkpoint-{s}"), mtime: *m }).collect();
        let best = best_pick.filter(|b| *b < folders.len());
        (folders, limit, best)
    }
}

prop_compose! {
    /// Step-based flow arguments: max_steps and a save / eval / logging interval each an int,
    /// an integral float or a ratio.
    fn interval()(kind in 0u8..3, i in 1i64..12, r in 1u32..100) -> Value {
        match kind {
            0 => json!(i),
            1 => json!(i as f64),
            _ => json!(r as f64 / 100.0),
        }
    }
}

prop_compose! {
    fn flow_case()(max_steps in 1i64..40, save in interval(), eval in interval(), logging in interval(),
                   first in any::<bool>()) -> Value {
        json!({"max_steps": max_steps, "save_steps": save, "eval_strategy": "steps", "eval_steps": eval,
               "logging_steps": logging, "logging_first_step": first})
    }
}

prop_compose! {
    /// Scripted metric values of the evaluations (from a small set, so ties happen), whether
    /// greater is better, and how often a save coincides with an evaluation (every k-th).
    fn best_case()(values in prop::collection::vec(1u8..8, 1..10), greater in any::<bool>(), k in 1usize..4)
        -> (Vec<f64>, bool, usize)
    {
        (values.iter().map(|v| *v as f64 / 10.0).collect(), greater, k)
    }
}

prop_compose! {
    fn plateau_case()(factor in 0u8..10, patience in 0i64..4, cooldown in 0i64..3, min_lr_k in 0u8..4,
                      max in any::<bool>(), abs in any::<bool>(), threshold_k in 0u8..3,
                      metrics in prop::collection::vec(0u8..6, 1..25))
        -> (Value, Vec<f64>)
    {
        let min_lr = [0.0, 1e-6, 1e-5, 6e-5][min_lr_k as usize];
        let threshold = [0.0, 1e-4, 0.1][threshold_k as usize];
        let kwargs = json!({
            "factor": factor as f64 / 10.0,
            "patience": patience,
            "cooldown": cooldown,
            "min_lr": min_lr,
            "mode": if max { "max" } else { "min" },
            "threshold_mode": if abs { "abs" } else { "rel" },
            "threshold": threshold,
        });
        (kwargs, metrics.iter().map(|m| *m as f64 / 10.0).collect())
    }
}

fn rotation_scenario(folders: &[Folder], limit: i64, best: Option<usize>) -> String {
    // One save per folder (every 2 steps), an evaluation with each save; the best folder's
    // evaluation has the highest accuracy.
    let n = folders.len();
    let mut args = json!({"max_steps": 2 * n, "save_steps": 2, "save_total_limit": limit});
    let mut metrics = None;
    if let Some(b) = best {
        args["eval_strategy"] = json!("steps");
        args["eval_steps"] = json!(2);
        args["metric_for_best_model"] = json!("acc");
        args["load_best_model_at_end"] = json!(true);
        metrics = Some((0..n).map(|i| json!({"acc": if i == b { 0.9 } else { 0.1 + 0.01 * i as f64 }})).collect());
    }
    scenario(
        "prop-rotation",
        &format!("{n} checkpoints, save_total_limit={limit}, best at checkpoint {:?}: which folders are left?", best.map(|b| 2 * (b + 1))),
        args,
        metrics,
    )
}

// ------------------------------------------------------------------ properties

proptest! {
    #![proptest_config(config())]

    /// 1. After `rotation::plan`, no more than save_total_limit checkpoints remain, except one
    /// more for a protected best that is not the newest.
    #[test]
    fn rotation_keeps_at_most_the_limit_except_the_best((folders, limit, best) in rotation_case()) {
        for p in profiles() {
            let sorted = rotation::sort(&folders, p.rotation);
            let b = best.map(|i| folders[i].path.clone());
            let del = rotation::plan(&sorted, Some(limit), b.as_deref(), p.rotation_protection).unwrap();
            let remaining: Vec<&String> = sorted.iter().filter(|s| !del.contains(s)).collect();
            let extra_ok = b.as_ref().is_some_and(|b| remaining.contains(&b) && sorted.last() != Some(b));
            prop_assert!(
                remaining.len() <= limit as usize || (extra_ok && remaining.len() == limit as usize + 1),
                "{}: {} remain of {sorted:?} with limit {limit}, best {b:?}{}",
                p.version, remaining.len(), rotation_scenario(&folders, limit, best)
            );
            prop_assert!(remaining.len() >= (limit as usize).min(sorted.len()), "{}: deleted too many", p.version);
        }
    }

    /// 2. The newest checkpoint and the best one survive rotation (both protections).
    #[test]
    fn rotation_keeps_the_newest_and_the_best((folders, limit, best) in rotation_case()) {
        for p in profiles() {
            let sorted = rotation::sort(&folders, p.rotation);
            let b = best.map(|i| folders[i].path.clone());
            let del = rotation::plan(&sorted, Some(limit), b.as_deref(), p.rotation_protection).unwrap();
            let newest = sorted.last().unwrap();
            prop_assert!(!del.contains(newest), "{}: newest {newest} deleted{}", p.version, rotation_scenario(&folders, limit, best));
            if let Some(b) = &b {
                prop_assert!(!del.contains(b), "{}: best {b} deleted{}", p.version, rotation_scenario(&folders, limit, best));
            }
            // Deletions are listed oldest first, each folder once, all from the list.
            let mut it = sorted.iter();
            for d in &del {
                prop_assert!(it.any(|s| s == d), "{}: {del:?} is not an oldest-first subsequence of {sorted:?}", p.version);
            }
        }
    }

    /// 3. `rotation::sort` is a permutation of its input; numeric orders are by step.
    #[test]
    fn rotation_sort_is_a_permutation((folders, _limit, _best) in rotation_case()) {
        for order in [RotationOrder::Mtime, RotationOrder::Numeric, RotationOrder::MtimeWithNumericFallback] {
            let sorted = rotation::sort(&folders, order);
            let mut a: Vec<String> = folders.iter().map(|f| f.path.clone()).collect();
            let mut b = sorted.clone();
            a.sort();
            b.sort();
            prop_assert_eq!(a, b, "{:?}", order);
            let steps: Vec<u64> = sorted.iter().map(|s| rotation::step_of(s).unwrap()).collect();
            let close = folders.iter().map(|f| f.mtime).fold(f64::NEG_INFINITY, f64::max)
                - folders.iter().map(|f| f.mtime).fold(f64::INFINITY, f64::min) < 1.0;
            if order == RotationOrder::Numeric || (order == RotationOrder::MtimeWithNumericFallback && close && folders.len() > 1) {
                prop_assert!(steps.windows(2).all(|w| w[0] < w[1]), "{:?} not numeric: {:?}", order, steps);
            }
        }
    }

    /// 4. A best folder missing from the list: the unguarded bubble (4.31-4.34) raises HF's
    /// ValueError whatever the count (the lookup runs before the length test), the guarded one
    /// never raises.
    #[test]
    fn rotation_best_missing_from_the_list((folders, limit, _best) in rotation_case()) {
        for p in profiles() {
            let sorted = rotation::sort(&folders, p.rotation);
            let r = rotation::plan(&sorted, Some(limit), Some("output/checkpoint-999"), p.rotation_protection);
            match (p.rotation_protection, r) {
                (Protection::Bubble { guarded: false }, Err(e)) => {
                    prop_assert_eq!(e, HfError::value("'output/checkpoint-999' is not in list"))
                }
                (Protection::Bubble { guarded: true }, Ok(_)) => {}
                (prot, r) => prop_assert!(false, "{}: {prot:?} gave {r:?}", p.version),
            }
        }
    }

    /// 5. The save rule at every step: should_save iff the save interval divides the step, plus
    /// a forced save at max_steps iff the profile has final_step_save.
    #[test]
    fn save_at_multiples_and_at_max_steps_per_profile(given in flow_case()) {
        for p in profiles() {
            let Some(a) = resolved(&given, &p) else { continue };
            let iv = Intervals::resolve(&a, a.max_steps);
            for step in 1..=a.max_steps {
                let mut c = Control::default();
                schedule::on_step_end(&a, &iv, &p, step as u64, a.max_steps, &mut c);
                let forced = match p.final_step_save {
                    FinalSave::Never => false,
                    FinalSave::AnyStrategy => a.save_strategy != Interval::No,
                    FinalSave::NotBest => !matches!(a.save_strategy, Interval::No | Interval::Best),
                    FinalSave::StepsOnly => a.save_strategy == Interval::Steps,
                };
                let want = (a.save_strategy == Interval::Steps && divides(step, iv.save)) || (step == a.max_steps && forced);
                prop_assert_eq!(c.should_save, want, "{} at step {} of {} (save interval {:?}){}", p.version, step, a.max_steps, iv.save,
                    scenario("prop-save-steps", "which steps save a checkpoint?", given.clone(), None));
                prop_assert_eq!(c.should_training_stop, step == a.max_steps);
            }
        }
    }

    /// 6. The eval rule: should_evaluate iff the eval interval divides the step, plus a forced
    /// evaluation at max_steps iff the profile has final_step_eval.
    #[test]
    fn eval_at_multiples_and_at_max_steps_per_profile(given in flow_case()) {
        for p in profiles() {
            let Some(a) = resolved(&given, &p) else { continue };
            let iv = Intervals::resolve(&a, a.max_steps);
            let e = iv.eval.expect("eval_steps given");
            for step in 1..=a.max_steps {
                let mut c = Control::default();
                schedule::on_step_end(&a, &iv, &p, step as u64, a.max_steps, &mut c);
                let want = divides(step, e) || (step == a.max_steps && p.final_step_eval);
                prop_assert_eq!(c.should_evaluate, want, "{} at step {} of {} (eval interval {:?}){}", p.version, step, a.max_steps, e,
                    scenario("prop-eval-steps", "which steps evaluate?", given.clone(), Some(vec![])));
            }
        }
    }

    /// 7. The logging rule: should_log iff the logging interval divides the step, or step 1 with
    /// logging_first_step.
    #[test]
    fn log_at_multiples_and_first_step(given in flow_case()) {
        for p in profiles() {
            let Some(a) = resolved(&given, &p) else { continue };
            let iv = Intervals::resolve(&a, a.max_steps);
            for step in 1..=a.max_steps {
                let mut c = Control::default();
                schedule::on_step_end(&a, &iv, &p, step as u64, a.max_steps, &mut c);
                let want = divides(step, iv.logging) || (step == 1 && a.logging_first_step);
                prop_assert_eq!(c.should_log, want, "{} at step {}{}", p.version, step,
                    scenario("prop-logging-steps", "which steps log?", given.clone(), None));
            }
        }
    }

    /// 8. Interval resolution: a ratio in (0, 1) becomes ceil(max_steps * ratio) in
    /// [1, max_steps]; an interval >= 1 is kept with its Python type.
    #[test]
    fn resolve_ratio_is_ceil_within_bounds(max_steps in 1i64..100_000, r in 1u32..1_000_000, i in 1i64..1000) {
        let ratio = r as f64 / 1_000_000.0;
        let got = resolve_ratio(Num::Float(ratio), max_steps);
        let want = (max_steps as f64 * ratio).ceil() as i64;
        prop_assert_eq!(got, Num::Int(want));
        prop_assert!((1..=max_steps).contains(&want));
        prop_assert_eq!(resolve_ratio(Num::Int(i), max_steps), Num::Int(i));
        prop_assert_eq!(resolve_ratio(Num::Float(i as f64), max_steps), Num::Float(i as f64));
    }

    /// 9. `Intervals::resolve` over resolved arguments: every step interval is the given value
    /// or its ceil ratio, never below 1.
    #[test]
    fn intervals_resolve_every_interval(given in flow_case()) {
        for p in profiles() {
            let Some(a) = resolved(&given, &p) else { continue };
            let iv = Intervals::resolve(&a, a.max_steps);
            for (name, got) in [("logging_steps", iv.logging), ("eval_steps", iv.eval.unwrap()), ("save_steps", iv.save)] {
                let g = given[name].as_f64().unwrap();
                prop_assert!(got.f() >= 1.0, "{} {}: {:?}", p.version, name, got);
                if g < 1.0 {
                    prop_assert_eq!(got, Num::Int((a.max_steps as f64 * g).ceil() as i64), "{} {}", p.version, name);
                } else {
                    prop_assert_eq!(got.f(), g, "{} {}", p.version, name);
                }
            }
        }
    }

    /// 10. The best metric is the best of the evaluations the version considers (5.x: every
    /// training evaluation; 4.31: only those that coincide with a save), its first occurrence
    /// (ties never replace), and the best checkpoint / step follow it.
    #[test]
    fn best_is_the_first_best_of_the_considered_evaluations((values, greater, k) in best_case()) {
        for p in profiles() {
            let mut b = Best::default();
            let mut considered = vec![];
            for (i, v) in values.iter().enumerate() {
                let step = 2 * (i as u64 + 1);
                let saved = (i + 1) % k == 0;
                match p.best_timing {
                    BestTiming::EveryEvalByStep => {
                        b.after_eval(&PyJson::Float(*v), greater, step, true);
                        considered.push((*v, step));
                    }
                    BestTiming::EveryEvalByPath => {
                        b.after_eval_by_path(&PyJson::Float(*v), greater, &format!("output/checkpoint-{step}"));
                        considered.push((*v, step));
                    }
                    BestTiming::OnSaveWithMetrics => {
                        if saved {
                            b.on_save_with_metrics(&PyJson::Float(*v), greater, &format!("output/checkpoint-{step}"));
                            considered.push((*v, step));
                        }
                    }
                }
            }
            let sc = || scenario(
                "prop-best",
                "which evaluation is the best, and which checkpoint holds it?",
                json!({"max_steps": 2 * values.len(), "eval_strategy": "steps", "eval_steps": 2, "save_steps": 2 * k,
                       "metric_for_best_model": "acc", "greater_is_better": greater}),
                Some(values.iter().map(|v| json!({"acc": v})).collect()),
            );
            let better = |x: f64, y: f64| if greater { x > y } else { x < y };
            let Some(&(first_v, first_s)) = considered.first() else {
                prop_assert!(b.best_metric.is_none(), "{}: a best without a considered evaluation{}", p.version, sc());
                continue;
            };
            let (mut bv, mut bs) = (first_v, first_s);
            for &(v, s) in &considered[1..] {
                if better(v, bv) {
                    bv = v;
                    bs = s;
                }
            }
            prop_assert_eq!(b.best_metric.clone(), Some(PyJson::Float(bv)), "{}{}", p.version, sc());
            prop_assert!(considered.iter().all(|(v, _)| !better(*v, bv)), "{}: a better value exists{}", p.version, sc());
            let first_at = considered.iter().find(|(v, _)| *v == bv).unwrap().1;
            prop_assert_eq!(bs, first_at);
            match p.best_timing {
                BestTiming::EveryEvalByStep => prop_assert_eq!(b.best_global_step, Some(bs), "{}{}", p.version, sc()),
                BestTiming::OnSaveWithMetrics | BestTiming::EveryEvalByPath => prop_assert_eq!(
                    b.best_model_checkpoint.clone(), Some(format!("output/checkpoint-{bs}")), "{}{}", p.version, sc()),
            }
        }
    }

    /// 11. Ties never replace, and NaN is never better (5.x tracking): a repeated or NaN value
    /// after the best is not a new best.
    #[test]
    fn ties_and_nan_never_replace(v in 1u8..10, greater in any::<bool>()) {
        let v = v as f64 / 10.0;
        let mut b = Best::default();
        prop_assert!(b.after_eval(&PyJson::Float(v), greater, 2, true));
        prop_assert!(!b.after_eval(&PyJson::Float(v), greater, 4, true));
        prop_assert!(!b.after_eval(&PyJson::Float(f64::NAN), greater, 8, true));
        prop_assert_eq!(b.best_global_step, Some(2));
        prop_assert_eq!(b.best_metric.clone(), Some(PyJson::Float(v)));
        // 4.31: the same for the save-time tracking.
        let mut o = Best::default();
        o.on_save_with_metrics(&PyJson::Float(v), greater, "output/checkpoint-2");
        o.on_save_with_metrics(&PyJson::Float(v), greater, "output/checkpoint-4");
        o.on_save_with_metrics(&PyJson::Float(f64::NAN), greater, "output/checkpoint-6");
        prop_assert_eq!(o.best_model_checkpoint.as_deref(), Some("output/checkpoint-2"));
    }

    /// 12. ReduceLROnPlateau: the learning rate never rises and never falls below min_lr.
    #[test]
    fn plateau_lr_never_rises_nor_falls_below_min_lr((kwargs, metrics) in plateau_case()) {
        for p in profiles() {
            let layout: TorchLayout = p.torch_layout;
            let base = 5e-5;
            let mut pl = Plateau::from_kwargs(&kwargs, &[base, base], layout).unwrap();
            let min_lr = kwargs["min_lr"].as_f64().unwrap();
            let mut prev = pl.lrs_f64();
            for (i, m) in metrics.iter().enumerate() {
                pl.step(*m);
                let now = pl.lrs_f64();
                let sc = || {
                    let mut a = json!({"lr_scheduler_type": "reduce_lr_on_plateau", "eval_strategy": "steps", "eval_steps": 1,
                                       "logging_steps": 1, "max_steps": metrics.len(), "metric_for_best_model": "acc"});
                    a["lr_scheduler_kwargs"] = kwargs.clone();
                    scenario("prop-plateau", "how does the learning rate follow the plateau?", a,
                             Some(metrics.iter().map(|m| json!({"acc": m})).collect()))
                };
                for (x, y) in prev.iter().zip(&now) {
                    prop_assert!(y <= x, "{}: lr rose from {} to {} at evaluation {}{}", p.version, x, y, i + 1, sc());
                    prop_assert!(*y >= min_lr.min(base), "{}: lr {} below min_lr {}{}", p.version, y, min_lr, sc());
                }
                prev = now;
            }
        }
    }

    /// 13. `eval_` prefixing is idempotent and always yields an `eval_` key.
    #[test]
    fn eval_prefixing_is_idempotent(m in "(eval_)?[a-z_]{0,12}") {
        let once = eval_prefixed(&m);
        prop_assert_eq!(eval_prefixed(&once), once.clone());
        prop_assert!(once.starts_with("eval_"));
        if m.starts_with("eval_") {
            prop_assert_eq!(once, m);
        } else {
            prop_assert_eq!(once, format!("eval_{m}"));
        }
    }

    /// 14. Python's round: idempotent, within half a unit of the last digit, and what
    /// Python prints for the value keeps at most n decimals.
    #[test]
    fn py_round_is_idempotent_and_close(x in -1e6f64..1e6, n in 0usize..8) {
        let r = py_round(x, n);
        prop_assert_eq!(py_round(r, n), r);
        prop_assert!((r - x).abs() <= 0.5 * 10f64.powi(-(n as i32)) * (1.0 + 1e-9) + 1e-9 * x.abs());
        let text = ckptspec::formats::pyjson::float_repr(r);
        if !text.contains('e') {
            let decimals = text.split('.').nth(1).map(|d| d.trim_end_matches('0').len()).unwrap_or(0);
            prop_assert!(decimals <= n.max(1), "{x} -> {text}");
        }
    }

    /// 15. numpy's float32 mean: between the min and the max, close to the exact mean, exact for
    /// one or two equal values.
    #[test]
    fn numpy_mean_is_a_mean(xs in prop::collection::vec(-100.0f32..100.0, 1..300), c in -100.0f32..100.0) {
        let m = numpy_mean_f32(&xs);
        let exact = xs.iter().map(|x| *x as f64).sum::<f64>() / xs.len() as f64;
        let scale = xs.iter().map(|x| x.abs() as f64).fold(0.0, f64::max).max(1.0);
        prop_assert!((m as f64 - exact).abs() <= 1e-5 * scale, "{m} vs {exact}");
        let (lo, hi) = xs.iter().fold((f32::INFINITY, f32::NEG_INFINITY), |(a, b), x| (a.min(*x), b.max(*x)));
        prop_assert!(m >= lo - 1e-4 * scale as f32 && m <= hi + 1e-4 * scale as f32);
        prop_assert_eq!(numpy_mean_f32(&[c]), c);
        prop_assert_eq!(numpy_mean_f32(&[c, c]), c);
    }
}
