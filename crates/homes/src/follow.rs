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
//! changed costs a few dozen `lstat`s and no reads (plus the `/proc` look while a
//! retired binary is kept).
//!
//! Replaced binaries: after a relink the running instance still runs the old inode
//! (the kernel keeps it alive, unlinked or renamed) until it restarts. A binary that
//! leaves the homes therefore moves to [`Found::retired`] while some `/proc/<pid>/exe`
//! is that inode, and leaves it when none is (looked at every [`RETIRED_EVERY`] polls,
//! only while there is one: a `stat` per process). An inode number is free for reuse
//! only once no process holds the file, so a retired identity cannot be taken over
//! while it is kept; it is dropped soon after. At start, a process whose `exe` is
//! `<a home binary's path> (deleted)` is taken as retired too (a relink before the
//! daemon started); a renamed old binary (`oracleO`) is not recognised then.
//!
//! Races: a discovery is taken as the truth only when a second discovery right after
//! the stamps were taken agrees with it, so a change that lands while discovering is
//! either in the result or in the next poll's stamps.

use crate::{discover_inputs, shown, Binary, Found, HomeKind, Spec, GRID_BINARIES, HOME_BINARIES};
use std::collections::HashSet;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// Polls between two unconditional rediscoveries.
pub const FULL_EVERY: u32 = 20;
/// Polls between two looks (in `/proc`) at whether [`Found::retired`] binaries still run.
pub const RETIRED_EVERY: u32 = 4;

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

fn key(b: &Binary) -> (u64, u64) {
    (b.dev, b.ino)
}

/// The process directories of `proc` (`/proc/<pid>`), `None` when it cannot be read.
fn processes(proc: &Path) -> Option<impl Iterator<Item = PathBuf>> {
    let rd = std::fs::read_dir(proc).ok()?;
    Some(rd.flatten().filter_map(|e| {
        let name = e.file_name();
        let digits = !name.is_empty() && name.as_bytes().iter().all(u8::is_ascii_digit);
        digits.then(|| e.path())
    }))
}

/// Those of `bins` that some process runs (`/proc/<pid>/exe`, which stat follows to
/// the running inode even when it was deleted); all of them when `/proc` cannot be
/// read: keeping a rule a little longer beats cutting a database off.
fn running(proc: &Path, bins: &[Binary]) -> Vec<Binary> {
    if bins.is_empty() {
        return Vec::new();
    }
    let want: HashSet<(u64, u64)> = bins.iter().map(key).collect();
    let Some(pids) = processes(proc) else {
        return bins.to_vec();
    };
    let mut seen = HashSet::new();
    for pid in pids {
        if let Ok(m) = std::fs::metadata(pid.join("exe")) {
            if want.contains(&(m.dev(), m.ino())) {
                seen.insert((m.dev(), m.ino()));
                if seen.len() == want.len() {
                    break;
                }
            }
        }
    }
    bins.iter()
        .filter(|b| seen.contains(&key(b)))
        .cloned()
        .collect()
}

/// Processes running a *deleted* file that was one of `found`'s binary paths (a
/// relink before asmguardd started, the instance not restarted yet): the kernel names
/// their `exe` `<path> (deleted)`. Only the exact binary paths count, and only
/// regular files that are not world-writable. Their identity is the running inode's.
fn deleted_but_running(proc: &Path, root_real: &Path, found: &Found) -> Vec<Binary> {
    let mut paths: HashSet<PathBuf> = HashSet::new();
    for h in &found.homes {
        paths.extend(h.binaries.iter().map(|b| b.path.clone()));
        let names = HOME_BINARIES.iter().chain(if h.kind == HomeKind::Grid {
            GRID_BINARIES
        } else {
            &[]
        });
        paths.extend(names.map(|n| h.path.join("bin").join(n)));
    }
    let current: HashSet<(u64, u64)> = found
        .homes
        .iter()
        .flat_map(|h| h.binaries.iter().map(key))
        .collect();
    let mut out = Vec::new();
    for pid in processes(proc).into_iter().flatten() {
        let exe = pid.join("exe");
        let Ok(target) = std::fs::read_link(&exe) else {
            continue;
        };
        let Some(path) = target.as_os_str().as_bytes().strip_suffix(b" (deleted)") else {
            continue;
        };
        let path = shown(root_real, Path::new(std::ffi::OsStr::from_bytes(path)));
        if !paths.contains(&path) {
            continue;
        }
        let Ok(m) = std::fs::metadata(&exe) else {
            continue;
        };
        if !m.file_type().is_file()
            || m.mode() & 0o002 != 0
            || current.contains(&(m.dev(), m.ino()))
        {
            continue;
        }
        out.push(Binary {
            path,
            dev: m.dev(),
            ino: m.ino(),
            owner_uid: m.uid(),
            owner_gid: m.gid(),
            mode: m.mode(),
        });
    }
    out.sort_by_key(key);
    out.dedup_by_key(|b| key(b));
    out
}

/// Follows [`crate::discover`]'s inputs for one root and spec, and the processes
/// still running binaries that were replaced ([`Found::retired`]).
#[derive(Debug)]
pub struct Follower {
    root: PathBuf,
    proc: PathBuf,
    spec: Spec,
    found: Found,
    stamps: Vec<(PathBuf, Option<Stamp>)>,
    polls: u32,
}

impl Follower {
    /// Discovers once; [`Follower::current`] is the result. Its `retired` holds the
    /// binaries processes run from a home binary's path that was since deleted.
    pub fn new(root: &Path, spec: &Spec) -> Self {
        let mut f = Follower {
            root: root.to_path_buf(),
            proc: root.join("proc"),
            spec: spec.clone(),
            found: Found::default(),
            stamps: Vec::new(),
            polls: 0,
        };
        let mut found = f.rediscover();
        if let Ok(root_real) = std::fs::canonicalize(root) {
            found.retired = deleted_but_running(&f.proc, &root_real, &found);
        }
        f.found = found;
        f
    }

    /// The homes as of the last discovery.
    pub fn current(&self) -> &Found {
        &self.found
    }

    /// Looks for changes; `Some(new)` when the homes, binaries, retired binaries or
    /// problems differ from what [`Follower::current`] said before the call, `None`
    /// otherwise (nothing changed, or something changed that makes no difference,
    /// like a touched oratab). A binary that leaves the homes (relink, rename, home
    /// removed) moves to [`Found::retired`] while a process runs it, and leaves it
    /// within [`RETIRED_EVERY`] polls of its last process's exit.
    pub fn poll(&mut self) -> Option<&Found> {
        self.polls = self.polls.wrapping_add(1);
        let moved = self.polls % FULL_EVERY == 0 || self.stamps.iter().any(|(p, s)| stamp(p) != *s);
        let retired = !self.found.retired.is_empty() && self.polls % RETIRED_EVERY == 0;
        let new = if moved {
            self.rediscover()
        } else if retired {
            Found {
                retired: running(&self.proc, &self.found.retired),
                ..self.found.clone()
            }
        } else {
            return None;
        };
        if new == self.found {
            return None;
        }
        self.found = new;
        Some(&self.found)
    }

    /// Discovers again (see the module doc on races), sets the stamps, and returns
    /// the result with `retired` carried over from the current one.
    fn rediscover(&mut self) -> Found {
        let (mut found, mut inputs) = discover_inputs(&self.root, &self.spec);
        let mut settled = false;
        for _ in 0..3 {
            let stamps: Vec<_> = inputs.paths.iter().map(|p| (p.clone(), stamp(p))).collect();
            let (again, again_inputs) = discover_inputs(&self.root, &self.spec);
            if again == found && again_inputs.paths == inputs.paths {
                self.stamps = stamps;
                settled = true;
                break;
            }
            (found, inputs) = (again, again_inputs);
        }
        if !settled {
            // Still moving: keep the latest and look again at the next poll.
            self.stamps = inputs.paths.into_iter().map(|p| (p, None)).collect();
        }
        let current: HashSet<(u64, u64)> = found
            .homes
            .iter()
            .flat_map(|h| h.binaries.iter().map(key))
            .collect();
        let mut gone: Vec<Binary> = self
            .found
            .retired
            .iter()
            .chain(self.found.homes.iter().flat_map(|h| h.binaries.iter()))
            .filter(|b| !current.contains(&key(b)))
            .cloned()
            .collect();
        gone.sort_by_key(key);
        gone.dedup_by_key(|b| key(b));
        found.retired = running(&self.proc, &gone);
        found
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::*;
    use crate::{OLR_LOC, ORATAB};
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
        assert!(f.current().retired.is_empty(), "no process ran the old one");
    }

    #[test]
    fn relinked_binary_stays_allowed_while_a_process_runs_it() {
        let r = setup();
        let bin = r.path().join(&DB19[1..]).join("bin");
        // A process runs the current binary (a stand-in /proc/<pid>/exe: stat follows it).
        fs::hard_link(bin.join("oracle"), r.path().join("running")).unwrap();
        fs::create_dir(r.path().join("proc/4242")).unwrap();
        std::os::unix::fs::symlink(r.path().join("running"), r.path().join("proc/4242/exe"))
            .unwrap();
        fs::create_dir(r.path().join("proc/self")).unwrap();
        let mut f = Follower::new(r.path(), &Spec::Auto);
        assert!(f.current().retired.is_empty());
        let old = f.current().homes[1].binaries[0].clone();
        fs::write(bin.join("oracle.new"), b"relinked").unwrap();
        fs::rename(bin.join("oracle.new"), bin.join("oracle")).unwrap();
        let found = f.poll().expect("relink seen").clone();
        assert_ne!(found.homes[1].binaries[0].ino, old.ino);
        assert_eq!(found.retired, std::slice::from_ref(&old));
        let allowed: Vec<u64> = found.allowed().map(|b| b.ino).collect();
        assert!(allowed.contains(&old.ino) && allowed.contains(&found.homes[1].binaries[0].ino));
        // Kept while the process runs, through rediscoveries.
        for _ in 0..(2 * FULL_EVERY) {
            assert!(f.poll().is_none());
        }
        assert_eq!(f.current().retired, std::slice::from_ref(&old));
        // The instance restarts on the new binary: the old identity goes.
        fs::remove_file(r.path().join("proc/4242/exe")).unwrap();
        let mut dropped = None;
        for _ in 0..RETIRED_EVERY {
            if let Some(found) = f.poll() {
                dropped = Some(found.clone());
                break;
            }
        }
        let dropped = dropped.expect("retired binary dropped within RETIRED_EVERY polls");
        assert!(dropped.retired.is_empty());
        assert_eq!(dropped.homes[1].binaries.len(), 1);
    }

    /// The real kernel: `/proc/<pid>/exe` of a process whose binary was replaced by a
    /// rename (a relink) still stats as the old inode, and its link reads `(deleted)`.
    #[test]
    fn real_proc_follows_a_replaced_running_binary() {
        let r = root();
        let exe = r.path().join("oracle");
        fs::copy("/bin/sleep", &exe).unwrap();
        let mut child = std::process::Command::new(&exe).arg("30").spawn().unwrap();
        let m = fs::metadata(&exe).unwrap();
        let old = Binary {
            path: exe.clone(),
            dev: m.dev(),
            ino: m.ino(),
            owner_uid: m.uid(),
            owner_gid: m.gid(),
            mode: m.mode(),
        };
        fs::write(r.path().join("oracle.new"), b"relinked").unwrap();
        fs::rename(r.path().join("oracle.new"), &exe).unwrap();
        let link = fs::read_link(format!("/proc/{}/exe", child.id())).unwrap();
        assert_eq!(link, Path::new(&format!("{} (deleted)", exe.display())));
        let seen = running(Path::new("/proc"), std::slice::from_ref(&old));
        child.kill().unwrap();
        child.wait().unwrap();
        assert_eq!(seen, std::slice::from_ref(&old));
        assert!(running(Path::new("/proc"), &[old]).is_empty());
    }

    #[test]
    fn removed_home_still_running_is_retired() {
        let r = setup();
        let bin = r.path().join(&DB19[1..]).join("bin");
        fs::hard_link(bin.join("oracle"), r.path().join("running")).unwrap();
        fs::create_dir(r.path().join("proc/17")).unwrap();
        std::os::unix::fs::symlink(r.path().join("running"), r.path().join("proc/17/exe")).unwrap();
        let mut f = Follower::new(r.path(), &Spec::Auto);
        let old = f.current().homes[1].binaries[0].clone();
        write(r.path(), ORATAB, &format!("+ASM:{GRID}:N\n"));
        let found = f.poll().expect("oratab edit seen");
        assert_eq!(found.homes.len(), 1);
        assert_eq!(found.retired, [old]);
    }

    #[test]
    fn deleted_binary_running_at_start_is_retired() {
        let r = setup();
        let real = fs::canonicalize(r.path()).unwrap();
        // The kernel names a deleted exe "<path> (deleted)"; the stand-in is a file of
        // that name, so that stat through the link finds an inode as it would.
        let deleted = real.join(&DB19[1..]).join("bin/oracle (deleted)");
        fs::write(&deleted, b"old build").unwrap();
        fs::create_dir(r.path().join("proc/100")).unwrap();
        std::os::unix::fs::symlink(&deleted, r.path().join("proc/100/exe")).unwrap();
        // Not adopted: a deleted file elsewhere, and another program of the home.
        fs::write(real.join("evil (deleted)"), b"x").unwrap();
        fs::create_dir(r.path().join("proc/101")).unwrap();
        std::os::unix::fs::symlink(real.join("evil (deleted)"), r.path().join("proc/101/exe"))
            .unwrap();
        let sqlplus = real.join(&DB19[1..]).join("bin/sqlplus (deleted)");
        fs::write(&sqlplus, b"x").unwrap();
        fs::create_dir(r.path().join("proc/102")).unwrap();
        std::os::unix::fs::symlink(&sqlplus, r.path().join("proc/102/exe")).unwrap();
        let f = Follower::new(r.path(), &Spec::Auto);
        let retired = &f.current().retired;
        assert_eq!(retired.len(), 1, "{retired:?}");
        assert_eq!(retired[0].path, Path::new(DB19).join("bin/oracle"));
        assert_eq!(retired[0].ino, fs::metadata(&deleted).unwrap().ino());
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
