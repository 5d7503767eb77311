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
/// archive without its end-of-central-directory record (any cut past the first local header),
/// what miniz's search for that record ends in ([`eocd_search`]): `RuntimeError` from
/// `PytorchStreamReader`, or the `OSError` of a seek before the file's start.
pub fn torch_load(path: &Path, empty_message: &str, zip_suffix: &str) -> Option<HfError> {
    let bytes = std::fs::read(path).ok()?;
    if bytes.is_empty() {
        return Some(HfError::new("EOFError", empty_message));
    }
    // torch takes a file for a zip archive by its first four bytes; miniz then looks for
    // the end-of-central-directory record in the last 64 KiB + 22 bytes.
    let tail = &bytes[bytes.len().saturating_sub(65_557)..];
    if bytes.starts_with(b"PK\x03\x04") && !tail.windows(4).any(|w| w == b"PK\x05\x06") {
        let miniz = |what: &str| HfError::new("RuntimeError", format!("PytorchStreamReader failed reading zip archive: {what}{zip_suffix}"));
        return Some(match eocd_search(bytes.len() as u64) {
            EocdSearch::TooShort => miniz("not a ZIP archive"),
            EocdSearch::NotFound => miniz("failed finding central directory"),
            EocdSearch::SeekBeforeStart => HfError::new("OSError", "[Errno 22] Invalid argument"),
        });
    }
    None
}

/// How miniz's search for the end-of-central-directory record ends in a zip archive that holds
/// none ([`eocd_search`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EocdSearch {
    /// Shorter than the record itself (22 bytes): `MZ_ZIP_NOT_AN_ARCHIVE` before any search.
    TooShort,
    /// The search reached the file's start, or went back 64 KiB + 22 bytes:
    /// `MZ_ZIP_FAILED_FINDING_CENTRAL_DIR`.
    NotFound,
    /// The next 4 KiB read would start before the file: miniz computes
    /// `MZ_MAX(ofs - 4093, 0)` in unsigned arithmetic, so it wraps to a negative offset, and torch
    /// reads through the Python file object (`torch.load` opens the path itself), whose `seek`
    /// refuses it with EINVAL.
    SeekBeforeStart,
}

/// `mz_zip_reader_locate_header_sig` for an archive of `len` bytes without the record: reads of
/// 4096 bytes from the end backwards, each 4093 bytes before the last (overlapping by the
/// signature's 3), until the start, 65,557 bytes back, or a read before the start. So a file
/// of 4,097 to 69,583 bytes whose length minus 4096 is no multiple of 4093 ends in the seek.
/// Checked against `torch.load` of a file cut to 82 lengths from 4 to 161,000 bytes under torch
/// 2.1.2 and 2.13.0 (every outcome as predicted; tests/resume.rs checks it against HF).
pub fn eocd_search(len: u64) -> EocdSearch {
    const RECORD: i64 = 22;
    const CHUNK: i64 = 4096;
    const MAX_BACK: i64 = 65_535 + RECORD;
    let len = len as i64;
    if len < RECORD {
        return EocdSearch::TooShort;
    }
    let mut ofs = (len - CHUNK).max(0);
    loop {
        if ofs == 0 || len - ofs >= MAX_BACK {
            return EocdSearch::NotFound;
        }
        ofs -= CHUNK - 3;
        if ofs < 0 {
            return EocdSearch::SeekBeforeStart;
        }
    }
}

/// `_load_from_checkpoint`'s read of the weights: `safetensors.torch.load_file` for
/// model.safetensors and peft's adapter_model.safetensors (a `SafetensorError` when the 8-byte
/// header length or the header itself is cut off), `torch.load` for pytorch_model.bin and
/// adapter_model.bin.
pub fn weights_load(path: &Path, rules: &ResumeBehaviors) -> Option<HfError> {
    if path.extension().is_some_and(|x| x == "bin") {
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

#[cfg(test)]
mod tests {
    use super::{eocd_search, EocdSearch::*};

    #[test]
    fn miniz_search_ends_as_torch_load_showed() {
        // torch.load of a checkpoint file cut to these lengths (torch 2.1.2 and 2.13.0 alike).
        for (len, want) in [
            (4, TooShort),
            (21, TooShort),
            (22, NotFound),
            (4096, NotFound),
            (4097, SeekBeforeStart),
            (7000, SeekBeforeStart),
            (8189, NotFound),
            (8190, SeekBeforeStart),
            (12282, NotFound),
            (69000, SeekBeforeStart),
            (16375, NotFound),
            (16376, SeekBeforeStart),
            (69583, SeekBeforeStart),
            (69584, NotFound),
            (70000, NotFound),
            (100000, NotFound),
        ] {
            assert_eq!(eocd_search(len), want, "{len} bytes");
        }
    }
}
