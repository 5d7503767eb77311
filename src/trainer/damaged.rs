//! HF's exceptions for a checkpoint file cut short (a run killed while writing it), as the real
//! HF of each profile raises them when `train(resume_from_checkpoint=...)` reads the file
//! (tests/resume.rs truncates each file of a real checkpoint). Each function says `None` for
//! damage whose exception is not modelled (the caller reports it as not implemented).

use crate::formats::json_error::py_json_error;
use crate::formats::pyjson::PyJson;
use crate::hf::behaviors::ResumeBehaviors;
use crate::hf::error::HfError;
use std::path::Path;

/// `torch.load` of a file cut short: empty, the unpickler's `EOFError` (its message is the
/// release's: pickle's "Ran out of input" or the weights-only unpickler's empty one); a zip
/// archive without its central directory (any cut past the first local header),
/// `RuntimeError` from `PytorchStreamReader`.
pub fn torch_load(path: &Path, empty_message: &str, zip_suffix: &str) -> Option<HfError> {
    let bytes = std::fs::read(path).ok()?;
    if bytes.is_empty() {
        return Some(HfError::new("EOFError", empty_message));
    }
    // torch takes a file for a zip archive by its first four bytes; miniz then looks for
    // the end-of-central-directory record in the last 64 KiB + 22 bytes.
    let tail = &bytes[bytes.len().saturating_sub(65_557)..];
    if bytes.starts_with(b"PK\x03\x04") && !tail.windows(4).any(|w| w == b"PK\x05\x06") {
        return Some(HfError::new(
            "RuntimeError",
            format!("PytorchStreamReader failed reading zip archive: failed finding central directory{zip_suffix}"),
        ));
    }
    None
}

/// `_load_from_checkpoint`'s read of the weights: `safetensors.torch.load_file` for
/// model.safetensors (a `SafetensorError` when the 8-byte header length or the header itself
/// is cut off), `torch.load` for pytorch_model.bin.
pub fn weights_load(path: &Path, rules: &ResumeBehaviors) -> Option<HfError> {
    if path.file_name().is_some_and(|n| n == "pytorch_model.bin") {
        return torch_load(path, rules.empty_weights_file_message, rules.zip_error_suffix);
    }
    let bytes = std::fs::read(path).ok()?;
    let (too_small, invalid_length) = rules.safetensors_header_errors;
    let which = if bytes.len() < 8 {
        too_small
    } else {
        let n = u64::from_le_bytes(bytes[..8].try_into().unwrap());
        // safetensors refuses a header over 100 MB first (HeaderTooLarge, not modelled).
        if n > 100_000_000 || n.checked_add(8).is_none_or(|end| end <= bytes.len() as u64) {
            return None;
        }
        invalid_length
    };
    Some(HfError::new("SafetensorError", format!("Error while deserializing header: {which}")))
}

/// `TrainerState.load_from_json`: `json.loads` of the text; `Err(Some(JSONDecodeError))`
/// where Python's decoder rejects it, with its message and position.
pub fn parse_trainer_state(text: &str) -> Result<PyJson, Option<HfError>> {
    if let Some((msg, pos)) = py_json_error(text) {
        let chars: Vec<char> = text.chars().collect();
        let before = &chars[..pos.min(chars.len())];
        let line = before.iter().filter(|c| **c == '\n').count() + 1;
        let column = match before.iter().rposition(|c| *c == '\n') {
            Some(nl) => pos - nl,
            None => pos + 1,
        };
        return Err(Some(HfError::new("JSONDecodeError", format!("{msg}: line {line} column {column} (char {pos})"))));
    }
    crate::formats::pyjson::loads(text).map_err(|_| None)
}
