//! Device name patterns (`sd*`, `dm-*`, `loop1?`, `mapper/mpath*`): `*` matches any run
//! of characters, `?` one character; everything else matches itself.

/// Does `name` match the shell-style `pattern` (`*` and `?` only)?
pub fn matches(pattern: &str, name: &str) -> bool {
    // Bytes, not chars: device names are ASCII, and this runs for every device against
    // every pattern (a config may list a thousand names).
    wildcard(pattern.as_bytes(), name.as_bytes(), true)
}

/// The one wildcard matcher of the project (device names here, the cgroup
/// patterns of `[[container]]` sections in the containers crate): `*` matches
/// any run of bytes, `?` one byte when `any_one` is set (else itself), every
/// other byte itself.
pub fn wildcard(p: &[u8], n: &[u8], any_one: bool) -> bool {
    // Iterative wildcard match with backtracking to the last `*`.
    let (mut pi, mut ni) = (0usize, 0usize);
    let mut star: Option<(usize, usize)> = None;
    while ni < n.len() {
        if pi < p.len() && p[pi] == b'*' {
            star = Some((pi, ni));
            pi += 1;
        } else if pi < p.len() && ((any_one && p[pi] == b'?') || p[pi] == n[ni]) {
            pi += 1;
            ni += 1;
        } else if let Some((sp, sn)) = star {
            pi = sp + 1;
            ni = sn + 1;
            star = Some((sp, sn + 1));
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|&c| c == b'*')
}

/// Include/exclude rules and the scan order, as ASMLib's SCANORDER / SCANEXCLUDE.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rules {
    /// A device is looked at only if a pattern here matches (empty: none is).
    pub include: Vec<String>,
    /// ...and no pattern here matches.
    pub exclude: Vec<String>,
    /// Preferred first: among paths of one disk the top is the first match here.
    pub scan_order: Vec<String>,
    /// Unlabelled disks whose ASM disk header names them (see [`AsmMembers`]).
    pub asm_members: AsmMembers,
}

/// Whether a disk with an ASM disk header (member, candidate, former or
/// provisioned) but no ASMLib/AFD label is managed, and under which name: the
/// name given for its LUN in `names`, else the disk name in its header. Nothing
/// is written to such a disk (config `[devices] manage_asm_members`,
/// `[devices.member_names]`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AsmMembers {
    /// Off by default: such disks are listed as unmanaged.
    pub enabled: bool,
    /// LUN identity (udev's `ID_SERIAL`, the WWID of a multipath device) -> name.
    pub names: std::collections::BTreeMap<String, String>,
}

/// Whether `name` is a loop device's kernel name (`loop0`, `loop12p1`).
fn is_loop(name: &str) -> bool {
    name.strip_prefix("loop")
        .is_some_and(|r| r.starts_with(|c: char| c.is_ascii_digit()))
}

impl Default for Rules {
    fn default() -> Self {
        Rules {
            include: vec!["*".into()],
            exclude: vec!["ram*".into(), "zram*".into(), "sr*".into(), "fd*".into()],
            scan_order: vec![
                "dm-*".into(),
                "nvme*".into(),
                "sd*".into(),
                "vd*".into(),
                "xvd*".into(),
            ],
            asm_members: AsmMembers::default(),
        }
    }
}

impl Rules {
    /// Is the device (kernel name, and `mapper/<name>` for a dm device) looked at?
    /// A loop device only when an include pattern that starts with `loop`
    /// matches it (`loop*`, `loop3`): any user may set one up (`udisksctl
    /// loop-setup`), and one carrying a managed disk's label must not count
    /// unless the configuration opts in.
    pub fn included(&self, name: &str, dm_name: Option<&str>) -> bool {
        let m = |pats: &[String]| {
            pats.iter().any(|p| {
                matches(p, name) || dm_name.is_some_and(|d| matches(p, &format!("mapper/{d}")))
            })
        };
        let included = if is_loop(name) {
            self.include
                .iter()
                .any(|p| p.starts_with("loop") && matches(p, name))
        } else {
            m(&self.include)
        };
        included && !m(&self.exclude)
    }

    /// The rank of a name in the scan order (lower is preferred; unmatched last).
    pub fn rank(&self, name: &str) -> usize {
        self.scan_order
            .iter()
            .position(|p| matches(p, name))
            .unwrap_or(self.scan_order.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs() {
        assert!(matches("*", ""));
        assert!(matches("sd*", "sdb"));
        assert!(matches("sd?", "sdb"));
        assert!(!matches("sd?", "sdb1"));
        assert!(matches("loop1?", "loop12"));
        assert!(!matches("loop1?", "loop1"));
        assert!(matches("*p1", "nvme0n1p1"));
        assert!(matches("a*b*c", "axxbyyc"));
        assert!(!matches("a*b*c", "axxbyy"));
        assert!(matches("loop5", "loop5"));
        assert!(!matches("loop5", "loop50"));
        // without `?` as a wildcard (cgroup patterns), `?` is only itself
        assert!(!wildcard(b"rac?", b"rac1", false));
        assert!(wildcard(b"rac?", b"rac?", false));
        assert!(wildcard(b"lxc.*.rac*", b"lxc.payload.rac1", false));
    }

    #[test]
    fn rules() {
        let r = Rules::default();
        assert!(r.included("sdb", None));
        assert!(!r.included("ram0", None));
        // loop devices: only when a pattern starting with loop names them
        assert!(!r.included("loop0", None) && !r.included("loop12p1", None));
        assert!(r.included("loopy", None), "not a loop device's name");
        let all = Rules {
            include: vec!["*".into(), "loop*".into()],
            ..Rules::default()
        };
        assert!(all.included("loop0", None) && all.included("sdb", None));
        let r = Rules {
            include: vec!["mapper/mpath*".into(), "loop3".into()],
            exclude: vec![],
            scan_order: vec!["dm-*".into()],
            ..Rules::default()
        };
        assert!(r.included("dm-2", Some("mpatha")));
        assert!(!r.included("dm-3", Some("vg-root")));
        assert!(r.included("loop3", None));
        assert!(!r.included("loop30", None));
        assert!(r.rank("dm-1") < r.rank("sdb"));
    }
}
