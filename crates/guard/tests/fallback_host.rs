//! Host tests of the write filter's cgroup-device backend (the fallback where
//! the BPF LSM is not usable, as on this project's CI host), on loop devices.
//!
//! Each test uses its own pin directory and loop device; both are removed on
//! drop, also when the test fails (a panic unwinds through the guards), so a
//! failing test never leaves a deny program attached to the cgroup root.
//!
//! Root is needed. Without root the tests fail, unless
//! `ASMGUARD_HOST_TESTS=skip` is set (then they print SKIPPED and pass).

use std::fs::OpenOptions;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use asmguard_guard::{pinned_backend, remove_pins};
use asmguard_guard::{
    Backend, Denial, DevKey, DeviceType, EventReader, Guard, Hook, Mode, Options,
};
use asmguard_paths::Paths;

use asmguard_testkit::root_lock as lock;

/// A loop device over a sparse file, detached and deleted on drop.
struct Loop {
    dev: PathBuf,
    file: PathBuf,
}

impl Loop {
    fn new(tag: &str) -> Loop {
        let file =
            std::env::temp_dir().join(format!("asmguard-guard-{tag}-{}.img", std::process::id()));
        let f = std::fs::File::create(&file).expect("create backing file");
        f.set_len(8 << 20).expect("size backing file");
        drop(f);
        let out =
            asmguard_testkit::run_ok(Command::new("losetup").args(["-f", "--show"]).arg(&file));
        let dev = PathBuf::from(out.trim());
        Loop { dev, file }
    }
    fn key(&self) -> DevKey {
        DevKey::of_path(&self.dev).expect("device number")
    }
}

impl Drop for Loop {
    fn drop(&mut self) {
        let _ = Command::new("losetup").arg("-d").arg(&self.dev).status();
        let _ = std::fs::remove_file(&self.file);
    }
}

/// A loop device and a guard with pins of its own, both named after `tag`.
fn guarded(tag: &str) -> (Loop, Pins, Guard) {
    let lo = Loop::new(tag);
    let pins = Pins::new(tag);
    let g = Guard::open(&pins.opts()).expect("open the guard");
    (lo, pins, g)
}

/// [`guarded`], with the loop device's mode bits open to everyone (so that
/// the filter, not DAC, is what stops a write).
fn guarded_0666(tag: &str) -> (Loop, Pins, Guard) {
    let (lo, pins, g) = guarded(tag);
    std::fs::set_permissions(&lo.dev, std::os::unix::fs::PermissionsExt::from_mode(0o666)).unwrap();
    (lo, pins, g)
}

/// [`guarded`], with the loop device in the managed set (`mode`, disk `id`)
/// and a reader of the guard's events.
fn watched(tag: &str, mode: Mode, id: u32) -> (Loop, Pins, Guard, EventReader) {
    let (lo, pins, g) = guarded(tag);
    g.set_disk(&[lo.key()], mode, id).unwrap();
    let reader = g.event_reader().unwrap();
    (lo, pins, g, reader)
}

/// A pin directory of its own, emptied (programs detached) on drop.
struct Pins(PathBuf);

impl Pins {
    fn new(tag: &str) -> Pins {
        let p = PathBuf::from(format!(
            "/sys/fs/bpf/asmguard-test-{tag}-{}",
            std::process::id()
        ));
        let _ = remove_pins(&Paths::default(), &p);
        Pins(p)
    }
    fn opts(&self) -> Options {
        Options {
            paths: Paths::default(),
            pin_dir: self.0.clone(),
            backend: Some(Backend::CgroupDevice),
            cgroup: None,
            claim: true,
        }
    }
}

impl Drop for Pins {
    fn drop(&mut self) {
        if let Err(e) = remove_pins(&Paths::default(), &self.0) {
            eprintln!("removing {}: {e}", self.0.display());
        }
    }
}

fn write_open(dev: &Path) -> std::io::Result<std::fs::File> {
    OpenOptions::new().write(true).open(dev)
}

fn is_eperm(r: &std::io::Result<std::fs::File>) -> bool {
    matches!(r, Err(e) if e.raw_os_error() == Some(libc::EPERM))
}

/// `dd` writing one block to `dev` as `uid` (gid the same, no supplementary
/// groups); true when it succeeded.
fn dd_as(uid: u32, dev: &Path) -> bool {
    dd_ids(uid, uid, &[], dev)
}

/// Events of a new reader until one satisfies `want` (or the deadline).
fn wait_event(g: &Guard, want: impl Fn(&Denial) -> bool) -> Option<Denial> {
    next_event(&mut g.event_reader().expect("event reader"), want)
}

/// Events of `r` until one satisfies `want` (or the deadline).
fn next_event(r: &mut EventReader, want: impl Fn(&Denial) -> bool) -> Option<Denial> {
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline {
        for e in r.poll(Duration::from_millis(100)).expect("poll") {
            if want(&e) {
                return Some(e);
            }
        }
    }
    None
}

#[test]
fn fallback_denies_root_write_open_and_allows_reads() {
    let Some(_l) = lock() else { return };
    let (lo, _pins, g) = guarded("deny");
    assert_eq!(g.backend(), Backend::CgroupDevice);
    assert_eq!(
        g.backend().coverage(),
        asmguard_guard::Coverage::OpenTimeOnly
    );
    assert!(write_open(&lo.dev).is_ok(), "writable before the filter");
    g.set_disk(&[lo.key()], Mode::Enforce, 3).unwrap();

    assert!(
        is_eperm(&write_open(&lo.dev)),
        "root write-open must be EPERM"
    );
    assert!(
        is_eperm(&OpenOptions::new().read(true).write(true).open(&lo.dev)),
        "O_RDWR must be EPERM"
    );
    assert!(!dd_as(0, &lo.dev), "root dd must fail");
    assert!(
        OpenOptions::new().read(true).open(&lo.dev).is_ok(),
        "reads stay allowed"
    );
    let s = g.stats().unwrap();
    assert!(
        s.denied.get(&Hook::CgroupDevice).copied().unwrap_or(0) >= 3,
        "{s:?}"
    );
    // one count per denial, in ag_counts: the stats array's per-hook slot
    // (a second map update per denial in earlier versions) stays 0
    use libbpf_rs::MapCore;
    let stats = libbpf_rs::MapHandle::from_pinned_path(_pins.0.join("maps/ag_stats")).unwrap();
    let slot = stats
        .lookup(&8u32.to_ne_bytes(), libbpf_rs::MapFlags::ANY) // AG_HOOK_CGROUP_DEVICE
        .unwrap()
        .unwrap();
    assert_eq!(slot, 0u64.to_ne_bytes(), "ag_stats counts no denial");
    assert_eq!(
        s.denied_total(),
        g.disk_counts().unwrap().values().sum::<u64>(),
        "the totals are the per-disk counts"
    );

    g.remove_disk(&[lo.key()]).unwrap();
    assert!(write_open(&lo.dev).is_ok(), "writable once removed");
}

#[test]
fn fallback_allow_listed_uid_can_write() {
    let Some(_l) = lock() else { return };
    let (lo, _pins, g) = guarded_0666("uid");
    g.set_allow(&[65534], &[], &[]).unwrap();
    g.set_disk(&[lo.key()], Mode::Enforce, 1).unwrap();
    assert!(dd_as(65534, &lo.dev), "the allow-listed uid writes");
    assert!(!dd_as(65533, &lo.dev), "another uid does not");
    assert!(!dd_as(0, &lo.dev), "root does not");
    // the allow-list is replaced, not merged
    g.set_allow(&[65533], &[], &[]).unwrap();
    assert_eq!(g.allow().0, vec![65533]);
    assert!(!dd_as(65534, &lo.dev));
    assert!(dd_as(65533, &lo.dev));
}

/// `dd` writing one block to `dev` as `uid`/`gid` with the supplementary
/// `groups` (setpriv); true when it succeeded.
fn dd_ids(uid: u32, gid: u32, groups: &[u32], dev: &Path) -> bool {
    let groups: Vec<String> = groups.iter().map(u32::to_string).collect();
    let mut c = Command::new("setpriv");
    c.arg(format!("--reuid={uid}"))
        .arg(format!("--regid={gid}"));
    if groups.is_empty() {
        c.arg("--clear-groups");
    } else {
        c.arg(format!("--groups={}", groups.join(",")));
    }
    c.args(["--", "dd", "if=/dev/zero"])
        .arg(format!("of={}", dev.display()))
        .args(["bs=4096", "count=1", "conv=notrunc"])
        .stderr(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .status()
        .expect("run setpriv dd")
        .success()
}

/// Every rule of the allow-list, one at a time, through the program that
/// reads the caller's task (`ag_cgroup_dev`: the LSM programs' identity
/// code): uid, gid, a supplementary group (also the 21st and the 64th, not
/// the 65th), and neither. The identity is read lazily, in the order of the rules, so each
/// rule is shown to allow on its own and a caller matching none is refused.
#[test]
fn fallback_every_allow_rule_on_its_own() {
    let Some(_l) = lock() else { return };
    let (lo, _pins, g) = guarded_0666("rules");
    assert!(
        g.programs().iter().any(|p| p == "ag_cgroup_dev"),
        "this host loads the task-reading variant: {:?}",
        g.programs()
    );
    g.set_allow(&[65501], &[65511], &[]).unwrap();
    g.set_disk(&[lo.key()], Mode::Enforce, 5).unwrap();
    assert!(dd_ids(65501, 65600, &[], &lo.dev), "by uid");
    assert!(dd_ids(65600, 65511, &[], &lo.dev), "by gid");
    assert!(
        dd_ids(65600, 65600, &[65511], &lo.dev),
        "by a supplementary group"
    );
    // the kernel keeps the groups sorted: 65511 comes after every lower gid
    let many = |lower: u32| -> Vec<u32> { (65000..65000 + lower).chain([65511]).collect() };
    assert!(
        dd_ids(65600, 65600, &many(20), &lo.dev),
        "by the 21st supplementary group"
    );
    assert!(
        dd_ids(65600, 65600, &many(63), &lo.dev),
        "by the 64th supplementary group"
    );
    let denied = || {
        g.stats()
            .unwrap()
            .denied
            .get(&Hook::CgroupDevice)
            .copied()
            .unwrap_or(0)
    };
    let before = denied();
    assert_eq!(before, 0, "the allowed writers were never denied");
    assert!(
        !dd_ids(65600, 65600, &[65512, 65513], &lo.dev),
        "no rule matches"
    );
    assert!(!dd_ids(65600, 65600, &[], &lo.dev), "no groups at all");
    assert!(!dd_ids(0, 0, &[], &lo.dev), "root");
    assert!(
        !dd_ids(65600, 65600, &many(64), &lo.dev),
        "the 65th supplementary group is past what the programs read"
    );
    // the device cgroup may be asked once or twice per open
    assert!(matches!(denied(), 4 | 8), "4 refused opens: {}", denied());
}

#[test]
fn fallback_audit_logs_and_allows_off_allows() {
    let Some(_l) = lock() else { return };
    let (lo, _pins, g, mut reader) = watched("audit", Mode::Audit, 9);
    assert!(write_open(&lo.dev).is_ok(), "audit allows");
    let e = next_event(&mut reader, |e| e.pid == std::process::id()).expect("an audit event");
    assert_eq!(e.mode, Mode::Audit);
    assert_eq!(e.disk_id, 9);
    let s = g.stats().unwrap();
    // (the kernel may ask the device cgroup twice per open: inode permission,
    // then the block device open itself; an allowed open passes both)
    assert!(
        s.audited.get(&Hook::CgroupDevice).copied().unwrap_or(0) >= 1,
        "{s:?}"
    );
    assert_eq!(s.denied_total(), 0);

    g.set_disk(&[lo.key()], Mode::Off, 9).unwrap();
    assert!(write_open(&lo.dev).is_ok(), "off allows");
    assert_eq!(g.stats().unwrap(), s, "off neither counts nor logs");
    assert!(reader.poll(Duration::from_millis(300)).unwrap().is_empty());
    assert_eq!(
        g.disks().unwrap().get(&lo.key()),
        Some(&(Mode::Off, 9)),
        "the map holds the mode"
    );
}

#[test]
fn fallback_events_carry_the_caller() {
    let Some(_l) = lock() else { return };
    let (lo, _pins, g, mut reader) = watched("events", Mode::Enforce, 42);
    assert!(is_eperm(&write_open(&lo.dev)));
    let me = std::process::id();
    let e = next_event(&mut reader, |e| e.pid == me).expect("an event from this process");
    assert_eq!(e.uid, 0);
    assert_eq!(e.euid, 0);
    assert_eq!((e.device, e.device_type), (lo.key().dev, DeviceType::Block));
    assert_eq!(e.disk_id, 42);
    assert_eq!(e.hook(), Hook::CgroupDevice);
    assert_eq!(e.operation.to_string(), "write-open");
    assert_eq!(e.mode, Mode::Enforce);
    let exe = std::fs::read_link("/proc/self/exe").unwrap();
    assert_eq!(
        e.exe,
        exe.display().to_string(),
        "exe resolved in userspace"
    );
    assert_ne!(e.exe_ino, 0, "the kernel saw the executable's inode");
    assert!(!e.comm.is_empty());

    // a dd child: its own pid and comm
    assert!(!dd_as(0, &lo.dev));
    let e = wait_event(&g, |e| e.comm == "dd").expect("dd's event");
    assert_ne!(e.pid, me);
}

#[test]
fn fallback_pins_survive_a_drop_and_are_readopted() {
    let Some(_l) = lock() else { return };
    let lo = Loop::new("pins");
    let pins = Pins::new("pins");
    {
        let g = Guard::open(&pins.opts()).unwrap();
        assert!(!g.adopted());
        g.set_allow(&[65534], &[], &[]).unwrap();
        g.set_disk(&[lo.key()], Mode::Enforce, 5).unwrap();
        // dropped here, as after a kill -9: nothing is detached
    }
    assert_eq!(pinned_backend(&pins.0), Some(Backend::CgroupDevice));
    assert!(
        is_eperm(&write_open(&lo.dev)),
        "protection stays without the process"
    );

    // restart: no backend requested, the pinned one is re-adopted as it is
    let opts = Options {
        backend: None,
        ..pins.opts()
    };
    let g = Guard::open(&opts).unwrap();
    assert!(g.adopted());
    assert_eq!(g.backend(), Backend::CgroupDevice);
    assert_eq!(g.disks().unwrap().get(&lo.key()), Some(&(Mode::Enforce, 5)));
    assert_eq!(g.allow().0, vec![65534]);
    assert!(is_eperm(&write_open(&lo.dev)));
    // the re-adopted ring buffer still delivers
    let mut reader = g.event_reader().unwrap();
    assert!(is_eperm(&write_open(&lo.dev)));
    let mut seen = false;
    for _ in 0..50 {
        if reader
            .poll(Duration::from_millis(100))
            .unwrap()
            .iter()
            .any(|e| e.pid == std::process::id())
        {
            seen = true;
            break;
        }
    }
    assert!(seen, "an event through the re-adopted ring buffer");

    g.uninstall().unwrap();
    assert!(!pins.0.exists(), "uninstall removes the pins");
    assert!(write_open(&lo.dev).is_ok(), "uninstall detaches at once");
}

/// With no backend requested, the guard takes the best the kernel gives and
/// says why: on a host that refuses trampolines (this project's build hosts)
/// the fallback, with the kernel's own error for the fmod_ret programs, and
/// nothing of the failed try left pinned; where trampolines work, a security
/// backend with its programs attached. A pinned fallback is then re-adopted
/// with the reason it was not replaced.
#[test]
fn choice_says_why_the_better_backends_did_not_load() {
    let Some(_l) = lock() else { return };
    let pins = Pins::new("choice");
    let opts = Options {
        backend: None,
        ..pins.opts()
    };
    let g = Guard::open(&opts).unwrap();
    let links: Vec<String> = std::fs::read_dir(pins.0.join("links"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    match g.backend() {
        Backend::CgroupDevice => {
            let why = g.reason().to_string();
            let fmod = why
                .split_once("fmod_ret programs did not load: ")
                .map(|(_, e)| e.trim());
            assert!(fmod.is_some_and(|e| !e.is_empty()), "{why}");
            assert!(
                links.iter().all(|l| !l.starts_with("ag_fr_")),
                "the failed try left {links:?}"
            );
            drop(g);
            let again = Guard::open(&opts).unwrap();
            assert!(again.adopted());
            assert!(
                again
                    .reason()
                    .to_string()
                    .contains("(no better backend loads: "),
                "{}",
                again.reason()
            );
        }
        b => {
            assert!(g.programs().iter().any(|p| p.starts_with("ag_")), "{b}");
            assert!(links.iter().any(|l| l.starts_with("ag_")), "{links:?}");
        }
    }
}

/// The programs look a device up only when its major's bit is set in
/// `ag_majors`: the loader sets it before the device goes in, keeps it while
/// any device of that major is managed, clears it after the last one, and
/// rebuilds it from the device maps when it re-adopts pins (an older
/// version's pins had no such map). The cgroup-device program reads the same
/// bits as the LSM programs, so this host can show it.
#[test]
fn fallback_majors_follow_the_managed_set() {
    use libbpf_rs::{MapCore, MapFlags, MapHandle};
    let Some(_l) = lock() else { return };
    let (a, b) = (Loop::new("maj-a"), Loop::new("maj-b"));
    let pins = Pins::new("majors");
    let g = Guard::open(&pins.opts()).unwrap();
    let major = a.key().dev.major();
    assert_eq!(b.key().dev.major(), major);
    let blk = |g: &Guard| g.managed_majors().unwrap().0;
    assert!(blk(&g).is_empty(), "nothing managed yet");
    g.set_disk(&[a.key(), b.key()], Mode::Enforce, 1).unwrap();
    assert_eq!(blk(&g), vec![major]);
    assert!(
        g.managed_majors().unwrap().1.is_empty(),
        "no character device"
    );
    assert_eq!(
        asmguard_guard::pinned_majors(&pins.0).unwrap(),
        (vec![major], vec![]),
        "the pinned map, read alone, says the same"
    );
    assert!(is_eperm(&write_open(&a.dev)), "a is protected");
    assert!(is_eperm(&write_open(&b.dev)), "b is protected");

    g.remove_disk(&[a.key()]).unwrap();
    assert_eq!(blk(&g), vec![major], "b keeps its major's bit");
    assert!(write_open(&a.dev).is_ok(), "a left the set");
    assert!(is_eperm(&write_open(&b.dev)), "b is still protected");

    // Pins of a version without the bits: b in the device map, no bit.
    let m = MapHandle::from_pinned_path(pins.0.join("maps").join("ag_majors")).unwrap();
    m.update(
        &(major / 64).to_ne_bytes(),
        &0u64.to_ne_bytes(),
        MapFlags::ANY,
    )
    .unwrap();
    assert!(
        write_open(&b.dev).is_ok(),
        "the program reads the bit before the device map"
    );
    drop(g);
    let g = Guard::open(&pins.opts()).unwrap();
    assert!(g.adopted());
    assert_eq!(blk(&g), vec![major], "re-adoption rebuilds the bits");
    assert!(is_eperm(&write_open(&b.dev)), "b is protected again");

    g.remove_disk(&[b.key()]).unwrap();
    assert!(
        blk(&g).is_empty(),
        "the last device of the major took its bit"
    );
    assert!(write_open(&b.dev).is_ok());
}

/// `prog` (a copy of dd or dd itself) writing one block to `dev` as
/// `uid`/`gid` (no supplementary groups), in cgroup `cg` when given; true
/// when it succeeded.
fn dd_with(prog: &Path, uid: u32, gid: u32, cg: Option<&Path>, dev: &Path) -> bool {
    let enter = match cg {
        Some(c) => format!("echo $$ > {}/cgroup.procs && ", c.display()),
        None => String::new(),
    };
    let script = format!(
        "{enter}exec setpriv --reuid={uid} --regid={gid} --clear-groups -- {} if=/dev/zero of={} bs=4096 count=1 conv=notrunc",
        prog.display(),
        dev.display()
    );
    Command::new("sh")
        .args(["-c", &script])
        .stderr(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .status()
        .expect("run sh")
        .success()
}

/// Rules are conjunctions: "user AND executable" lets that user write with
/// that executable only (not with another one, and no other user with it);
/// "in this cgroup" lets what runs there write and nothing outside; the
/// daemon's own process writes, another process of the same user does not;
/// a rule set replaced keeps only the new rules' bits in force.
#[test]
fn fallback_rules_are_conjunctions() {
    use asmguard_guard::{ExeId, Rule, Rules, SelfId};
    let Some(_l) = lock() else { return };
    let (lo, _pins, g) = guarded_0666("conj");
    assert!(g.programs().iter().any(|p| p == "ag_cgroup_dev"));
    let dir = tempfile::tempdir().unwrap();
    let own_dd = dir.path().join("dd-oracle");
    std::fs::copy("/usr/bin/dd", &own_dd).unwrap();
    let mut perm = std::fs::metadata(dir.path()).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perm, 0o755);
    std::fs::set_permissions(dir.path(), perm).unwrap();
    let cg = asmguard_guard::guard::cgroup2_root(&Paths::default().proc)
        .unwrap()
        .join("agtest-conj-place");
    let _ = std::fs::remove_dir(&cg);
    std::fs::create_dir(&cg).unwrap();
    let cg_id = std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(&cg).unwrap());
    let dd = Path::new("/usr/bin/dd");
    g.set_disk(&[lo.key()], Mode::Enforce, 6).unwrap();
    let rules = Rules {
        rules: vec![
            Rule {
                uids: vec![65501],
                exes: vec![ExeId::of_path(&own_dd).unwrap()],
                ..Rule::default()
            },
            Rule {
                gids: vec![65520],
                places: vec![cg_id],
                ..Rule::default()
            },
        ],
        daemon: Some(SelfId::current(&Paths::default().proc).unwrap()),
        ..Rules::default()
    };
    g.set_rules(&rules).unwrap();
    assert!(
        dd_with(&own_dd, 65501, 65600, None, &lo.dev),
        "user AND executable"
    );
    assert!(
        !dd_with(dd, 65501, 65600, None, &lo.dev),
        "the user with another executable"
    );
    assert!(
        !dd_with(&own_dd, 65502, 65600, None, &lo.dev),
        "another user with the executable"
    );
    assert!(
        dd_with(dd, 65600, 65520, Some(&cg), &lo.dev),
        "group AND place"
    );
    assert!(
        !dd_with(dd, 65600, 65520, None, &lo.dev),
        "the group outside the place"
    );
    assert!(
        !dd_with(dd, 65600, 65521, Some(&cg), &lo.dev),
        "another group in the place"
    );
    assert!(
        write_open(&lo.dev).is_ok(),
        "the daemon's own process (this one)"
    );
    assert!(!dd_with(dd, 0, 0, None, &lo.dev), "root in another process");

    // Replaced: the old rules' bits leave, the new ones alone are in force.
    let (before, _) = g.rules_in_force().unwrap();
    g.set_rules(&Rules::from_ids(&[65502], &[], &[])).unwrap();
    let ((active, who, exe, place), places) = g.rules_in_force().unwrap();
    assert_eq!(active.count_ones(), 1);
    assert_eq!(active & before.0, 0, "new bits beside the old ones");
    assert_eq!((who, exe, place), (active, 0, 0));
    assert!(places.is_empty());
    assert!(dd_with(dd, 65502, 65600, None, &lo.dev), "the new rule");
    assert!(
        !dd_with(&own_dd, 65501, 65600, None, &lo.dev),
        "the old rule is gone"
    );
    assert!(is_eperm(&write_open(&lo.dev)), "no daemon process any more");
    let _ = std::fs::remove_dir(&cg);
}

/// The tamper check of the rule maps: an entry another process changed is
/// named and put back.
#[test]
fn fallback_rule_maps_put_back() {
    let Some(_l) = lock() else { return };
    let (lo, pins, g) = guarded_0666("rulewatch");
    g.set_disk(&[lo.key()], Mode::Enforce, 7).unwrap();
    g.set_allow(&[65501], &[], &[]).unwrap();
    assert!(g.check_maps().is_empty());
    let m = libbpf_rs::MapHandle::from_pinned_path(pins.0.join("maps/ag_rule_uids")).unwrap();
    use libbpf_rs::MapCore;
    m.update(
        &65600u32.to_ne_bytes(),
        &u64::MAX.to_ne_bytes(),
        libbpf_rs::MapFlags::ANY,
    )
    .unwrap();
    assert!(
        dd_as(65600, &lo.dev),
        "the planted uid writes until the check"
    );
    let found = g.check_maps();
    assert!(
        found.len() == 1 && found[0].starts_with("ag_rule_uids") && found[0].contains("put back"),
        "{found:?}"
    );
    assert!(!dd_as(65600, &lo.dev), "put back");
    assert!(dd_as(65501, &lo.dev));
}

/// A cgroup-device program that allows everything (`r0 = 1; exit`),
/// attached to the cgroup-v2 root by a link: what an intruder pins in
/// place of the filter's link. Returns the link's fd.
fn allow_all_link() -> std::os::fd::OwnedFd {
    use libbpf_rs::libbpf_sys as sys;
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
    let mut mov = sys::bpf_insn {
        code: 0xb7, // BPF_ALU64 | BPF_MOV | BPF_K: r0 = 1
        imm: 1,
        ..Default::default()
    };
    mov.set_dst_reg(0);
    let exit = sys::bpf_insn {
        code: 0x95, // BPF_JMP | BPF_EXIT
        ..Default::default()
    };
    let insns = [mov, exit];
    // SAFETY: valid NUL-terminated name and license, two instructions, no
    // options; the returned fd (or error) is checked and then owned.
    let prog = unsafe {
        sys::bpf_prog_load(
            sys::BPF_PROG_TYPE_CGROUP_DEVICE,
            c"intruder".as_ptr(),
            c"GPL".as_ptr(),
            insns.as_ptr(),
            insns.len() as _,
            std::ptr::null_mut(),
        )
    };
    assert!(prog >= 0, "loading the intruder's program: {prog}");
    // SAFETY: prog is a new fd of ours.
    let prog = unsafe { OwnedFd::from_raw_fd(prog) };
    let cg =
        std::fs::File::open(asmguard_guard::guard::cgroup2_root(&Paths::default().proc).unwrap())
            .unwrap();
    // SAFETY: plain fds and an attach type; no options.
    let link = unsafe {
        sys::bpf_link_create(
            prog.as_raw_fd(),
            cg.as_raw_fd(),
            sys::BPF_CGROUP_DEVICE,
            std::ptr::null(),
        )
    };
    assert!(link >= 0, "attaching the intruder's program: {link}");
    // SAFETY: link is a new fd of ours.
    unsafe { OwnedFd::from_raw_fd(link) }
}

/// Pins of a filter replaced while no daemon runs: root unpins the
/// filter's link (its program goes with the last reference) and pins a
/// do-nothing program's link under the same name. The write lands then (the
/// attack, shown); the next open does not adopt that link (not the one the
/// daemon recorded, nor its program), attaches this build's program in its
/// place and says so: the intruder's write is refused again, and the start
/// after adopts what this one pinned.
#[test]
fn fallback_foreign_link_pinned_in_place_is_replaced() {
    use std::os::fd::AsRawFd;
    let Some(_l) = lock() else { return };
    let lo = Loop::new("foreign");
    std::fs::set_permissions(&lo.dev, std::os::unix::fs::PermissionsExt::from_mode(0o666)).unwrap();
    let pins = Pins::new("foreign");
    let name = {
        let g = Guard::open(&pins.opts()).unwrap();
        assert!(g.replaced_links().is_empty(), "{:?}", g.replaced_links());
        g.set_disk(&[lo.key()], Mode::Enforce, 9).unwrap();
        g.programs()
            .into_iter()
            .find(|p| p.starts_with("ag_cgroup_dev"))
            .expect("the cgroup-device program")
    };
    assert!(
        is_eperm(&write_open(&lo.dev)),
        "protected without the process"
    );
    let pin = pins.0.join("links").join(&name);
    std::fs::remove_file(&pin).unwrap();
    {
        let intruder = allow_all_link();
        let path = std::ffi::CString::new(pin.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a link fd of ours and a NUL-terminated path.
        let rc = unsafe { libbpf_rs::libbpf_sys::bpf_obj_pin(intruder.as_raw_fd(), path.as_ptr()) };
        assert_eq!(rc, 0, "pinning the intruder's link");
    }
    let t0 = Instant::now();
    while is_eperm(&write_open(&lo.dev)) {
        assert!(
            t0.elapsed() < Duration::from_secs(5),
            "the unpinned filter link stays attached"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(
        dd_as(0, &lo.dev),
        "the attack: a write lands under the intruder's link"
    );

    let opts = Options {
        backend: None,
        ..pins.opts()
    };
    let g = Guard::open(&opts).unwrap();
    assert!(g.adopted());
    let r = g.replaced_links();
    assert_eq!(r.len(), 1, "{r:?}");
    assert!(
        r[0].to_string()
            .starts_with(&format!("{name}: program id "))
            && r[0].to_string().contains("reads other maps ([]"),
        "{r:?}"
    );
    assert!(
        is_eperm(&write_open(&lo.dev)),
        "the intruder's write is refused"
    );
    assert!(!dd_as(0, &lo.dev));
    drop(g);
    let g = Guard::open(&opts).unwrap();
    assert!(g.replaced_links().is_empty(), "{:?}", g.replaced_links());
    assert!(is_eperm(&write_open(&lo.dev)));

    // With no record (deleted, or pins of a version that kept none), a
    // pinned link is not adopted either: it is replaced.
    drop(g);
    let rec = std::fs::read_dir("/run/asmguard/pins")
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| {
            p.to_string_lossy()
                .contains(&format!("asmguard-test-foreign-{}", std::process::id()))
        })
        .expect("the record of the test's pins");
    std::fs::remove_file(&rec).unwrap();
    let g = Guard::open(&opts).unwrap();
    let r = g.replaced_links();
    assert!(
        r.len() == 1 && r[0].to_string().contains("is in no record"),
        "{r:?}"
    );
    assert!(is_eperm(&write_open(&lo.dev)));
    assert!(rec.exists(), "recorded again");

    // The link the record names, with another program (an earlier build's,
    // as after an upgrade): replaced too, quietly (the reason counts it).
    drop(g);
    std::fs::remove_file(&pin).unwrap();
    let (link_id, prog_id) = {
        let other = allow_all_link();
        let info =
            std::fs::read_to_string(format!("/proc/self/fdinfo/{}", other.as_raw_fd())).unwrap();
        let field = |k: &str| -> u32 {
            info.lines()
                .find_map(|l| l.strip_prefix(k))
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or_else(|| panic!("{k} in {info}"))
        };
        let path = std::ffi::CString::new(pin.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a link fd of ours and a NUL-terminated path.
        let rc = unsafe { libbpf_rs::libbpf_sys::bpf_obj_pin(other.as_raw_fd(), path.as_ptr()) };
        assert_eq!(rc, 0);
        (field("link_id:"), field("prog_id:"))
    };
    let text = std::fs::read_to_string(&rec).unwrap();
    let text: String = text
        .lines()
        .map(|l| match l.strip_prefix(&format!("{name} ")) {
            Some(_) => format!("{name} {link_id} {prog_id} 0000000000000000\n"),
            None => format!("{l}\n"),
        })
        .collect();
    std::fs::write(&rec, text).unwrap();
    let g = Guard::open(&opts).unwrap();
    assert!(g.replaced_links().is_empty(), "{:?}", g.replaced_links());
    assert!(
        g.reason()
            .to_string()
            .contains("1 program of an earlier build replaced"),
        "{}",
        g.reason()
    );
    assert!(
        is_eperm(&write_open(&lo.dev)),
        "this build's program judges"
    );
}
