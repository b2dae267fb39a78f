//! Why the filter has its backend, or why it has none ([`FilterReason`]):
//! the facts the guard's load and the daemon's checks found, each a variant;
//! [`fmt::Display`] writes the sentence `asmguardctl status` and the
//! daemon's log show.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::{Backend, BackendName};

/// `status`'s `filter_reason`: how the backend was chosen and what its load
/// found, or why there is no filter; and what another process changed.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct FilterReason {
    /// How the backend was chosen (`None`: no filter, `none` says why).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chosen: Option<Chosen>,
    /// What the load found beside the choice, in the order it found it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<LoadNote>,
    /// Why there is no filter (`None` with a filter).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub none: Option<NoFilter>,
    /// What another process changed of the filter's pins or maps (put back
    /// since; protection stays `degraded` until a reload or restart).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub changed: Option<String>,
}

/// How the loaded backend was chosen.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "how", rename_all = "snake_case")]
pub enum Chosen {
    /// Named by the configuration or the caller.
    Requested,
    /// The filter pinned by an earlier run, re-adopted; `no_better`: why no
    /// better backend replaced a pinned open-time-only one.
    Readopted {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        no_better: Option<NoBetter>,
    },
    /// The best backend that loaded: what the kernel's LSM list said, and
    /// the better backends refused first (best first).
    Best {
        backend: BackendName,
        lsm: LsmList,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        refused: Vec<Refused>,
    },
}

/// Why no backend better than the pinned one loads (`why`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "why", rename_all = "snake_case")]
pub enum NoBetter {
    /// The better backends were refused: what the kernel's LSM list said,
    /// and each one's error (best first).
    Refused {
        lsm: LsmList,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        refused: Vec<Refused>,
    },
    /// Trying them failed otherwise.
    Failed { error: String },
}

/// The kernel's active LSMs (`/sys/kernel/security/lsm`) as the choice read
/// them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "bpf", rename_all = "snake_case")]
pub enum LsmList {
    /// `bpf` is in `list`.
    Active { list: String },
    /// `bpf` is not in `list`.
    Inactive { list: String },
    /// The list could not be read.
    Unreadable { error: String },
}

/// A better backend that did not load or attach.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Refused {
    pub backend: BackendName,
    pub error: String,
}

/// What a load found beside the choice of backend.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "note", rename_all = "snake_case")]
pub enum LoadNote {
    /// The cgroup-device fallback knows callers by uid and gid only: the
    /// kernel refused it the task helpers.
    UidGidOnly { error: String },
    /// SG_IO and NVMe passthrough are all-or-nothing: the kernel refused the
    /// sleepable file_ioctl program that reads the command.
    PassthroughAllOrNothing { error: String },
    /// In-kernel opens by device number (nvmet) are judged by
    /// `ag_kernel_open`.
    KernelOpensJudged,
    /// The kernel refused `ag_kernel_open`: in-kernel opens are not judged.
    KernelOpensNotJudged { error: String },
    /// The record of the pinned links could not be written (the next start
    /// replaces them).
    LinksNotRecorded { path: String, error: String },
    /// Programs of an earlier build, pinned, replaced by this build's.
    EarlierReplaced { programs: usize },
    /// A pinned worse filter replaced; it stayed attached until this one was.
    ReplacedPinned { backend: BackendName },
}

/// Why there is no filter.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "why", rename_all = "snake_case")]
pub enum NoFilter {
    /// The daemon has not loaded one (yet).
    NotStarted,
    /// An administrator turned it off (`asmguardctl filter disable`).
    Disabled,
    /// Turned off, but the programs could not be detached: they stay
    /// attached until reboot, with every disk's mode off.
    DisabledStillAttached { error: String },
    /// No backend could load.
    LoadFailed { error: String },
}

impl FilterReason {
    /// A loaded filter's reason.
    pub fn chosen(chosen: Chosen) -> FilterReason {
        FilterReason {
            chosen: Some(chosen),
            ..FilterReason::default()
        }
    }

    /// No filter, for `why`.
    pub fn none(why: NoFilter) -> FilterReason {
        FilterReason {
            none: Some(why),
            ..FilterReason::default()
        }
    }
}

/// How to turn the BPF LSM on where the kernel has it built in but `bpf` is
/// not an active LSM: the kernel command-line argument to boot with.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LsmHint {
    /// `lsm=...,bpf`: the active list with `bpf` added.
    pub lsm_param: String,
}

/// The sentence `asmguardctl status`'s `hint:` line and the daemon's log
/// show: the argument and how to add it with either distribution's tool.
impl fmt::Display for LsmHint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let arg = &self.lsm_param;
        write!(
            f,
            "this kernel has the BPF LSM but it is not active: boot with {arg} \
             (RHEL/Oracle Linux: grubby --update-kernel=ALL --args=\"{arg}\"; \
             Debian/Ubuntu: add {arg} to GRUB_CMDLINE_LINUX in /etc/default/grub, run \
             update-grub) and reboot"
        )
    }
}

/// The sentence of a best-backend choice: the LSM list's verdict or the LSM
/// programs' error, then the `fmod_ret` clause. `backend` is `None` when no
/// backend was taken (none better than a pinned one loads).
pub fn best_sentence(lsm: &LsmList, refused: &[Refused], backend: Option<Backend>) -> String {
    let failed = |b: BackendName| refused.iter().find(|r| r.backend == b);
    let mut s = match (failed(BackendName::Lsm), lsm) {
        (Some(r), _) => format!("the BPF LSM programs could not load or attach: {}", r.error),
        (None, LsmList::Active { list }) => format!("bpf is an active LSM ({list})"),
        (None, LsmList::Inactive { list }) => format!("bpf is not an active LSM ({list})"),
        (None, LsmList::Unreadable { error }) => error.clone(),
    };
    if let Some(r) = failed(BackendName::FmodRet) {
        s = format!("{s}; fmod_ret programs did not load: {}", r.error);
    } else if backend == Some(Backend::FmodRet) {
        s.push_str(": fmod_ret programs on the kernel's security_* functions");
    }
    s
}

impl fmt::Display for NoBetter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NoBetter::Refused { lsm, refused } => f.write_str(&best_sentence(lsm, refused, None)),
            NoBetter::Failed { error } => f.write_str(error),
        }
    }
}

impl fmt::Display for Chosen {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Chosen::Requested => f.write_str("requested"),
            Chosen::Readopted { no_better: None } => f.write_str("re-adopted the pinned filter"),
            Chosen::Readopted { no_better: Some(e) } => write!(
                f,
                "re-adopted the pinned filter (no better backend loads: {e})"
            ),
            Chosen::Best {
                backend,
                lsm,
                refused,
            } => {
                let b = Backend::ALL
                    .into_iter()
                    .find(|b| BackendName::from(*b) == *backend);
                f.write_str(&best_sentence(lsm, refused, b))
            }
        }
    }
}

impl fmt::Display for LoadNote {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LoadNote::UidGidOnly { error } => write!(
                f,
                "identity from uid and gid only (this kernel refuses the task helpers to \
                 cgroup-device programs: {error})"
            ),
            LoadNote::PassthroughAllOrNothing { error } => write!(
                f,
                "SG_IO and NVMe passthrough all-or-nothing (this kernel refuses the sleepable \
                 file_ioctl program that reads the command: {error})"
            ),
            LoadNote::KernelOpensJudged => {
                f.write_str("in-kernel opens by device number (nvmet): judged by ag_kernel_open")
            }
            LoadNote::KernelOpensNotJudged { error } => write!(
                f,
                "in-kernel opens by device number (nvmet) not judged (this kernel refuses \
                 ag_kernel_open: {error})"
            ),
            LoadNote::LinksNotRecorded { path, error } => write!(
                f,
                "cannot record the pinned links in {path}: {error} (the next start replaces them)"
            ),
            LoadNote::EarlierReplaced { programs } => write!(
                f,
                "{programs} program{} of an earlier build replaced",
                if *programs == 1 { "" } else { "s" }
            ),
            LoadNote::ReplacedPinned { backend } => write!(
                f,
                "replaced the pinned {backend} filter, which stayed attached until this one was"
            ),
        }
    }
}

impl fmt::Display for NoFilter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NoFilter::NotStarted => f.write_str("not started"),
            NoFilter::Disabled => f.write_str("disabled (asmguardctl filter disable)"),
            NoFilter::DisabledStillAttached { error } => write!(
                f,
                "disabled; {error}: they stay attached until reboot, with every disk's mode off"
            ),
            NoFilter::LoadFailed { error } => write!(f, "no filter: {error}"),
        }
    }
}

/// The clauses joined by `; `, the change another process made last.
impl fmt::Display for FilterReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts: Vec<String> = Vec::new();
        parts.extend(self.chosen.iter().map(ToString::to_string));
        parts.extend(self.none.iter().map(ToString::to_string));
        parts.extend(self.notes.iter().map(ToString::to_string));
        if let Some(c) = &self.changed {
            parts.push(format!(
                "CHANGED BY ANOTHER PROCESS (put back; reload with `asmguardctl filter \
                 disable` and `enable`, or restart, once it is found): {c}"
            ));
        }
        f.write_str(&parts.join("; "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Why no better backend replaced a pinned one is facts on the wire
    /// (`filter_reason.chosen.no_better`), worded by its `Display`.
    #[test]
    fn no_better_is_facts() {
        let c = Chosen::Readopted {
            no_better: Some(NoBetter::Refused {
                lsm: LsmList::Inactive {
                    list: "capability".into(),
                },
                refused: vec![Refused {
                    backend: BackendName::FmodRet,
                    error: "E8".into(),
                }],
            }),
        };
        let j = serde_json::json!({"how":"readopted","no_better":{"why":"refused",
            "lsm":{"bpf":"inactive","list":"capability"},
            "refused":[{"backend":"fmod_ret","error":"E8"}]}});
        assert_eq!(serde_json::to_value(&c).unwrap(), j);
        assert_eq!(serde_json::from_value::<Chosen>(j).unwrap(), c);
        let failed = NoBetter::Failed { error: "E9".into() };
        assert_eq!(
            serde_json::to_value(&failed).unwrap(),
            serde_json::json!({"why":"failed","error":"E9"})
        );
        assert_eq!(failed.to_string(), "E9");
    }

    fn best(lsm: LsmList, refused: &[(BackendName, &str)], backend: BackendName) -> Chosen {
        Chosen::Best {
            backend,
            lsm,
            refused: refused
                .iter()
                .map(|(b, e)| Refused {
                    backend: *b,
                    error: e.to_string(),
                })
                .collect(),
        }
    }

    /// The sentences `asmguardctl status` printed when the daemon wrote
    /// them, clause for clause.
    #[test]
    fn sentences_are_the_ones_the_daemon_wrote() {
        let active = || LsmList::Active {
            list: "capability,bpf".into(),
        };
        let inactive = || LsmList::Inactive {
            list: "capability,yama".into(),
        };
        let rows: Vec<(FilterReason, &str)> = vec![
            (
                FilterReason::chosen(best(active(), &[], BackendName::Lsm)),
                "bpf is an active LSM (capability,bpf)",
            ),
            (
                FilterReason::chosen(best(
                    active(),
                    &[(BackendName::Lsm, "E1")],
                    BackendName::FmodRet,
                )),
                "the BPF LSM programs could not load or attach: E1: fmod_ret programs on the \
                 kernel's security_* functions",
            ),
            (
                FilterReason::chosen(best(
                    inactive(),
                    &[(BackendName::FmodRet, "E2")],
                    BackendName::CgroupDevice,
                )),
                "bpf is not an active LSM (capability,yama); fmod_ret programs did not load: E2",
            ),
            (
                FilterReason::chosen(best(
                    LsmList::Unreadable {
                        error: "no securityfs".into(),
                    },
                    &[],
                    BackendName::CgroupDevice,
                )),
                "no securityfs",
            ),
            (
                FilterReason {
                    notes: vec![
                        LoadNote::PassthroughAllOrNothing { error: "E3".into() },
                        LoadNote::KernelOpensNotJudged { error: "E4".into() },
                        LoadNote::LinksNotRecorded {
                            path: "/run/x".into(),
                            error: "E5".into(),
                        },
                        LoadNote::EarlierReplaced { programs: 2 },
                        LoadNote::ReplacedPinned {
                            backend: BackendName::CgroupDevice,
                        },
                    ],
                    changed: Some("the managed-device map".into()),
                    ..FilterReason::chosen(Chosen::Requested)
                },
                "requested; SG_IO and NVMe passthrough all-or-nothing (this kernel refuses the \
                 sleepable file_ioctl program that reads the command: E3); in-kernel opens by \
                 device number (nvmet) not judged (this kernel refuses ag_kernel_open: E4); \
                 cannot record the pinned links in /run/x: E5 (the next start replaces them); \
                 2 programs of an earlier build replaced; replaced the pinned cgroup_device \
                 filter, which stayed attached until this one was; CHANGED BY ANOTHER PROCESS \
                 (put back; reload with `asmguardctl filter disable` and `enable`, or restart, \
                 once it is found): the managed-device map",
            ),
            (
                FilterReason {
                    notes: vec![
                        LoadNote::UidGidOnly { error: "E6".into() },
                        LoadNote::EarlierReplaced { programs: 1 },
                    ],
                    ..FilterReason::chosen(Chosen::Readopted {
                        no_better: Some(NoBetter::Failed { error: "E7".into() }),
                    })
                },
                "re-adopted the pinned filter (no better backend loads: E7); identity from uid \
                 and gid only (this kernel refuses the task helpers to cgroup-device programs: \
                 E6); 1 program of an earlier build replaced",
            ),
            (
                FilterReason::chosen(Chosen::Readopted { no_better: None }),
                "re-adopted the pinned filter",
            ),
            (
                FilterReason::chosen(Chosen::Readopted {
                    no_better: Some(NoBetter::Refused {
                        lsm: LsmList::Inactive {
                            list: "capability,yama".into(),
                        },
                        refused: vec![Refused {
                            backend: BackendName::FmodRet,
                            error: "E8".into(),
                        }],
                    }),
                }),
                "re-adopted the pinned filter (no better backend loads: bpf is not an active \
                 LSM (capability,yama); fmod_ret programs did not load: E8)",
            ),
            (
                FilterReason {
                    notes: vec![LoadNote::KernelOpensJudged],
                    ..FilterReason::chosen(Chosen::Requested)
                },
                "requested; in-kernel opens by device number (nvmet): judged by ag_kernel_open",
            ),
            (FilterReason::none(NoFilter::NotStarted), "not started"),
            (
                FilterReason::none(NoFilter::Disabled),
                "disabled (asmguardctl filter disable)",
            ),
            (
                FilterReason::none(NoFilter::DisabledStillAttached { error: "E8".into() }),
                "disabled; E8: they stay attached until reboot, with every disk's mode off",
            ),
            (
                FilterReason::none(NoFilter::LoadFailed { error: "E9".into() }),
                "no filter: E9",
            ),
        ];
        for (r, text) in rows {
            assert_eq!(r.to_string(), text);
            // and the typed value crosses the wire whole
            let json = serde_json::to_string(&r).unwrap();
            assert_eq!(serde_json::from_str::<FilterReason>(&json).unwrap(), r);
        }
    }

    /// The wire shape `status --json` gives.
    #[test]
    fn json_shape() {
        let r = FilterReason {
            notes: vec![LoadNote::KernelOpensJudged],
            changed: Some("ag_majors".into()),
            ..FilterReason::chosen(Chosen::Best {
                backend: BackendName::FmodRet,
                lsm: LsmList::Inactive {
                    list: "yama".into(),
                },
                refused: vec![],
            })
        };
        assert_eq!(
            serde_json::to_value(&r).unwrap(),
            serde_json::json!({
                "chosen": {"how": "best", "backend": "fmod_ret",
                           "lsm": {"bpf": "inactive", "list": "yama"}},
                "notes": [{"note": "kernel_opens_judged"}],
                "changed": "ag_majors"
            })
        );
        assert_eq!(
            serde_json::to_value(FilterReason::none(NoFilter::Disabled)).unwrap(),
            serde_json::json!({"none": {"why": "disabled"}})
        );
    }
}
