//! `asmguardctl import oracleasm|afd|udev [FILE]`: read what a site runs today
//! (ASMLib's `/etc/sysconfig/oracleasm`, AFD's `afd.conf`/`/etc/oracleafd.conf`,
//! or a `99-oracle-asmdevices.rules` udev rules file) and print the asmguard
//! configuration it means, key by key, each with a comment naming the line it came
//! from, and what has no equivalent. `--write` installs it (never over another file
//! without `--force`, which keeps a backup).
//!
//! Every disk or rule the old configuration gave to ASM is answered one by one
//! ([`DiskAnswer`]): protected as NAME, or not and the command that fixes it (exit
//! 8 unless `--allow-unprotected`). A udev rule that matches by pattern is resolved
//! against the host's sysfs and udev database ([`host_devices`]).
//!
//! The parsing is pure (text in, [`Import`] out; user and group numbers are
//! resolved through a function the caller passes, the host's devices are passed
//! in, read under injected roots), so it is tested without a host.

use crate::exit::{CliError, BAD_INPUT, FAILED, IMPORT_NAME_CONFLICT, IMPORT_UNPROTECTED, REFUSED};
use asmguard_devices::pattern;
use serde::Serialize;
use std::path::{Path, PathBuf};

/// What is imported.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    /// ASMLib: /etc/sysconfig/oracleasm.
    Oracleasm,
    /// ASM Filter Driver: /etc/oracleafd.conf (or afd.conf).
    Afd,
    /// udev rules such as /etc/udev/rules.d/99-oracle-asmdevices.rules.
    Udev,
}

impl Kind {
    /// The kind's usual file under `etc` (the caller's `Paths::etc`).
    fn default_file(self, etc: &Path) -> PathBuf {
        etc.join(match self {
            Kind::Oracleasm => "sysconfig/oracleasm",
            Kind::Afd => "oracleafd.conf",
            Kind::Udev => "udev/rules.d/99-oracle-asmdevices.rules",
        })
    }
}

#[derive(Debug, clap::Args)]
pub struct ImportArgs {
    /// What the site runs: oracleasm (ASMLib), afd (ASM Filter Driver) or udev (rules).
    pub kind: Kind,
    /// The file to read (default: /etc/sysconfig/oracleasm, /etc/oracleafd.conf,
    /// /etc/udev/rules.d/99-oracle-asmdevices.rules).
    pub file: Option<PathBuf>,
    /// Install the configuration (refused when another one is there, unless --force).
    #[arg(long)]
    pub write: bool,
    /// With --write: replace an existing, different configuration (kept as FILE.bak.N).
    #[arg(long, requires = "write")]
    pub force: bool,
    /// Where --write installs it.
    #[arg(long, value_name = "FILE", default_value = asmguard_config::DEFAULT_PATH)]
    pub config: PathBuf,
    /// Print JSON instead of the commented configuration.
    #[arg(long)]
    pub json: bool,
    /// Exit 0 even when a disk the old configuration gave to ASM is left unprotected
    /// (otherwise exit 8, each such disk named with the command that fixes it).
    #[arg(long)]
    pub allow_unprotected: bool,
}

/// A TOML value the importer sets.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Val {
    Str(String),
    List(Vec<String>),
    Bool(bool),
    /// A table of strings (printed as an inline table).
    Table(std::collections::BTreeMap<String, String>),
}

impl Val {
    fn toml(&self) -> String {
        // JSON string escapes are TOML basic-string escapes.
        let q = |s: &str| serde_json::to_string(s).unwrap_or_default();
        match self {
            Val::Str(s) => q(s),
            Val::List(l) => format!(
                "[{}]",
                l.iter().map(|s| q(s)).collect::<Vec<_>>().join(", ")
            ),
            Val::Bool(b) => b.to_string(),
            Val::Table(t) => format!(
                "{{ {} }}",
                t.iter()
                    .map(|(k, v)| format!("{} = {}", q(k), q(v)))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        }
    }
}

/// One key of the asmguard configuration and where it came from.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Setting {
    /// `section.key`, as asmguard.toml spells it.
    pub key: String,
    pub value: Val,
    /// The source line (`ORACLEASM_UID=grid (line 4)`), and why this value.
    pub from: String,
}

/// A source setting with no asmguard equivalent, and why.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Unmapped {
    pub from: String,
    pub why: String,
}

/// The result of an import.
#[derive(Debug, Clone, Serialize)]
pub struct Import {
    pub kind: Kind,
    pub file: String,
    pub settings: Vec<Setting>,
    pub no_equivalent: Vec<Unmapped>,
    /// Every disk (or rule giving disks) the old configuration gave to ASM, and
    /// whether the imported configuration protects it.
    pub disks: Vec<DiskAnswer>,
    /// The configuration text (what --write installs).
    pub config: String,
}

/// What the import does for one disk, or one rule, the old configuration gave to
/// ASM.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DiskAnswer {
    /// The source (`line 3: /dev/asm-disk1 for RESULT=="36000c29a"`).
    pub from: String,
    /// The name asmguard manages it under (`None`: not protected).
    pub protected_as: Option<String>,
    /// How the daemon knows it (protected only).
    pub by: Option<By>,
    /// Why it is not protected (not protected only).
    pub why: Option<String>,
    /// The command that protects it (not protected only).
    pub fix: Option<String>,
    /// Another rule gives the same disk another name: which, and the name kept.
    pub conflict: Option<String>,
}

impl DiskAnswer {
    fn protected(from: impl Into<String>, name: impl Into<String>, by: By) -> Self {
        DiskAnswer {
            from: from.into(),
            protected_as: Some(name.into()),
            by: Some(by),
            why: None,
            fix: None,
            conflict: None,
        }
    }
    fn unprotected(
        from: impl Into<String>,
        why: impl Into<String>,
        fix: impl Into<String>,
    ) -> Self {
        DiskAnswer {
            from: from.into(),
            protected_as: None,
            by: None,
            why: Some(why.into()),
            fix: Some(fix.into()),
            conflict: None,
        }
    }
    /// The per-disk line the import prints.
    pub fn line(&self) -> String {
        let line = match (&self.protected_as, &self.fix) {
            (Some(n), _) => format!(
                "{}: protected as {n} (by {})",
                self.from,
                self.by.map_or("", By::words)
            ),
            (None, f) => format!(
                "{}: NOT protected: {}; {}",
                self.from,
                self.why.as_deref().unwrap_or(""),
                f.as_deref().unwrap_or("")
            ),
        };
        match &self.conflict {
            Some(c) => format!("{line}; NAME CONFLICT: {c}"),
            None => line,
        }
    }
}

/// How the daemon knows a disk the import protects.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum By {
    /// Its ORCLDISK label (ASMLib's, AFD's, asmguard's).
    Label,
    /// The disk name in its ASM header (`devices.manage_asm_members`).
    AsmHeader,
    /// A rule's name for its LUN (`[devices.member_names]`).
    Rule,
}

impl By {
    /// The words of the per-disk line.
    pub fn words(self) -> &'static str {
        match self {
            By::Label => "label",
            By::AsmHeader => "asm header",
            By::Rule => "rule",
        }
    }
}

/// A name one rule gives one LUN: what `[devices.member_names]` is made of.
struct Named {
    /// The LUN key the daemon finds the disk by.
    lun: String,
    name: String,
    /// The rule's line.
    line: usize,
    /// The match the LUN came from (`RESULT=="..."`).
    matched: String,
    /// The node or link the rule makes, as the comment shows it.
    shown: String,
}

/// A LUN a rule gave ASM: its answer's place in the list, and the first
/// rule's name for it and line (a later rule for it joins that answer).
struct SeenLun {
    lun: String,
    answer: usize,
    name: Option<String>,
    line: usize,
}

/// Resolves a user or group number to its name (the host's passwd/group).
pub struct Names<'a> {
    pub user: &'a dyn Fn(u32) -> Option<String>,
    pub group: &'a dyn Fn(u32) -> Option<String>,
}

/// The order of sections and keys in the printed configuration.
const KEY_ORDER: [&str; 13] = [
    "devices.include",
    "devices.exclude",
    "devices.scan_order",
    "devices.manage_asm_members",
    "devices.member_names",
    "paths.owner",
    "paths.group",
    "paths.mode",
    "paths.compat",
    "socket.admin_group",
    "filter.mode",
    "filter.allow_users",
    "filter.allow_groups",
];

struct Builder {
    settings: Vec<Setting>,
    unmapped: Vec<Unmapped>,
    disks: Vec<DiskAnswer>,
}

impl Builder {
    fn new() -> Self {
        Builder {
            settings: Vec::new(),
            unmapped: Vec::new(),
            disks: Vec::new(),
        }
    }
    fn set(&mut self, key: &str, value: Val, from: impl Into<String>) {
        let from = from.into();
        if let Some(s) = self.settings.iter_mut().find(|s| s.key == key) {
            s.value = value;
            s.from = from;
        } else {
            self.settings.push(Setting {
                key: key.into(),
                value,
                from,
            });
        }
    }
    fn none(&mut self, from: impl Into<String>, why: impl Into<String>) {
        self.unmapped.push(Unmapped {
            from: from.into(),
            why: why.into(),
        });
    }
    /// `list` plus `v`, unless it is there already.
    fn add_to(&mut self, key: &str, default: &[String], v: &str, from: String) {
        let mut l = match self.settings.iter().find(|s| s.key == key) {
            Some(Setting {
                value: Val::List(l),
                ..
            }) => l.clone(),
            _ => default.to_vec(),
        };
        if !l.iter().any(|x| x == v) {
            l.push(v.to_string());
            self.set(key, Val::List(l), from);
        }
    }
    fn finish(mut self, kind: Kind, file: &str) -> Result<Import, String> {
        self.settings.sort_by_key(|s| {
            KEY_ORDER
                .iter()
                .position(|k| *k == s.key)
                .unwrap_or(KEY_ORDER.len())
        });
        let config = render(kind, file, &self.settings, &self.unmapped, &self.disks);
        // What is printed must load: checked here, not hoped.
        asmguard_config::parse(&config, "the imported configuration")
            .map_err(|e| format!("{file}: {e}"))?;
        Ok(Import {
            kind,
            file: file.to_string(),
            settings: self.settings,
            no_equivalent: self.unmapped,
            disks: self.disks,
            config,
        })
    }
}

fn render(
    kind: Kind,
    file: &str,
    settings: &[Setting],
    unmapped: &[Unmapped],
    disks: &[DiskAnswer],
) -> String {
    use std::fmt::Write;
    let what = match kind {
        Kind::Oracleasm => "ASMLib",
        Kind::Afd => "the ASM Filter Driver",
        Kind::Udev => "udev rules",
    };
    let mut s = format!(
        "# /etc/asmguard/asmguard.toml imported from {file} ({what}) by\n\
         # `asmguardctl import {}`. Keys not set here keep their defaults.\n",
        serde_json::to_value(kind)
            .ok()
            .and_then(|v| v.as_str().map(String::from))
            .unwrap_or_default()
    );
    let mut section = "";
    for st in settings {
        let (sec, key) = st.key.split_once('.').unwrap_or(("", &st.key));
        if sec != section {
            let _ = write!(s, "\n[{sec}]\n");
            section = sec;
        }
        for line in st.from.lines() {
            let _ = writeln!(s, "# {line}");
        }
        let _ = writeln!(s, "{key} = {}", st.value.toml());
    }
    if !disks.is_empty() {
        let _ = write!(s, "\n# The disks the old configuration gave to ASM:\n");
        for d in disks {
            let _ = writeln!(s, "#   {}", d.line());
        }
    }
    if !unmapped.is_empty() {
        let _ = write!(s, "\n# Not carried over (no asmguard equivalent):\n");
        for u in unmapped {
            let _ = writeln!(s, "#   {}: {}", u.from, u.why);
        }
    }
    s
}

/// `KEY=value` lines of a shell-style file: comments, blank lines, `export`,
/// single or double quotes. Returns (line number, key, value, the line).
fn assignments(text: &str, file: &str) -> Result<Vec<(usize, String, String)>, String> {
    let mut out = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let n = i + 1;
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let line = line.strip_prefix("export ").unwrap_or(line).trim();
        let Some((k, v)) = line.split_once('=') else {
            return Err(format!(
                "{file}:{n}: {line:?} is not a KEY=value line: fix or remove it"
            ));
        };
        let k = k.trim();
        if k.is_empty() || !k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return Err(format!("{file}:{n}: {k:?} is not a setting name"));
        }
        out.push((n, k.to_string(), unquote(v.trim(), file, n)?));
    }
    Ok(out)
}

/// A shell word: quoted and unquoted parts joined (`'a','b'` is `a,b`), up to
/// whitespace; after it only a `#` comment.
fn unquote(v: &str, file: &str, n: usize) -> Result<String, String> {
    let mut out = String::new();
    let mut chars = v.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\'' | '"' => {
                let mut closed = false;
                for d in chars.by_ref() {
                    if d == c {
                        closed = true;
                        break;
                    }
                    out.push(d);
                }
                if !closed {
                    return Err(format!("{file}:{n}: the quote {c} is not closed"));
                }
            }
            c if c.is_whitespace() => {
                let after: String = chars.collect();
                let after = after.trim();
                if !(after.is_empty() || after.starts_with('#')) {
                    return Err(format!(
                        "{file}:{n}: {after:?} after the value: one value per line (quote a value with spaces)"
                    ));
                }
                break;
            }
            c => out.push(c),
        }
    }
    Ok(out)
}

fn boolean(v: &str, file: &str, n: usize, k: &str) -> Result<bool, String> {
    match v.to_ascii_lowercase().as_str() {
        "true" | "yes" | "y" | "1" | "enable" | "enabled" => Ok(true),
        "false" | "no" | "n" | "0" | "disable" | "disabled" => Ok(false),
        _ => Err(format!("{file}:{n}: {k}={v:?} is neither true nor false")),
    }
}

/// A user or group as ASMLib takes it: a name, or a number resolved on this host.
fn who(
    v: &str,
    what: &str,
    resolve: &dyn Fn(u32) -> Option<String>,
    file: &str,
    n: usize,
    k: &str,
) -> Result<String, String> {
    let name = match v.parse::<u32>() {
        Ok(id) => resolve(id).ok_or_else(|| {
            format!(
                "{file}:{n}: {k}={v}: no {what} has that number on this host: give the {what} name"
            )
        })?,
        Err(_) => v.to_string(),
    };
    let ok = name
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_lowercase() || c == '_')
        && name.len() <= 32
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-');
    if !ok {
        return Err(format!("{file}:{n}: {k}={v:?} is not a {what} name"));
    }
    Ok(name)
}

fn defaults() -> asmguard_config::Config {
    asmguard_config::Config::default()
}

/// `ORACLEASM_SCANORDER`/`_SCANEXCLUDE` words (device name prefixes, as ASMLib
/// matches /proc/partitions names) as asmguard patterns.
fn prefixes(v: &str) -> Vec<String> {
    v.split_whitespace()
        .map(|p| match p {
            // multipath devices are dm-N kernel names
            "mpath" | "multipath" | "mapper" => "dm-*".to_string(),
            p => format!("{}*", p.trim_end_matches('*')),
        })
        .fold(Vec::new(), |mut acc, p| {
            if !acc.contains(&p) {
                acc.push(p);
            }
            acc
        })
}

/// ASMLib's `/etc/sysconfig/oracleasm`.
pub fn oracleasm(text: &str, file: &str, names: &Names) -> Result<Import, String> {
    let d = defaults();
    let mut b = Builder::new();
    b.set(
        "paths.compat",
        Val::List(vec!["oracleasm".into()]),
        "ASMLib's /dev/oracleasm/disks/<LABEL>: the same names, so asm_diskstring stays",
    );
    for (n, k, v) in assignments(text, file)? {
        let src = format!("{k}={v} (line {n})");
        if v.is_empty() && k != "ORACLEASM_SCANEXCLUDE" && k != "ORACLEASM_SCAN_DIRECTORIES" {
            b.none(src, "empty: asmguard's default is kept");
            continue;
        }
        match k.as_str() {
            "ORACLEASM_UID" => {
                let u = who(&v, "user", names.user, file, n, &k)?;
                b.set("paths.owner", Val::Str(u.clone()), format!("{src}: owner of the disk links"));
                b.add_to(
                    "filter.allow_users",
                    &d.filter.allow_users,
                    &u,
                    format!("{src}: the disks' owner may write them"),
                );
            }
            "ORACLEASM_GID" => {
                let g = who(&v, "group", names.group, file, n, &k)?;
                b.set("paths.group", Val::Str(g.clone()), format!("{src}: group of the disk links"));
                b.set(
                    "socket.admin_group",
                    Val::Str(g.clone()),
                    format!("{src}: its members may list the disks (lsdsk, querydisk)"),
                );
                b.add_to(
                    "filter.allow_groups",
                    &d.filter.allow_groups,
                    &g,
                    format!("{src}: the disks' group may write them"),
                );
            }
            "ORACLEASM_SCANORDER" => {
                let mut order = prefixes(&v);
                let covered = |dflt: &str| {
                    order
                        .iter()
                        .any(|p| pattern::matches(p, dflt.trim_end_matches('*')))
                };
                let rest: Vec<String> = d
                    .devices
                    .scan_order
                    .iter()
                    .filter(|x| !covered(x))
                    .cloned()
                    .collect();
                order.extend(rest);
                b.set(
                    "devices.scan_order",
                    Val::List(order),
                    format!(
                        "{src}: these first, then asmguard's default order; a multipath\n\
                         device is always preferred over its own paths"
                    ),
                );
            }
            "ORACLEASM_SCANEXCLUDE" if prefixes(&v).is_empty() => b.none(
                src,
                "it excludes nothing: asmguard's default exclude list stays as it is",
            ),
            "ORACLEASM_SCANEXCLUDE" => {
                let mut ex = d.devices.exclude.clone();
                for p in prefixes(&v) {
                    if !ex.contains(&p) {
                        ex.push(p);
                    }
                }
                b.set(
                    "devices.exclude",
                    Val::List(ex),
                    format!(
                        "{src}: never read for a label; the excluded paths of a multipath\n\
                         device are still its paths, and protected with it"
                    ),
                );
            }
            "ORACLEASM_ENABLE_IOFILTER" => {
                let (mode, why) = filter_mode(boolean(&v, file, n, &k)?, Kind::Oracleasm, &src);
                b.set("filter.mode", Val::Str(mode.into()), why);
            }
            "ORACLEASM_SCANBOOT" => {
                boolean(&v, file, n, &k)?;
                b.none(src, "asmguardd reads every device when it starts and on every hotplug event");
            }
            "ORACLEASM_ENABLED" => {
                boolean(&v, file, n, &k)?;
                b.none(src, "the service is enabled with `systemctl enable asmguard`");
            }
            "ORACLEASM_SCAN_DIRECTORIES" => b.none(
                src,
                "asmguardd finds devices in /sys/class/block, not in directories; devices.include/exclude pick them",
            ),
            "ORACLEASM_USE_LOGICAL_BLOCK_SIZE" => {
                boolean(&v, file, n, &k)?;
                b.none(
                    src,
                    "asmguard is not in ASM's I/O path: ASM opens the device and sees its own sector sizes (lsdsk shows both)",
                )
            }
            "ORACLEASM_CONFIG_MAX_DISKS" => {
                b.none(src, "asmguard has no limit on the number of disks")
            }
            _ => b.none(src, "not an ASMLib setting this importer knows"),
        }
    }
    b.disks.push(DiskAnswer::protected(
        "every disk ASMLib scans that carries an ASMLib label (ORCLDISK)",
        "its label",
        By::Label,
    ));
    b.finish(Kind::Oracleasm, file)
}

/// An AFD disk string glob as an asmguard device pattern (`/dev/sd*` -> `sd*`,
/// `/dev/mapper/mpath*` -> `mapper/mpath*`); `None` for other paths.
fn afd_glob(g: &str) -> Option<String> {
    let rest = g.strip_prefix("/dev/")?; // literal path: AFD's disk string, text to translate
    let ok = |s: &str| {
        !s.is_empty()
            && s.chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '*' | '?' | '-' | '_' | '.'))
    };
    match rest.strip_prefix("mapper/") {
        Some(m) if ok(m) => Some(format!("mapper/{m}")),
        Some(_) => None,
        None if ok(rest) => Some(rest.to_string()),
        None => None,
    }
}

/// AFD's `afd.conf` / `/etc/oracleafd.conf`.
pub fn afd(text: &str, file: &str) -> Result<Import, String> {
    let mut b = Builder::new();
    b.set(
        "paths.compat",
        Val::List(vec!["oracleafd".into()]),
        "AFD's /dev/oracleafd/disks/<LABEL>: the same names, so asm_diskstring stays\n(AFD labels are ORCLDISK labels: asmguard manages them as they are)",
    );
    for (n, k, v) in assignments(text, file)? {
        let src = format!("{k}={v} (line {n})");
        match k.as_str() {
            "afd_diskstring" => {
                let globs: Vec<&str> = v
                    .split(',')
                    .map(|g| g.trim().trim_matches(|c| c == '\'' || c == '"').trim())
                    .filter(|g| !g.is_empty())
                    .collect();
                if globs.is_empty() {
                    return Err(format!(
                        "{file}:{n}: afd_diskstring is empty: give the disk string AFD uses, such as '/dev/sd*'"
                    ));
                }
                for g in &globs {
                    let what = match afd_glob(g) {
                        Some(p) if p.ends_with(|c: char| c.is_ascii_digit()) => {
                            format!("the partitions {g} of {src} matches")
                        }
                        Some(_) => format!("the disks {g} of {src} matches"),
                        None => format!(
                            "the disks the links {g} of {src} reach (udev symlinks: their kernel devices are read)"
                        ),
                    };
                    b.disks.push(DiskAnswer::protected(
                        format!("{what}, when they carry an AFD label"),
                        "its label",
                        By::Label,
                    ));
                }
                b.disks.push(DiskAnswer::protected(
                    format!("AFD-labelled disks outside {src}"),
                    "its label",
                    By::Label,
                ));
                b.none(
                    src,
                    "asmguard reads every device for labels (devices.include stays [\"*\"]): the disks the \
                     string matches and AFD-labelled disks outside it are protected alike (a label is a label)",
                );
            }
            "afd_filtering" => {
                let (mode, why) = filter_mode(boolean(&v, file, n, &k)?, Kind::Afd, &src);
                b.set("filter.mode", Val::Str(mode.into()), why);
            }
            _ => b.none(src, "not an AFD setting this importer knows"),
        }
    }
    b.finish(Kind::Afd, file)
}

/// The one mapping of an old driver's filtering switch (ASMLib's
/// `ORACLEASM_ENABLE_IOFILTER`, AFD's `afd_filtering`) to an asmguard `filter.mode`
/// and the comment that says why: on is enforce; off is audit, which logs what
/// enforce would refuse and lets it through.
fn filter_mode(on: bool, kind: Kind, src: &str) -> (&'static str, String) {
    if on {
        (
            "enforce",
            format!("{src}: writes by anyone but the allowed users and groups are refused"),
        )
    } else {
        let driver = match kind {
            Kind::Afd => "AFD",
            _ => "ASMLib",
        };
        (
            "audit",
            format!(
                "{src}: {driver} did not filter; audit logs what enforce would refuse\n\
                 (`asmguardctl events`) and lets it through: set enforce once that is empty"
            ),
        )
    }
}

/// One udev rule: its line and its `KEY{attr}OP"value"` terms.
#[derive(Debug)]
struct Rule {
    line: usize,
    terms: Vec<(String, String, String)>,
}

impl Rule {
    fn get(&self, key: &str) -> Option<&str> {
        self.terms
            .iter()
            .find(|(k, _, _)| k == key)
            .map(|(_, _, v)| v.as_str())
    }
}

fn udev_rules(text: &str, file: &str) -> Result<Vec<Rule>, String> {
    let mut rules = Vec::new();
    let mut joined = String::new();
    let mut first = 0;
    for (i, raw) in text.lines().enumerate() {
        if joined.is_empty() {
            first = i + 1;
        }
        if let Some(head) = raw.strip_suffix('\\') {
            joined.push_str(head);
            continue;
        }
        joined.push_str(raw);
        let line = std::mem::take(&mut joined);
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        rules.push(Rule {
            line: first,
            terms: udev_terms(line).map_err(|e| format!("{file}:{first}: {e}"))?,
        });
    }
    Ok(rules)
}

/// `KERNEL=="sd?1", ENV{ID_SERIAL}=="x", SYMLINK+="a"` as (key, op, value).
fn udev_terms(line: &str) -> Result<Vec<(String, String, String)>, String> {
    let mut out = Vec::new();
    let mut rest = line.trim();
    while !rest.is_empty() {
        let op_at = rest
            .find(['=', '!', '+', '-', ':'])
            .ok_or_else(|| format!("{rest:?} has no operator (==, !=, =, +=, :=)"))?;
        let key = rest[..op_at].trim().to_string();
        let after = &rest[op_at..];
        let op = ["==", "!=", "+=", "-=", ":=", "="]
            .into_iter()
            .find(|o| after.starts_with(o))
            .ok_or_else(|| format!("{key}: no operator (==, !=, =, +=, :=)"))?;
        let after = after[op.len()..].trim_start();
        let Some(body) = after.strip_prefix('"') else {
            return Err(format!("{key}{op}: the value is not in double quotes"));
        };
        let end = body
            .find('"')
            .ok_or_else(|| format!("{key}{op}: the quote is not closed"))?;
        if key.is_empty() {
            return Err("a term with no key".into());
        }
        out.push((key, op.to_string(), body[..end].to_string()));
        rest = body[end + 1..].trim_start();
        rest = rest.strip_prefix(',').unwrap_or(rest).trim_start();
    }
    Ok(out)
}

/// The asmguard label a udev rule's symlink name suggests (`asm-disk1` -> `ASM_DISK1`).
fn label_for(symlink: &str) -> Option<String> {
    let base = symlink.rsplit('/').next()?;
    let l: String = base
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_uppercase()
            } else {
                '_'
            }
        })
        .collect();
    asmguard_format::label::Label::new(&l)
        .ok()
        .map(|x| x.as_str().to_string())
}

/// `want`, or (taken) `want_2`, `want_3`...: a label no name of `taken` has.
fn free_label(want: &str, taken: &[&str]) -> String {
    let base: String = want.chars().take(21).collect();
    std::iter::once(want.to_string())
        .chain((2..).map(|n| format!("{base}_{n}")))
        .find(|l| !taken.contains(&l.as_str()))
        .unwrap_or_default()
}

/// The label a fix command gives device `d` when no rule names it: its multipath
/// alias (`asmdata1` -> `ASMDATA1`), else `ASM_` and its kernel name (`ASM_SDC`).
fn device_label(d: &HostDev) -> String {
    d.props
        .get("DM_NAME")
        .and_then(|n| label_for(n))
        .or_else(|| label_for(&format!("asm_{}", d.name)))
        .unwrap_or_else(|| "ASM_DISK".into())
}

/// The LUN one rule names, as udev's properties spell it, and the match it came
/// from: `RESULT=="<wwid>"` of `scsi_id` (`1ATA_<model>_<serial>`, scsi_id's
/// form for an ATA disk, is udev's `ID_SERIAL` `<model>_<serial>`),
/// `ENV{ID_SERIAL}`, `ENV{ID_SCSI_SERIAL}`, `ENV{ID_WWN}` (kept as udev reports
/// them: the daemon looks a name up by each) or `ENV{DM_UUID}=="mpath-<wwid>"`.
/// A rule for partition N of it (`KERNEL=="sd?1"`, `ENV{ID_PART_ENTRY_NUMBER}`)
/// gives `<LUN>-partN`, the daemon's key for that partition. None for a pattern
/// (`*`, `?`, `[`, `|`) or a rule matching something else.
fn rule_lun(r: &Rule) -> Option<(String, String)> {
    let eq = |k: &str| {
        r.terms
            .iter()
            .find(|(kk, op, _)| kk == k && op == "==")
            .map(|(_, _, v)| v.as_str())
    };
    let exact = |v: &str| !v.is_empty() && !v.contains(['*', '?', '[', '|']);
    let (lun, by) = if let Some(v) = eq("ENV{DM_UUID}") {
        let w = v.strip_prefix("mpath-")?;
        // A multipath device is never a partition: its key is its WWID.
        return exact(w).then(|| (w.to_string(), format!("ENV{{DM_UUID}}==\"{v}\"")));
    } else if let Some((k, v)) = ["ENV{ID_SERIAL}", "ENV{ID_SCSI_SERIAL}", "ENV{ID_WWN}"]
        .into_iter()
        .find_map(|k| eq(k).map(|v| (k, v)))
    {
        (v.to_string(), format!("{k}==\"{v}\""))
    } else {
        let v = eq("RESULT")?;
        if !r.get("PROGRAM").is_some_and(|p| p.contains("scsi_id")) {
            return None;
        }
        let key = match v.strip_prefix("1ATA_") {
            Some(ata) => ata.to_string(),
            None => v.to_string(),
        };
        (key, format!("RESULT==\"{v}\" (scsi_id)"))
    };
    if !exact(&lun) {
        return None;
    }
    match rule_partition(r) {
        Some(Some(n)) => Some((format!("{lun}-part{n}"), by)),
        Some(None) => None,
        None => Some((lun, by)),
    }
}

/// The partition a rule matches: `None` for a whole disk, `Some(Some(n))` for
/// partition n (`KERNEL=="sd?1"`, `KERNEL=="nvme0n1p2"`,
/// `ENV{ID_PART_ENTRY_NUMBER}=="1"`), `Some(None)` for partitions of no one number
/// (`KERNEL=="sd?*"` with `ENV{DEVTYPE}=="partition"`).
fn rule_partition(r: &Rule) -> Option<Option<u32>> {
    let eq = |k: &str| {
        r.terms
            .iter()
            .find(|(kk, op, _)| kk == k && op == "==")
            .map(|(_, _, v)| v.as_str())
    };
    if let Some(n) = eq("ENV{ID_PART_ENTRY_NUMBER}") {
        return Some(n.parse().ok());
    }
    let digits = |k: &str| -> Option<u32> {
        let t = k.trim_end_matches(|c: char| c.is_ascii_digit());
        let d = &k[t.len()..];
        // sdb1, sd?1, vd*2, nvme0n1p1: digits after a letter, `?`, `*` or `p`.
        let before = t.chars().last()?;
        if d.is_empty() || k.starts_with("nvme") && before != 'p' {
            return None;
        }
        (before.is_ascii_alphabetic() || matches!(before, '?' | '*' | ']'))
            .then(|| d.parse().ok())?
    };
    match eq("KERNEL").and_then(digits) {
        Some(n) => Some(Some(n)),
        None if eq("ENV{DEVTYPE}") == Some("partition") => Some(None),
        None => None,
    }
}

/// What a rule's `RUN+="/bin/sh -c 'mknod /dev/asm-disk1 b ...; chown grid:asmadmin
/// ...; chmod 0660 ...'"` does: the node it makes, and its owner, group and mode.
#[derive(Debug, Default, PartialEq, Eq)]
struct RunNode {
    node: Option<String>,
    owner: Option<String>,
    group: Option<String>,
    mode: Option<String>,
}

fn run_node(cmd: &str) -> RunNode {
    let words: Vec<&str> = cmd
        .split(|c: char| c.is_whitespace() || matches!(c, ';' | '\'' | '&' | '|'))
        .filter(|w| !w.is_empty())
        .collect();
    let mut n = RunNode::default();
    // The first word after `cmd` that is not an option.
    let arg = |i: usize| words[i + 1..].iter().find(|w| !w.starts_with('-')).copied();
    for (i, w) in words.iter().enumerate() {
        match w.rsplit('/').next().unwrap_or(w) {
            "mknod" => {
                n.node = arg(i)
                    .and_then(|p| p.strip_prefix("/dev/")) // literal path: the recipe's text
                    .map(String::from)
            }
            "chown" => {
                if let Some(a) = arg(i) {
                    let (o, g) = match a.split_once([':', '.']) {
                        Some((o, g)) => (o, Some(g)),
                        None => (a, None),
                    };
                    n.owner = Some(o.to_string()).filter(|o| !o.is_empty());
                    n.group = g.filter(|g| !g.is_empty()).map(String::from);
                }
            }
            "chgrp" => n.group = arg(i).map(String::from),
            "chmod" => n.mode = arg(i).map(String::from),
            _ => {}
        }
    }
    n
}

/// One block device as the host's sysfs and udev database describe it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HostDev {
    /// Kernel name (`sdb1`, `dm-3`).
    pub name: String,
    /// Its partition number (sysfs `partition`), `None` for a whole disk.
    pub partition: Option<u32>,
    /// udev's properties (`E:` lines of its database entry).
    pub props: std::collections::BTreeMap<String, String>,
    /// Whether block 0 holds what the daemon manages a disk by (a label, or the
    /// ASM disk header of a disk ASM knows); `None`: unreadable (no node, an
    /// error, a read that timed out).
    pub managed_block0: Option<bool>,
}

impl HostDev {
    /// The `[devices.member_names]` key the daemon finds it by: a multipath
    /// device's WWID, else its `ID_SERIAL` (`-partN` for partition N).
    fn key(&self) -> Option<String> {
        if let Some(u) = self.props.get("DM_UUID") {
            return u
                .strip_prefix("mpath-")
                .filter(|w| !w.is_empty())
                .map(String::from);
        }
        let s = self.props.get("ID_SERIAL").filter(|s| !s.is_empty())?;
        Some(match self.partition {
            Some(n) => format!("{s}-part{n}"),
            None => s.clone(),
        })
    }

    /// Every key a `[devices.member_names]` entry (a rule's LUN) may name it by,
    /// as the daemon's discovery takes them (`Observed::name_keys`): its
    /// [`HostDev::key`], and, for a device that is not a dm device, its `ID_WWN`
    /// and `ID_SCSI_SERIAL` (`-partN` for partition N).
    fn name_keys(&self) -> Vec<String> {
        let mut keys: Vec<String> = self.key().into_iter().collect();
        if self.props.contains_key("DM_UUID") {
            return keys;
        }
        let part = self
            .partition
            .map(|n| format!("-part{n}"))
            .unwrap_or_default();
        for p in ["ID_WWN", "ID_SCSI_SERIAL"] {
            if let Some(v) = self.props.get(p).filter(|v| !v.trim().is_empty()) {
                keys.push(format!("{v}{part}"));
            }
        }
        keys
    }
}

/// The block devices under `paths.sys` with udev's properties from its database
/// under `paths.run` (`udev/data/b<major>:<minor>`); empty where there is none.
pub fn host_devices(paths: &asmguard_paths::Paths) -> Vec<HostDev> {
    let read = |p: PathBuf| std::fs::read_to_string(p).ok();
    let Ok(dir) = std::fs::read_dir(paths.class_block()) else {
        return Vec::new();
    };
    let mut out: Vec<HostDev> = dir
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().to_string();
            let d = e.path();
            let dev = read(d.join("dev"))?;
            let props = read(paths.run.join(format!("udev/data/b{}", dev.trim())))
                .unwrap_or_default()
                .lines()
                .filter_map(|l| l.strip_prefix("E:")?.split_once('='))
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
            let partition = read(d.join("partition")).and_then(|p| p.trim().parse().ok());
            Some(HostDev {
                name,
                partition,
                props,
                managed_block0: None,
            })
        })
        .collect();
    out.sort_by(|a, b| a.name.cmp(&b.name));
    // Block 0 of every device, read as the daemon reads it (O_DIRECT, in
    // parallel; a read that hangs, such as a multipath device queueing with no
    // path left, answers nothing after READ_TIMEOUT): a rule names a device by
    // its LUN, or matches one udev gives no identity that its ASM header still
    // protects.
    use asmguard_devices::discovery::{read_label, run_reads, READ_TIMEOUT};
    // not optical or floppy drives (a read may spin one up or wait for a
    // medium), RAM disks or empty devices: never an ASM disk
    let readable = |name: &str| {
        !["sr", "fd", "ram", "zram"].iter().any(|p| {
            name.strip_prefix(p)
                .is_some_and(|r| r.chars().all(|c| c.is_ascii_digit()))
        }) && read(paths.class_block().join(name).join("size")).is_none_or(|s| s.trim() != "0")
    };
    let keyed = out
        .iter()
        .filter(|d| readable(&d.name))
        .map(|d| (d.name.clone(), paths.dev.join(&d.name)))
        .collect();
    let mut read = run_reads(keyed, 16, READ_TIMEOUT, |p| {
        read_label(p).map_err(|e| e.to_string())
    });
    for d in &mut out {
        d.managed_block0 = read
            .remove(&d.name)
            .and_then(Result::ok)
            .map(|r| r.managed());
    }
    out
}

/// A device of `host` that `key` names (its LUN key, `ID_WWN` or
/// `ID_SCSI_SERIAL`: [`HostDev::name_keys`]) whose block 0 was read and holds
/// neither a label nor an ASM disk header, when no device of that LUN (a path,
/// the multipath device) reads as one the daemon manages: a rule names it, yet
/// the daemon would not manage it.
fn headerless<'a>(host: &'a [HostDev], key: &str) -> Option<&'a HostDev> {
    // The LUN keys of the devices `key` names: a path named by its ID_WWN shares
    // its LUN (ID_SERIAL, the WWID) with the multipath device over it.
    let luns: Vec<String> = host
        .iter()
        .filter(|d| d.name_keys().iter().any(|k| k == key))
        .filter_map(HostDev::key)
        .collect();
    let lun: Vec<&HostDev> = host
        .iter()
        .filter(|d| {
            d.name_keys().iter().any(|k| k == key) || d.key().is_some_and(|k| luns.contains(&k))
        })
        .collect();
    if lun.iter().any(|d| d.managed_block0 == Some(true)) {
        return None;
    }
    lun.into_iter().find(|d| d.managed_block0 == Some(false))
}

/// The answer for `from`, which a rule gives ASM (as `name` or, `None`, under its
/// header's disk name), on device `d` that carries no label and no ASM header.
fn headerless_answer(from: String, d: &HostDev, name: Option<&str>) -> DiskAnswer {
    // The device is named in `from` too: the exit-8 error lists the `from`s.
    let node = format!("/dev/{}", d.name); // literal path: the node named to the user
    let from = if from.ends_with(&format!(": {node}")) {
        from
    } else {
        format!("{from}: {node}")
    };
    DiskAnswer::unprotected(
        from,
        format!(
            "/dev/{} carries neither a label nor an ASM disk header (ASM has not written one): the daemon manages a disk by one of them", // literal path: the node named to the user
            d.name
        ),
        format!(
            "asmguardctl label {} /dev/{}",
            name.map(String::from).unwrap_or_else(|| device_label(d)),
            d.name
        ),
    )
}

/// Whether rule `r` matches device `d`: `None` when a term of it cannot be told
/// from the udev database (`ATTR{...}`, `DRIVERS`, a `[...]` class).
fn rule_matches(r: &Rule, d: &HostDev) -> Option<bool> {
    let glob = |p: &str, v: &str| -> Option<bool> {
        if p.contains('[') {
            return None;
        }
        Some(p.split('|').any(|alt| pattern::matches(alt, v)))
    };
    let mut all = true;
    for (k, op, v) in &r.terms {
        if op != "==" && op != "!=" {
            continue;
        }
        let got = match k.as_str() {
            "ACTION" | "PROGRAM" => continue,
            "SUBSYSTEM" => glob(v, "block")?,
            "KERNEL" => glob(v, &d.name)?,
            "RESULT" if r.get("PROGRAM").is_some_and(|p| p.contains("scsi_id")) => {
                let serial = d.props.get("ID_SERIAL").map(String::as_str).unwrap_or("");
                let want = v.strip_prefix("1ATA_").unwrap_or(v);
                glob(want, serial)?
            }
            k => {
                let prop = k.strip_prefix("ENV{")?.strip_suffix('}')?;
                glob(v, d.props.get(prop).map(String::as_str).unwrap_or(""))?
            }
        };
        all &= got == (op == "==");
    }
    Some(all)
}

/// A udev rules file, each rule that matches by pattern resolved to the devices
/// of `host` it matches.
pub fn udev_on(text: &str, file: &str, host: &[HostDev]) -> Result<Import, String> {
    let mut b = Builder::new();
    let rules = udev_rules(text, file)?;
    // (line, [OWNER, GROUP, MODE]) of the rules that make ASM disk nodes.
    let mut perms: Vec<(usize, [Option<String>; 3])> = Vec::new();
    // the names rules give one LUN each
    let mut names: Vec<Named> = Vec::new();
    // each LUN a rule gives ASM: a second rule for it is answered on the same line
    let mut seen: Vec<SeenLun> = Vec::new();
    // Some disks are protected by their ASM header only (manage_asm_members).
    let mut by_header = false;
    for r in &rules {
        let mut run = RunNode::default();
        for (_, _, v) in r.terms.iter().filter(|(k, _, _)| k == "RUN") {
            let n = run_node(v);
            run.node = run.node.or(n.node);
            run.owner = run.owner.or(n.owner);
            run.group = run.group.or(n.group);
            run.mode = run.mode.or(n.mode);
        }
        let pick = |k: &str, alt: &Option<String>| r.get(k).map(String::from).or(alt.clone());
        let (o, g, m) = (
            pick("OWNER", &run.owner),
            pick("GROUP", &run.group),
            pick("MODE", &run.mode),
        );
        let link = r
            .get("SYMLINK")
            .or(r.get("NAME"))
            .map(String::from)
            .or(run.node.clone());
        if o.is_none() && g.is_none() && m.is_none() && link.is_none() {
            continue;
        }
        perms.push((r.line, [o, g, m]));
        let matched: Vec<String> = r
            .terms
            .iter()
            .filter(|(_, op, _)| op == "==")
            .filter(|(k, _, _)| k != "SUBSYSTEM" && k != "ACTION")
            .map(|(k, op, v)| format!("{k}{op}\"{v}\""))
            .collect();
        let what = if matched.is_empty() {
            "every device".to_string()
        } else {
            matched.join(", ")
        };
        let exact = |v: &&str| !v.is_empty() && !v.contains(['*', '?', '[', '|']);
        // The multipath device's own name (`ENV{DM_NAME}=="asm-data1"`) names it too.
        let dm_name = r
            .terms
            .iter()
            .find(|(k, op, v)| k == "ENV{DM_NAME}" && op == "==" && exact(&v.as_str()))
            .map(|(_, _, v)| v.clone());
        let name = link
            .as_deref()
            .and_then(label_for)
            .or(dm_name.as_deref().and_then(label_for));
        let src = match &link {
            Some(l) => format!("line {}: /dev/{l} for {what}", r.line),
            None => format!("line {}: {what}", r.line),
        };
        let lun = rule_lun(r);
        // A LUN an earlier rule gives ASM: one answer for the disk, both rules in it.
        let before = lun
            .as_ref()
            .and_then(|(l, _)| seen.iter_mut().find(|s| s.lun == *l));
        if let Some(SeenLun {
            lun: l,
            answer: i,
            name: first,
            line: first_line,
        }) = before
        {
            let a = &mut b.disks[*i];
            a.from = format!("{} and {src}", a.from);
            match (first.as_deref(), name) {
                (Some(f), Some(n)) if f != n => {
                    let c = format!(
                        "line {} names this disk {n}, line {first_line} {f}: asmguard gives a disk one name, its first rule's ({f}); both rules' links stay (the rules file is kept)",
                        r.line
                    );
                    a.conflict = Some(match a.conflict.take() {
                        Some(o) => format!("{o}; {c}"),
                        None => c,
                    });
                }
                // the first rule gave it no name: this one does
                (None, Some(n))
                    if a.by == Some(By::AsmHeader) && !names.iter().any(|x| x.name == n) =>
                {
                    a.protected_as = Some(n.clone());
                    a.by = Some(By::Rule);
                    let shown = link.clone().or(dm_name.map(|d| format!("mapper/{d}")));
                    let by = lun.map(|x| x.1).unwrap_or_default();
                    names.push(Named {
                        lun: l.clone(),
                        name: n.clone(),
                        line: r.line,
                        matched: by,
                        shown: shown.unwrap_or_default(),
                    });
                    *first = Some(n);
                }
                _ => {}
            }
        } else {
            if let Some((l, _)) = &lun {
                seen.push(SeenLun {
                    lun: l.clone(),
                    answer: b.disks.len(),
                    name: name.clone(),
                    line: r.line,
                });
            }
            match (lun, name) {
                (Some((lun, by)), Some(name)) => {
                    if let Some(other) = names.iter().find(|x| x.name == name) {
                        // another name: the link's whole path (`other/disk1` -> OTHER_DISK1)
                        let taken: Vec<&str> = names.iter().map(|x| x.name.as_str()).collect();
                        let want = link
                            .as_deref()
                            .filter(|l| !l.contains('%'))
                            .and_then(|l| label_for(&l.replace('/', "_")))
                            .unwrap_or_else(|| name.clone());
                        let dev = match (
                            host.iter().find(|d| d.name_keys().contains(&lun)),
                            &link,
                            &dm_name,
                        ) {
                            (Some(d), ..) => format!("/dev/{}", d.name), // literal path: shown, not opened
                            (None, Some(l), _) if !l.contains('%') => format!("/dev/{l}"), // literal path: shown
                            (None, _, Some(d)) => format!("/dev/mapper/{d}"), // literal path: shown
                            _ => "DEVICE".into(),
                        };
                        b.disks.push(DiskAnswer::unprotected(
                            src,
                            format!("the name {name} is taken by line {}", other.line),
                            format!(
                                "label this disk: asmguardctl label {} {dev} --migrate",
                                free_label(&want, &taken)
                            ),
                        ));
                        // the answer is for this rule: a later one for its LUN joins it
                        if let Some(s) = seen.last_mut() {
                            s.name = None;
                        }
                    } else {
                        b.disks.push(match headerless(host, &lun) {
                            Some(d) => headerless_answer(src, d, Some(&name)),
                            None => DiskAnswer::protected(src, &name, By::Rule),
                        });
                        let shown = link.clone().or(dm_name.map(|d| format!("mapper/{d}")));
                        names.push(Named {
                            lun,
                            name,
                            line: r.line,
                            matched: by,
                            shown: shown.unwrap_or_default(),
                        });
                    }
                }
                (Some((lun, _)), None) => {
                    by_header = true;
                    b.disks.push(match headerless(host, &lun) {
                        Some(d) => headerless_answer(src, d, None),
                        None => DiskAnswer::protected(
                            src,
                            "the disk name in its ASM header",
                            By::AsmHeader,
                        ),
                    });
                }
                (None, _)
                    if !host.is_empty() && host.iter().all(|d| rule_matches(r, d).is_some()) =>
                {
                    by_header = true;
                    let hit: Vec<&HostDev> = host
                        .iter()
                        .filter(|d| rule_matches(r, d) == Some(true))
                        .collect();
                    if hit.is_empty() {
                        b.disks.push(DiskAnswer::unprotected(
                            src.clone(),
                            "it matches no device on this host",
                            "run the import where the disks are attached",
                        ));
                    }
                    for d in hit {
                        let from = format!("{src}: /dev/{}", d.name);
                        // Its own name: the multipath alias, else the rule's one link.
                        let own = d
                            .props
                            .get("DM_NAME")
                            .and_then(|n| label_for(n))
                            .or_else(|| {
                                link.as_deref()
                                    .filter(|l| !l.contains('%'))
                                    .and_then(label_for)
                            });
                        match (d.key(), own) {
                            (Some(key), own) if headerless(host, &key).is_some() => {
                                b.disks.push(headerless_answer(from, d, own.as_deref()))
                            }
                            (Some(key), Some(n))
                                if !names.iter().any(|x| x.name == n || x.lun == key) =>
                            {
                                b.disks.push(DiskAnswer::protected(from, &n, By::Rule));
                                let shown =
                                    format!("{} ({})", link.clone().unwrap_or_default(), d.name);
                                names.push(Named {
                                    lun: key,
                                    name: n,
                                    line: r.line,
                                    matched: what.clone(),
                                    shown,
                                });
                            }
                            (Some(_), _) => b.disks.push(DiskAnswer::protected(
                                from,
                                "the disk name in its ASM header",
                                By::AsmHeader,
                            )),
                            // no identity, yet an ASM header (or a label): the daemon
                            // manages it as it is
                            (None, _) if d.managed_block0 == Some(true) => {
                                b.disks.push(DiskAnswer::protected(
                                    from,
                                    "the disk name in its ASM header",
                                    By::AsmHeader,
                                ))
                            }
                            (None, own) => {
                                let taken: Vec<&str> =
                                    names.iter().map(|x| x.name.as_str()).collect();
                                let l = free_label(&own.unwrap_or_else(|| device_label(d)), &taken);
                                b.disks.push(DiskAnswer::unprotected(
                                from,
                                "udev reports no ID_SERIAL or multipath WWID for it",
                                format!(
                                    "asmguardctl label {l} /dev/{} --migrate (keeps its ASM header)",
                                    d.name
                                ),
                            ))
                            }
                        }
                    }
                }
                (None, name) => {
                    by_header = true;
                    // The multipath aliases it matches (`ENV{DM_NAME}=="asm*"`, nothing
                    // else): each device under /dev/mapper named after its alias.
                    let alias_glob = r
                        .terms
                        .iter()
                        .filter(|(k, op, _)| op == "==" && k != "SUBSYSTEM" && k != "ACTION")
                        .map(|(k, _, v)| {
                            (k == "ENV{DM_NAME}"
                                && !v.contains(['[', '|', '/', '"', '$', '`', ' ']))
                            .then_some(v)
                        })
                        .collect::<Option<Vec<_>>>()
                        .filter(|v| v.len() == 1)
                        .map(|v| v[0].clone());
                    let fix = match (name, &dm_name, alias_glob) {
                    (Some(l), Some(d), _) => format!(
                        "asmguardctl label {l} /dev/mapper/{d} --migrate (keeps its ASM header)" // literal path: shown, not opened
                    ),
                    (None, None, Some(g)) => format!(
                        "for d in /dev/mapper/{g}; do asmguardctl label \"$(basename \"$d\" | tr a-z A-Z | tr -c 'A-Z0-9\\n' _)\" \"$d\" --migrate; done (each disk named after its alias; keeps its ASM header)" // literal path: shown, not opened
                    ),
                    (l, _, _) => format!(
                        "asmguardctl label {} DEVICE --migrate for each disk it matches (keeps its ASM header)",
                        l.unwrap_or_else(|| "NAME".into())
                    ),
                };
                    b.disks.push(DiskAnswer::unprotected(
                    src,
                    format!(
                        "it matches {what}, not one LUN by its identity: the disks it gives ASM are \
                         protected (under the disk name in their ASM header) only once ASM has written \
                         one, and the import cannot tell which they are"
                    ),
                    fix,
                ));
                }
            }
        }
        for (k, op, v) in &r.terms {
            if k == "RUN" || k == "PROGRAM" && r.get("RESULT").is_none() {
                b.none(
                    format!("line {}: {k}{op}\"{v}\"", r.line),
                    if k == "RUN" && run != RunNode::default() {
                        "asmguard runs no program per device (the node, owner, group and mode it sets are read above)"
                    } else {
                        "asmguard runs no program per device"
                    },
                );
            }
        }
    }
    if perms.is_empty() {
        return Err(format!(
            "{file}: no rule sets OWNER, GROUP, MODE or SYMLINK: is this the ASM disks' rules file?"
        ));
    }
    if by_header && names.is_empty() {
        b.set(
            "devices.manage_asm_members",
            Val::Bool(true),
            "the disks these rules give ASM carry ASM headers and no label: asmguard protects\n\
             them as they are, under the disk name in their header (nothing is written to them).\n\
             Keep the rules file: its links, owner, group and mode stay as they are",
        );
    }
    if !names.is_empty() {
        b.set(
            "devices.manage_asm_members",
            Val::Bool(true),
            "the disks these rules name carry ASM headers and no label: asmguard protects\n\
             them as they are (nothing is written to them). Keep the rules file: its links,\n\
             owner, group and mode stay as they are (ASM's discovery string too)",
        );
        let from: Vec<String> = names
            .iter()
            .map(|x| {
                format!(
                    "line {}: /dev/{} for {} -> /dev/asmguard/disks/{}",
                    x.line, x.shown, x.matched, x.name
                )
            })
            .collect();
        b.set(
            "devices.member_names",
            Val::Table(
                names
                    .iter()
                    .map(|x| (x.lun.clone(), x.name.clone()))
                    .collect(),
            ),
            from.join("\n"),
        );
    }
    // One owner/group/mode for all disks: the most common one among the rules.
    for (i, key, what) in [
        (0, "paths.owner", "OWNER"),
        (1, "paths.group", "GROUP"),
        (2, "paths.mode", "MODE"),
    ] {
        let vals: Vec<(usize, &str)> = perms
            .iter()
            .filter_map(|(line, v)| v[i].as_deref().map(|v| (*line, v)))
            .collect();
        let Some(&(line, _)) = vals.first() else {
            continue;
        };
        let mut best = vals[0].1;
        let mut best_n = 0;
        for (_, v) in &vals {
            let c = vals.iter().filter(|(_, x)| x == v).count();
            if c > best_n {
                best = v;
                best_n = c;
            }
        }
        let mode;
        let value = if i == 2 {
            let ok = !best.is_empty()
                && best.len() <= 4
                && best.chars().all(|c| ('0'..='7').contains(&c));
            if !ok {
                return Err(format!(
                    "{file}:{line}: MODE=\"{best}\" is not an octal mode such as \"0660\""
                ));
            }
            mode = format!("{:0>4}", best);
            mode.as_str()
        } else {
            best
        };
        let lines: Vec<String> = vals
            .iter()
            .filter(|(_, v)| *v == best)
            .map(|(l, _)| l.to_string())
            .collect();
        b.set(
            key,
            Val::Str(value.to_string()),
            format!("{what}=\"{best}\" (line {})", lines.join(", ")),
        );
        for (l, v) in vals.iter().filter(|(_, v)| *v != best) {
            let why = if names.iter().any(|n| n.line == *l) {
                format!(
                    "asmguard has one {} for every disk ({best}); the rule, kept, still sets {v} on its disk's node (it runs after asmguard's rules)",
                    what.to_lowercase()
                )
            } else {
                format!(
                    "asmguard has one {} for every disk: {best} is kept",
                    what.to_lowercase()
                )
            };
            b.none(format!("line {l}: {what}=\"{v}\""), why);
        }
    }
    if let Some(Setting {
        value: Val::Str(o), ..
    }) = b.settings.iter().find(|s| s.key == "paths.owner").cloned()
    {
        let d = defaults();
        b.add_to(
            "filter.allow_users",
            &d.filter.allow_users,
            &o,
            format!("OWNER=\"{o}\": the disks' owner may write them"),
        );
    }
    if let Some(Setting {
        value: Val::Str(g), ..
    }) = b.settings.iter().find(|s| s.key == "paths.group").cloned()
    {
        let d = defaults();
        b.add_to(
            "filter.allow_groups",
            &d.filter.allow_groups,
            &g,
            format!("GROUP=\"{g}\": the disks' group may write them"),
        );
    }
    b.finish(Kind::Udev, file)
}

/// Parse `text` as `kind`.
pub fn parse(
    kind: Kind,
    text: &str,
    file: &str,
    names: &Names,
    host: &[HostDev],
) -> Result<Import, String> {
    match kind {
        Kind::Oracleasm => oracleasm(text, file, names),
        Kind::Afd => afd(text, file),
        Kind::Udev => udev_on(text, file, host),
    }
}

/// Installs `text` at `path`: unchanged when it is there already; refused when
/// another file is there without `force`; with it, the old file is kept as
/// `path.bak.N` (the first N free). Returns what was done.
pub fn install(text: &str, path: &Path, force: bool) -> Result<String, CliError> {
    let shown = path.display();
    match std::fs::read_to_string(path) {
        Ok(old) if old == text => return Ok(format!("{shown}: unchanged")),
        Ok(_) if !force => {
            return Err(CliError::new(
                REFUSED,
                format!("{shown} exists and differs: --force replaces it (the old one is kept as {shown}.bak.N)"),
            ))
        }
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(CliError::new(FAILED, format!("{shown}: cannot read: {e}"))),
    }
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)
        .map_err(|e| CliError::new(FAILED, format!("{}: cannot create: {e}", dir.display())))?;
    let mut backup = None;
    if path.exists() {
        let b = (1..)
            .map(|n| PathBuf::from(format!("{shown}.bak.{n}")))
            .find(|b| !b.exists())
            .unwrap_or_default();
        std::fs::copy(path, &b).map_err(|e| {
            CliError::new(
                FAILED,
                format!("{}: cannot keep a backup: {e}", b.display()),
            )
        })?;
        backup = Some(b);
    }
    let name = path
        .file_name()
        .map(|f| f.to_string_lossy().to_string())
        .unwrap_or_default();
    let tmp = dir.join(format!(".{name}.import"));
    let written = (|| {
        use std::io::Write;
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(text.as_bytes())?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        return Err(CliError::new(FAILED, format!("{shown}: cannot write: {e}")));
    }
    Ok(match backup {
        Some(b) => format!("{shown}: written (the old one is kept as {})", b.display()),
        None => format!("{shown}: written"),
    })
}

/// `asmguardctl import` on the host whose configuration, sysfs and udev
/// database are under `paths` (`main`'s, or a test's tree).
pub fn run_on(a: &ImportArgs, paths: &asmguard_paths::Paths) -> Result<(), CliError> {
    let file = a
        .file
        .clone()
        .unwrap_or_else(|| a.kind.default_file(&paths.etc));
    let shown = file.display().to_string();
    let text = std::fs::read_to_string(&file)
        .map_err(|e| CliError::new(BAD_INPUT, format!("{shown}: cannot read: {e}")))?;
    let user = |id: u32| {
        nix::unistd::User::from_uid(id.into())
            .ok()
            .flatten()
            .map(|u| u.name)
    };
    let group = |id: u32| {
        nix::unistd::Group::from_gid(id.into())
            .ok()
            .flatten()
            .map(|g| g.name)
    };
    let names = Names {
        user: &user,
        group: &group,
    };
    let host = host_devices(paths);
    let imp =
        parse(a.kind, &text, &shown, &names, &host).map_err(|e| CliError::new(BAD_INPUT, e))?;
    let left: Vec<&DiskAnswer> = imp
        .disks
        .iter()
        .filter(|d| d.protected_as.is_none())
        .collect();
    let refused = !left.is_empty() && !a.allow_unprotected;
    // A configuration that leaves a disk unprotected is written only when told.
    let done = if a.write && !refused {
        Some(install(&imp.config, &a.config, a.force)?)
    } else {
        None
    };
    if a.json {
        let mut v = serde_json::to_value(&imp).unwrap_or_default();
        if let Some(d) = &done {
            v["written"] = serde_json::Value::String(d.clone());
        }
        outln!("{}", serde_json::to_string_pretty(&v).unwrap_or_default());
    } else if let Some(d) = done {
        outln!("{d}");
        outln!(
            "next: asmguardd --check-config --config {}; systemctl restart asmguard",
            a.config.display()
        );
    } else {
        out!("{}", imp.config);
    }
    if !a.json {
        for d in &imp.disks {
            errln!("{}", d.line());
        }
    }
    if !refused {
        let conflicts: Vec<&DiskAnswer> =
            imp.disks.iter().filter(|d| d.conflict.is_some()).collect();
        if conflicts.is_empty() {
            return Ok(());
        }
        let named: Vec<String> = conflicts
            .iter()
            .map(|d| format!("{}: {}", d.from, d.conflict.as_deref().unwrap_or("")))
            .collect();
        return Err(CliError::new(
            IMPORT_NAME_CONFLICT,
            format!(
                "{shown}: {} disks are named differently by two rules, each protected under its first rule's name ({}){}",
                conflicts.len(),
                named.join("; "),
                if a.write { "; the configuration was written" } else { "" }
            ),
        ));
    }
    let unwritten = if a.write {
        format!("; {} was not written", a.config.display())
    } else {
        String::new()
    };
    let named: Vec<&str> = left.iter().map(|d| d.from.as_str()).collect();
    Err(CliError::new(
        IMPORT_UNPROTECTED,
        format!(
            "{shown}: {} of the {} disks or rules it gives ASM would be left unprotected ({}; each is named above with the command that fixes it){unwritten}; --allow-unprotected when that is intended",
            left.len(),
            imp.disks.len(),
            named.join("; ")
        ),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `--json`'s per-disk answer: how a protected disk is known (`by`, a
    /// word), why another is not (`why`), never both.
    #[test]
    fn a_disk_answer_is_either_how_or_why() {
        let p = DiskAnswer::protected("line 1: /dev/asm-d1", "ASM_D1", By::AsmHeader);
        let j = serde_json::to_value(&p).unwrap();
        assert_eq!(j["by"], "asm_header");
        assert!(j["why"].is_null() && j["fix"].is_null());
        assert_eq!(
            p.line(),
            "line 1: /dev/asm-d1: protected as ASM_D1 (by asm header)"
        );
        let u = DiskAnswer::unprotected("line 2: sdc", "no key", "asmguardctl label X /dev/sdc");
        let j = serde_json::to_value(&u).unwrap();
        assert!(j["by"].is_null() && j["protected_as"].is_null());
        assert_eq!(j["why"], "no key");
        assert_eq!(
            u.line(),
            "line 2: sdc: NOT protected: no key; asmguardctl label X /dev/sdc"
        );
    }

    fn names() -> Names<'static> {
        Names {
            user: &|id| (id == 54331).then(|| "grid".to_string()),
            group: &|id| (id == 54329).then(|| "asmadmin".to_string()),
        }
    }

    fn get<'a>(i: &'a Import, key: &str) -> &'a Val {
        &i.settings
            .iter()
            .find(|s| s.key == key)
            .unwrap_or_else(|| panic!("{key} not set: {:?}", i.settings))
            .value
    }

    fn strs(v: &[&str]) -> Val {
        Val::List(v.iter().map(|s| s.to_string()).collect())
    }

    const SYSCONFIG: &str = r#"#
# This is a configuration file for automatic loading of the Oracle
# Automatic Storage Management library kernel driver.
#

# ORACLEASM_ENABLED: 'true' means to load the driver on boot.
ORACLEASM_ENABLED=true

# ORACLEASM_UID: Default user owning the /dev/oracleasm mount point.
ORACLEASM_UID=54331

# ORACLEASM_GID: Default group owning the /dev/oracleasm mount point.
ORACLEASM_GID=asmadmin

# ORACLEASM_SCANBOOT: 'true' means scan for ASM disks on boot.
ORACLEASM_SCANBOOT=true

# ORACLEASM_SCANORDER: Matching patterns to order disk scanning
ORACLEASM_SCANORDER="dm"

# ORACLEASM_SCANEXCLUDE: Matching patterns to exclude disks from scan
ORACLEASM_SCANEXCLUDE="sd"

ORACLEASM_SCAN_DIRECTORIES=""
ORACLEASM_USE_LOGICAL_BLOCK_SIZE=false
ORACLEASM_CONFIG_MAX_DISKS=2048
ORACLEASM_ENABLE_IOFILTER=true
"#;

    #[test]
    fn oracleasm_sysconfig_key_by_key() {
        let i = oracleasm(SYSCONFIG, "/etc/sysconfig/oracleasm", &names()).unwrap();
        assert_eq!(get(&i, "paths.owner"), &Val::Str("grid".into()));
        assert_eq!(get(&i, "paths.group"), &Val::Str("asmadmin".into()));
        assert_eq!(get(&i, "socket.admin_group"), &Val::Str("asmadmin".into()));
        assert_eq!(get(&i, "paths.compat"), &strs(&["oracleasm"]));
        // multipath (dm) first, then the rest of the default order without dm-*
        assert_eq!(
            get(&i, "devices.scan_order"),
            &strs(&["dm*", "nvme*", "sd*", "vd*", "xvd*"])
        );
        assert_eq!(
            get(&i, "devices.exclude"),
            &strs(&["ram*", "zram*", "sr*", "fd*", "sd*"])
        );
        assert_eq!(get(&i, "filter.mode"), &Val::Str("enforce".into()));
        let c = asmguard_config::parse(&i.config, "t").unwrap();
        assert_eq!(c.paths.owner, "grid");
        assert_eq!(c.paths.compat, vec!["oracleasm"]);
        assert_eq!(c.devices.exclude.last().unwrap(), "sd*");
        // dm-3 before sdb, and sdb excluded
        let r = c.rules();
        assert!(r.rank("dm-3") < r.rank("sdb"));
        assert!(!r.included("sdb", None) && r.included("dm-3", Some("mpatha")));
        // every setting's source line is in the text, over its key
        assert!(
            i.config.contains(
                "# ORACLEASM_UID=54331 (line 10): owner of the disk links\nowner = \"grid\""
            ),
            "{}",
            i.config
        );
        for k in [
            "ORACLEASM_ENABLED",
            "ORACLEASM_SCANBOOT",
            "ORACLEASM_SCAN_DIRECTORIES",
            "ORACLEASM_USE_LOGICAL_BLOCK_SIZE",
            "ORACLEASM_CONFIG_MAX_DISKS",
        ] {
            assert!(
                i.no_equivalent.iter().any(|u| u.from.starts_with(k)),
                "{k} not reported: {:?}",
                i.no_equivalent
            );
            assert!(i.config.contains(&format!("#   {k}=")), "{k}: {}", i.config);
        }
        // the defaults already allow grid and asmadmin: not repeated
        assert!(!i.settings.iter().any(|s| s.key == "filter.allow_users"));
    }

    #[test]
    fn one_filter_mode_mapping_for_asmlib_and_afd() {
        for (on, mode) in [("true", "enforce"), ("false", "audit")] {
            let a = oracleasm(&format!("ORACLEASM_ENABLE_IOFILTER={on}\n"), "f", &names()).unwrap();
            let d = afd(
                &format!(
                    "afd_filtering={}\n",
                    if on == "true" { "enable" } else { "disable" }
                ),
                "f",
            )
            .unwrap();
            for (i, driver) in [(&a, "ASMLib"), (&d, "AFD")] {
                let s = i.settings.iter().find(|s| s.key == "filter.mode").unwrap();
                assert_eq!(s.value, Val::Str(mode.into()), "{driver} {on}");
                if mode == "audit" {
                    assert!(
                        s.from.contains(&format!("{driver} did not filter")),
                        "{}",
                        s.from
                    );
                }
            }
        }
    }

    #[test]
    fn oracleasm_other_owner_is_allowed_to_write_and_iofilter_off_audits() {
        let t = "ORACLEASM_UID=oracle\nORACLEASM_GID=dba\nORACLEASM_ENABLE_IOFILTER=false\n";
        let i = oracleasm(t, "f", &names()).unwrap();
        assert_eq!(get(&i, "paths.group"), &Val::Str("dba".into()));
        assert_eq!(
            get(&i, "filter.allow_groups"),
            &strs(&["asmadmin", "asmdba", "oinstall", "dba"])
        );
        assert_eq!(get(&i, "filter.mode"), &Val::Str("audit".into()));
        assert!(asmguard_config::parse(&i.config, "t").is_ok());
    }

    #[test]
    fn oracleasm_bad_input_is_one_line_naming_the_line() {
        for (t, want) in [
            (
                "ORACLEASM_UID=12345\n",
                "f:1: ORACLEASM_UID=12345: no user has that number",
            ),
            (
                "ORACLEASM_GID=\"Asm Admin\"\n",
                "f:1: ORACLEASM_GID=\"Asm Admin\" is not a group name",
            ),
            (
                "\n\nORACLEASM_ENABLE_IOFILTER=maybe\n",
                "f:3: ORACLEASM_ENABLE_IOFILTER=\"maybe\"",
            ),
            (
                "ORACLEASM_SCANORDER=\"dm\n",
                "f:1: the quote \" is not closed",
            ),
            (
                "this is not a config\n",
                "f:1: \"this is not a config\" is not a KEY=value line",
            ),
            ("ORACLEASM_SCANORDER=dm sd\n", "f:1: \"sd\" after the value"),
        ] {
            let e = oracleasm(t, "f", &names()).unwrap_err();
            assert!(e.starts_with(want), "{t:?} -> {e}");
            assert!(!e.contains('\n'), "{e}");
        }
    }

    #[test]
    fn afd_conf() {
        let t = "afd_diskstring='/dev/mapper/mpath*','/dev/sd*','/dev/disk/by-id/x*'\nafd_filtering=enable\nafd_debug=1\n";
        let i = afd(t, "/etc/oracleafd.conf").unwrap();
        // The disk string does not narrow what is read: a label is a label.
        assert!(i.settings.iter().all(|s| s.key != "devices.include"));
        let d: Vec<String> = i.disks.iter().map(DiskAnswer::line).collect();
        assert!(
            d[0].starts_with("the disks /dev/mapper/mpath* of afd_diskstring="),
            "{d:?}"
        );
        assert!(
            d[2].starts_with("the disks the links /dev/disk/by-id/x* of "),
            "{d:?}"
        );
        assert!(
            d[3].starts_with("AFD-labelled disks outside afd_diskstring="),
            "{d:?}"
        );
        assert!(
            d.iter()
                .all(|l| l.ends_with("protected as its label (by label)")),
            "{d:?}"
        );
        assert_eq!(get(&i, "filter.mode"), &Val::Str("enforce".into()));
        assert_eq!(get(&i, "paths.compat"), &strs(&["oracleafd"]));
        assert!(i
            .no_equivalent
            .iter()
            .any(|u| u.from.starts_with("afd_debug=1")));
        let c = asmguard_config::parse(&i.config, "t").unwrap();
        assert!(c.rules().included("dm-2", Some("mpatha")));
        assert!(c.rules().included("sdb", None));
        let i = afd("afd_filtering=disable\n", "f").unwrap();
        assert_eq!(get(&i, "filter.mode"), &Val::Str("audit".into()));
        let e = afd("afd_diskstring=''\n", "f").unwrap_err();
        assert!(e.starts_with("f:1: afd_diskstring"), "{e}");
        let e = afd("afd_filtering=sometimes\n", "f").unwrap_err();
        assert!(e.contains("neither true nor false"), "{e}");
    }

    const RULES: &str = r#"# 99-oracle-asmdevices.rules
KERNEL=="sd?1", SUBSYSTEM=="block", PROGRAM=="/usr/lib/udev/scsi_id -g -u -d /dev/$parent", RESULT=="36000c29a1b2c3d4", SYMLINK+="oracleasm/asm-disk1", OWNER="grid", GROUP="asmadmin", MODE="0660"
KERNEL=="sd*", ENV{ID_SERIAL}=="36000c29e5f6a7b8", \
  SYMLINK+="oracleasm/asm-disk2", OWNER="grid", GROUP="asmadmin", MODE="0660"
KERNEL=="dm-*", ENV{DM_UUID}=="mpath-3600a0b80", SYMLINK+="asm_data3", OWNER="grid", GROUP="dba", MODE="0660"
KERNEL=="sd*", ENV{ID_SERIAL}=="3600c0ff*", SYMLINK+="asm-fra1", OWNER="grid", GROUP="asmadmin", MODE="0660"
"#;

    #[test]
    fn udev_rules_owner_group_mode_and_each_disk() {
        let i = udev_on(RULES, "r", &[]).unwrap();
        assert_eq!(get(&i, "paths.owner"), &Val::Str("grid".into()));
        assert_eq!(get(&i, "paths.group"), &Val::Str("asmadmin".into()));
        assert_eq!(get(&i, "paths.mode"), &Val::Str("0660".into()));
        assert!(
            i.config
                .contains("# GROUP=\"asmadmin\" (line 2, 3, 6)\ngroup = \"asmadmin\""),
            "{}",
            i.config
        );
        let un: Vec<String> = i
            .no_equivalent
            .iter()
            .map(|u| format!("{}: {}", u.from, u.why))
            .collect();
        assert!(
            un.iter()
                .any(|u| u.starts_with("line 5: GROUP=\"dba\"") && u.contains("still sets dba")),
            "{un:?}"
        );
        // rules naming one LUN: managed by its ASM header under the rule's name
        assert_eq!(get(&i, "devices.manage_asm_members"), &Val::Bool(true));
        assert_eq!(
            get(&i, "devices.member_names"),
            &Val::Table(
                [
                    ("36000c29a1b2c3d4-part1", "ASM_DISK1"),
                    ("36000c29e5f6a7b8", "ASM_DISK2"),
                    ("3600a0b80", "ASM_DATA3"),
                ]
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
            )
        );
        assert!(
            i.config.contains("# line 2: /dev/oracleasm/asm-disk1 for RESULT==\"36000c29a1b2c3d4\" (scsi_id) -> /dev/asmguard/disks/ASM_DISK1\n"),
            "{}",
            i.config
        );
        assert!(i.config.contains("member_names = { \"36000c29a1b2c3d4-part1\" = \"ASM_DISK1\", \"36000c29e5f6a7b8\" = \"ASM_DISK2\", \"3600a0b80\" = \"ASM_DATA3\" }\n"), "{}", i.config);
        // a pattern names no one LUN: label it
        let d: Vec<String> = i.disks.iter().map(DiskAnswer::line).collect();
        assert!(
            d.iter().any(|u| u.starts_with(
                "line 6: /dev/asm-fra1 for KERNEL==\"sd*\", ENV{ID_SERIAL}==\"3600c0ff*\": NOT protected: "
            ) && u.contains("asmguardctl label ASM_FRA1 DEVICE --migrate")),
            "{d:?}"
        );
        assert!(
            d[0].ends_with(": protected as ASM_DISK1 (by rule)"),
            "{d:?}"
        );
        assert!(!un.iter().any(|u| u.contains("ASM_DISK1")), "{un:?}");
        let c = asmguard_config::parse(&i.config, "t").unwrap();
        assert_eq!(c.rules().asm_members.names["3600a0b80"], "ASM_DATA3");
        // one name for two LUNs: the second is left to a label
        let two = "KERNEL==\"sd*\", ENV{ID_SERIAL}==\"A1\", SYMLINK+=\"d1\", OWNER=\"grid\"\n\
                   KERNEL==\"sd*\", ENV{ID_SERIAL}==\"A2\", SYMLINK+=\"x/d1\", OWNER=\"grid\"\n";
        let i2 = udev_on(two, "r", &[]).unwrap();
        assert!(
            i2.disks.iter().any(|u| u.from.starts_with("line 2:")
                && u.why
                    .as_deref()
                    .is_some_and(|w| w.contains("taken by line 1"))),
            "{:?}",
            i2.disks
        );
        for (t, want) in [
            ("# nothing\n", "r: no rule sets OWNER"),
            ("KERNEL==\"sd*\", MODE=\"rw\"\n", "r:1: MODE=\"rw\""),
            (
                "KERNEL==\"sd*\", OWNER=grid\n",
                "r:1: OWNER=: the value is not in double quotes",
            ),
            (
                "KERNEL==\"sd*\", OWNER=\"grid\n",
                "r:1: OWNER=: the quote is not closed",
            ),
            ("OWNER=\"Grid User\"\n", "the imported configuration"),
        ] {
            let e = udev_on(t, "r", &[]).unwrap_err();
            assert!(e.starts_with(want) || e.contains(want), "{t:?} -> {e}");
            assert!(!e.contains('\n'), "{e}");
        }
    }

    #[test]
    fn install_never_overwrites_without_force_and_keeps_a_backup() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("etc/asmguard.toml");
        assert_eq!(
            install("a\n", &p, false).unwrap(),
            format!("{}: written", p.display())
        );
        assert_eq!(
            install("a\n", &p, false).unwrap(),
            format!("{}: unchanged", p.display())
        );
        let e = install("b\n", &p, false).unwrap_err();
        assert_eq!(e.code, REFUSED);
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "a\n");
        install("b\n", &p, true).unwrap();
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "b\n");
        assert_eq!(
            std::fs::read_to_string(d.path().join("etc/asmguard.toml.bak.1")).unwrap(),
            "a\n"
        );
        install("c\n", &p, true).unwrap();
        assert_eq!(
            std::fs::read_to_string(d.path().join("etc/asmguard.toml.bak.2")).unwrap(),
            "b\n"
        );
    }

    /// What the corpus compares for one file: the exit code, every key set, and
    /// the per-disk answers.
    fn corpus_answer(kind: Kind, text: &str, file: &str) -> String {
        let i = match parse(kind, text, file, &names(), &[]) {
            Ok(i) => i,
            Err(e) => return format!("error: {e}\n"),
        };
        let left = i.disks.iter().any(|d| d.protected_as.is_none());
        let code = if left {
            IMPORT_UNPROTECTED
        } else if i.disks.iter().any(|d| d.conflict.is_some()) {
            IMPORT_NAME_CONFLICT
        } else {
            0
        };
        let mut out = format!("exit: {code}\n");
        for st in &i.settings {
            out.push_str(&format!("set {} = {}\n", st.key, st.value.toml()));
        }
        for d in &i.disks {
            out.push_str(&format!("disk: {}\n", d.line()));
        }
        out
    }

    /// `ctl/tests/import-corpus/`: site configurations of every shape (`.rules`
    /// udev, `.sysconfig` ASMLib, `.afd` AFD), each beside `<file>.expected`, the
    /// answer it must give.
    #[test]
    fn import_corpus_gives_each_file_its_expected_answer() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/import-corpus");
        let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|x| x != "expected"))
            .collect();
        files.sort();
        assert!(
            files.len() >= 15,
            "{} files in {}",
            files.len(),
            dir.display()
        );
        let show = std::env::var_os("IMPORT_CORPUS_SHOW").is_some();
        let mut wrong = Vec::new();
        for f in &files {
            let name = f.file_name().unwrap().to_string_lossy().to_string();
            let kind = match f.extension().and_then(|x| x.to_str()) {
                Some("rules") => Kind::Udev,
                Some("sysconfig") => Kind::Oracleasm,
                Some("afd") => Kind::Afd,
                x => panic!("{name}: extension {x:?} is none of rules, sysconfig, afd"),
            };
            let got = corpus_answer(kind, &std::fs::read_to_string(f).unwrap(), &name);
            if show {
                outln!("==> {name}\n{got}");
            }
            let want = std::fs::read_to_string(dir.join(format!("{name}.expected")))
                .unwrap_or_else(|e| format!("({name}.expected: {e})\n"));
            if got != want {
                wrong.push(format!("{name}:\n--- expected\n{want}--- got\n{got}"));
            }
        }
        assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    }

    /// The multipath recipe that names no LUN (`12-dm-permissions.rules`) in
    /// `dir`, and the arguments of `import udev` on it (the configuration
    /// `dir/asmguard.toml`).
    fn dm_permissions_import(dir: &Path, write: bool, json: bool) -> ImportArgs {
        let f = dir.join("12-dm-permissions.rules");
        std::fs::write(
            &f,
            "ENV{DM_NAME}==\"asm*\", OWNER=\"grid\", MODE=\"0660\"\n",
        )
        .unwrap();
        ImportArgs {
            kind: Kind::Udev,
            file: Some(f),
            write,
            force: false,
            config: dir.join("asmguard.toml"),
            json,
            allow_unprotected: false,
        }
    }

    #[test]
    fn without_a_file_the_kinds_file_is_read_under_the_callers_etc() {
        let d = tempfile::tempdir().unwrap();
        let mut a = dm_permissions_import(d.path(), false, true);
        let rules = a.file.take().unwrap();
        a.allow_unprotected = true;
        let bare = asmguard_paths::Paths::under(d.path());
        // nothing under this tree's etc: the error names its file
        let e = run_on(&a, &bare).unwrap_err();
        let want = bare.etc.join("udev/rules.d/99-oracle-asmdevices.rules");
        assert!(
            e.message.contains(&want.display().to_string()),
            "{}",
            e.message
        );
        std::fs::create_dir_all(want.parent().unwrap()).unwrap();
        std::fs::rename(&rules, &want).unwrap();
        run_on(&a, &bare).unwrap();
    }

    #[test]
    fn run_exits_8_when_a_disk_is_left_unprotected_unless_allowed() {
        let d = tempfile::tempdir().unwrap();
        let mut a = dm_permissions_import(d.path(), false, true);
        let f = a.file.clone().unwrap();
        let bare = asmguard_paths::Paths::under(d.path());
        let e = run_on(&a, &bare).unwrap_err();
        assert_eq!(e.code, IMPORT_UNPROTECTED);
        assert!(
            e.message.contains("1 of the 1 disks or rules"),
            "{}",
            e.message
        );
        assert!(!e.message.contains('\n'), "{}", e.message);
        a.allow_unprotected = true;
        run_on(&a, &bare).unwrap();
        // every disk protected: exit 0 without being told
        std::fs::write(
            &f,
            "ENV{DM_UUID}==\"mpath-3600a\", SYMLINK+=\"asm-d1\", OWNER=\"grid\"\n",
        )
        .unwrap();
        a.allow_unprotected = false;
        run_on(&a, &bare).unwrap();
    }

    /// Two rules naming one LUN differently: one answer for the disk, protected
    /// under its first rule's name, the configuration written, exit 9 with one line
    /// naming both rules and both names.
    #[test]
    fn run_exits_9_when_two_rules_name_one_disk_differently_and_still_writes() {
        let d = tempfile::tempdir().unwrap();
        let mut a = dm_permissions_import(d.path(), true, false);
        std::fs::write(
            a.file.as_ref().unwrap(),
            "ENV{DM_UUID}==\"mpath-3600a\", SYMLINK+=\"asm-d1\", OWNER=\"grid\"\n\
             ENV{DM_UUID}==\"mpath-3600a\", SYMLINK+=\"asm-data1\"\n",
        )
        .unwrap();
        let bare = asmguard_paths::Paths::under(d.path());
        let e = run_on(&a, &bare).unwrap_err();
        assert_eq!(e.code, IMPORT_NAME_CONFLICT, "{}", e.message);
        assert!(!e.message.contains('\n'), "{}", e.message);
        for w in ["line 1", "line 2", "ASM_D1", "ASM_DATA1"] {
            assert!(e.message.contains(w), "{w}: {}", e.message);
        }
        let conf = std::fs::read_to_string(&a.config).unwrap();
        assert!(conf.contains("\"3600a\" = \"ASM_D1\""), "{conf}");
        assert!(!conf.contains("= \"ASM_DATA1\""), "{conf}");
        // the same names: no conflict, exit 0
        std::fs::write(
            a.file.as_ref().unwrap(),
            "ENV{DM_UUID}==\"mpath-3600a\", SYMLINK+=\"asm-d1\", OWNER=\"grid\"\n\
             ENV{DM_UUID}==\"mpath-3600a\", SYMLINK+=\"other/asm-d1\"\n",
        )
        .unwrap();
        a.write = false;
        run_on(&a, &bare).unwrap();
    }

    #[test]
    fn write_writes_nothing_when_a_disk_is_left_unprotected() {
        let d = tempfile::tempdir().unwrap();
        let mut a = dm_permissions_import(d.path(), true, false);
        let conf = a.config.clone();
        let bare = asmguard_paths::Paths::under(d.path());
        let e = run_on(&a, &bare).unwrap_err();
        assert_eq!(e.code, IMPORT_UNPROTECTED);
        assert!(e.message.contains("was not written"), "{}", e.message);
        assert!(e.message.contains("--allow-unprotected"), "{}", e.message);
        assert!(!conf.exists(), "written although the import exited 8");
        // told: written
        a.allow_unprotected = true;
        run_on(&a, &bare).unwrap();
        assert!(conf.exists());
    }

    /// `--write` (even with `--force`) writes nothing when a disk a rule names
    /// carries no header (exit 8): the file absent stays absent, the one there
    /// stays as it was, and the one-line error names the disk and the flag.
    #[test]
    fn write_writes_nothing_when_a_named_disk_carries_no_header() {
        let d = tempfile::tempdir().unwrap();
        fake_host(
            d.path(),
            &[
                ("vdb", "252:16", None, &[("ID_SERIAL", "SER1")]),
                ("vdc", "252:32", None, &[("ID_SERIAL", "SER2")]),
            ],
        );
        let dev = d.path().join("dev");
        std::fs::create_dir_all(&dev).unwrap();
        std::fs::write(dev.join("vdb"), vec![0u8; 4096]).unwrap();
        let mut b = vec![0u8; 4096];
        asmguard_format::label::write(
            &mut b,
            &asmguard_format::label::Label::new("ASM_DISK2").unwrap(),
        )
        .unwrap();
        std::fs::write(dev.join("vdc"), &b).unwrap();
        let f = d.path().join("99-oracle-asmdevices.rules");
        std::fs::write(
            &f,
            "KERNEL==\"vd?\", ENV{ID_SERIAL}==\"SER1\", SYMLINK+=\"asm-disk1\", OWNER=\"grid\"\n\
             KERNEL==\"vd?\", ENV{ID_SERIAL}==\"SER2\", SYMLINK+=\"asm-disk2\", OWNER=\"grid\"\n",
        )
        .unwrap();
        let mut a = ImportArgs {
            kind: Kind::Udev,
            file: Some(f),
            write: true,
            force: false,
            config: d.path().join("asmguard.toml"),
            json: false,
            allow_unprotected: false,
        };
        let host = asmguard_paths::Paths::under(d.path());
        let e = run_on(&a, &host).unwrap_err();
        assert_eq!(e.code, IMPORT_UNPROTECTED);
        assert!(!e.message.contains('\n'), "{}", e.message);
        assert!(e.message.contains("/dev/vdb"), "{}", e.message);
        assert!(!e.message.contains("/dev/vdc"), "{}", e.message);
        assert!(e.message.contains("--allow-unprotected"), "{}", e.message);
        assert!(!a.config.exists(), "written although the import exited 8");
        // a configuration there already, --force: left as it was, no backup
        std::fs::write(&a.config, "# the site's own\n").unwrap();
        a.force = true;
        let e = run_on(&a, &host).unwrap_err();
        assert_eq!(e.code, IMPORT_UNPROTECTED);
        assert_eq!(
            std::fs::read_to_string(&a.config).unwrap(),
            "# the site's own\n"
        );
        assert!(!d.path().join("asmguard.toml.bak.1").exists());
        // told: written
        a.allow_unprotected = true;
        run_on(&a, &host).unwrap();
        assert!(std::fs::read_to_string(&a.config)
            .unwrap()
            .contains("ASM_DISK2"));
    }

    /// A rule names a disk that carries no header: the daemon would not manage
    /// it, so the import does not call it protected (block 0 read from the
    /// host's node).
    #[test]
    fn a_disk_a_rule_names_without_a_header_is_not_protected() {
        let d = tempfile::tempdir().unwrap();
        fake_host(
            d.path(),
            &[
                ("vdb", "252:16", None, &[("ID_SERIAL", "SER1")]),
                ("vdc", "252:32", None, &[("ID_SERIAL", "SER2")]),
                ("vdd", "252:48", None, &[("ID_SERIAL", "SER3")]),
                // a second path of vdc's LUN whose block 0 reads as zeros
                // (a stale read): the LUN still counts as labelled
                ("vde", "252:64", None, &[("ID_SERIAL", "SER2")]),
            ],
        );
        let dev = d.path().join("dev");
        std::fs::create_dir_all(&dev).unwrap();
        // vdb: zeros; vdc: a label; vdd: not readable (no node): unchecked
        std::fs::write(dev.join("vdb"), vec![0u8; 4096]).unwrap();
        let mut b = vec![0u8; 4096];
        asmguard_format::label::write(
            &mut b,
            &asmguard_format::label::Label::new("ASM_DISK2").unwrap(),
        )
        .unwrap();
        std::fs::write(dev.join("vdc"), &b).unwrap();
        std::fs::write(dev.join("vde"), vec![0u8; 4096]).unwrap();
        let host = host_devices(&asmguard_paths::Paths::under(d.path()));
        assert_eq!(
            host.iter().map(|h| h.managed_block0).collect::<Vec<_>>(),
            [Some(false), Some(true), None, Some(false)]
        );
        let rules = "KERNEL==\"vd?\", ENV{ID_SERIAL}==\"SER1\", SYMLINK+=\"asm-disk1\", OWNER=\"grid\"\n\
                     KERNEL==\"vd?\", ENV{ID_SERIAL}==\"SER2\", SYMLINK+=\"asm-disk2\", OWNER=\"grid\"\n\
                     KERNEL==\"vdb\", OWNER=\"grid\"\n";
        let i = udev_on(rules, "r", &host).unwrap();
        let lines: Vec<String> = i.disks.iter().map(DiskAnswer::line).collect();
        assert_eq!(lines.len(), 3, "{lines:?}");
        assert!(
            lines[0]
                .contains("NOT protected: /dev/vdb carries neither a label nor an ASM disk header")
                && lines[0].ends_with("asmguardctl label ASM_DISK1 /dev/vdb"),
            "{lines:?}"
        );
        assert!(
            lines[1].ends_with("protected as ASM_DISK2 (by rule)"),
            "{lines:?}"
        );
        assert!(
            lines[2].contains("/dev/vdb: NOT protected: /dev/vdb carries neither"),
            "{lines:?}"
        );
    }

    /// A rule that names its LUN by `ENV{ID_WWN}` or `ENV{ID_SCSI_SERIAL}` (keys
    /// the daemon looks a name up by) is checked like one by `ID_SERIAL`: a disk
    /// it gives ASM that carries neither a label nor an ASM header is NOT
    /// protected, with the label command.
    #[test]
    fn a_disk_a_rule_names_by_id_wwn_or_scsi_serial_without_a_header_is_not_protected() {
        let d = tempfile::tempdir().unwrap();
        fake_host(
            d.path(),
            &[
                (
                    "sdb",
                    "8:16",
                    None,
                    &[("ID_SERIAL", "3600a"), ("ID_WWN", "0x600a")],
                ),
                (
                    "sdc",
                    "8:32",
                    None,
                    &[("ID_SERIAL", "3600b"), ("ID_SCSI_SERIAL", "SN-B")],
                ),
                (
                    "sdd",
                    "8:48",
                    None,
                    &[("ID_SERIAL", "3600c"), ("ID_WWN", "0x600c")],
                ),
                (
                    "sde",
                    "8:64",
                    None,
                    &[("ID_SERIAL", "3600e"), ("ID_WWN", "0x600e")],
                ),
                (
                    "sde1",
                    "8:65",
                    Some(1),
                    &[("ID_SERIAL", "3600e"), ("ID_WWN", "0x600e")],
                ),
            ],
        );
        let dev = d.path().join("dev");
        std::fs::create_dir_all(&dev).unwrap();
        let mut labelled = vec![0u8; 4096];
        asmguard_format::label::write(
            &mut labelled,
            &asmguard_format::label::Label::new("ASM_DISK3").unwrap(),
        )
        .unwrap();
        for (n, b) in [
            ("sdb", vec![0u8; 4096]),
            ("sdc", vec![0u8; 4096]),
            ("sdd", labelled),
            ("sde", vec![0u8; 4096]),
            ("sde1", vec![0u8; 4096]),
        ] {
            std::fs::write(dev.join(n), b).unwrap();
        }
        let host = host_devices(&asmguard_paths::Paths::under(d.path()));
        let rules = "ENV{ID_WWN}==\"0x600a\", SYMLINK+=\"asm-disk1\", OWNER=\"grid\"\n\
                     ENV{ID_SCSI_SERIAL}==\"SN-B\", OWNER=\"grid\"\n\
                     ENV{ID_WWN}==\"0x600c\", SYMLINK+=\"asm-disk3\", OWNER=\"grid\"\n\
                     KERNEL==\"sd?1\", ENV{ID_WWN}==\"0x600e\", SYMLINK+=\"asm-disk4\", OWNER=\"grid\"\n";
        let i = udev_on(rules, "r", &host).unwrap();
        let lines: Vec<String> = i.disks.iter().map(DiskAnswer::line).collect();
        assert_eq!(lines.len(), 4, "{lines:?}");
        let not = |l: &str, dev: &str, fix: &str| {
            l.contains(&format!(
                "NOT protected: /dev/{dev} carries neither a label nor an ASM disk header"
            )) && l.ends_with(fix)
        };
        assert!(
            not(&lines[0], "sdb", "asmguardctl label ASM_DISK1 /dev/sdb"),
            "{lines:?}"
        );
        assert!(
            not(&lines[1], "sdc", "asmguardctl label ASM_SDC /dev/sdc"),
            "{lines:?}"
        );
        assert!(
            lines[2].ends_with("protected as ASM_DISK3 (by rule)"),
            "{lines:?}"
        );
        assert!(
            not(&lines[3], "sde1", "asmguardctl label ASM_DISK4 /dev/sde1"),
            "{lines:?}"
        );
    }

    /// A host under `root`: sysfs devices (name, major:minor, partition number)
    /// and their udev database entries.
    type FakeDev<'a> = (&'a str, &'a str, Option<u32>, &'a [(&'a str, &'a str)]);

    fn fake_host(root: &Path, devs: &[FakeDev]) {
        let paths = asmguard_paths::Paths::under(root);
        for (name, dev, part, props) in devs {
            let d = paths.class_block().join(name);
            std::fs::create_dir_all(&d).unwrap();
            std::fs::write(d.join("dev"), format!("{dev}\n")).unwrap();
            if let Some(n) = part {
                std::fs::write(d.join("partition"), format!("{n}\n")).unwrap();
            }
            let db = paths.run.join("udev/data");
            std::fs::create_dir_all(&db).unwrap();
            let e: String = props.iter().map(|(k, v)| format!("E:{k}={v}\n")).collect();
            std::fs::write(db.join(format!("b{dev}")), format!("S:disk/x\n{e}")).unwrap();
        }
    }

    /// A device udev gives no identity (a null_blk disk) that a rule matches by
    /// its kernel name is still protected when its block 0 is an ASM disk header:
    /// the daemon manages it under the header's disk name. One with none is not.
    #[test]
    fn a_device_with_no_identity_but_an_asm_header_is_protected_by_it() {
        let d = tempfile::tempdir().unwrap();
        fake_host(
            d.path(),
            &[("mg1", "252:0", None, &[]), ("mg2", "252:1", None, &[])],
        );
        let dev = d.path().join("dev");
        std::fs::create_dir_all(&dev).unwrap();
        let v = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../crates/format/tests/vectors/linux-dm39-first96.bin");
        let mut b = std::fs::read(v).unwrap();
        b.resize(4096, 0);
        std::fs::write(dev.join("mg1"), &b).unwrap();
        std::fs::write(dev.join("mg2"), vec![0u8; 4096]).unwrap();
        let host = host_devices(&asmguard_paths::Paths::under(d.path()));
        let rules = "KERNEL==\"mg1\", NAME=\"asm-nullb\", OWNER=\"grid\", GROUP=\"asmadmin\", MODE=\"0660\"\n\
                     KERNEL==\"mg2\", OWNER=\"grid\"\n";
        let i = udev_on(rules, "r", &host).unwrap();
        let lines: Vec<String> = i.disks.iter().map(DiskAnswer::line).collect();
        assert_eq!(
            lines,
            [
                "line 1: /dev/asm-nullb for KERNEL==\"mg1\": /dev/mg1: protected as the disk name in its ASM header (by asm header)",
                "line 2: KERNEL==\"mg2\": /dev/mg2: NOT protected: udev reports no ID_SERIAL or multipath WWID for it; asmguardctl label ASM_MG2 /dev/mg2 --migrate (keeps its ASM header)",
            ],
            "{lines:?}"
        );
        assert!(i
            .settings
            .iter()
            .any(|s| s.key == "devices.manage_asm_members" && s.value == Val::Bool(true)));
    }

    #[test]
    fn pattern_rules_resolved_against_the_hosts_udev_database() {
        let d = tempfile::tempdir().unwrap();
        fake_host(
            d.path(),
            &[
                (
                    "dm-0",
                    "253:0",
                    None,
                    &[("DM_NAME", "asmdata1"), ("DM_UUID", "mpath-3600a1")],
                ),
                (
                    "dm-1",
                    "253:1",
                    None,
                    &[("DM_NAME", "asmfra1"), ("DM_UUID", "mpath-3600a2")],
                ),
                (
                    "dm-2",
                    "253:2",
                    None,
                    &[("DM_NAME", "vg-root"), ("DM_UUID", "LVM-xyz")],
                ),
                ("vdb", "252:16", None, &[("ID_SERIAL", "VDB-SER")]),
                (
                    "vdb1",
                    "252:17",
                    Some(1),
                    &[("ID_SERIAL", "VDB-SER"), ("DEVTYPE", "partition")],
                ),
                (
                    "vdb2",
                    "252:18",
                    Some(2),
                    &[("ID_SERIAL", "VDB-SER"), ("DEVTYPE", "partition")],
                ),
                ("vdc", "252:32", None, &[]),
            ],
        );
        let host = host_devices(&asmguard_paths::Paths::under(d.path()));
        assert_eq!(host.len(), 7);
        let rules = "ENV{DM_NAME}==\"asm*\", OWNER:=\"grid\", GROUP:=\"asmadmin\", MODE:=\"660\"\n\
                     KERNEL==\"vdb2\", NAME=\"asm-disk2\", OWNER=\"grid\"\n\
                     KERNEL==\"vdc\", OWNER=\"grid\"\n\
                     KERNEL==\"sdz\", OWNER=\"grid\"\n\
                     KERNEL==\"vd*\", ATTR{size}==\"1024\", OWNER=\"grid\"\n";
        let i = udev_on(rules, "r", &host).unwrap();
        let lines: Vec<String> = i.disks.iter().map(DiskAnswer::line).collect();
        assert_eq!(
            lines,
            [
                "line 1: ENV{DM_NAME}==\"asm*\": /dev/dm-0: protected as ASMDATA1 (by rule)",
                "line 1: ENV{DM_NAME}==\"asm*\": /dev/dm-1: protected as ASMFRA1 (by rule)",
                "line 2: /dev/asm-disk2 for KERNEL==\"vdb2\": /dev/vdb2: protected as ASM_DISK2 (by rule)",
                "line 3: KERNEL==\"vdc\": /dev/vdc: NOT protected: udev reports no ID_SERIAL or multipath WWID for it; asmguardctl label ASM_VDC /dev/vdc --migrate (keeps its ASM header)",
                "line 4: KERNEL==\"sdz\": NOT protected: it matches no device on this host; run the import where the disks are attached",
                "line 5: KERNEL==\"vd*\", ATTR{size}==\"1024\": NOT protected: it matches KERNEL==\"vd*\", ATTR{size}==\"1024\", not one LUN by its identity: the disks it gives ASM are protected (under the disk name in their ASM header) only once ASM has written one, and the import cannot tell which they are; asmguardctl label NAME DEVICE --migrate for each disk it matches (keeps its ASM header)",
            ],
            "{lines:?}"
        );
        // line 5: a term the database cannot answer (ATTR) keeps the pattern's answer
        assert_eq!(
            get(&i, "devices.member_names"),
            &Val::Table(
                [
                    ("3600a1", "ASMDATA1"),
                    ("3600a2", "ASMFRA1"),
                    ("VDB-SER-part2", "ASM_DISK2")
                ]
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
            )
        );
    }
}
