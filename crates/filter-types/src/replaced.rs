//! A pinned link a filter start did not adopt ([`ReplacedPin`]): which pin
//! and what was found there instead ([`PinFound`]), as facts. The guard
//! finds them (its adoption check), the daemon keeps each as an event and in
//! `status`, and one `Display` words them for the journal and `asmguardctl`.

use std::fmt;

use serde::{Deserialize, Serialize};

/// A pinned link replaced at a filter start: the pin (the program's name)
/// and what was there instead. Written `PIN: what was found`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReplacedPin {
    /// The pin (`ag_file_open`).
    pub pin: String,
    /// What it held instead of this daemon's link.
    pub found: PinFound,
}

/// What a pin held instead of the link this daemon's build pinned.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "what", rename_all = "snake_case")]
pub enum PinFound {
    /// A link the kernel gives no information on.
    NoLinkInfo,
    /// No link at all (`error`: why it does not open as one).
    NotALink { error: String },
    /// This build's program cannot be read to compare with it.
    CannotCompare,
    /// A link of another type or place (`link`: its kind; `attach`: how
    /// this daemon attaches that program).
    OtherPlace { link: String, attach: String },
    /// A link whose program cannot be read.
    ProgramUnreadable { program: u32 },
    /// A program of another type or hook.
    OtherProgramType { program: u32 },
    /// A program reading other maps (`reads`) than this build's (`want`:
    /// the pinned ones).
    OtherMaps {
        program: u32,
        reads: Vec<u32>,
        want: Vec<u32>,
    },
    /// Another link than the one the daemon recorded.
    OtherLink {
        link: u32,
        program: u32,
        recorded_link: u32,
        recorded_program: u32,
    },
    /// A link no record of a daemon's names.
    Unrecorded { link: u32, program: u32 },
    /// The recorded link, with an earlier build's program (tags in hex).
    EarlierBuild {
        program: u32,
        tag: String,
        this_tag: String,
    },
}

impl fmt::Display for PinFound {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PinFound::NoLinkInfo => {
                f.write_str("the kernel gives no information on the pinned link")
            }
            PinFound::NotALink { error } => write!(f, "the pin is not a link ({error})"),
            PinFound::CannotCompare => {
                f.write_str("this build's program cannot be read to compare")
            }
            PinFound::OtherPlace { link, attach } => write!(
                f,
                "a link of another type or place ({link} or another hook, where this daemon \
                 pins {attach})"
            ),
            PinFound::ProgramUnreadable { program } => {
                write!(f, "its program (id {program}) cannot be read")
            }
            PinFound::OtherProgramType { program } => {
                write!(f, "program id {program} is of another type or hook")
            }
            PinFound::OtherMaps {
                program,
                reads,
                want,
            } => write!(
                f,
                "program id {program} reads other maps ({reads:?}, not {want:?})"
            ),
            PinFound::OtherLink {
                link,
                program,
                recorded_link,
                recorded_program,
            } => write!(
                f,
                "link id {link} with program id {program}, where the daemon pinned link id \
                 {recorded_link} with program id {recorded_program}"
            ),
            PinFound::Unrecorded { link, program } => write!(
                f,
                "link id {link} (program id {program}) is in no record of a daemon's"
            ),
            PinFound::EarlierBuild {
                program,
                tag,
                this_tag,
            } => write!(
                f,
                "program id {program} (tag {tag}) is an earlier build's (this one's: tag \
                 {this_tag})"
            ),
        }
    }
}

impl fmt::Display for ReplacedPin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.pin, self.found)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The words the journal, `status` and `asmguardctl events` print (the
    /// VM test `pinswap` reads `PIN REPLACED <pin>:`), and the facts on the
    /// wire.
    #[test]
    fn a_replaced_pin_is_written_once() {
        let r = ReplacedPin {
            pin: "ag_file_open".into(),
            found: PinFound::Unrecorded {
                link: 9,
                program: 4,
            },
        };
        assert_eq!(
            r.to_string(),
            "ag_file_open: link id 9 (program id 4) is in no record of a daemon's"
        );
        let j = serde_json::to_value(&r).unwrap();
        assert_eq!(
            j,
            serde_json::json!({"pin":"ag_file_open","found":{"what":"unrecorded","link":9,"program":4}})
        );
        assert_eq!(serde_json::from_value::<ReplacedPin>(j).unwrap(), r);
        let maps = PinFound::OtherMaps {
            program: 5,
            reads: vec![],
            want: vec![1],
        };
        assert_eq!(
            maps.to_string(),
            "program id 5 reads other maps ([], not [1])"
        );
        let place = PinFound::OtherPlace {
            link: "a cgroup link".into(),
            attach: "Lsm".into(),
        };
        assert_eq!(
            place.to_string(),
            "a link of another type or place (a cgroup link or another hook, where this \
             daemon pins Lsm)"
        );
    }
}
