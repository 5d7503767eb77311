//! Releases and their histories: a version number, and the macro that declares a table of
//! behaviors as the value each has from every release where it changed ([`at`]). The tables
//! themselves are [`crate::hf::behaviors`].

use std::fmt;

/// A release number `major.minor.patch`, ordered numerically.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Version(pub u32, pub u32, pub u32);

impl Version {
    /// Parses `4.46.3` (a missing patch is 0; a local suffix such as `+cu121` is ignored).
    pub fn parse(s: &str) -> Option<Version> {
        let s = s.split('+').next()?;
        let mut it = s.split('.').map(|p| p.parse::<u32>().ok());
        let major = it.next()??;
        let minor = it.next()??;
        let patch = match it.next() {
            Some(p) => p?,
            None => 0,
        };
        if it.next().is_some() {
            return None;
        }
        Some(Version(major, minor, patch))
    }

    /// For `const` tables.
    pub(crate) const fn lit(s: &str) -> Version {
        let b = s.as_bytes();
        let mut parts = [0u32; 3];
        let (mut i, mut k) = (0, 0);
        while i < b.len() {
            if b[i] == b'.' {
                k += 1;
            } else {
                parts[k] = parts[k] * 10 + (b[i] - b'0') as u32;
            }
            i += 1;
        }
        Version(parts[0], parts[1], parts[2])
    }
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.0, self.1, self.2)
    }
}

/// The value a history gives a version: the last change at or before it.
pub fn at<T: Clone>(history: &[(&str, T)], v: Version) -> T {
    history
        .iter()
        .rev()
        .find(|(since, _)| Version::lit(since) <= v)
        .or(history.first())
        .map(|(_, x)| x.clone())
        .expect("a history has at least one entry")
}

/// One row of the behavior table: a field, what it means, and its history rendered as text.
#[derive(Debug, Clone)]
pub struct Row {
    pub name: &'static str,
    pub doc: &'static str,
    pub changes: Vec<(&'static str, String)>,
}

/// Declares a behavior table (the tables are [`crate::hf::behaviors`]): the struct (one field per behavior), its
/// derivation for a version, and its rows for `ckptspec versions`.
macro_rules! behaviors {
    ($( #[doc = $sdoc:literal] )+ struct $Behaviors:ident;
     $( $( #[doc = $doc:literal] )+ $field:ident : $ty:ty = [ $( $since:literal => $val:expr ),+ $(,)? ] ; )*) => {
        $( #[doc = $sdoc] )+
        #[derive(Debug, Clone, Copy, PartialEq)]
        pub struct $Behaviors {
            $( $( #[doc = $doc] )+ pub $field: $ty, )*
        }

        impl $Behaviors {
            /// The value of every behavior in release `v`.
            pub fn at(v: $crate::hf::version::Version) -> $Behaviors {
                $Behaviors { $( $field: $crate::hf::version::at::<$ty>(&[ $( ($since, { let x: $ty = $val; x }) ),+ ], v), )* }
            }

            /// The table itself: each behavior with the release of every change.
            pub fn table() -> Vec<$crate::hf::version::Row> {
                vec![ $( $crate::hf::version::Row {
                    name: stringify!($field),
                    doc: concat!($($doc),+),
                    changes: vec![ $( ($since, $crate::hf::version::show::<$ty>(&{ let x: $ty = $val; x })) ),+ ],
                }, )* ]
            }
        }
    };
}

pub(crate) use behaviors;

/// How a value reads in the table.
pub fn show<T: fmt::Debug>(v: &T) -> String {
    let s = format!("{v:?}");
    match s.strip_prefix('"').and_then(|t| t.strip_suffix('"')) {
        Some(inner) => inner.replace("\\\"", "\""),
        None => s,
    }
}
