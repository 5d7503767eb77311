//! The world a scenario runs in, as the runner contract defines it (conformance/README.md): the
//! scenario itself ([`scenario`]: the arguments, data, scripted metrics, callbacks, resume and
//! damage, parsed strictly), the processes and disks of a launch ([`launch`]), the data sets
//! ([`data`]) and the model ([`model`]).
//!
//! Invariant: uses [`crate::formats`], [`crate::hf`] and [`crate::numerics`] only. It describes
//! what a run trains on and is asked to do; the executor ([`crate::trainer`]) does it.

pub mod data;
pub mod launch;
pub mod model;
pub mod scenario;
