//! What the save benchmarks and the kill/save workers train and measure: a model like the one
//! the HF side is timed on (an MLP with AdamW state, as a [`Checkpoint`] of the fast writers), and
//! this process's resident memory (Linux `/proc/self/status`).

use crate::save::fastsave::{AdamEntry, AdamState, Checkpoint, Result, Small, Snapshot};
use crate::save::store;
use std::fs;
use std::path::{Path, PathBuf};

/// A model like the one the benchmarks time on the HF side: `layers` × `nn.Linear(hidden,
/// hidden)` (`layers.{i}.weight`, `layers.{i}.bias`), float32, with AdamW state after `step`
/// steps. Sizes used: 1M = (512, 4), 10M = (1024, 10), 100M = (2048, 24).
pub struct Mlp {
    pub hidden: i64,
    pub layers: i64,
    /// In state-dict order.
    pub weights: Vec<(String, tch::Tensor)>,
    /// In torch's optimizer numbering: HF's decay group (the weights) first, then the biases.
    pub exp_avg: Vec<tch::Tensor>,
    pub exp_avg_sq: Vec<tch::Tensor>,
    pub step: f32,
}

/// `(hidden, layers)` for about `p` parameters, as the benchmarks use them.
pub fn mlp_shape(p: u64) -> (i64, i64) {
    match p {
        0..=3_000_000 => (512, 4),
        3_000_001..=30_000_000 => (1024, 10),
        _ => (2048, 24),
    }
}

impl Mlp {
    /// Random values (seeded), on `device`.
    pub fn new(hidden: i64, layers: i64, device: tch::Device) -> Mlp {
        tch::manual_seed(0);
        let opts = (tch::Kind::Float, device);
        let mut weights = Vec::new();
        for i in 0..layers {
            weights.push((format!("layers.{i}.weight"), tch::Tensor::randn([hidden, hidden], opts) * 0.02));
            weights.push((format!("layers.{i}.bias"), tch::Tensor::randn([hidden], opts) * 0.02));
        }
        let order = Self::optimizer_order(layers);
        let exp_avg = order.iter().map(|&k| tch::Tensor::randn(weights[k].1.size(), opts) * 1e-3).collect();
        let exp_avg_sq = order.iter().map(|&k| tch::Tensor::rand(weights[k].1.size(), opts) * 1e-6).collect();
        Mlp { hidden, layers, weights, exp_avg, exp_avg_sq, step: 2.0 }
    }

    /// State-dict indices in optimizer order (weights, then biases).
    fn optimizer_order(layers: i64) -> Vec<usize> {
        let l = layers as usize;
        (0..l).map(|i| 2 * i).chain((0..l).map(|i| 2 * i + 1)).collect()
    }

    pub fn num_params(&self) -> u64 {
        self.weights.iter().map(|(_, t)| t.numel() as u64).sum()
    }

    /// Every tensor of the checkpoint, weights first (for snapshots).
    pub fn all_tensors(&self) -> Vec<&tch::Tensor> {
        self.weights.iter().map(|(_, t)| t).chain(self.exp_avg.iter()).chain(self.exp_avg_sq.iter()).collect()
    }

    /// Rebuilds an `Mlp` view over snapshot buffers (same order as [`Mlp::all_tensors`]).
    pub fn from_snapshot(like: &Mlp, snap: &Snapshot) -> Mlp {
        let n = like.weights.len();
        let t = &snap.tensors;
        Mlp {
            hidden: like.hidden,
            layers: like.layers,
            weights: like.weights.iter().zip(&t[..n]).map(|((k, _), v)| (k.clone(), v.shallow_clone())).collect(),
            exp_avg: t[n..2 * n].iter().map(|v| v.shallow_clone()).collect(),
            exp_avg_sq: t[2 * n..].iter().map(|v| v.shallow_clone()).collect(),
            step: like.step,
        }
    }

    /// The bytes of `model.safetensors` tensors and of the optimizer moments, as [`raw_write`]
    /// groups for `dir/model.raw` and `dir/optimizer.raw`.
    pub fn raw_groups(&self, dir: &Path) -> Vec<(PathBuf, Vec<&tch::Tensor>)> {
        vec![
            (dir.join("model.raw"), self.weights.iter().map(|(_, t)| t).collect()),
            (dir.join("optimizer.raw"), self.exp_avg.iter().chain(self.exp_avg_sq.iter()).collect()),
        ]
    }

    /// The checkpoint HF 5.24.0 writes for this model after `step` steps of AdamW
    /// (`optim="adamw_torch"`, lr 5e-5, linear schedule over 100 steps).
    pub fn checkpoint(&self, hf_version: &str) -> Result<Checkpoint<'_>> {
        use crate::numerics::optim::{AdamW, AdamWKind};
        let profile = crate::hf::profile::Profile::get(hf_version)?;
        let layout = profile.torch_layout;
        let l = self.layers as usize;
        let step = self.step as i64;
        let decay: Vec<bool> = (0..2 * l).map(|i| i < l).collect();
        let base_lr = 5e-5;
        let sched = crate::numerics::lr::Schedule { kind: crate::numerics::lr::ScheduleKind::Linear, warmup: 0.0, num_training_steps: 100 };
        let lr = sched.lr_after_steps(base_lr, step);
        let mut adam = AdamW::hf(AdamWKind::TorchSingleTensor, layout, lr, (0.9, 0.999), 1e-8, 0.0, &decay);
        for g in adam.groups.iter_mut() {
            g.initial_lr = Some(base_lr);
        }
        let groups = adam.state_dict();
        let param_groups = groups.get("param_groups").cloned().ok_or("no param_groups")?;
        let entries = (0..2 * l)
            .map(|i| AdamEntry { step: self.step, exp_avg: &self.exp_avg[i], exp_avg_sq: &self.exp_avg_sq[i] })
            .collect();
        let sched_sd = crate::numerics::lr::LambdaLrState::new(&sched, base_lr, 2, step).to_py(layout);
        let mut state = crate::hf::state::TrainerState::new(&profile);
        state.global_step = step as u64;
        state.max_steps = 100;
        state.num_train_epochs = 1;
        let args = crate::hf::args::resolve(&serde_json::Map::new(), &profile).map_err(|x| format!("{x:?}"))?;
        let config = format!(
            "{{\n  \"architectures\": [\n    \"MLP\"\n  ],\n  \"dtype\": \"float32\",\n  \"hidden\": {},\n  \"layers\": {},\n  \"model_type\": \"perf_mlp\",\n  \"transformers_version\": \"{}\"\n}}\n",
            self.hidden, self.layers, profile.version
        );
        let p1 = profile.clone();
        let p2 = profile.clone();
        let state_json = state.to_json_string(&profile);
        Ok(Checkpoint {
            weights: self.weights.iter().map(|(k, t)| (k.clone(), t)).collect(),
            weights_metadata: vec![("format".into(), "pt".into())],
            optimizer: Some(AdamState { entries, param_groups }),
            small: vec![
                ("config.json".into(), Small::Bytes(config.into_bytes())),
                ("training_args.bin".into(), Small::With(Box::new(move |d| store::write_training_args(d, &p1, &args)))),
                ("scheduler.pt".into(), Small::Torch(sched_sd.clone())),
                (
                    "rng_state.pth".into(),
                    Small::With(Box::new(move |d| {
                        store::write_rng(d, &p2, 42, &crate::numerics::rng::TorchGenerator::new(42).get_state())
                    })),
                ),
                ("trainer_state.json".into(), Small::Bytes(state_json.into_bytes())),
            ],
        })
    }
}

/// Peak resident memory of this process so far (`VmHWM`), in bytes.
pub fn peak_rss() -> Option<u64> {
    proc_status_kib("VmHWM:").map(|k| k * 1024)
}

/// Current resident memory (`VmRSS`), in bytes.
pub fn current_rss() -> Option<u64> {
    proc_status_kib("VmRSS:").map(|k| k * 1024)
}

/// Resets `VmHWM` to the current RSS (Linux `clear_refs` 5); false where unsupported.
pub fn reset_peak_rss() -> bool {
    fs::write("/proc/self/clear_refs", "5").is_ok()
}

fn proc_status_kib(key: &str) -> Option<u64> {
    let s = fs::read_to_string("/proc/self/status").ok()?;
    let line = s.lines().find(|l| l.starts_with(key))?;
    line[key.len()..].trim().trim_end_matches("kB").trim().parse().ok()
}

