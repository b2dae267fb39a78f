//! What a valid configuration may still get wrong: names that do not resolve
//! now (they may later: an LDAP user, a group created after the install), an
//! allow-list that lets no one write, metrics served to every network, a
//! running container whose id maps reach a host user's `/etc/subuid` or
//! `/etc/subgid` range (`asmguard_containers::subid`). Each is
//! one warning line naming the key; `--check-config` prints them and exits 0,
//! the daemon logs them at start. What cannot work is an error of
//! `asmguard_config::parse`, never a warning.

use crate::apply::filter::identity::{gid_of, uid_of};
use asmguard_config::Config;

/// One line per doubtful setting, in the order of the file's sections.
pub fn warnings(c: &Config, file: &str, paths: &asmguard_paths::Paths) -> Vec<String> {
    let mut out = Vec::new();
    let mut unresolved = |key: &str, r: Result<u32, String>| {
        if let Err(e) = r {
            out.push(format!(
                "{file}: key `{key}`: {e}: it takes effect only once it resolves (a directory user or group appears when NSS finds it)"
            ));
        }
    };
    unresolved("paths.owner", uid_of(&c.paths.owner));
    unresolved("paths.group", gid_of(&c.paths.group));
    unresolved("socket.admin_group", gid_of(&c.socket.admin_group));
    for u in &c.filter.allow_users {
        unresolved("filter.allow_users", uid_of(u));
    }
    for g in &c.filter.allow_groups {
        unresolved("filter.allow_groups", gid_of(g));
    }
    let f = &c.filter;
    let homes_off = f.oracle_homes == asmguard_config::OracleHomes::Word("off".into());
    if f.mode != asmguard_config::FilterMode::Off
        && f.allow_users.is_empty()
        && f.allow_groups.is_empty()
        && f.allow_executables.is_empty()
        && c.rule.is_empty()
    {
        if homes_off {
            out.push(format!(
                "{file}: key `filter.allow_users`: the allow-list is empty (allow_users, allow_groups, allow_executables, no [[rule]], oracle_homes off): in mode {} no process but asmguardd may write to a managed disk, ASM included",
                f.mode
            ));
        } else {
            let homes = asmguard_homes::discover(&paths.root, &crate::apply::filter::homes_spec(f));
            if homes.homes.is_empty() {
                out.push(format!(
                    "{file}: key `filter.oracle_homes`: only the Oracle homes' binaries may write, and none is found now: ASM can write once Grid Infrastructure's root.sh writes /etc/oracle/olr.loc (or a home is in /etc/oratab); it is picked up within a second"
                ));
            }
        }
    }
    let (_, notes) =
        crate::apply::filter::describe_rules(c, &asmguard_homes::Found::default(), false);
    out.extend(notes.into_iter().map(|n| format!("{file}: {n}")));
    // containers running now whose maps reach a host user's subordinate ids
    if let (false, Ok(root)) = (
        c.container.is_empty(),
        asmguard_guard::guard::cgroup2_root(&paths.proc),
    ) {
        for ctr in &c.container {
            let f = asmguard_containers::find(&paths.proc, &root, ctr);
            if f.pid.is_some() {
                out.extend(
                    asmguard_containers::subid::host_warnings(&f, &paths.etc)
                        .into_iter()
                        .map(|w| format!("{file}: [[container]] {}: {w}", ctr.name)),
                );
            }
        }
    }
    if let Ok(a) = c.metrics.listen.parse::<std::net::SocketAddr>() {
        if a.ip().is_unspecified() {
            out.push(format!(
                "{file}: key `metrics.listen`: {a} serves the metrics to every network this host is on: listen on 127.0.0.1 or one address unless that is meant"
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_doubtful_setting_is_one_warning_naming_its_key() {
        let c = asmguard_config::parse(
            "[paths]\nowner = \"root\"\ngroup = \"root\"\n[socket]\nadmin_group = \"root\"\n\
             [filter]\nallow_users = [\"root\", \"nosuchuser_ag\"]\nallow_groups = [\"nosuchgroup_ag\"]\n",
            "t.toml",
        )
        .unwrap();
        let w = warnings(&c, "t.toml", &asmguard_paths::Paths::default());
        assert_eq!(w.len(), 3, "{w:#?}");
        assert!(w[0].contains("`filter.allow_users`") && w[0].contains("nosuchuser_ag"));
        assert!(w[1].contains("`filter.allow_groups`") && w[1].contains("nosuchgroup_ag"));
        assert!(w[2].contains("any process of those users") && w[2].contains("dd"));

        let c = asmguard_config::parse(
            "[paths]\nowner = \"root\"\ngroup = \"root\"\n[socket]\nadmin_group = \"root\"\n\
             [metrics]\nlisten = \"0.0.0.0:9465\"\n\
             [filter]\nallow_users = []\nallow_groups = []\noracle_homes = \"off\"\n",
            "t.toml",
        )
        .unwrap();
        let w = warnings(&c, "t.toml", &asmguard_paths::Paths::default());
        assert_eq!(w.len(), 2, "{w:#?}");
        assert!(w[0].contains("allow-list is empty"));
        assert!(w[1].contains("`metrics.listen`") && w[1].contains("0.0.0.0"));

        let c = asmguard_config::parse(
            "[paths]\nowner = \"root\"\ngroup = \"root\"\n[socket]\nadmin_group = \"root\"\n\
             [metrics]\nlisten = \"[::]:9465\"\n[filter]\nmode = \"off\"\nallow_users = []\nallow_groups = []\n",
            "t.toml",
        )
        .unwrap();
        let w = warnings(&c, "t.toml", &asmguard_paths::Paths::default());
        assert_eq!(w.len(), 1, "off lets everyone write anyway: {w:#?}");
        assert!(w[0].contains("[::]:9465"));

        // homes only, none there yet: say when ASM can write
        let c = asmguard_config::parse(
            "[paths]\nowner = \"root\"\ngroup = \"root\"\n[socket]\nadmin_group = \"root\"\n\
             [filter]\nallow_users = []\nallow_groups = []\noracle_homes = [\"/nonexistent-home-ag\"]\n\
             allow_executables = []\n",
            "t.toml",
        )
        .unwrap();
        let w = warnings(&c, "t.toml", &asmguard_paths::Paths::default());
        assert_eq!(w.len(), 1, "{w:#?}");
        assert!(w[0].contains("`filter.oracle_homes`") && w[0].contains("olr.loc"));
    }
}
