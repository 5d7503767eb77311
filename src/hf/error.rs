//! What HF raises for a scenario (its outcome, recorded in result.json), kept apart from what
//! the Rust trainer does not reproduce yet (reported as "not yet implemented", never as a pass).

use crate::formats::pyjson::py_str_repr;

#[derive(Debug, Clone, PartialEq)]
pub enum HfError {
    /// An exception HF raises: Python class name and `str(exception)`.
    Raised { type_: String, message: String },
    /// A path the Rust trainer does not model; never written into result.json.
    NotModelled(String),
}

impl HfError {
    pub fn new(type_: &str, message: impl Into<String>) -> HfError {
        HfError::Raised { type_: type_.into(), message: message.into() }
    }
    pub fn value(message: impl Into<String>) -> HfError {
        HfError::new("ValueError", message)
    }
    /// A `KeyError(arg)`: `str()` of it is the repr of its argument.
    pub fn key(arg: &str) -> HfError {
        HfError::new("KeyError", py_str_repr(arg))
    }
    pub fn not_modelled(what: impl Into<String>) -> HfError {
        HfError::NotModelled(what.into())
    }
}
