//! The allow-list's user and group names to numeric ids, through NSS
//! (`getpwnam_r`/`getgrnam_r`), so that users from LDAP, SSSD or extrausers
//! resolve exactly as they do for a login. A number stands for itself.
//!
//! Not for authorising socket peers: the daemon's server takes their ids from
//! the kernel (`SO_PEERCRED`, `SO_PEERGROUPS`).

use nix::unistd::{Group, User};

/// The uid of a user name (or a number), `Err` naming what is wrong.
pub fn uid_of(name: &str) -> Result<u32, String> {
    if let Ok(n) = name.parse() {
        return Ok(n);
    }
    match User::from_name(name) {
        Ok(Some(u)) => Ok(u.uid.as_raw()),
        Ok(None) => Err(format!("user {name} does not exist (NSS passwd)")),
        Err(e) => Err(format!("user {name}: NSS lookup failed: {e}")),
    }
}

/// The gid of a group name (or a number), `Err` naming what is wrong.
pub fn gid_of(name: &str) -> Result<u32, String> {
    if let Ok(n) = name.parse() {
        return Ok(n);
    }
    match Group::from_name(name) {
        Ok(Some(g)) => Ok(g.gid.as_raw()),
        Ok(None) => Err(format!("group {name} does not exist (NSS group)")),
        Err(e) => Err(format!("group {name}: NSS lookup failed: {e}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
