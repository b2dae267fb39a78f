//! The line systemd shows as the service's state (`systemctl status
//! asmguardd`: `Status: "protected: 3 disks (lsm)"`), a function of what was
//! applied and of the filter's protection, sent again whenever it changes
//! (the 2 s check compares). It leads with what a DBA looks for: whether the
//! disks are protected, in the words `asmguardctl status` uses, then what is
//! not as it should be (disks in audit or off, conflicts, exposures).

use crate::daemon::*;
use asmguard_guard::Mode;
use asmguard_proto::Protection;

/// What the line says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Line {
    pub protection: Protection,
    pub backend: asmguard_guard::BackendName,
    /// Managed disks (no conflict).
    pub disks: usize,
    /// Disks whose mode lets writes through: `audit`, `off` (per disk).
    pub audit: usize,
    pub off: usize,
    /// Disks a reclaim fences right now.
    pub fenced: usize,
    /// Labels on more than one disk (neither is managed).
    pub conflicts: usize,
    /// Protected disks written through a mapping made before protection.
    pub exposed: usize,
}

fn n(k: usize, one: &str) -> String {
    if k == 1 {
        format!("1 {one}")
    } else {
        format!("{k} {one}s")
    }
}

impl std::fmt::Display for Line {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let disks = n(self.disks, "disk");
        match self.protection {
            Protection::Protected => write!(f, "protected: {disks} ({})", self.backend)?,
            Protection::Degraded => write!(
                f,
                "degraded: {disks} ({}; see asmguardctl status)",
                self.backend
            )?,
            Protection::Off => write!(f, "PROTECTION OFF (filter disabled): {disks}")?,
            Protection::Unprotected => write!(
                f,
                "UNPROTECTED (no write filter could load; see asmguardctl status): {disks}"
            )?,
        }
        let mut more = Vec::new();
        if self.audit > 0 {
            more.push(format!("{} in audit", self.audit));
        }
        if self.off > 0 {
            more.push(format!("{} off", self.off));
        }
        if self.fenced > 0 {
            more.push(format!("{} fenced for a reclaim", self.fenced));
        }
        if self.conflicts > 0 {
            more.push(format!(
                "{} (label on two disks)",
                n(self.conflicts, "conflict")
            ));
        }
        if self.exposed > 0 {
            more.push(format!(
                "{} EXPOSED (written through a mapping made before protection)",
                self.exposed
            ));
        }
        if !more.is_empty() {
            write!(f, "; {}", more.join(", "))?;
        }
        Ok(())
    }
}

/// The service's state line for what was applied and the filter's protection.
pub fn line(s: &Applied, filter: &FilterService) -> Line {
    let (protection, backend) = filter.protection();
    let m = &s.world.model;
    let modes = || {
        m.disks
            .iter()
            .filter(|d| !d.conflict)
            .filter_map(|d| d.mode)
            .map(|d| d.mode())
    };
    let filtered = !matches!(protection, Protection::Off | Protection::Unprotected);
    Line {
        protection,
        backend,
        disks: m.usable(),
        audit: if filtered {
            modes().filter(|x| *x == Mode::Audit).count()
        } else {
            0
        },
        off: if filtered {
            modes().filter(|x| *x == Mode::Off).count()
        } else {
            0
        },
        fenced: modes().filter(|x| *x == Mode::Fenced).count(),
        conflicts: m.conflicts.len(),
        exposed: s.world.exposed.len(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use asmguard_guard::BackendName;

    fn line(protection: Protection) -> Line {
        Line {
            protection,
            backend: BackendName::Lsm,
            disks: 3,
            audit: 0,
            off: 0,
            fenced: 0,
            conflicts: 0,
            exposed: 0,
        }
    }

    #[test]
    fn it_leads_with_protection_in_the_status_words() {
        assert_eq!(
            line(Protection::Protected).to_string(),
            "protected: 3 disks (lsm)"
        );
        assert_eq!(
            line(Protection::Off).to_string(),
            "PROTECTION OFF (filter disabled): 3 disks"
        );
        assert!(line(Protection::Unprotected)
            .to_string()
            .starts_with("UNPROTECTED"));
        assert!(line(Protection::Degraded)
            .to_string()
            .starts_with("degraded: 3 disks (lsm;"));
        let one = Line {
            disks: 1,
            ..line(Protection::Protected)
        };
        assert_eq!(one.to_string(), "protected: 1 disk (lsm)");
    }

    #[test]
    fn what_is_not_as_it_should_be_follows() {
        let l = Line {
            audit: 1,
            off: 2,
            fenced: 1,
            conflicts: 1,
            exposed: 1,
            ..line(Protection::Protected)
        };
        assert_eq!(
            l.to_string(),
            "protected: 3 disks (lsm); 1 in audit, 2 off, 1 fenced for a reclaim, \
             1 conflict (label on two disks), 1 EXPOSED (written through a mapping made \
             before protection)"
        );
    }
}
