//! The one error type of the file-format layer (torch zip+pickle, safetensors, Python JSON).

use std::fmt;
use std::io;
use std::path::Path;

/// What went wrong while reading or writing a checkpoint file.
///
/// Every variant carries `path`: the file it concerns, as the caller named it (empty while an
/// error travels inside the layer; the public functions fill it in). `Display` prints
/// `"<path>: <what>"`, e.g. `optimizer.pt: truncated zip central directory` or
/// `optimizer.pt: data.pkl: unsupported opcode 0x93 at byte 120`.
#[derive(Debug)]
pub enum FormatError {
    /// The operating system refused a read, write, open or sync.
    Io {
        path: String,
        action: &'static str,
        source: io::Error,
    },
    /// The zip container is malformed or uses a feature torch never writes.
    Zip { path: String, msg: String },
    /// The pickle stream (`record`, e.g. `data.pkl`) is malformed or uses an unsupported opcode.
    Pickle {
        path: String,
        record: String,
        offset: u64,
        msg: String,
    },
    /// The pickle names a global that is not on the allow-list; nothing was executed.
    RefusedGlobal {
        path: String,
        record: String,
        offset: u64,
        global: String,
    },
    /// The data is well-formed but means something this layer does not model
    /// (a tensor whose storage record is missing, a big-endian archive, ...).
    Invalid { path: String, msg: String },
    /// The value cannot be written in this format (e.g. a recursive structure, a NaN in strict JSON).
    Unwritable { path: String, msg: String },
    /// A safetensors file is truncated or its header is malformed.
    Safetensors { path: String, msg: String },
    /// Text that is not JSON as Python's `json` module reads it.
    Json {
        path: String,
        line: usize,
        column: usize,
        msg: String,
    },
}

impl FormatError {
    /// The path the error concerns ("" when unknown).
    pub fn path(&self) -> &str {
        match self {
            FormatError::Io { path, .. }
            | FormatError::Zip { path, .. }
            | FormatError::Pickle { path, .. }
            | FormatError::RefusedGlobal { path, .. }
            | FormatError::Invalid { path, .. }
            | FormatError::Unwritable { path, .. }
            | FormatError::Safetensors { path, .. }
            | FormatError::Json { path, .. } => path,
        }
    }

    /// Sets the path when none is set yet.
    pub fn at(mut self, p: &Path) -> Self {
        let slot = match &mut self {
            FormatError::Io { path, .. }
            | FormatError::Zip { path, .. }
            | FormatError::Pickle { path, .. }
            | FormatError::RefusedGlobal { path, .. }
            | FormatError::Invalid { path, .. }
            | FormatError::Unwritable { path, .. }
            | FormatError::Safetensors { path, .. }
            | FormatError::Json { path, .. } => path,
        };
        if slot.is_empty() {
            *slot = p.display().to_string();
        }
        self
    }

    pub(crate) fn io(action: &'static str, source: io::Error) -> Self {
        FormatError::Io {
            path: String::new(),
            action,
            source,
        }
    }
    pub(crate) fn zip(msg: impl Into<String>) -> Self {
        FormatError::Zip {
            path: String::new(),
            msg: msg.into(),
        }
    }
    pub(crate) fn invalid(msg: impl Into<String>) -> Self {
        FormatError::Invalid {
            path: String::new(),
            msg: msg.into(),
        }
    }
    pub(crate) fn unwritable(msg: impl Into<String>) -> Self {
        FormatError::Unwritable {
            path: String::new(),
            msg: msg.into(),
        }
    }
    pub(crate) fn safetensors(msg: impl Into<String>) -> Self {
        FormatError::Safetensors {
            path: String::new(),
            msg: msg.into(),
        }
    }
}

impl fmt::Display for FormatError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let p = self.path();
        if !p.is_empty() {
            write!(f, "{p}: ")?;
        }
        match self {
            FormatError::Io { action, source, .. } => write!(f, "{action} failed: {source}"),
            FormatError::Zip { msg, .. } => write!(f, "{msg}"),
            FormatError::Pickle {
                record,
                offset,
                msg,
                ..
            } => write!(f, "{record}: {msg} at byte {offset}"),
            FormatError::RefusedGlobal {
                record,
                offset,
                global,
                ..
            } => {
                write!(
                    f,
                    "{record}: refusing global {global} at byte {offset} (not on the allow-list)"
                )
            }
            FormatError::Invalid { msg, .. } => write!(f, "{msg}"),
            FormatError::Unwritable { msg, .. } => write!(f, "cannot write: {msg}"),
            FormatError::Safetensors { msg, .. } => write!(f, "{msg}"),
            FormatError::Json {
                line, column, msg, ..
            } => write!(f, "{msg} at line {line} column {column}"),
        }
    }
}

impl std::error::Error for FormatError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            FormatError::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}

/// Result of the file-format layer.
pub type Result<T, E = FormatError> = std::result::Result<T, E>;
