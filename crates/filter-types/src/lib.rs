//! The filter's words that several crates share and no BPF is needed for:
//! one [`Mode`] for the guard's maps (`AG_MODE_*`), the configuration's
//! `[filter] mode`, the protocol's denial and `status` words, and the
//! metrics; the backends and what they cover ([`backend`]); the hook and
//! program tables ([`hooks`]), which the guard loads from and the metrics
//! key their counters by; a denial as the guard decodes it and the
//! protocol carries it ([`denial`]), with its device number ([`devt`]) and
//! the names of its ioctl ([`ioctls`]) and passthrough command
//! ([`commands`]). A leaf: it depends on serde (and thiserror) alone, so the
//! configuration, the metrics (built without BPF for `asmguardctl iostat`)
//! and the guard can all use it.

use std::fmt;

pub mod backend;
pub mod commands;
pub mod denial;
pub mod devt;
pub mod hooks;
pub mod ioctls;
pub mod reason;
pub mod replaced;

pub use backend::{Applied, Backend, BackendName, Coverage, PassthroughRule};
pub use denial::{Command, Denial, DeviceType, Operation};
pub use devt::{DevtError, KernelDev};
pub use hooks::{Hook, HookDef, Op, Program, ProgramRuns, HOOKS};
pub use reason::{Chosen, FilterReason, LoadNote, LsmHint, LsmList, NoBetter, NoFilter, Refused};
pub use replaced::{PinFound, ReplacedPin};

use serde::{Deserialize, Serialize};

/// What the filter does on one disk (`AG_MODE_*`; `[filter] mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// Nothing.
    Off,
    /// Log (event, counter) and allow.
    Audit,
    /// Log and deny with EPERM.
    Enforce,
    /// A reclaim runs on the disk: only the daemon's own process writes (no
    /// allow rule counts); log and deny with EPERM. Set by the daemon for the
    /// time of the job, never by the configuration or `filter`.
    Fenced,
}

impl Mode {
    /// All modes, with their `AG_MODE_*` codes.
    pub const ALL: [(Mode, u32); 4] = [
        (Mode::Off, 0),
        (Mode::Audit, 1),
        (Mode::Enforce, 2),
        (Mode::Fenced, 3),
    ];

    /// The `AG_MODE_*` code.
    pub fn code(self) -> u32 {
        match self {
            Mode::Off => 0,
            Mode::Audit => 1,
            Mode::Enforce => 2,
            Mode::Fenced => 3,
        }
    }
    /// From an `AG_MODE_*` code (unknown codes: off, as the programs treat them).
    pub fn from_code(c: u32) -> Mode {
        Mode::ALL
            .iter()
            .find(|(_, code)| *code == c)
            .map_or(Mode::Off, |(m, _)| *m)
    }
    /// `off`, `audit`, `enforce`: the configuration's word, the wire's and
    /// the metric label's.
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Off => "off",
            Mode::Audit => "audit",
            Mode::Enforce => "enforce",
            Mode::Fenced => "fenced",
        }
    }
}

impl std::str::FromStr for Mode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "off" => Ok(Mode::Off),
            "audit" => Ok(Mode::Audit),
            "enforce" => Ok(Mode::Enforce),
            "fenced" => Ok(Mode::Fenced),
            _ => Err(format!("{s:?} is not one of enforce, audit, off")),
        }
    }
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The words are pinned: the configuration, `lsdsk`'s JSON and the
    /// `asmguard_filter_mode` label all read them; serde, `FromStr`,
    /// `Display` and the codes agree.
    #[test]
    fn the_words_and_codes_are_pinned_and_agree() {
        for (m, word, code) in [
            (Mode::Off, "off", 0),
            (Mode::Audit, "audit", 1),
            (Mode::Enforce, "enforce", 2),
            (Mode::Fenced, "fenced", 3),
        ] {
            assert_eq!(m.as_str(), word);
            assert_eq!(m.to_string(), word);
            assert_eq!(word.parse::<Mode>().unwrap(), m);
            let j: Mode = serde_json::from_str(&format!("\"{word}\"")).unwrap();
            assert_eq!(serde_json::to_string(&m).unwrap(), format!("\"{word}\""));
            assert_eq!(j, m);
            assert_eq!(m.code(), code);
            assert_eq!(Mode::from_code(code), m);
        }
        assert_eq!(Mode::from_code(7), Mode::Off);
        assert!("Enforce".parse::<Mode>().is_err());
        assert!(serde_json::from_str::<Mode>("\"permissive\"").is_err());
    }
}
