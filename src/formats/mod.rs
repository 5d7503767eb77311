//! The file formats of a checkpoint, read and written byte for byte as torch, safetensors and
//! Python write them; the readers trust nothing in a file (README "Reading a diff").
//!
//! Invariant: uses no other layer. A format knows bytes and Python's values, not HF: which
//! release writes which layout is [`crate::hf`]'s to say.

pub mod json_error;
pub mod pyjson;
pub mod safetensors;
pub mod torch_format;
