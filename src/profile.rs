//! Version profiles: every behavioral difference between HF versions is a field here, so the
//! policies read data instead of comparing version strings.

/// The HF versions this implementation reproduces, newest first.
pub const SUPPORTED: [&str; 2] = ["5.24.0", "4.31.0"];

#[derive(Debug, Clone, PartialEq)]
pub struct Profile {
    pub version: &'static str,
}

impl Profile {
    /// The profile of an HF version, or an error listing the supported ones.
    pub fn get(version: &str) -> Result<Profile, String> {
        match SUPPORTED.iter().find(|v| **v == version) {
            Some(v) => Ok(Profile { version: v }),
            None => Err(format!(
                "unsupported --hf version {version:?}; supported: {}",
                SUPPORTED.join(", ")
            )),
        }
    }
}
