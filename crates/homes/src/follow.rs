//! Following the homes while the daemon runs.
//!
//! [`Follower::poll`] `lstat`s every path the last discovery looked at (oratab,
//! olr.loc, each named home and its resolved directory, `bin/`, each binary path and
//! its resolved file, and the paths that were missing) and compares device, inode,
//! mode, owner, size, mtime and ctime with what it saw. Any difference — an edited
//! oratab (a new home for out-of-place patching, a removed one), a relink (a new inode
//! at the same path), a chmod, a home that appears — runs [`crate::discover`] again.
//! Every [`FULL_EVERY`] polls it rediscovers anyway, which catches what the stamps do
//! not cover (a directory higher up made world-writable). A poll that finds nothing
//! changed costs a few dozen `lstat`s and no reads.
//!
//! Races: a discovery is taken as the truth only when a second discovery right after
//! the stamps were taken agrees with it, so a change that lands while discovering is
//! either in the result or in the next poll's stamps.

use crate::{discover_inputs, Found, Spec};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// Polls between two unconditional rediscoveries.
pub const FULL_EVERY: u32 = 20;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stamp {
    dev: u64,
    ino: u64,
    mode: u32,
    uid: u32,
    gid: u32,
    size: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

fn stamp(p: &Path) -> Option<Stamp> {
    let m = std::fs::symlink_metadata(p).ok()?;
    Some(Stamp {
        dev: m.dev(),
        ino: m.ino(),
        mode: m.mode(),
        uid: m.uid(),
        gid: m.gid(),
        size: m.size(),
        mtime: (m.mtime(), m.mtime_nsec()),
        ctime: (m.ctime(), m.ctime_nsec()),
    })
}

/// Follows [`crate::discover`]'s inputs for one root and spec.
#[derive(Debug)]
pub struct Follower {
    root: PathBuf,
    spec: Spec,
    found: Found,
    stamps: Vec<(PathBuf, Option<Stamp>)>,
    polls: u32,
}

impl Follower {
    /// Discovers once; [`Follower::current`] is the result.
    pub fn new(root: &Path, spec: &Spec) -> Self {
        let mut f = Follower {
            root: root.to_path_buf(),
            spec: spec.clone(),
            found: Found::default(),
            stamps: Vec::new(),
            polls: 0,
        };
        f.rediscover();
        f
    }

    /// The homes as of the last discovery.
    pub fn current(&self) -> &Found {
        &self.found
    }

    /// Looks for changes; `Some(new)` when the homes, binaries or problems differ from
    /// what [`Follower::current`] said before the call, `None` otherwise (nothing
    /// changed, or something changed that makes no difference, like a touched oratab).
    pub fn poll(&mut self) -> Option<&Found> {
        self.polls = self.polls.wrapping_add(1);
        let moved = self.polls % FULL_EVERY == 0 || self.stamps.iter().any(|(p, s)| stamp(p) != *s);
        if !moved {
            return None;
        }
        let before = std::mem::take(&mut self.found);
        self.rediscover();
        (self.found != before).then_some(&self.found)
    }

    fn rediscover(&mut self) {
        let (mut found, mut inputs) = discover_inputs(&self.root, &self.spec);
        for _ in 0..3 {
            let stamps: Vec<_> = inputs.paths.iter().map(|p| (p.clone(), stamp(p))).collect();
            let (again, again_inputs) = discover_inputs(&self.root, &self.spec);
            if again == found && again_inputs.paths == inputs.paths {
                self.found = found;
                self.stamps = stamps;
                return;
            }
            (found, inputs) = (again, again_inputs);
        }
        // Still moving: keep the latest and look again at the next poll.
        self.found = found;
        self.stamps = inputs
            .paths
            .into_iter()
            .map(|p| (p, None::<Stamp>))
            .collect();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::*;
    use crate::{HomeKind, OLR_LOC, ORATAB};
    use std::fs;

    const GRID: &str = "/u01/app/19c/grid";
    const DB19: &str = "/u01/app/oracle/product/19.21/dbhome_1";
    const DB19B: &str = "/u01/app/oracle/product/19.22/dbhome_1";

    fn setup() -> tempfile::TempDir {
        let r = root();
        home(r.path(), GRID, &["oracle", "ocssd.bin", "crsd.bin"]);
        home(r.path(), DB19, &["oracle"]);
        write(r.path(), OLR_LOC, &format!("crs_home={GRID}\n"));
        write(r.path(), ORATAB, &format!("+ASM:{GRID}:N\nORCL:{DB19}:Y\n"));
        r
    }

    #[test]
    fn quiet_when_nothing_changes() {
        let r = setup();
        let mut f = Follower::new(r.path(), &Spec::Auto);
        assert_eq!(f.current().homes.len(), 2);
        for _ in 0..(2 * FULL_EVERY) {
            assert!(f.poll().is_none());
        }
        // Rewriting oratab with the same content changes nothing that matters.
        write(r.path(), ORATAB, &format!("+ASM:{GRID}:N\nORCL:{DB19}:Y\n"));
        assert!(f.poll().is_none());
    }

    #[test]
    fn relink_is_a_new_inode_at_the_same_path() {
        let r = setup();
        let mut f = Follower::new(r.path(), &Spec::Auto);
        let old = f.current().homes[1].binaries[0].clone();
        // What `relink` does: build a new file, move it over the old one.
        let bin = r.path().join(&DB19[1..]).join("bin");
        fs::write(bin.join("oracle.new"), b"relinked").unwrap();
        fs::rename(bin.join("oracle.new"), bin.join("oracle")).unwrap();
        let new = f.poll().expect("relink seen").homes[1].binaries[0].clone();
        assert_eq!(new.path, old.path);
        assert_ne!(new.ino, old.ino);
        assert_eq!(new.ino, fs::metadata(bin.join("oracle")).unwrap().ino());
        assert!(f.poll().is_none());
    }

    #[test]
    fn new_home_in_oratab_and_removed_home() {
        let r = setup();
        let mut f = Follower::new(r.path(), &Spec::Auto);
        // Out-of-place patching: the new home is unpacked, then registered.
        home(r.path(), DB19B, &["oracle"]);
        assert!(f.poll().is_none(), "an unregistered home is not a home");
        write(
            r.path(),
            ORATAB,
            &format!("+ASM:{GRID}:N\nORCL:{DB19}:Y\nORCL:{DB19B}:Y\n"),
        );
        let found = f.poll().expect("new home seen");
        let paths: Vec<_> = found
            .homes
            .iter()
            .map(|h| h.path.to_str().unwrap())
            .collect();
        assert_eq!(paths, [GRID, DB19, DB19B]);
        // The old home is deleted while oratab still names it.
        fs::remove_dir_all(r.path().join(&DB19[1..])).unwrap();
        let found = f.poll().expect("removed home seen");
        assert_eq!(found.homes.len(), 2);
        assert!(
            found.problems[0].contains(&format!("home {DB19} does not exist")),
            "{found:?}"
        );
        // Then it is removed from oratab too.
        write(
            r.path(),
            ORATAB,
            &format!("+ASM:{GRID}:N\nORCL:{DB19B}:Y\n"),
        );
        let found = f.poll().expect("oratab edit seen");
        assert_eq!(found.problems, Vec::<String>::new());
        assert_eq!(found.homes.len(), 2);
        assert!(f.poll().is_none());
    }

    #[test]
    fn grid_install_after_start_is_seen() {
        // A fresh host: asmguard starts first, Grid's root.sh writes olr.loc later.
        let r = root();
        let mut f = Follower::new(r.path(), &Spec::Auto);
        assert_eq!(f.current(), &Found::default());
        home(r.path(), GRID, &["oracle", "ocssd.bin", "crsd.bin"]);
        assert!(f.poll().is_none());
        write(r.path(), OLR_LOC, &format!("crs_home={GRID}\n"));
        let found = f.poll().expect("olr.loc seen");
        assert_eq!(found.homes[0].kind, HomeKind::Grid);
        assert_eq!(found.homes[0].binaries.len(), 3);
    }

    #[test]
    fn missing_binary_appearing_and_chmod_are_seen() {
        let r = setup();
        let bin = r.path().join(&DB19[1..]).join("bin");
        fs::remove_file(bin.join("oracle")).unwrap();
        let mut f = Follower::new(r.path(), &Spec::Auto);
        assert!(f.current().homes[1].binaries.is_empty());
        home(r.path(), DB19, &["oracle"]);
        assert_eq!(f.poll().expect("binary seen").homes[1].binaries.len(), 1);
        use std::os::unix::fs::PermissionsExt;
        fs::set_permissions(bin.join("oracle"), fs::Permissions::from_mode(0o777)).unwrap();
        let found = f.poll().expect("chmod seen");
        assert!(found.homes[1].binaries.is_empty());
        assert!(found.problems[0].contains("world-writable"), "{found:?}");
    }

    #[test]
    fn list_spec_follows_its_homes() {
        let r = root();
        let spec = Spec::List(vec!["/d".into()]);
        let mut f = Follower::new(r.path(), &spec);
        assert_eq!(f.current().homes.len(), 0);
        assert_eq!(f.current().problems.len(), 1);
        home(r.path(), "/d", &["oracle"]);
        let found = f.poll().expect("home seen");
        assert_eq!(found.homes.len(), 1);
        assert_eq!(found.homes[0].kind, HomeKind::Database);
        home(r.path(), "/d", &["ocssd.bin"]);
        let found = f.poll().expect("kind change seen");
        assert_eq!(found.homes[0].kind, HomeKind::Grid);
    }
}
