//! The two files that name Oracle homes: `/etc/oratab` and `/etc/oracle/olr.loc`.
//!
//! Both parsers take bytes (the files are not guaranteed UTF-8, and a home path is an
//! `OsStr`), never panic, and report a malformed line as one problem line instead of
//! stopping: one bad line must not cost the other homes their rule.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;

/// One `SID:ORACLE_HOME:FLAG` line of `/etc/oratab`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OratabEntry {
    /// 1-based line number, for problem lines.
    pub line: usize,
    /// The SID as written: `ORCL`, `+ASM`, `+ASM1`, `-MGMTDB`, `*` (a home with no
    /// instance). Not validated: the SID does not decide whether a home is allowed.
    pub sid: String,
    /// The home as written (trailing slashes removed).
    pub home: PathBuf,
}

impl OratabEntry {
    /// An ASM instance (`+ASM`, `+ASM1`, ...): since 11.2 ASM runs only from the Grid
    /// home, so its home is a Grid home.
    pub fn is_asm(&self) -> bool {
        self.sid.starts_with("+ASM")
    }
}

fn trim(mut b: &[u8]) -> &[u8] {
    while let [first, rest @ ..] = b {
        if first.is_ascii_whitespace() {
            b = rest;
        } else {
            break;
        }
    }
    while let [rest @ .., last] = b {
        if last.is_ascii_whitespace() {
            b = rest;
        } else {
            break;
        }
    }
    b
}

fn home_path(b: &[u8]) -> PathBuf {
    let mut b = trim(b);
    while b.len() > 1 && b.ends_with(b"/") {
        b = &b[..b.len() - 1];
    }
    PathBuf::from(OsStr::from_bytes(b))
}

/// Parses `/etc/oratab`: `SID:ORACLE_HOME:Y|N` lines; `#` starts a comment (to the end
/// of the line), blank lines are skipped, the third field is not checked (`Y`, `N`,
/// and the `W` of old releases are all seen). A line without a home is a problem
/// (`name` is the file's name in the message). Duplicates are kept here; [`crate::discover`]
/// takes each home once.
pub fn parse_oratab(text: &[u8], name: &str) -> (Vec<OratabEntry>, Vec<String>) {
    let mut entries = Vec::new();
    let mut problems = Vec::new();
    for (i, raw) in text.split(|&c| c == b'\n').enumerate() {
        let line = match raw.iter().position(|&c| c == b'#') {
            Some(at) => &raw[..at],
            None => raw,
        };
        let line = trim(line);
        if line.is_empty() {
            continue;
        }
        let mut fields = line.splitn(3, |&c| c == b':');
        let sid = trim(fields.next().unwrap_or_default());
        let home = fields.next().map(trim).unwrap_or_default();
        if home.is_empty() {
            problems.push(format!(
                "{name} line {}: expected SID:ORACLE_HOME:Y|N, found {:?}: line ignored, fix or remove it",
                i + 1,
                String::from_utf8_lossy(line)
            ));
            continue;
        }
        entries.push(OratabEntry {
            line: i + 1,
            sid: String::from_utf8_lossy(sid).into_owned(),
            home: home_path(home),
        });
    }
    (entries, problems)
}

/// The Grid home of `/etc/oracle/olr.loc` (written by the Grid home's `root.sh`):
/// the value of its first `crs_home=` line, `None` without one.
pub fn parse_olr_loc(text: &[u8]) -> Option<PathBuf> {
    text.split(|&c| c == b'\n').find_map(|raw| {
        let line = trim(raw);
        let value = line.strip_prefix(b"crs_home")?;
        let value = trim(value).strip_prefix(b"=")?;
        let value = trim(value);
        (!value.is_empty()).then(|| home_path(value))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn oratab_lines_comments_and_special_sids() {
        let text = b"# comment line\n\n  \n+ASM:/u01/app/19c/grid:N   # the ASM\n\
-MGMTDB:/u01/app/19c/grid:N\nORCL:/u01/app/oracle/product/19c/dbhome_1/:Y\n\
*:/u01/app/oracle/product/21c:N\r\nbroken line\nNOHOME::Y\n";
        let (e, p) = parse_oratab(text, "/etc/oratab");
        let got: Vec<(&str, &str, usize)> = e
            .iter()
            .map(|e| (e.sid.as_str(), e.home.to_str().unwrap(), e.line))
            .collect();
        assert_eq!(
            got,
            vec![
                ("+ASM", "/u01/app/19c/grid", 4),
                ("-MGMTDB", "/u01/app/19c/grid", 5),
                ("ORCL", "/u01/app/oracle/product/19c/dbhome_1", 6),
                ("*", "/u01/app/oracle/product/21c", 7),
            ]
        );
        assert!(e[0].is_asm() && !e[1].is_asm() && !e[2].is_asm());
        assert_eq!(p.len(), 2, "{p:?}");
        assert!(p[0].starts_with("/etc/oratab line 8:"), "{p:?}");
        assert!(p[1].starts_with("/etc/oratab line 9:"), "{p:?}");
    }

    #[test]
    fn olr_loc_crs_home() {
        let text = b"olrconfig_loc=/u01/app/19c/grid/cdata/host1.olr\ncrs_home=/u01/app/19c/grid\n";
        assert_eq!(
            parse_olr_loc(text),
            Some(PathBuf::from("/u01/app/19c/grid"))
        );
        assert_eq!(
            parse_olr_loc(b" crs_home = /g/ \n"),
            Some(PathBuf::from("/g"))
        );
        assert_eq!(parse_olr_loc(b"olrconfig_loc=/x\n"), None);
        assert_eq!(parse_olr_loc(b"crs_home=\n"), None);
        assert_eq!(parse_olr_loc(b"crs_homeX=/a\n"), None);
    }

    proptest! {
        #[test]
        fn oratab_parser_never_panics(text in proptest::collection::vec(any::<u8>(), 0..512)) {
            let (entries, problems) = parse_oratab(&text, "oratab");
            for e in &entries {
                prop_assert!(!e.home.as_os_str().is_empty());
            }
            let lines = text.split(|&c| c == b'\n').count();
            prop_assert!(entries.len() + problems.len() <= lines);
            let _ = parse_olr_loc(&text);
        }

        #[test]
        fn oratab_parser_reads_what_was_written(
            sid in "[+*-]?[A-Z][A-Z0-9_]{0,8}",
            home in "(/[a-z0-9._]{1,8}){1,5}",
            flag in "[YN]",
        ) {
            let text = format!("# header\n{sid}:{home}:{flag}\n");
            let (entries, problems) = parse_oratab(text.as_bytes(), "oratab");
            prop_assert!(problems.is_empty());
            prop_assert_eq!(entries.len(), 1);
            prop_assert_eq!(&entries[0].sid, &sid);
            prop_assert_eq!(entries[0].home.to_str().unwrap(), home.as_str());
        }
    }
}
