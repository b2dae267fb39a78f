//! The filter modes an administrator set (the World's `modes`): a mode per
//! disk (`asmguardctl filter enable|audit|disable LABEL`) and the whole
//! filter off (`filter disable`). Pure: the runtime state file
//! (`<runtime_dir>/filter.state`) is read at start and written by the apply
//! side; the filter turns these and the configured mode into each device's
//! mode.
//!
//! A mode belongs to the disk it was set for (its top device), not to the
//! name: it moves with a rename, ends with the label (`unlabel`, a new label
//! written over it), and is void when the label turns up on another disk.

use asmguard_devices::KernelDev;
use asmguard_guard::Mode;
use asmguard_proto::FilterAction as Action;
use std::collections::BTreeMap;

/// A mode an administrator set for one disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Set {
    pub mode: Mode,
    /// The top device of the disk it was set for (`None`: from a state file
    /// that did not name it; bound to the label's disk by the next model).
    pub top: Option<KernelDev>,
}

/// The modes set, by label, and whether the filter is off.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Modes {
    pub set: BTreeMap<String, Set>,
    /// `filter disable` with no label: no programs until `enable`/`audit`.
    pub disabled: bool,
}

/// Why a mode cannot be set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refused {
    /// The label names no managed disk.
    UnknownLabel(String),
}

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refused::UnknownLabel(l) => write!(f, "no managed disk has the label {l}"),
        }
    }
}

/// The mode an action asks for.
pub fn mode_of(action: Action) -> Mode {
    match action {
        Action::Enable => Mode::Enforce,
        Action::Audit => Mode::Audit,
        Action::Disable => Mode::Off,
    }
}

impl Modes {
    /// The state file's text read back (unknown lines are skipped).
    pub fn parse(text: &str) -> Modes {
        let mut m = Modes::default();
        for line in text.lines() {
            let mut f = line.split_whitespace();
            match (f.next(), f.next(), f.next(), f.next()) {
                (Some("disabled"), None, None, None) => m.disabled = true,
                (Some("mode"), Some(label), Some(word), top) => {
                    let top = top.and_then(|t| t.parse::<KernelDev>().ok());
                    if let Ok(mode) = word.parse() {
                        m.set.insert(label.to_string(), Set { mode, top });
                    }
                }
                _ => {}
            }
        }
        m
    }

    /// The state file's text.
    pub fn text(&self) -> String {
        let mut text = String::new();
        if self.disabled {
            text.push_str("disabled\n");
        }
        for (l, s) in &self.set {
            match s.top {
                Some(top) => text.push_str(&format!("mode {l} {} {top}\n", s.mode)),
                None => text.push_str(&format!("mode {l} {}\n", s.mode)),
            }
        }
        text
    }

    /// The mode of the disk that carries `label` now (top device `top`): the
    /// one set for that disk, else `configured`; `fenced` whatever is set
    /// while a reclaim runs on it.
    pub fn mode_for(
        &self,
        label: &str,
        top: Option<KernelDev>,
        configured: Mode,
        fenced: bool,
    ) -> Mode {
        if fenced {
            return Mode::Fenced;
        }
        match self.set.get(label) {
            Some(s) if s.top.is_none() || s.top == top => s.mode,
            _ => configured,
        }
    }

    /// Bound to the disks now (label -> top device): a mode read without a
    /// disk binds to the label's disk; one whose label is now on another
    /// disk is dropped (the mode ended with the disk's label).
    pub fn settled(&self, tops: &BTreeMap<String, KernelDev>) -> Modes {
        let mut m = self.clone();
        m.set.retain(|label, s| match (tops.get(label), s.top) {
            (None, _) => true,
            (Some(t), None) => {
                s.top = Some(*t);
                true
            }
            (Some(t), Some(x)) => *t == x,
        });
        m
    }

    /// `asmguardctl filter ACTION [LABEL]` on the disks now (label -> top
    /// device) with `configured` the configuration's mode. Without a label:
    /// enable/audit set every disk (and the filter on), disable turns the
    /// filter off keeping the modes. With a label no disk carries: refused,
    /// except `enable` of a label a mode is kept for (the disk is gone),
    /// which clears it.
    pub fn with(
        &self,
        label: Option<&str>,
        action: Action,
        tops: &BTreeMap<String, KernelDev>,
        configured: Mode,
    ) -> Result<Modes, Refused> {
        let mut m = self.clone();
        let mode = mode_of(action);
        match label {
            Some(l) => match tops.get(l) {
                None if action == Action::Enable && m.set.remove(l).is_some() => {}
                None => return Err(Refused::UnknownLabel(l.to_string())),
                Some(top) if mode == configured => {
                    let _ = top;
                    m.set.remove(l);
                }
                Some(top) => {
                    m.set.insert(
                        l.to_string(),
                        Set {
                            mode,
                            top: Some(*top),
                        },
                    );
                }
            },
            None if action == Action::Disable => m.disabled = true,
            None => {
                m.disabled = false;
                m.set.clear();
                if mode != configured {
                    for (l, top) in tops {
                        m.set.insert(
                            l.clone(),
                            Set {
                                mode,
                                top: Some(*top),
                            },
                        );
                    }
                }
            }
        }
        Ok(m)
    }

    /// A label write ended `label` (`unlabel`, or a new label written over
    /// it): the mode set for it ends too.
    pub fn forget(&self, label: &str) -> Modes {
        let mut m = self.clone();
        m.set.remove(label);
        m
    }

    /// `rename`: the disk keeps its mode under its new label.
    pub fn renamed(&self, old: &str, new: &str) -> Modes {
        let mut m = self.clone();
        let moved = m.set.remove(old);
        m.set.remove(new);
        if let Some(s) = moved {
            m.set.insert(new.to_string(), s);
        }
        m
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tops(label: &str, top: &str) -> BTreeMap<String, KernelDev> {
        BTreeMap::from([(label.to_string(), top.parse().unwrap())])
    }

    fn mode(m: &Modes, label: &str, top: &str) -> Mode {
        m.mode_for(label, Some(top.parse().unwrap()), Mode::Enforce, false)
    }

    /// A mode belongs to the disk: it moves with a rename, ends with the
    /// label (forget), is void when the label turns up on another disk, and
    /// `enable` clears one kept for a label no disk carries.
    #[test]
    fn a_mode_follows_the_disk() {
        let e = Mode::Enforce;
        let m = Modes::default()
            .with(Some("R1"), Action::Audit, &tops("R1", "7:1"), e)
            .unwrap();
        assert_eq!(mode(&m, "R1", "7:1"), Mode::Audit);
        // rename R1 -> R2 -> R1: the disk keeps audit throughout
        let m = m.renamed("R1", "R2").settled(&tops("R2", "7:1"));
        assert_eq!(
            (mode(&m, "R2", "7:1"), mode(&m, "R1", "7:1")),
            (Mode::Audit, e)
        );
        let m = m.renamed("R2", "R1").settled(&tops("R1", "7:1"));
        assert_eq!(mode(&m, "R1", "7:1"), Mode::Audit);
        // the name on another disk: the configured mode, and the old mode is gone
        let m = m.settled(&tops("R1", "7:2"));
        assert_eq!(mode(&m, "R1", "7:2"), e);
        let m = m.settled(&tops("R1", "7:1"));
        assert_eq!(mode(&m, "R1", "7:1"), e, "void for good");
        // unlabel (forget), then the same name on the same disk: configured
        let m = m
            .with(Some("R1"), Action::Disable, &tops("R1", "7:1"), e)
            .unwrap()
            .forget("R1")
            .settled(&tops("R1", "7:1"));
        assert_eq!(mode(&m, "R1", "7:1"), e);
        // a disk gone without unlabel: enable clears its mode, audit needs a disk
        let m = m
            .with(Some("R1"), Action::Audit, &tops("R1", "7:1"), e)
            .unwrap();
        let none = BTreeMap::new();
        assert_eq!(
            m.with(Some("R1"), Action::Audit, &none, e),
            Err(Refused::UnknownLabel("R1".into()))
        );
        let m = m.with(Some("R1"), Action::Enable, &none, e).unwrap();
        assert!(m.set.is_empty());
        assert_eq!(mode(&m.settled(&tops("R1", "7:1")), "R1", "7:1"), e);
        assert!(
            m.with(Some("R1"), Action::Enable, &none, e).is_err(),
            "nothing kept to clear"
        );
    }

    /// `filter disable` turns the filter off and keeps each disk's mode;
    /// `enable`/`audit` without a label set every disk and turn it on.
    #[test]
    fn the_whole_filter_off_and_on() {
        let e = Mode::Enforce;
        let t = tops("R1", "7:1");
        let m = Modes::default()
            .with(Some("R1"), Action::Audit, &t, e)
            .unwrap();
        let off = m.with(None, Action::Disable, &t, e).unwrap();
        assert!(off.disabled);
        assert_eq!(off.set, m.set);
        let on = off.with(None, Action::Enable, &t, e).unwrap();
        assert!(!on.disabled && on.set.is_empty());
        let audit = off.with(None, Action::Audit, &t, e).unwrap();
        assert!(!audit.disabled);
        assert_eq!(mode(&audit, "R1", "7:1"), Mode::Audit);
        assert_eq!(
            m.mode_for("R1", Some("7:1".parse().unwrap()), e, true),
            Mode::Fenced,
            "a fenced disk is fenced whatever its mode"
        );
    }

    /// The runtime state file keeps a disk's mode with its top device; a
    /// line without one (an older daemon's) binds to the label's disk.
    #[test]
    fn state_file_keeps_the_disk() {
        let m = Modes::default()
            .with(Some("R1"), Action::Audit, &tops("R1", "7:1"), Mode::Enforce)
            .unwrap();
        assert_eq!(m.text(), "mode R1 audit 7:1\n");
        let again = Modes::parse(&m.text());
        assert_eq!(again, m);
        assert_eq!(
            mode(&again.settled(&tops("R1", "7:2")), "R1", "7:2"),
            Mode::Enforce
        );
        let old = Modes::parse("mode R1 audit\nnonsense line\n").settled(&tops("R1", "7:3"));
        assert_eq!(mode(&old, "R1", "7:3"), Mode::Audit);
        assert_eq!(old.text(), "mode R1 audit 7:3\n");
        assert_eq!(Modes::parse("disabled\n").text(), "disabled\n");
    }
}
