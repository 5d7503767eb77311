//! torch's and transformers' arithmetic, bit for bit for the contract's model: the learning-rate
//! schedules, AdamW and SGD, ReduceLROnPlateau and GreedyLR, the RNGs (MT19937, torch's
//! generator, CPython's and numpy's states) and the order of the training data.

pub mod greedy;
pub mod lr;
pub mod optim;
pub mod plateau;
pub mod rng;
pub mod sampler;
pub mod sgd;
