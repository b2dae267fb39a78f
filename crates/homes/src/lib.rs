//! Oracle homes as asmguard sees them: which Grid and database homes the host has,
//! which binaries in them may write ASM disks, and who owns those binaries. The write
//! filter turns each [`Binary`] into a rule "this executable (by file identity) AND
//! run by its owner" (issue 29, point 2); this crate only finds and follows them.
//!
//! # API
//!
//! - [`Spec`]: the configuration's `oracle_homes = "auto" | "off" | ["/path", ...]`.
//! - [`discover`]`(root, spec)` → [`Found`]: the [`Home`]s with their [`Binary`]s,
//!   and one problem line per thing that could not be used. `root` is `/` in
//!   production and a temporary directory in tests; every path the crate reports is
//!   as the host sees it under `root` (`/u01/...`).
//! - [`Follower`]: follows what [`discover`] read (`/etc/oratab`, `/etc/oracle/olr.loc`,
//!   each home and its binaries) with a handful of `lstat`s per [`Follower::poll`],
//!   cheap enough for every 250-500 ms; `poll` returns the new [`Found`] when it differs.
//!   It also keeps [`Found::retired`]: binaries replaced while processes still run
//!   them (a relink before the instance restarts), found through `/proc/PID/exe`.
//! - [`Found::allowed`]: every binary to allow, retired ones included.
//! - [`describe`]: status lines (`grid home /u01/app/19c/grid: oracle (uid 54331), ...`).
//! - [`parse_oratab`], [`parse_olr_loc`]: the two parsers.
//!
//! # Where homes come from
//!
//! - `Spec::Auto`: `/etc/oracle/olr.loc`'s `crs_home=` is the Grid home (written by
//!   the Grid home's `root.sh`, cluster or Oracle Restart); `/etc/oratab`'s
//!   `SID:HOME:Y|N` lines name the database homes. An oratab home is a Grid home too
//!   when it is the `crs_home` or its SID is an ASM instance (`+ASM`, `+ASM1`: since
//!   11.2 ASM runs only from the Grid home). Each home is taken once (by its resolved
//!   path; a home named twice, or once through a symlink, is one home). A missing
//!   oratab or olr.loc is not a problem (a host without Oracle yet); an unreadable one
//!   is; a home that does not exist is.
//! - `Spec::List`: exactly those homes; a home is a Grid home when it has
//!   `bin/ocssd.bin`, otherwise a database home.
//! - `Spec::Off`: none.
//!
//! # Which binaries
//!
//! Only programs that do their own I/O on ASM disks, each justified:
//!
//! - `bin/oracle`, every home: the database instances' processes (DBWn, LGWR, CKPT,
//!   ARCn, RMAN channels, ...) and, in the Grid home, the ASM instance (and ASM proxy /
//!   IOServer) write ASM disks directly: ASM hands its clients extent maps, the
//!   client does the I/O. The real binary is setuid/setgid to the home's owner
//!   (`-rwsr-s--x oracle:asmadmin`), which is what makes "owner's uid AND this
//!   binary" unborrowable (see DESIGN.md "Who may write"). Instances started from
//!   `sqlplus` in a login shell run the same binary.
//! - `bin/ocssd.bin`, Grid home: CSS reads and writes the voting files itself, at
//!   the offsets the disk header names (`kfdhdb.vfstart`), with or without a running
//!   ASM instance; a heartbeat every second, and a node that cannot write them is
//!   evicted. Runs as the Grid owner.
//! - `bin/crsd.bin`, Grid home: CRSD is an ASM client for the OCR when the OCR is in a
//!   disk group (the default since 11.2) and writes it with its own I/O; it runs as
//!   root and the binary is root-owned in real installs. The owner always comes from
//!   the file, so its rule is "uid 0 AND crsd.bin".
//!
//! Left out on purpose: `ohasd.bin` and `gpnpd.bin` only *read* disk headers (the ASM
//! spfile location, the discovery string) — reads need no rule; `octssd.bin`,
//! `evmd.bin`, `gipcd.bin`, `mdnsd.bin`, the agents (`oraagent.bin`,
//! `orarootagent.bin`, `cssdagent`, `cssdmonitor`) do no disk I/O of their own;
//! `ocssdrim.bin` is CSS for Flex Cluster leaf nodes, which have no shared storage.
//! ACFS/ADVM volume I/O is issued by the `oracleadvm` kernel module, not a task.
//!
//! **Admin tools, allow explicitly** (never allowed by this crate, listed in
//! [`ADMIN_TOOLS`]): `kfed` (`kfed repair`/`merge` rewrite disk headers), `amdu`
//! (reads only, but is run on damaged disks), `kfod` (disk discovery, used by the
//! installer and `asmca`; reads), `ocrconfig` (`-restore`, `-add` into a disk group
//! with the stack in exclusive mode). A site that needs one adds a rule with
//! `allow_executables` and the user that runs it. `asmcmd` needs none: it is a Perl
//! script whose disk-group work is done by the ASM instance (`bin/oracle`).
//!
//! # Identity and trust
//!
//! A binary is `<home>/bin/<name>` resolved to its final path: a symlink (of the
//! binary, of `bin/`) is followed only while it stays inside the home's resolved
//! path; one that leads out of the home is refused with a problem line (its target
//! is not the home's to vouch for). [`Binary`]'s `path`, `dev`, `ino` and owner are
//! those of the final file, which is what the kernel's `exe_file` of a process
//! running it is. `dev` is `st_dev` as stat(2) encodes it (userspace `makedev`), not
//! the kernel's internal `dev_t`: the filter converts it. Only regular files are
//! taken. A binary that is world-writable, or that lies under a directory that is
//! world-writable without the sticky bit (anyone could rename a new file into its
//! place, and the follower would then vouch for the new inode), is refused with a
//! problem line. A [`Home`]'s `owner_uid` is the owner of its `bin/oracle` (the
//! set-uid target) or, without one, of the home directory.
//!
//! The rule is as trustworthy as the files that name the homes: whoever can write
//! `/etc/oratab` (on most installs the database software owner and group `oinstall`,
//! mode 0664) can name a directory of their own as a home, and so a binary their uid
//! may write with. A site that does not trust every `oinstall` member sets
//! `oracle_homes` to a list. `olr.loc` is root's (written by `root.sh`).

use std::collections::BTreeSet;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Component, Path, PathBuf};

mod follow;
mod oratab;
pub use follow::{Follower, FULL_EVERY, RETIRED_EVERY};
pub use oratab::{parse_olr_loc, parse_oratab, OratabEntry};

/// `/etc/oratab`, relative to the root.
pub const ORATAB: &str = "etc/oratab";
/// `/etc/oracle/olr.loc`, relative to the root.
pub const OLR_LOC: &str = "etc/oracle/olr.loc";
/// Binaries allowed in every home (see the module doc).
pub const HOME_BINARIES: &[&str] = &["oracle"];
/// Binaries allowed in a Grid home besides [`HOME_BINARIES`] (see the module doc).
pub const GRID_BINARIES: &[&str] = &["ocssd.bin", "crsd.bin"];
/// Oracle's disk tools that may write ASM headers but are run by an admin: never
/// allowed by the homes rule, allow them explicitly (see the module doc).
pub const ADMIN_TOOLS: &[&str] = &["kfed", "amdu", "kfod", "ocrconfig"];

/// Which homes to use: the configuration's `oracle_homes`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Spec {
    /// `"off"`: no homes, no rules.
    Off,
    /// `"auto"`: from `/etc/oracle/olr.loc` and `/etc/oratab`.
    Auto,
    /// `["/u01/app/19c/grid", ...]`: exactly these homes (absolute paths).
    List(Vec<PathBuf>),
}

/// A binary that may write ASM disks, by the identity of its final file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Binary {
    /// The final path (symlinks inside the home resolved), as the host sees it.
    pub path: PathBuf,
    /// `st_dev` (userspace encoding).
    pub dev: u64,
    pub ino: u64,
    /// The file's owner: the uid the rule requires of the process.
    pub owner_uid: u32,
    pub owner_gid: u32,
    /// `st_mode` (type and permission bits, set-id bits included).
    pub mode: u32,
}

impl Binary {
    /// The file name (`oracle`, `ocssd.bin`).
    pub fn name(&self) -> String {
        self.path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum HomeKind {
    /// Grid Infrastructure (Clusterware or Oracle Restart) with ASM.
    Grid,
    /// A database home.
    Database,
}

impl HomeKind {
    pub fn as_str(self) -> &'static str {
        match self {
            HomeKind::Grid => "grid",
            HomeKind::Database => "database",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Home {
    /// The home as named (oratab, olr.loc or the configuration), trailing `/` removed.
    pub path: PathBuf,
    pub kind: HomeKind,
    /// Owner of `bin/oracle`, or of the home directory without one.
    pub owner_uid: u32,
    /// The binaries that passed every check, in [`HOME_BINARIES`], [`GRID_BINARIES`] order.
    pub binaries: Vec<Binary>,
}

/// What [`discover`] found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Found {
    pub homes: Vec<Home>,
    /// Binaries no home has any more (relinked: a new inode at the same path; renamed;
    /// their home removed) that a process still runs: their rule must stay until the
    /// last such process exits, or a running database loses its writes. Only
    /// [`Follower`] fills this ([`discover`] leaves it empty), see its doc.
    pub retired: Vec<Binary>,
    /// One line each: what could not be used and what to do about it.
    pub problems: Vec<String>,
}

impl Found {
    /// Every binary to allow (each with its owner as the required uid): the homes'
    /// binaries, then the retired ones still running.
    pub fn allowed(&self) -> impl Iterator<Item = &Binary> {
        self.homes
            .iter()
            .flat_map(|h| h.binaries.iter())
            .chain(self.retired.iter())
    }
}

/// A home named by one of the inputs, before it is resolved.
struct Candidate {
    named: PathBuf,
    grid: bool,
    /// `Spec::List`: the kind comes from `bin/ocssd.bin`.
    probe_kind: bool,
    source: String,
}

/// What one discovery looked at: the paths the follower stats.
#[derive(Debug, Default)]
pub(crate) struct Inputs {
    pub(crate) paths: BTreeSet<PathBuf>,
}

/// `p` (absolute, as the host names it) under `root`.
fn under(root: &Path, p: &Path) -> PathBuf {
    let rel: PathBuf = p
        .components()
        .filter(|c| !matches!(c, Component::RootDir | Component::Prefix(_)))
        .collect();
    root.join(rel)
}

/// A resolved path under the resolved root, as the host sees it: a name
/// for messages (the root component before `rel`), never read.
pub(crate) fn shown(root_real: &Path, p: &Path) -> PathBuf {
    match p.strip_prefix(root_real) {
        Ok(rel) => Path::new("/").join(rel), // literal path: the name the host gives it, for messages
        Err(_) => p.to_path_buf(),
    }
}

/// Reads a small input file: `Ok(None)` when it does not exist.
fn read_input(path: &Path) -> io::Result<Option<Vec<u8>>> {
    match std::fs::read(path) {
        Ok(b) => Ok(Some(b)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

fn candidates(
    root: &Path,
    spec: &Spec,
    problems: &mut Vec<String>,
    inputs: &mut Inputs,
) -> Vec<Candidate> {
    let mut out = Vec::new();
    match spec {
        Spec::Off => {}
        Spec::List(paths) => {
            for p in paths {
                out.push(Candidate {
                    named: p.clone(),
                    grid: false,
                    probe_kind: true,
                    source: "oracle_homes".into(),
                });
            }
        }
        Spec::Auto => {
            let olr = root.join(OLR_LOC);
            inputs.paths.insert(olr.clone());
            let mut crs_home = None;
            match read_input(&olr) {
                Ok(None) => {}
                Ok(Some(text)) => match parse_olr_loc(&text) {
                    Some(h) => crs_home = Some(h),
                    None => problems.push(format!(
                        "/{OLR_LOC} has no crs_home= line: no Grid home from it (set oracle_homes to the Grid home's path)"
                    )),
                },
                Err(e) => problems.push(format!(
                    "/{OLR_LOC} cannot be read ({e}): no Grid home from it (fix its permissions or set oracle_homes)"
                )),
            }
            if let Some(h) = &crs_home {
                out.push(Candidate {
                    named: h.clone(),
                    grid: true,
                    probe_kind: false,
                    source: format!("/{OLR_LOC} crs_home"),
                });
            }
            let oratab = root.join(ORATAB);
            inputs.paths.insert(oratab.clone());
            match read_input(&oratab) {
                Ok(None) => {}
                Ok(Some(text)) => {
                    let name = format!("/{ORATAB}");
                    let (entries, p) = parse_oratab(&text, &name);
                    problems.extend(p);
                    for e in entries {
                        out.push(Candidate {
                            grid: e.is_asm() || crs_home.as_deref() == Some(e.home.as_path()),
                            named: e.home.clone(),
                            probe_kind: false,
                            source: format!("{name} line {} ({})", e.line, e.sid),
                        });
                    }
                }
                Err(e) => problems.push(format!(
                    "/{ORATAB} cannot be read ({e}): no database homes from it (fix its permissions or set oracle_homes)"
                )),
            }
        }
    }
    out
}

/// Whether anyone may rename entries of this directory: world-writable, not sticky.
fn open_dir(meta: &std::fs::Metadata) -> bool {
    meta.mode() & 0o002 != 0 && meta.mode() & 0o1000 == 0
}

/// Checks `<home>/bin/<name>` and returns its identity, or the problem line.
fn binary(
    root_real: &Path,
    home_real: &Path,
    label: &str,
    name: &str,
    inputs: &mut Inputs,
) -> Result<Binary, String> {
    let bin_dir = home_real.join("bin");
    let p = bin_dir.join(name);
    inputs.paths.insert(bin_dir);
    inputs.paths.insert(p.clone());
    let lmeta = match std::fs::symlink_metadata(&p) {
        Ok(m) => m,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            return Err(format!(
                "{label}: bin/{name} is missing: not allowed (is the home installed and linked?)"
            ))
        }
        Err(e) => {
            return Err(format!(
                "{label}: bin/{name} cannot be examined ({e}): not allowed"
            ))
        }
    };
    let real = std::fs::canonicalize(&p).map_err(|e| {
        format!("{label}: bin/{name} cannot be resolved ({e}): not allowed (a dangling symlink?)")
    })?;
    if !real.starts_with(home_real) {
        return Err(format!(
            "{label}: bin/{name} leads out of the home to {}: not allowed (put the binary itself in the home)",
            shown(root_real, &real).display()
        ));
    }
    inputs.paths.insert(real.clone());
    // `real` has no symlinks left: lstat refuses one swapped in since.
    let meta = if real == p {
        lmeta
    } else {
        std::fs::symlink_metadata(&real)
            .map_err(|e| format!("{label}: bin/{name} cannot be examined ({e}): not allowed"))?
    };
    let where_ = shown(root_real, &real);
    if !meta.file_type().is_file() {
        return Err(format!(
            "{label}: {} is not a regular file: not allowed",
            where_.display()
        ));
    }
    if meta.mode() & 0o002 != 0 {
        return Err(format!(
            "{label}: {} is world-writable: not allowed (anyone could replace it; chmod o-w it and relink)",
            where_.display()
        ));
    }
    for dir in real.ancestors().skip(1) {
        match std::fs::metadata(dir) {
            Ok(m) if open_dir(&m) => {
                return Err(format!(
                    "{label}: {} lies under the world-writable directory {}: not allowed (anyone could replace it; chmod o-w {} or set its sticky bit)",
                    where_.display(),
                    shown(root_real, dir).display(),
                    shown(root_real, dir).display()
                ))
            }
            Ok(_) => {}
            Err(e) => return Err(format!("{label}: {} cannot be examined ({e}): not allowed", shown(root_real, dir).display())),
        }
    }
    Ok(Binary {
        path: where_,
        dev: meta.dev(),
        ino: meta.ino(),
        owner_uid: meta.uid(),
        owner_gid: meta.gid(),
        mode: meta.mode(),
    })
}

/// Finds the homes `spec` names under `root` and the binaries in them that may write
/// ASM disks (see the module doc for every rule). Never fails: what cannot be used is
/// a line in [`Found::problems`].
pub fn discover(root: &Path, spec: &Spec) -> Found {
    discover_inputs(root, spec).0
}

pub(crate) fn discover_inputs(root: &Path, spec: &Spec) -> (Found, Inputs) {
    let mut found = Found::default();
    let mut inputs = Inputs::default();
    if *spec == Spec::Off {
        return (found, inputs);
    }
    let root_real = match std::fs::canonicalize(root) {
        Ok(r) => r,
        Err(e) => {
            found.problems.push(format!(
                "{} cannot be resolved ({e}): no Oracle homes",
                root.display()
            ));
            return (found, inputs);
        }
    };
    let cands = candidates(&root_real, spec, &mut found.problems, &mut inputs);
    // (resolved path, home) in the order the inputs name them.
    let mut homes: Vec<(PathBuf, Home)> = Vec::new();
    for c in cands {
        if !c.named.is_absolute() {
            found.problems.push(format!(
                "{}: home {} is not an absolute path: ignored",
                c.source,
                c.named.display()
            ));
            continue;
        }
        let host = under(&root_real, &c.named);
        inputs.paths.insert(host.clone());
        let real = match std::fs::canonicalize(&host) {
            Ok(r) => r,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                found.problems.push(format!(
                    "{}: home {} does not exist: ignored (remove the entry if the home was removed)",
                    c.source,
                    c.named.display()
                ));
                continue;
            }
            Err(e) => {
                found.problems.push(format!(
                    "{}: home {} cannot be resolved ({e}): ignored",
                    c.source,
                    c.named.display()
                ));
                continue;
            }
        };
        inputs.paths.insert(real.clone());
        let meta = match std::fs::metadata(&real) {
            Ok(m) if m.is_dir() => m,
            Ok(_) => {
                found.problems.push(format!(
                    "{}: home {} is not a directory: ignored",
                    c.source,
                    c.named.display()
                ));
                continue;
            }
            Err(e) => {
                found.problems.push(format!(
                    "{}: home {} cannot be examined ({e}): ignored",
                    c.source,
                    c.named.display()
                ));
                continue;
            }
        };
        let grid = c.grid || (c.probe_kind && real.join("bin/ocssd.bin").exists());
        if c.probe_kind {
            inputs.paths.insert(real.join("bin/ocssd.bin"));
        }
        if let Some((_, h)) = homes.iter_mut().find(|(r, _)| *r == real) {
            if grid {
                h.kind = HomeKind::Grid;
            }
            continue;
        }
        homes.push((
            real,
            Home {
                path: c.named,
                kind: if grid {
                    HomeKind::Grid
                } else {
                    HomeKind::Database
                },
                owner_uid: meta.uid(),
                binaries: Vec::new(),
            },
        ));
    }
    for (real, mut home) in homes {
        let label = format!("{} home {}", home.kind.as_str(), home.path.display());
        let names = HOME_BINARIES.iter().chain(if home.kind == HomeKind::Grid {
            GRID_BINARIES
        } else {
            &[]
        });
        for name in names {
            match binary(&root_real, &real, &label, name, &mut inputs) {
                Ok(b) => {
                    if *name == "oracle" {
                        home.owner_uid = b.owner_uid;
                    }
                    home.binaries.push(b);
                }
                Err(p) => found.problems.push(p),
            }
        }
        found.homes.push(home);
    }
    (found, inputs)
}

#[cfg(test)]
pub(crate) mod testutil {
    use std::fs;
    use std::os::unix::fs::PermissionsExt;
    use std::path::Path;

    /// Writes `rel` under `root` with `text`, creating directories.
    pub fn write(root: &Path, rel: &str, text: &str) {
        let p = root.join(rel.trim_start_matches('/'));
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(&p, text).unwrap();
    }

    /// A home under `root` with the given binaries (mode 0750, dirs 0755).
    pub fn home(root: &Path, home: &str, bins: &[&str]) {
        let bin = root.join(home.trim_start_matches('/')).join("bin");
        fs::create_dir_all(&bin).unwrap();
        for b in bins {
            let p = bin.join(b);
            fs::write(&p, b"\x7fELF stand-in").unwrap();
            fs::set_permissions(&p, fs::Permissions::from_mode(0o750)).unwrap();
        }
    }

    /// A root directory that is not world-writable (tempdirs live under /tmp, which
    /// is world-writable but sticky, so that is accepted anyway).
    pub fn root() -> tempfile::TempDir {
        let d = tempfile::tempdir().unwrap();
        fs::set_permissions(d.path(), fs::Permissions::from_mode(0o755)).unwrap();
        fs::create_dir(d.path().join("proc")).unwrap();
        d
    }
}

#[cfg(test)]
mod tests {
    use super::testutil::*;
    use super::*;
    use std::fs;
    use std::os::unix::fs::PermissionsExt;

    const GRID: &str = "/u01/app/19c/grid";
    const DB: &str = "/u01/app/oracle/product/19c/dbhome_1";

    fn names(h: &Home) -> Vec<String> {
        h.binaries.iter().map(Binary::name).collect()
    }

    #[test]
    fn auto_finds_grid_from_olr_loc_and_databases_from_oratab() {
        let r = root();
        home(
            r.path(),
            GRID,
            &["oracle", "ocssd.bin", "crsd.bin", "ohasd.bin", "kfed"],
        );
        home(r.path(), DB, &["oracle", "sqlplus"]);
        write(
            r.path(),
            OLR_LOC,
            "olrconfig_loc=/u01/app/19c/grid/cdata/h.olr\ncrs_home=/u01/app/19c/grid\n",
        );
        write(
            r.path(),
            ORATAB,
            &format!("# oratab\n+ASM:{GRID}:N\n-MGMTDB:{GRID}:N\nORCL:{DB}:Y\nORCL2:{DB}/:N\n\n"),
        );
        let f = discover(r.path(), &Spec::Auto);
        assert_eq!(f.problems, Vec::<String>::new());
        assert_eq!(f.homes.len(), 2, "{f:?}");
        assert_eq!(f.homes[0].path, Path::new(GRID));
        assert_eq!(f.homes[0].kind, HomeKind::Grid);
        assert_eq!(names(&f.homes[0]), ["oracle", "ocssd.bin", "crsd.bin"]);
        assert_eq!(f.homes[1].path, Path::new(DB));
        assert_eq!(f.homes[1].kind, HomeKind::Database);
        assert_eq!(names(&f.homes[1]), ["oracle"]);
        assert_eq!(f.allowed().count(), 4);
        let oracle = &f.homes[1].binaries[0];
        assert_eq!(oracle.path, Path::new(DB).join("bin/oracle"));
        let m = fs::metadata(r.path().join(&DB[1..]).join("bin/oracle")).unwrap();
        assert_eq!(
            (oracle.dev, oracle.ino, oracle.mode),
            (m.dev(), m.ino(), m.mode())
        );
        assert_eq!((oracle.owner_uid, oracle.owner_gid), (m.uid(), m.gid()));
        assert_eq!(f.homes[1].owner_uid, m.uid());
    }

    #[test]
    fn crs_home_is_grid_even_when_oratab_names_it_first_and_without_asm() {
        let r = root();
        home(r.path(), GRID, &["oracle", "ocssd.bin", "crsd.bin"]);
        write(r.path(), OLR_LOC, &format!("crs_home={GRID}\n"));
        write(r.path(), ORATAB, &format!("*:{GRID}:N\n"));
        let f = discover(r.path(), &Spec::Auto);
        assert_eq!(f.homes.len(), 1);
        assert_eq!(f.homes[0].kind, HomeKind::Grid);
        // +ASM in oratab alone (no olr.loc) also makes a Grid home.
        let r = root();
        home(r.path(), GRID, &["oracle", "ocssd.bin", "crsd.bin"]);
        write(r.path(), ORATAB, &format!("+ASM1:{GRID}:N\n"));
        let f = discover(r.path(), &Spec::Auto);
        assert_eq!(f.homes[0].kind, HomeKind::Grid);
        assert_eq!(names(&f.homes[0]), ["oracle", "ocssd.bin", "crsd.bin"]);
    }

    #[test]
    fn missing_oratab_is_not_a_problem_unreadable_one_is() {
        let r = root();
        let f = discover(r.path(), &Spec::Auto);
        assert_eq!(f, Found::default());
        // A directory in oratab's place cannot be read, even by root.
        fs::create_dir_all(r.path().join(ORATAB)).unwrap();
        let f = discover(r.path(), &Spec::Auto);
        assert!(f.homes.is_empty());
        assert_eq!(f.problems.len(), 1, "{f:?}");
        assert!(
            f.problems[0].starts_with("/etc/oratab cannot be read"),
            "{f:?}"
        );
        fs::create_dir_all(r.path().join(OLR_LOC)).unwrap();
        let f = discover(r.path(), &Spec::Auto);
        assert_eq!(f.problems.len(), 2, "{f:?}");
        assert!(
            f.problems[0].starts_with("/etc/oracle/olr.loc cannot be read"),
            "{f:?}"
        );
    }

    #[test]
    fn missing_home_and_missing_binary_are_problems() {
        let r = root();
        home(r.path(), DB, &["sqlplus"]);
        write(
            r.path(),
            ORATAB,
            &format!("OLD:/u01/app/oracle/product/12c:N\nORCL:{DB}:Y\nbad\n"),
        );
        let f = discover(r.path(), &Spec::Auto);
        assert_eq!(f.homes.len(), 1);
        assert!(f.homes[0].binaries.is_empty());
        assert_eq!(f.problems.len(), 3, "{f:?}");
        assert!(f.problems[0].starts_with("/etc/oratab line 3"), "{f:?}");
        assert!(
            f.problems[1].contains("home /u01/app/oracle/product/12c does not exist"),
            "{f:?}"
        );
        assert!(f.problems[2].contains("bin/oracle is missing"), "{f:?}");
        // the home, with no binary allowed (its line: proto's `OracleHome`)
        assert_eq!(f.homes.len(), 1, "{f:?}");
        assert_eq!(f.homes[0].path, std::path::Path::new(DB));
        assert!(f.homes[0].binaries.is_empty(), "{f:?}");
        assert_eq!(f.problems.len(), 3, "{f:?}");
    }

    #[test]
    fn list_kind_comes_from_ocssd_bin() {
        let r = root();
        home(r.path(), "/g", &["oracle", "ocssd.bin", "crsd.bin"]);
        home(r.path(), "/d", &["oracle"]);
        let spec = Spec::List(vec!["/g".into(), "/d".into(), "/d/".into(), "rel".into()]);
        let f = discover(r.path(), &spec);
        assert_eq!(f.homes.len(), 2, "{f:?}");
        assert_eq!(f.homes[0].kind, HomeKind::Grid);
        assert_eq!(f.homes[1].kind, HomeKind::Database);
        assert_eq!(f.problems.len(), 1, "{f:?}");
        assert!(f.problems[0].contains("not an absolute path"), "{f:?}");
        assert_eq!(discover(r.path(), &Spec::Off), Found::default());
    }

    #[test]
    fn symlinks_inside_the_home_resolve_outside_are_refused() {
        let r = root();
        home(r.path(), "/d", &["oracle.real"]);
        std::os::unix::fs::symlink("oracle.real", r.path().join("d/bin/oracle")).unwrap();
        let f = discover(r.path(), &Spec::List(vec!["/d".into()]));
        assert_eq!(f.problems, Vec::<String>::new());
        assert_eq!(f.homes[0].binaries[0].path, Path::new("/d/bin/oracle.real"));

        home(r.path(), "/elsewhere", &["oracle"]);
        home(r.path(), "/e", &[]);
        std::os::unix::fs::symlink(
            r.path().join("elsewhere/bin/oracle"),
            r.path().join("e/bin/oracle"),
        )
        .unwrap();
        let f = discover(r.path(), &Spec::List(vec!["/e".into()]));
        assert!(f.homes[0].binaries.is_empty());
        assert_eq!(f.problems.len(), 1);
        assert!(
            f.problems[0].contains("leads out of the home to /elsewhere/bin/oracle"),
            "{f:?}"
        );

        // A home reached through a symlink is the same home, binaries inside it count.
        std::os::unix::fs::symlink(r.path().join("d"), r.path().join("dlink")).unwrap();
        let f = discover(r.path(), &Spec::List(vec!["/dlink".into(), "/d".into()]));
        assert_eq!(f.homes.len(), 1, "{f:?}");
        assert_eq!(f.homes[0].path, Path::new("/dlink"));
        assert_eq!(f.homes[0].binaries.len(), 1);
    }

    #[test]
    fn only_regular_files_and_nothing_anyone_can_replace() {
        let r = root();
        home(r.path(), "/d", &[]);
        fs::create_dir(r.path().join("d/bin/oracle")).unwrap();
        let f = discover(r.path(), &Spec::List(vec!["/d".into()]));
        assert!(f.homes[0].binaries.is_empty());
        assert!(f.problems[0].contains("not a regular file"), "{f:?}");

        let r = root();
        home(r.path(), "/d", &["oracle"]);
        let p = r.path().join("d/bin/oracle");
        fs::set_permissions(&p, fs::Permissions::from_mode(0o757)).unwrap();
        let f = discover(r.path(), &Spec::List(vec!["/d".into()]));
        assert!(f.homes[0].binaries.is_empty());
        assert!(
            f.problems[0].contains("/d/bin/oracle is world-writable"),
            "{f:?}"
        );

        fs::set_permissions(&p, fs::Permissions::from_mode(0o750)).unwrap();
        fs::set_permissions(r.path().join("d/bin"), fs::Permissions::from_mode(0o777)).unwrap();
        let f = discover(r.path(), &Spec::List(vec!["/d".into()]));
        assert!(f.homes[0].binaries.is_empty());
        assert!(
            f.problems[0].contains("world-writable directory /d/bin"),
            "{f:?}"
        );

        // Sticky (like /tmp): others cannot rename what they do not own.
        fs::set_permissions(r.path().join("d/bin"), fs::Permissions::from_mode(0o1777)).unwrap();
        let f = discover(r.path(), &Spec::List(vec!["/d".into()]));
        assert_eq!(f.problems, Vec::<String>::new());
        assert_eq!(f.homes[0].binaries.len(), 1);
    }

    #[test]
    fn owner_comes_from_the_file() {
        let r = root();
        home(r.path(), "/g", &["oracle", "ocssd.bin", "crsd.bin"]);
        let g = r.path().join("g/bin");
        match std::os::unix::fs::chown(g.join("oracle"), Some(54331), Some(54321)) {
            Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
                eprintln!("skipped: chown needs root");
                return;
            }
            other => other.unwrap(),
        }
        std::os::unix::fs::chown(g.join("ocssd.bin"), Some(54331), Some(54321)).unwrap();
        std::os::unix::fs::chown(g.join("crsd.bin"), Some(0), Some(0)).unwrap();
        fs::set_permissions(g.join("oracle"), fs::Permissions::from_mode(0o6751)).unwrap();
        let f = discover(r.path(), &Spec::List(vec!["/g".into()]));
        let h = &f.homes[0];
        assert_eq!(h.owner_uid, 54331);
        let uids: Vec<(u32, u32)> = h
            .binaries
            .iter()
            .map(|b| (b.owner_uid, b.owner_gid))
            .collect();
        assert_eq!(uids, [(54331, 54321), (54331, 54321), (0, 0)]);
        assert_eq!(h.binaries[0].mode & 0o7777, 0o6751);
        let names: Vec<String> = h.binaries.iter().map(|b| b.name()).collect();
        assert_eq!(names, ["oracle", "ocssd.bin", "crsd.bin"]);
        assert_eq!(f.homes.len(), 1, "{f:?}");
    }
}
