//! The file formats of a checkpoint, read and written byte for byte as torch, safetensors and
//! Python write them; the readers trust nothing in a file (README "Reading a diff").

pub mod pyjson;
pub mod safetensors;
pub mod torch_format;
