//! torch's and transformers' arithmetic, bit for bit for the contract's model: the learning-rate
//! schedules, AdamW, SGD, Adagrad, RMSprop and transformers' Adafactor, ReduceLROnPlateau and GreedyLR, the RNGs (MT19937, torch's
//! generator, CPython's and numpy's states), the order of the training data and its split between
//! the processes of a launch ([`shard`]).
//! Python's `round` and numpy's float32 mean ([`py_math`]) for the logged numbers.
//!
//! Invariant: uses [`crate::formats`] and [`crate::hf`] only (a torch release's numeric details
//! come from [`crate::hf::behaviors::TorchLayout`]); no I/O, no decisions.

pub mod adafactor;
pub mod adagrad;
pub mod greedy;
pub mod lr;
pub mod optim;
pub mod plateau;
pub mod py_math;
pub mod rmsprop;
pub mod rng;
pub mod sampler;
pub mod sgd;
pub mod shard;
