//! The allow-list's user and group names to numeric ids, through NSS
//! (`getpwnam_r`/`getgrnam_r`), so that users from LDAP, SSSD or extrausers
//! resolve exactly as they do for a login. A number stands for itself.
//!
//! Not for authorising socket peers: the daemon's server takes their ids from
//! the kernel (`SO_PEERCRED`, `SO_PEERGROUPS`).

use nix::unistd::{Group, User};

/// The uid of a user name (or a number), `Err` naming what is wrong.
pub fn uid_of(name: &str) -> Result<u32, String> {
    id_of(name, ("user", "passwd"), |n| {
        User::from_name(n).map(|u| u.map(|u| u.uid.as_raw()))
    })
}

/// The gid of a group name (or a number), `Err` naming what is wrong.
pub fn gid_of(name: &str) -> Result<u32, String> {
    id_of(name, ("group", "group"), |n| {
        Group::from_name(n).map(|g| g.map(|g| g.gid.as_raw()))
    })
}

/// The uids of a group's listed members (NSS `gr_mem`; a member that does
/// not resolve is left out). Users whose primary group it is are not listed
/// there, and need not be: their gid says so.
pub fn member_uids(gid: u32) -> Vec<u32> {
    match Group::from_gid(nix::unistd::Gid::from_raw(gid)) {
        Ok(Some(g)) => g.mem.iter().filter_map(|m| uid_of(m).ok()).collect(),
        _ => Vec::new(),
    }
}

/// A number as it is, else `lookup` through NSS; `(what, database)` name it in errors.
fn id_of(
    name: &str,
    (what, db): (&str, &str),
    lookup: impl FnOnce(&str) -> nix::Result<Option<u32>>,
) -> Result<u32, String> {
    if let Ok(n) = name.parse() {
        return Ok(n);
    }
    match lookup(name) {
        Ok(Some(id)) => Ok(id),
        Ok(None) => Err(format!("{what} {name} does not exist (NSS {db})")),
        Err(e) => Err(format!("{what} {name}: NSS lookup failed: {e}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;
    use std::process::Command;

    #[test]
    fn names_numbers_and_unknowns() {
        assert_eq!(uid_of("root"), Ok(0));
        assert_eq!(gid_of("root"), Ok(0));
        assert_eq!(uid_of("54331"), Ok(54331));
        let e = uid_of("no-such-user-asmguard").unwrap_err();
        assert!(e.contains("does not exist"), "{e}");
        let e = gid_of("no-such-group-asmguard").unwrap_err();
        assert!(e.contains("does not exist"), "{e}");
    }

    /// The child half of `extrausers_accounts_resolve`: runs inside a private
    /// mount namespace where nsswitch.conf lists extrausers (ignored in normal
    /// runs: the parent runs it with `--ignored`).
    #[test]
    #[ignore = "run by extrausers_accounts_resolve inside its namespace"]
    fn extrausers_child() {
        assert!(std::env::var_os("ASMGUARD_NSS_CHILD").is_some());
        assert_eq!(uid_of("ldapgrid"), Ok(54399));
        assert_eq!(gid_of("ldapasm"), Ok(54398));
        // members as listed (a member that does not resolve is left out)
        assert_eq!(member_uids(54398), vec![54399]);
        assert_eq!(member_uids(54397), vec![54399]);
        assert!(member_uids(0x7fff_fff0).is_empty(), "a gid no group has");
    }

    /// An account that exists only in libnss-extrausers' files (as on hosts whose
    /// grid/oracle users come from a directory) resolves. The machine's own
    /// nsswitch.conf is left alone: a private mount namespace sees a copy that
    /// lists extrausers and a private /var/lib/extrausers.
    #[test]
    fn extrausers_accounts_resolve() {
        let so = [
            "/usr/lib",
            "/lib",
            "/lib/x86_64-linux-gnu",
            "/usr/lib/x86_64-linux-gnu",
            "/lib64",
            "/usr/lib64",
        ]
        .iter()
        .any(|d| Path::new(d).join("libnss_extrausers.so.2").exists());
        assert!(
            so,
            "libnss-extrausers is not installed: run scripts/deps.sh (it installs it)"
        );
        let unshare_ok = Command::new("unshare")
            .args(["-m", "true"])
            .status()
            .map(|s| s.success())
            .unwrap_or(false);
        assert!(
            unshare_ok,
            "unshare -m failed: the test needs root for a private mount namespace"
        );
        // Without the module listed, the name is unknown (the test is not
        // answered by some other source).
        assert!(uid_of("ldapgrid").is_err());
        let dir = std::env::temp_dir().join(format!("asmguard-nss-{}", std::process::id()));
        let eu = dir.join("extrausers");
        std::fs::create_dir_all(&eu).unwrap();
        let nss = std::fs::read_to_string("/etc/nsswitch.conf").unwrap_or_default();
        let mut conf = String::new();
        for l in nss.lines() {
            let db = l.split(':').next().unwrap_or("").trim();
            if (db == "passwd" || db == "group") && !l.contains("extrausers") {
                conf.push_str(&format!("{l} extrausers\n"));
            } else {
                conf.push_str(l);
                conf.push('\n');
            }
        }
        if !conf.lines().any(|l| l.starts_with("passwd:")) {
            conf.push_str("passwd: files extrausers\ngroup: files extrausers\n");
        }
        std::fs::write(dir.join("nsswitch.conf"), conf).unwrap();
        std::fs::write(
            eu.join("passwd"),
            "ldapgrid:x:54399:54398::/home/ldapgrid:/bin/sh\n",
        )
        .unwrap();
        std::fs::write(
            eu.join("group"),
            "ldapasm:x:54398:ldapgrid\nldapdba:x:54397:nosuchuser,ldapgrid\n",
        )
        .unwrap();
        std::fs::write(eu.join("shadow"), "").unwrap();
        let exe = std::env::current_exe().unwrap();
        let script = format!(
            "mount --bind {d}/nsswitch.conf /etc/nsswitch.conf && \
             mount --bind {d}/extrausers /var/lib/extrausers && exec \"$0\" \
             --exact apply::filter::identity::tests::extrausers_child --ignored --test-threads=1",
            d = dir.display()
        );
        // Without a mount point for the module's files: a private tmpfs on /var/lib.
        let script = if Path::new("/var/lib/extrausers").is_dir() {
            script
        } else {
            format!("mount -t tmpfs none /var/lib && mkdir /var/lib/extrausers && {script}")
        };
        let out = Command::new("unshare")
            .args(["-m", "--propagation", "private", "sh", "-c", &script])
            .arg(&exe)
            .env("ASMGUARD_NSS_CHILD", "1")
            .output()
            .unwrap();
        let _ = std::fs::remove_dir_all(&dir);
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && text.contains("1 passed"),
            "child failed: {text}{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}
