//! The order in which the HF Trainer visits training rows, and what that costs the global torch
//! generator.
//!
//! Two mechanisms exist (found by reading the sources and confirmed by instrumenting real
//! Trainer runs, see `tests/numerics.rs`):
//!
//! * [`SamplerKind::SeedableEpochSeed`] (transformers 5.24.0 + accelerate 1.15.0):
//!   `Trainer._get_train_sampler` returns a plain `RandomSampler(train_dataset)`;
//!   `accelerator.prepare` replaces it with accelerate's `SeedableRandomSampler`
//!   (`use_seedable_sampler` defaults to True) whose `initial_seed` is `data_seed` when given,
//!   else `torch.random.initial_seed()` (= `args.seed`, set by `set_seed` in `Trainer.__init__`).
//!   Before each epoch the Trainer calls `set_epoch(epoch)`; `__iter__` does
//!   `generator.manual_seed(initial_seed + epoch)` on a private generator, then
//!   `randperm(n)`. The global generator is not touched by the sampler.
//! * [`SamplerKind::GlobalDrawnSeed`] (transformers 4.31.0 + accelerate 0.21.0):
//!   a plain `RandomSampler(train_dataset)` with no generator (`data_seed` is ignored);
//!   each `__iter__` draws `seed = int(torch.empty((), dtype=torch.int64).random_())` from the
//!   global generator, seeds a fresh generator with it and yields `randperm(n)`. Every release
//!   from 4.38 trains this way too with `accelerator_config={"use_seedable_sampler": False}`
//!   (accelerate then keeps the Trainer's sampler; the `args-accelerator-config-unseeded-*`
//!   goldens).
//!
//! In both, every creation of a `DataLoader` iterator (each training epoch, each evaluation
//! loop over one eval set) first draws `_base_seed` = one int64 `random_()` from the global
//! generator (num_workers=0 still draws it). In the 4.31 mechanism the sampler's draw comes
//! right after the base-seed draw of the same epoch (it happens on the first `next()`).
//! Nothing else consumes the global torch, python or numpy generators during `train()` for the
//! contract's model (no dropout, model built before `set_seed`), so `rng_state.pth` holds
//! `random.seed(seed)`'s and `np.random.seed(seed)`'s untouched states and the torch generator
//! after `2 * (number of int64 draws)` 32-bit draws.

use crate::hf::behaviors::{EpochSkip, SamplerKind};
use crate::numerics::rng::TorchGenerator;

/// The order of one epoch for [`SamplerKind::SeedableEpochSeed`]: `randperm(n)` of a generator
/// seeded with `(data_seed.unwrap_or(seed)) + epoch`.
pub fn seedable_epoch_order(seed: u64, data_seed: Option<u64>, n: usize, epoch: usize) -> Vec<usize> {
    let initial = data_seed.unwrap_or(seed);
    perm(initial.wrapping_add(epoch as u64), n)
}

/// The order of one epoch for [`SamplerKind::SeedableCumulativeSeed`]: `randperm(n)` of a
/// generator seeded with `seed + epoch (epoch + 1) / 2`.
pub fn cumulative_epoch_order(seed: u64, n: usize, epoch: usize) -> Vec<usize> {
    let e = epoch as u64;
    perm(seed.wrapping_add(e * (e + 1) / 2), n)
}

/// The order that a generator seeded with `seed` gives: `torch.randperm(n, generator=g)`.
pub fn perm(seed: u64, n: usize) -> Vec<usize> {
    TorchGenerator::new(seed).randperm(n).into_iter().map(|i| i as usize).collect()
}

/// The order of epoch `epoch` (0-based) of a run whose global generator is consumed only by the
/// training DataLoader itself (no evaluation loop ran before that epoch started).
///
/// For [`SamplerKind::GlobalDrawnSeed`] with evaluations in between, drive a
/// [`TrainRngTracker`] instead: its orders depend on every earlier global draw.
pub fn train_order(kind: SamplerKind, seed: u64, data_seed: Option<u64>, n: usize, epoch: usize) -> Vec<usize> {
    match kind {
        SamplerKind::SeedableEpochSeed => seedable_epoch_order(seed, data_seed, n, epoch),
        SamplerKind::SeedableCumulativeSeed => cumulative_epoch_order(seed, n, epoch),
        SamplerKind::GlobalDrawnSeed => {
            let mut t = TrainRngTracker::new(kind, seed, data_seed);
            let mut last = Vec::new();
            for _ in 0..=epoch {
                last = t.begin_train_epoch(n);
            }
            last
        }
    }
}

/// Follows the global torch generator through a Trainer run, in the order HF consumes it.
///
/// Call [`begin_train_epoch`](Self::begin_train_epoch) when the Trainer starts iterating the
/// training DataLoader for an epoch (also for an epoch cut short by `max_steps`; not for an
/// epoch the loop never enters), and [`begin_eval_loop`](Self::begin_eval_loop) once per
/// evaluation DataLoader iteration (once per eval set of a dict `eval_dataset`, per round).
/// [`torch_state`](Self::torch_state) is then the `cpu` entry of `rng_state.pth`.
#[derive(Clone, Debug)]
pub struct TrainRngTracker {
    pub kind: SamplerKind,
    pub seed: u64,
    pub data_seed: Option<u64>,
    /// The global generator (after `torch.manual_seed(seed)` in `Trainer.__init__`).
    pub global: TorchGenerator,
    /// Epochs started so far.
    pub epochs_started: usize,
    /// 32-bit draws taken from the global generator so far.
    pub draws_u32: u64,
    /// A `SequentialSampler` (5.2+'s `train_sampling_strategy="sequential"`): every epoch in row
    /// order; accelerate replaces only a RandomSampler, so no sampler draws, only `_base_seed`.
    pub sequential: bool,
    /// In a launch of several processes, accelerate gives a `RandomSampler` that has no generator
    /// its own `torch.Generator()` (torch's default seed, 67280421310721) and keeps the processes'
    /// copies in step: [`SamplerKind::GlobalDrawnSeed`]'s epochs then draw their orders from it,
    /// one epoch after another, and take no seed from the global generator.
    pub own: Option<TorchGenerator>,
    /// Every epoch's order is `randperm(n)` of a generator seeded with this (accelerate 0.24's
    /// seedable sampler in a launch); no seed drawn from the global generator.
    pub fixed_seed: Option<u64>,
}

/// `torch.Generator()`'s seed (`default_rng_seed_val`).
pub const TORCH_DEFAULT_SEED: u64 = 67280421310721;

impl TrainRngTracker {
    pub fn new(kind: SamplerKind, seed: u64, data_seed: Option<u64>) -> Self {
        TrainRngTracker { kind, seed, data_seed, global: TorchGenerator::new(seed), epochs_started: 0, draws_u32: 0, sequential: false, own: None, fixed_seed: None }
    }

    fn draw_int64(&mut self) -> i64 {
        self.draws_u32 += 2;
        self.global.random_int64()
    }

    /// A training epoch's DataLoader iterator is created and its first batch fetched: returns
    /// the row order of the epoch.
    pub fn begin_train_epoch(&mut self, n: usize) -> Vec<usize> {
        let epoch = self.epochs_started;
        self.epochs_started += 1;
        let _base_seed = self.draw_int64();
        if self.sequential {
            return (0..n).collect();
        }
        if let Some(s) = self.fixed_seed {
            return perm(s, n);
        }
        match self.kind {
            SamplerKind::SeedableEpochSeed => seedable_epoch_order(self.seed, self.data_seed, n, epoch),
            SamplerKind::SeedableCumulativeSeed => cumulative_epoch_order(self.seed, n, epoch),
            SamplerKind::GlobalDrawnSeed => match &mut self.own {
                Some(g) => g.randperm(n).into_iter().map(|i| i as usize).collect(),
                None => {
                    let s = self.draw_int64();
                    perm(s as u64, n)
                }
            },
        }
    }

    /// The epoch's DataLoader fetched its last batch (accelerate fetches one batch ahead, so
    /// this happens before the last batch trains): the sampler runs to its end. A torch
    /// `RandomSampler` with a generator of its own then makes one more `randperm(n)` for
    /// `num_samples % n` (zero) rows: [`Self::own`]'s generator moves on by it.
    pub fn end_train_epoch(&mut self, n: usize) {
        if let (SamplerKind::GlobalDrawnSeed, false, Some(g)) = (self.kind, self.sequential, &mut self.own) {
            let _ = g.randperm(n);
        }
    }

    /// A resumed run passes over one epoch its checkpoint already trained, as `how` says.
    /// Draws from the global generator only: a seedable sampler's order is set per epoch anyway
    /// (the executor sets [`epochs_started`](Self::epochs_started) at the resumed epoch).
    pub fn skip_trained_epoch(&mut self, n: usize, how: EpochSkip) {
        match how {
            EpochSkip::None => {}
            EpochSkip::FirstBatch => {
                let _ = self.begin_train_epoch(n);
            }
            EpochSkip::WholeSampler => {
                // A seedable sampler of a launch (`fixed_seed`) has its own generator.
                if self.kind == SamplerKind::GlobalDrawnSeed && !self.sequential && self.fixed_seed.is_none() {
                    match &mut self.own {
                        // `list(sampler)` runs a RandomSampler with a generator of its own to its
                        // end: the epoch's `randperm(n)` and the one for the `num_samples % n`
                        // tail.
                        Some(g) => {
                            let _ = g.randperm(n);
                            let _ = g.randperm(n);
                        }
                        None => {
                            let _ = self.draw_int64();
                        }
                    }
                }
                self.epochs_started += 1;
            }
        }
    }

    /// Another iterator of the training DataLoader fetches its first batch before the epoch's
    /// own (include_tokens_per_second's `num_tokens`): the draws of an epoch's start, at the
    /// same epoch (the iterator stops early, so accelerate's epoch count does not move on).
    pub fn extra_train_iterator(&mut self, n: usize) {
        let epoch = self.epochs_started;
        let _ = self.begin_train_epoch(n);
        self.epochs_started = epoch;
    }

    /// An evaluation DataLoader iterator is created (one `_base_seed` draw).
    pub fn begin_eval_loop(&mut self) {
        let _ = self.draw_int64();
    }

    /// `torch.get_rng_state()` now: the `cpu` entry of `rng_state.pth`.
    pub fn torch_state(&self) -> Vec<u8> {
        self.global.get_state()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seedable_first_epoch_seed_42() {
        // Recorded from a real transformers 5.24.0 Trainer run (64 rows, seed 42, epoch 0).
        let o = seedable_epoch_order(42, None, 64, 0);
        assert_eq!(&o[..8], &[38, 24, 48, 63, 10, 29, 36, 51]);
    }

    #[test]
    fn global_drawn_first_epoch_seed_42() {
        // Recorded from a real transformers 4.31.0 Trainer run (64 rows, seed 42, epoch 0).
        let o = train_order(SamplerKind::GlobalDrawnSeed, 42, None, 64, 0);
        assert_eq!(&o[..8], &[32, 26, 19, 6, 10, 17, 50, 11]);
        let o = train_order(SamplerKind::GlobalDrawnSeed, 42, Some(123), 64, 1);
        assert_eq!(&o[..4], &[30, 24, 39, 52]);
    }

    #[test]
    fn skipping_trained_epochs_draws_as_the_release_does() {
        // 4.31-4.33 start the DataLoader (two int64 draws), 4.34+ list the sampler (one draw).
        let mut t = TrainRngTracker::new(SamplerKind::GlobalDrawnSeed, 42, None);
        t.skip_trained_epoch(64, EpochSkip::FirstBatch);
        assert_eq!(t.draws_u32, 4);
        t.skip_trained_epoch(64, EpochSkip::WholeSampler);
        assert_eq!(t.draws_u32, 6);
        t.skip_trained_epoch(64, EpochSkip::None);
        assert_eq!((t.draws_u32, t.epochs_started), (6, 2));
        let mut t = TrainRngTracker::new(SamplerKind::SeedableEpochSeed, 42, None);
        t.skip_trained_epoch(64, EpochSkip::WholeSampler);
        assert_eq!(t.draws_u32, 0);
    }

    #[test]
    fn tracker_draw_counts() {
        let mut t = TrainRngTracker::new(SamplerKind::SeedableEpochSeed, 42, None);
        t.begin_train_epoch(64);
        t.begin_eval_loop();
        assert_eq!(t.draws_u32, 4);
        let mut t = TrainRngTracker::new(SamplerKind::GlobalDrawnSeed, 42, None);
        t.begin_train_epoch(64);
        assert_eq!(t.draws_u32, 4);
    }
}
