//! Moving a site onto asmguard: `asmguardctl import oracleasm|afd|udev` prints a
//! configuration `asmguardd --check-config` accepts and `--write` installs it
//! without ever replacing another file unasked; the `[paths] compat` links
//! (`/dev/oracleasm/disks/<LABEL>`, `/dev/oracleafd/disks/<LABEL>`) come from the
//! same udev rule as `/dev/asmguard/disks/<LABEL>`, with its owner and mode, for a
//! disk carrying a real AFD label that the daemon adopts without writing a byte.

use asmguard_host_tests::*;
use std::path::{Path, PathBuf};
use std::process::Command;

const MIB: u64 = 1 << 20;

const SYSCONFIG: &str = "ORACLEASM_ENABLED=true\nORACLEASM_UID=nobody\nORACLEASM_GID=nogroup\n\
ORACLEASM_SCANBOOT=true\nORACLEASM_SCANORDER=\"dm\"\nORACLEASM_SCANEXCLUDE=\"sd\"\n\
ORACLEASM_SCAN_DIRECTORIES=\"\"\nORACLEASM_USE_LOGICAL_BLOCK_SIZE=false\n\
ORACLEASM_CONFIG_MAX_DISKS=2048\nORACLEASM_ENABLE_IOFILTER=true\n";
const AFD: &str = "afd_diskstring='/dev/mapper/mpath*','/dev/sd*'\nafd_filtering=enable\n";
const RULES: &str = "KERNEL==\"sd*\", ENV{ID_SERIAL}==\"36000c29e5f6a7b8\", SYMLINK+=\"oracleasm/asm-disk1\", OWNER=\"nobody\", GROUP=\"nogroup\", MODE=\"0640\"\n";

fn import(args: &[&str]) -> Out {
    run(Command::new(ctl_bin()).arg("import").args(args))
}

fn check_config(path: &Path) -> Out {
    run(Command::new(daemon_bin())
        .args(["--check-config", "--config"])
        .arg(path))
}

#[test]
fn import_prints_a_configuration_the_daemon_accepts() {
    let dir = tempfile::tempdir().unwrap();
    for (kind, text, keys) in [
        (
            "oracleasm",
            SYSCONFIG,
            &[
                "devices.scan_order",
                "devices.exclude",
                "paths.owner",
                "paths.group",
                "paths.compat",
                "filter.mode",
            ][..],
        ),
        (
            "afd",
            AFD,
            // (the disk string no longer narrows `include`: AFD-labelled disks
            // outside it are still protected by their label)
            &["paths.compat", "filter.mode"][..],
        ),
        (
            "udev",
            RULES,
            &["paths.owner", "paths.group", "paths.mode"][..],
        ),
    ] {
        let src = dir.path().join(kind);
        std::fs::write(&src, text).unwrap();
        let o = import(&[kind, src.to_str().unwrap()]).ok();
        let out = dir.path().join(format!("{kind}.toml"));
        std::fs::write(&out, &o.stdout).unwrap();
        let c = check_config(&out);
        assert_eq!(c.code, 0, "{kind}: {c:?}\n{}", o.stdout);
        assert!(c.stdout.contains("configuration is valid"), "{c:?}");
        // --json: the same keys, each with where it came from
        let j = import(&[kind, src.to_str().unwrap(), "--json"]).ok().json();
        assert_eq!(j["kind"], kind);
        let got: Vec<&str> = j["settings"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["key"].as_str().unwrap())
            .collect();
        for k in keys {
            assert!(got.contains(k), "{kind}: {k} not in {got:?}");
        }
        for s in j["settings"].as_array().unwrap() {
            assert!(!s["from"].as_str().unwrap().is_empty(), "{s}");
        }
        assert_eq!(j["config"].as_str().unwrap(), o.stdout);
    }
    let asm = std::fs::read_to_string(dir.path().join("oracleasm.toml")).unwrap();
    assert!(
        asm.contains(
            "# ORACLEASM_UID=nobody (line 2): owner of the disk links\nowner = \"nobody\""
        ),
        "{asm}"
    );
    assert!(
        asm.contains("exclude = [\"ram*\", \"zram*\", \"sr*\", \"fd*\", \"sd*\"]"),
        "{asm}"
    );
    assert!(
        asm.contains("scan_order = [\"dm*\", \"nvme*\", \"sd*\", \"vd*\", \"xvd*\"]"),
        "{asm}"
    );
    assert!(
        asm.contains("#   ORACLEASM_CONFIG_MAX_DISKS=2048 (line 9): asmguard has no limit"),
        "{asm}"
    );
    let udev = std::fs::read_to_string(dir.path().join("udev.toml")).unwrap();
    assert!(udev.contains("mode = \"0640\""), "{udev}");
    // the rule names one LUN: managed by its ASM header under the rule's name
    assert!(
        udev.contains("manage_asm_members = true\n")
            && udev.contains("member_names = { \"36000c29e5f6a7b8\" = \"ASM_DISK1\" }\n"),
        "{udev}"
    );
}

#[test]
fn import_write_never_replaces_unasked_and_keeps_a_backup() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("oracleasm");
    std::fs::write(&src, SYSCONFIG).unwrap();
    let cfg = dir.path().join("etc/asmguard/asmguard.toml");
    let w = |extra: &[&str]| {
        let mut a = vec![
            "oracleasm",
            src.to_str().unwrap(),
            "--write",
            "--config",
            cfg.to_str().unwrap(),
        ];
        a.extend_from_slice(extra);
        import(&a)
    };
    let o = w(&[]).ok();
    assert!(o.stdout.contains("asmguard.toml: written"), "{o:?}");
    assert_eq!(check_config(&cfg).code, 0);
    let first = std::fs::read_to_string(&cfg).unwrap();
    // the same again: unchanged, nothing else made
    assert!(w(&[]).ok().stdout.contains("unchanged"));
    assert!(!dir.path().join("etc/asmguard/asmguard.toml.bak.1").exists());
    // another configuration there: refused (4), untouched
    std::fs::write(&cfg, "[paths]\nmode = \"0640\"\n").unwrap();
    let o = w(&[]);
    o.refused(4, &["exists and differs", "--force"]);
    assert_eq!(
        std::fs::read_to_string(&cfg).unwrap(),
        "[paths]\nmode = \"0640\"\n"
    );
    // --force: replaced, the old one kept
    let o = w(&["--force"]).ok();
    assert!(o.stdout.contains("asmguard.toml.bak.1"), "{o:?}");
    assert_eq!(std::fs::read_to_string(&cfg).unwrap(), first);
    assert_eq!(
        std::fs::read_to_string(dir.path().join("etc/asmguard/asmguard.toml.bak.1")).unwrap(),
        "[paths]\nmode = \"0640\"\n"
    );
    // bad input: one line naming the line, exit 3, nothing written
    std::fs::write(
        &src,
        "ORACLEASM_UID=grid\nORACLEASM_ENABLE_IOFILTER=maybe\n",
    )
    .unwrap();
    let o = w(&["--force"]);
    assert_eq!(o.code, 3, "{o:?}");
    assert_eq!(o.stderr.trim().lines().count(), 1, "{o:?}");
    assert!(
        o.stderr.contains(":2: ORACLEASM_ENABLE_IOFILTER=\"maybe\""),
        "{o:?}"
    );
    assert_eq!(std::fs::read_to_string(&cfg).unwrap(), first);
    assert!(!dir.path().join("etc/asmguard/asmguard.toml.bak.2").exists());
    let o = import(&["afd", dir.path().join("absent.conf").to_str().unwrap()]);
    assert_eq!(o.code, 3, "{o:?}");
    assert!(o.stderr.contains("absent.conf: cannot read"), "{o:?}");
    // --force without --write is bad usage
    assert_eq!(import(&["afd", "--force"]).code, 2);
}

#[test]
fn compat_links_have_the_asmguard_links_owner_and_mode() {
    let Some(_g) = lock() else { return };
    if Path::new("/run/udev/control").exists() {
        eprintln!("SKIPPED: a udevd runs here; this test only runs where udevadm test is alone");
        return;
    }
    // A disk AFD labelled (the seed's real sector), adopted as it is.
    let l = Loop::new(16 * MIB);
    let seed = std::fs::read(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../crates/format/tests/vectors/seed-afd-label-V512DATA1-4096.bin"),
    )
    .unwrap();
    l.write_dev(0, &seed);
    let before = l.read_dev(0, 1 << 20);
    // The configuration `import afd` makes, with this host's owner and group.
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("oracleafd.conf");
    std::fs::write(
        &src,
        format!("afd_diskstring='/dev/{}'\nafd_filtering=enable\n", l.name),
    )
    .unwrap();
    let imported = import(&["afd", src.to_str().unwrap()]).ok().stdout;
    let text = imported.replace(
        "compat = [\"oracleafd\"]",
        "compat = [\"oracleafd\", \"oracleasm\"]\nowner = \"nobody\"\ngroup = \"nogroup\"\nmode = \"0640\"",
    );
    assert_ne!(text, imported, "{imported}");
    let cfg = dir.path().join("asmguard.toml");
    std::fs::write(&cfg, &text).unwrap();
    assert_eq!(check_config(&cfg).code, 0);
    let d = Daemon::start(&[&l.name], "");
    assert_eq!(d.labels(), vec!["V512DATA1"]);
    drop(d);
    let rules = run(Command::new(ctl_bin())
        .args(["udev-rules", "--config"])
        .arg(&cfg))
    .ok()
    .stdout;
    let created: Vec<PathBuf> = [
        "/run/udev",
        "/run/asmguard",
        "/dev/asmguard",
        "/dev/oracleasm",
        "/dev/oracleafd",
        "/dev/disk",
        "/dev/block",
    ]
    .iter()
    .map(PathBuf::from)
    .filter(|p| !p.exists())
    .collect();
    std::fs::create_dir_all("/run/udev/rules.d").unwrap();
    let path = Path::new("/run/udev/rules.d").join(format!(
        "99-asmguard-compat-test-{}.rules",
        std::process::id()
    ));
    std::fs::write(&path, &rules).unwrap();
    let db = Path::new("/run/asmguard/links").join(&l.name);
    let _c = UdevCleanup {
        dev: l.dev.clone(),
        created,
        rules: path,
        db: db.clone(),
    };
    // What the daemon writes where udevd runs: the label it manages the disk under.
    std::fs::create_dir_all("/run/asmguard/links").unwrap();
    std::fs::write(&db, "ASMGUARD_LABEL=V512DATA1\n").unwrap();
    let o = run(Command::new("udevadm")
        .args(["test", "--action=change"])
        .arg(format!("/sys/class/block/{}", l.name)));
    assert_eq!(o.code, 0, "{o:?}");
    for link in [
        "/dev/asmguard/disks/V512DATA1",
        "/dev/oracleasm/disks/V512DATA1",
        "/dev/oracleafd/disks/V512DATA1",
    ] {
        let target = std::fs::read_link(link).unwrap_or_else(|e| panic!("{link}: {e}: {o:?}"));
        assert_eq!(target, Path::new("../..").join(&l.name), "{link}");
    }
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata("/dev/oracleasm/disks/V512DATA1").unwrap();
    assert_eq!((m.uid(), m.gid(), m.mode() & 0o7777), (65534, 65534, 0o640));
    assert_same(&l.read_dev(0, 1 << 20), &before, "device bytes");
}

/// `oracleasm` (asmguardctl through a symlink of that name) against `d`.
fn oracleasm(d: &Daemon, link: &Path, args: &[&str]) -> Out {
    run(Command::new(link)
        .env("ASMGUARD_SOCKET", &d.socket)
        .args(args))
}

#[test]
fn oracleasm_front_end_runs_what_orahost_storage_runs() {
    let Some(_g) = lock() else { return };
    let a = Loop::new(32 * MIB);
    let b = Loop::new(32 * MIB);
    let fs = Loop::new(32 * MIB);
    let (da, db, dfs) = (
        a.dev.display().to_string(),
        b.dev.display().to_string(),
        fs.dev.display().to_string(),
    );
    sh("mkfs.ext4", &["-q", "-F", &dfs]).ok();
    let fs_before = fs.read_dev(0, 1 << 20);
    let d = Daemon::start(&[&a.name, &b.name, &fs.name], "");
    let dir = tempfile::tempdir().unwrap();
    let link = dir.path().join("oracleasm");
    std::os::unix::fs::symlink(ctl_bin(), &link).unwrap();
    let asm = |args: &[&str]| oracleasm(&d, &link, args);

    // label-asm-disks.sh: `querydisk DEVICE | grep 'is marked an ASM disk' | wc -l`
    let q = asm(&["querydisk", &da]);
    assert_eq!(q.code, 1, "{q:?}");
    assert_eq!(
        q.stdout,
        format!("Device \"{da}\" is not marked as an ASM disk\n")
    );
    assert!(!q.stdout.contains("is marked an ASM disk"));
    // orahost_storage: `{{ asmlib_binary }} createdisk {{ asmlabel }} {{ device }}`
    for (l, dev) in [("data01", &da), ("data02", &db)] {
        let o = asm(&["createdisk", l, dev]).ok();
        assert_eq!(
            o.stdout,
            "Writing disk header: done\nInstantiating disk: done\n"
        );
    }
    let q = asm(&["querydisk", &da]).ok();
    assert_eq!(
        q.stdout,
        format!("Device \"{da}\" is marked an ASM disk with the label \"DATA01\"\n")
    );
    assert_eq!(q.stdout.matches("is marked an ASM disk").count(), 1);
    // `scandisks` (changed_when: false), then `listdisks` -> stdout_lines
    let s = asm(&["scandisks"]).ok();
    assert!(
        s.stdout.starts_with("Reloading disk partitions: done\n"),
        "{s:?}"
    );
    assert_eq!(asm(&["listdisks"]).ok().stdout, "DATA01\nDATA02\n");
    assert_eq!(
        d.ctl(&["oracleasm", "listdisks"]).ok().stdout,
        "DATA01\nDATA02\n"
    );
    // createdisk again: ASMLib's answer, exit 1, nothing changes
    let o = asm(&["createdisk", "DATA09", &da]);
    o.refused(
        1,
        &[&format!(
            "Device \"{da}\" is already labeled for ASM disk \"DATA01\""
        )],
    );
    // a disk holding a filesystem: refused with asmguard's sentence, not a byte written
    let o = asm(&["createdisk", "DATA03", &dfs]);
    o.refused(1, &["holds data (ext4"]);
    assert_eq!(
        o.stdout,
        "Writing disk header: failed\nUnable to create disk \"DATA03\"\n"
    );
    assert_same(&fs.read_dev(0, 1 << 20), &fs_before, "filesystem disk");
    // querydisk by label, -d, -p (blkid's lines), unknown label
    let (maj, min) = {
        use std::os::unix::fs::MetadataExt;
        let r = std::fs::metadata(&a.dev).unwrap().rdev();
        (libc::major(r), libc::minor(r))
    };
    let q = asm(&["querydisk", "-d", "-p", "DATA01"]).ok();
    assert_eq!(
        q.stdout,
        format!(
            "Disk \"DATA01\" is a valid ASM disk on device [{maj},{min}]\n{da}: LABEL=\"DATA01\" TYPE=\"oracleasm\"\n"
        )
    );
    let blkid = sh("blkid", &["-p", "-o", "export", &da]).ok().stdout;
    assert!(
        blkid.contains("LABEL=DATA01") && blkid.contains("TYPE=oracleasm"),
        "{blkid}"
    );
    let q = asm(&["querydisk", "NOSUCH"]);
    assert_eq!(q.code, 1);
    assert_eq!(
        q.stdout,
        "Disk \"NOSUCH\" does not exist or is not instantiated\n"
    );
    // discover (ORCL:*), renamedisk by device, deletedisk by label
    let o = asm(&["discover"]).ok();
    assert!(
        o.stdout
            .contains("Discovered disk: ORCL:DATA01 [65536 blocks (33554432 bytes), maxio 512]"),
        "{o:?}"
    );
    let o = asm(&["renamedisk", &db, "fra01"]).ok();
    assert_eq!(
        o.stdout,
        "Writing disk header: done\nInstantiating disk \"FRA01\": done\n"
    );
    assert_eq!(asm(&["listdisks"]).ok().stdout, "DATA01\nFRA01\n");
    let o = asm(&["deletedisk", "FRA01"]).ok();
    assert_eq!(
        o.stdout,
        "Clearing disk header: done\nDropping disk: done\n"
    );
    assert_eq!(asm(&["listdisks"]).ok().stdout, "DATA01\n");
    // AFD runbooks: afd_lsdsk's columns, afd_state's line
    for o in [
        d.ctl(&["lsdsk", "--afd"]).ok(),
        d.ctl(&["oracleasm", "lsdsk", "--afd"]).ok(),
    ] {
        assert!(
            o.stdout
                .starts_with("Label                   Filtering   Path\n"),
            "{o:?}"
        );
        assert!(
            o.stdout
                .lines()
                .any(|l| l.split_whitespace().collect::<Vec<_>>()
                    == ["DATA01", "DISABLED", da.as_str()]),
            "{o:?}"
        );
    }
    let o = d.ctl(&["status", "--afd"]).ok();
    assert!(
        o.stdout.starts_with(
            "ASMCMD-9526: The AFD state is 'LOADED' and filtering is 'DISABLED' on host '"
        ),
        "{o:?}"
    );
    // status: a checklist; no udevd here, so no link: "no", exit 1
    let o = asm(&["status"]);
    assert_eq!(o.code, 1, "{o:?}");
    assert!(
        o.stdout
            .starts_with("Checking if asmguardd is running: yes (pid "),
        "{o:?}"
    );
    assert!(
        o.stdout
            .contains("Checking if /dev/asmguard/disks/DATA01 is grid:asmadmin mode 0660: no"),
        "{o:?}"
    );
    assert!(o.stdout.contains(&format!("Checking if disk DATA01 is filtered on every path: no (preferred {da}; paths {}(labelled))", a.name)), "{o:?}");
    // no daemon: exit 1 and a sentence
    drop(d);
    let o = run(Command::new(&link)
        .env("ASMGUARD_SOCKET", dir.path().join("none.sock"))
        .arg("listdisks"));
    o.refused(1, &["asmguardd is not reachable"]);
}

/// `ansible-playbook` on this host (connection=local) with the collection's role.
fn playbook(dir: &Path, vars: &serde_json::Value, extra: &[&str]) -> Out {
    let roles = repo_root().join("contrib/ansible/roles");
    let play = dir.join("play.yml");
    std::fs::write(
        &play,
        "- name: asmguard\n  hosts: localhost\n  connection: local\n  gather_facts: false\n  roles:\n    - role: asmguard\n",
    )
    .unwrap();
    let vars_file = dir.join("vars.json");
    std::fs::write(&vars_file, vars.to_string()).unwrap();
    let path = format!(
        "{}:{}",
        bin_dir().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    run(Command::new("ansible-playbook")
        .args(["-i", "localhost,", "-e"])
        .arg(format!("@{}", vars_file.display()))
        .args(extra)
        .arg(&play)
        .env("PATH", path)
        .env("ANSIBLE_ROLES_PATH", roles)
        .env("ANSIBLE_NOCOLOR", "1")
        .env("ANSIBLE_LOCALHOST_WARNING", "false")
        .env("ANSIBLE_INVENTORY_UNPARSED_WARNING", "false")
        .env("ANSIBLE_LOCAL_TEMP", dir.join("tmp"))
        .env("ANSIBLE_HOME", dir.join("home")))
}

/// `changed=N` and `failed=N` of the PLAY RECAP.
fn recap(o: &Out) -> (u32, u32) {
    let line = o
        .stdout
        .lines()
        .rev()
        .find(|l| l.starts_with("localhost") && l.contains("changed="))
        .unwrap_or_else(|| panic!("no PLAY RECAP: {o:?}"));
    let n = |k: &str| {
        line.split_whitespace()
            .find_map(|w| w.strip_prefix(k))
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("{k} not in {line}"))
    };
    (n("changed="), n("failed="))
}

#[test]
fn ansible_role_syntax_and_lint() {
    let dir = tempfile::tempdir().unwrap();
    let o = playbook(dir.path(), &serde_json::json!({}), &["--syntax-check"]);
    assert_eq!(o.code, 0, "{o:?}");
    // The playbook names the role by its collection: make it findable.
    let col = dir.path().join("ansible_collections/asmguard");
    std::fs::create_dir_all(&col).unwrap();
    std::os::unix::fs::symlink(repo_root().join("contrib/ansible"), col.join("asmguard")).unwrap();
    let o = run(Command::new("ansible-lint")
        .args(["--offline", "roles/asmguard", "playbooks/site.yml"])
        .current_dir(repo_root().join("contrib/ansible"))
        .env("NO_COLOR", "1")
        .env("ANSIBLE_COLLECTIONS_PATH", dir.path())
        .env("ANSIBLE_HOME", dir.path().join("home")));
    assert_eq!(o.code, 0, "ansible-lint: {o:?}");
    let all = format!("{}{}", o.stdout, o.stderr);
    assert!(
        all.contains("0 failure(s), 0 warning(s)"),
        "ansible-lint: {o:?}"
    );
}

#[test]
fn ansible_role_labels_once_then_changes_nothing_and_fails_on_data() {
    let Some(_g) = lock() else { return };
    let a = Loop::new(32 * MIB);
    let b = Loop::new(32 * MIB);
    let fs = Loop::new(32 * MIB);
    let dfs = fs.dev.display().to_string();
    sh("mkfs.ext4", &["-q", "-F", &dfs]).ok();
    let fs_before = fs.read_dev(0, 1 << 20);
    let d = Daemon::start(&[&a.name, &b.name, &fs.name], "");
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("etc/asmguard.toml");
    let rules = dir.path().join("99-asmguard.rules");
    // The community Oracle collection's variables.
    let vars = |disks: serde_json::Value| {
        serde_json::json!({
            "device_persistence": "asmlib",
            "asm_diskgroups": [{"diskgroup": "data", "disk": disks}],
            "asmguard_install_package": false,
            "asmguard_manage_service": false,
            "asmguard_reload_udev": false,
            "asmguard_owner": "nobody",
            "asmguard_group": "nogroup",
            "asmguard_config_path": cfg,
            "asmguard_udev_rules_path": rules,
            "asmguard_socket": d.socket,
        })
    };
    let two = vars(serde_json::json!([
        {"device": a.dev, "asmlabel": "data01"},
        {"device": b.dev, "asmlabel": "data02"},
    ]));
    let o = playbook(dir.path(), &two, &[]);
    assert_eq!(o.code, 0, "{o:?}");
    let (changed, failed) = recap(&o);
    assert!(changed >= 4 && failed == 0, "{o:?}");
    let mut labels = d.labels();
    labels.sort();
    assert_eq!(labels, vec!["DATA01", "DATA02"]);
    let text = std::fs::read_to_string(&cfg).unwrap();
    assert!(text.contains("compat = [\"oracleasm\"]"), "{text}");
    assert_eq!(check_config(&cfg).code, 0);
    assert!(std::fs::read_to_string(&rules)
        .unwrap()
        .contains("SYMLINK+=\"oracleasm/disks/$env{ASMGUARD_LABEL}\""));
    // The second run changes nothing.
    let o = playbook(dir.path(), &two, &[]);
    assert_eq!(o.code, 0, "{o:?}");
    assert_eq!(recap(&o), (0, 0), "{o:?}");
    // A disk holding a filesystem: the play fails with asmguard's message.
    let bad = vars(serde_json::json!([{"device": fs.dev, "asmlabel": "data03"}]));
    let o = playbook(dir.path(), &bad, &[]);
    assert_ne!(o.code, 0, "{o:?}");
    assert_eq!(recap(&o), (0, 1), "{o:?}");
    assert!(
        o.stdout
            .contains(&format!("{dfs}: {dfs}: holds data (ext4")),
        "{o:?}"
    );
    assert_same(&fs.read_dev(0, 1 << 20), &fs_before, "filesystem disk");
    assert!(!d.labels().contains(&"DATA03".to_string()));
}

/// A real dump from the format crate's vectors, zero-padded to a 4 KiB block.
fn vector(name: &str) -> Vec<u8> {
    let mut b = std::fs::read(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../crates/format/tests/vectors")
            .join(name),
    )
    .unwrap();
    b.resize(b.len().div_ceil(4096) * 4096, 0);
    b
}

/// A udev-rule site: disks carrying real ASM member headers and no label. With
/// `manage_asm_members` they are managed under the disk name in their header,
/// protected by the filter, listed with how they are identified, and not one
/// byte of them changes; without it they are listed as not managed.
#[test]
fn unlabelled_asm_members_are_managed_by_their_header_without_a_write() {
    let Some(_g) = lock() else { return };
    let member = Loop::new(16 * MIB); // DISK15 of disk group DATA (a public dump)
    member.write_dev(0, &vector("asm-disk-chk-pl-sdk1-first160.bin"));
    let dm39 = Loop::new(16 * MIB); // NCAS_DISK1_0000 (a public dump of /dev/dm-39)
    dm39.write_dev(0, &vector("linux-dm39-first96.bin"));
    let mut conflict = vector("asm-disk-chk-pl-sdk1-first160.bin");
    conflict[0x47] = 5; // hdrsts CONFLICT: not a disk ASM owns
    let other = Loop::new(16 * MIB);
    other.write_dev(0, &conflict);
    let all = [&member, &dm39, &other];
    let before: Vec<Vec<u8>> = all.iter().map(|l| l.read_dev(0, 16 << 20)).collect();
    let names = [
        member.name.as_str(),
        dm39.name.as_str(),
        other.name.as_str(),
    ];

    // off (the default): nothing managed, each listed as not managed
    let d = Daemon::start(&names, "");
    let v = d.lsdsk();
    assert!(v["disks"].as_array().unwrap().is_empty(), "{v:#}");
    assert_eq!(v["unmanaged"].as_array().unwrap().len(), 3, "{v:#}");
    drop(d);

    let d = Daemon::start(
        &names,
        "manage_asm_members = true\n[filter]\nmode = \"enforce\"\nallow_users = [\"nobody\"]\nallow_groups = []\n",
    );
    let v = d.lsdsk();
    assert_eq!(d.labels(), vec!["DISK15", "NCAS_DISK1_0000"], "{v:#}");
    let m = disk(&v, "DISK15");
    assert_eq!(m["identified_by"], "asm_header");
    assert_eq!(m["disk_group"], "DATA");
    assert_eq!(m["asm_disk_name"], "DISK15");
    assert_eq!(m["top"], member.dev.display().to_string());
    assert_eq!(disk(&v, "NCAS_DISK1_0000")["identified_by"], "asm_header");
    // the CONFLICT header is still listed as not managed
    let un = v["unmanaged"].as_array().unwrap();
    assert_eq!(un.len(), 1, "{v:#}");
    assert_eq!(un[0]["device"], other.dev.display().to_string());
    let text = d.ctl(&["lsdsk"]).ok().stdout;
    assert!(
        text.contains(&format!(
            "NO LABEL: DISK15 ({}) is managed by the disk name in its ASM header (disk DISK15 of disk group DATA, MEMBER (checksum BAD)): nothing is written to it",
            member.dev.display()
        )),
        "{text}"
    );
    // protected: root's write-open is refused; reads pass; the unmanaged one is not
    let wopen = |l: &Loop| {
        std::fs::OpenOptions::new()
            .write(true)
            .open(&l.dev)
            .map(|_| ())
            .map_err(|e| e.raw_os_error())
    };
    assert_eq!(wopen(&member), Err(Some(libc::EPERM)));
    assert_eq!(wopen(&dm39), Err(Some(libc::EPERM)));
    assert!(std::fs::File::open(&member.dev).is_ok(), "reads pass");
    assert_eq!(wopen(&other), Ok(()), "not managed, not protected");
    // no label to remove or rename: refused, nothing written
    let o = d.ctl(&["unlabel", "DISK15"]);
    assert_ne!(o.code, 0, "{o:?}");
    let o = d.ctl(&["rename", "DISK15", "DATA1"]);
    assert_ne!(o.code, 0, "{o:?}");
    drop(d);
    for (l, b) in all.iter().zip(&before) {
        assert_same(&l.read_dev(0, 16 << 20), b, &l.name);
    }
}
