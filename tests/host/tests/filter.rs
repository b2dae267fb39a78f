//! The write filter through the daemon, on the host (where the BPF LSM cannot
//! load, so this is the cgroup-device fallback, and the daemon says so):
//! a labelled disk is protected at once, root's write-open is denied and
//! logged (journal line, `events`), reads pass, the daemon's own label writes
//! pass, an allow-listed user writes, audit/off/disable work per label and for
//! all, and only root may change the filter.

use asmguard_host_tests::*;
use std::fs::OpenOptions;
use std::time::{Duration, Instant};

const MIB: u64 = 1 << 20;

fn write_open(dev: &str) -> std::io::Result<std::fs::File> {
    OpenOptions::new().write(true).open(dev)
}

fn denied(dev: &str) -> bool {
    matches!(write_open(dev), Err(e) if e.raw_os_error() == Some(libc::EPERM))
}

/// Events (JSON) until `f` finds one, or panics after 5 s.
fn wait_event(d: &Daemon, f: impl Fn(&serde_json::Value) -> bool) -> serde_json::Value {
    let t0 = Instant::now();
    loop {
        let o = d.ctl(&["events", "--json"]).ok();
        for line in o.stdout.lines() {
            let v: serde_json::Value = serde_json::from_str(line).unwrap();
            if f(&v) {
                return v;
            }
        }
        assert!(
            t0.elapsed() < Duration::from_secs(5),
            "no such event in: {}",
            o.stdout
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn daemon_filter_protects_labelled_disks() {
    let Some(_g) = lock() else { return };
    let l = Loop::new(64 * MIB);
    let l2 = Loop::new(64 * MIB);
    let dev = l.dev.display().to_string();
    let dev2 = l2.dev.display().to_string();
    let d = Daemon::start(
        &[&l.name, &l2.name],
        "[filter]\nmode = \"enforce\"\nallow_users = [\"nobody\"]\nallow_groups = []\n",
    );
    assert!(
        write_open(&dev).is_ok(),
        "not protected before it is labelled"
    );

    // status names the backend and says it is degraded
    let st = d.ctl(&["status", "--json"]).ok().json();
    assert_eq!(st["filter_backend"], "cgroup_device", "{st:#}");
    assert_eq!(st["filter_coverage"], "open_time_only");
    let text = d.ctl(&["status"]).ok().stdout;
    assert!(
        text.contains("cgroup_device (degraded: open-time only)"),
        "{text}"
    );

    d.ctl(&["label", "FDATA1", &dev]).ok();
    assert!(
        denied(&dev),
        "root write-open of a labelled disk must be EPERM"
    );
    assert!(
        OpenOptions::new().read(true).open(&dev).is_ok(),
        "reads pass"
    );
    let v = d.lsdsk();
    assert_eq!(
        disk(&v, "FDATA1")["filtering"],
        "enforce (cgroup_device, open-time only)"
    );
    let lsdsk_text = d.ctl(&["lsdsk"]).ok().stdout;
    assert!(lsdsk_text.contains("enforce"), "{lsdsk_text}");

    // the denial: an event with the caller, and a journal line
    let dd = sh(
        "dd",
        &[
            "if=/dev/zero",
            &format!("of={dev}"),
            "bs=4096",
            "count=1",
            "conv=notrunc",
        ],
    );
    assert_ne!(dd.code, 0, "dd must fail: {dd:?}");
    assert!(dd.stderr.contains("Operation not permitted"), "{dd:?}");
    let e = wait_event(&d, |e| e["comm"] == "dd");
    assert_eq!(e["label"], "FDATA1");
    assert_eq!(e["hook"], "cgroup_device");
    assert_eq!(e["operation"], "write-open");
    assert_eq!(e["mode"], "enforce");
    assert_eq!(e["uid"], 0);
    assert_eq!(e["device_type"], "block");
    let text = d.ctl(&["events"]).ok().stdout;
    assert!(
        text.contains("DENIED") && text.contains("label=FDATA1") && text.contains("comm=dd"),
        "{text}"
    );
    let log = d.log_text();
    assert!(
        log.contains("write denied:")
            && log.contains("label=FDATA1")
            && log.contains("hook=cgroup_device"),
        "{log}"
    );

    // the daemon's own writes pass: rename and relabel work while enforcing
    d.ctl(&["rename", "FDATA1", "FDATA2"]).ok();
    assert!(denied(&dev), "still protected under the new label");

    // a disk labelled now is protected at once
    d.ctl(&["label", "FDATA3", &dev2]).ok();
    assert!(denied(&dev2));

    // the allow-listed user (nobody) writes; DAC opened so the filter decides
    let chmod = sh("chmod", &["666", &dev]);
    assert_eq!(chmod.code, 0);
    let as_nobody = |dev: &str| {
        sh(
            "setpriv",
            &[
                "--reuid=65534",
                "--regid=65534",
                "--clear-groups",
                "dd",
                "if=/dev/zero",
                &format!("of={dev}"),
                "bs=4096",
                "count=1",
                "seek=100",
                "conv=notrunc",
            ],
        )
    };
    assert_eq!(as_nobody(&dev).code, 0, "allow-listed user writes");

    // only root changes the filter
    let o = d.ctl_as(
        &["--reuid", "65534", "--regid", "65534", "--clear-groups"],
        &["filter", "disable"],
    );
    assert_ne!(o.code, 0, "{o:?}");
    assert!(denied(&dev));

    // per label: audit logs and allows, disable allows
    d.ctl(&["filter", "audit", "FDATA2"]).ok();
    assert!(write_open(&dev).is_ok(), "audit allows");
    assert!(denied(&dev2), "the other disk keeps enforcing");
    wait_event(&d, |e| e["mode"] == "audit" && e["label"] == "FDATA2");
    assert_eq!(
        disk(&d.lsdsk(), "FDATA2")["filtering"],
        "audit (cgroup_device, open-time only)"
    );
    d.ctl(&["filter", "disable", "FDATA2"]).ok();
    assert!(write_open(&dev).is_ok());
    assert_eq!(disk(&d.lsdsk(), "FDATA2")["filtering"], "off");
    // an unknown label is bad input (exit 3, not_found), from the error's kind
    let o = d.ctl(&["filter", "enable", "NOSUCH"]);
    assert_eq!(o.code, 3, "{o:?}");
    assert!(o.stderr.contains("NOSUCH"), "{o:?}");

    // all disks: disable removes the programs and their pins, enable brings them back
    d.ctl(&["filter", "disable"]).ok();
    assert!(!d.pin_dir.exists(), "pins removed");
    assert!(write_open(&dev2).is_ok());
    let st = d.ctl(&["status", "--json"]).ok().json();
    assert_eq!(st["filter_backend"], "none");
    d.ctl(&["filter", "enable"]).ok();
    assert!(d.pin_dir.join("links").exists());
    assert!(denied(&dev) && denied(&dev2));
    let v = d.lsdsk();
    assert_eq!(
        disk(&v, "FDATA2")["filtering"],
        "enforce (cgroup_device, open-time only)"
    );

    // unlabel: the disk leaves the managed set
    d.ctl(&["unlabel", "FDATA3"]).ok();
    let t0 = Instant::now();
    while denied(&dev2) && t0.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(
        write_open(&dev2).is_ok(),
        "an unlabelled disk is no longer protected"
    );
}

/// An exclusive open of the device (what dm, md, mount, swapon ... do in the kernel).
fn claim_open(dev: &str) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_EXCL)
        .open(dev)
}

#[test]
fn managed_disks_are_claimed_exclusively_until_unlabelled() {
    let Some(_g) = lock() else { return };
    let l = Loop::new(16 * MIB);
    let dev = l.dev.display().to_string();
    let d = Daemon::start(
        &[&l.name],
        "[filter]\nmode = \"enforce\"\nallow_users = [\"root\"]\nallow_groups = []\n",
    );
    drop(claim_open(&dev).expect("nobody claims it before it is labelled"));
    d.ctl(&["label", "CLAIM1", &dev]).ok();
    let e = claim_open(&dev).expect_err("a managed disk is claimed by the daemon");
    assert_eq!(e.raw_os_error(), Some(libc::EBUSY), "{e}");
    let st = d.ctl(&["status", "--json"]).ok().json();
    let devno = std::fs::read_to_string(format!("/sys/class/block/{}/dev", l.name)).unwrap();
    let (maj, min) = devno.trim().split_once(':').unwrap();
    let (maj, min): (u32, u32) = (maj.parse().unwrap(), min.parse().unwrap());
    assert_eq!(
        st["claims"],
        serde_json::json!([{"label": "CLAIM1", "major": maj, "minor": min}])
    );
    let text = d.ctl(&["status"]).ok().stdout;
    assert!(
        text.contains(&format!(
            "1 disk(s), kernel consumers get EBUSY: CLAIM1 {}",
            devno.trim()
        )),
        "{text}"
    );
    assert_eq!(st["claims_kept"], "systemd fd store", "{st:#}");
    // opens without O_EXCL (ASM, the database, multipathd) are not in its way
    assert!(OpenOptions::new().read(true).write(true).open(&dev).is_ok());
    let name = format!("FDNAME=claim-{}", devno.trim().replace(':', "-"));
    let n = d.notifications(Duration::from_millis(300));
    assert!(
        n.windows(2).any(|w| w[0] == "FDSTORE=1" && w[1] == name),
        "the claim goes to systemd's fd store: {n:?}"
    );
    // the daemon's own label writes go through its claim
    d.ctl(&["rename", "CLAIM1", "CLAIM2"]).ok();
    d.ctl(&["label", "CLAIM3", &dev, "--force"]).ok();
    assert_eq!(
        claim_open(&dev).unwrap_err().raw_os_error(),
        Some(libc::EBUSY)
    );
    d.ctl(&["unlabel", "CLAIM3"]).ok();
    drop(claim_open(&dev).expect("unlabelled: the claim is released"));
    let st = d.ctl(&["status", "--json"]).ok().json();
    assert_eq!(st["claims"], serde_json::json!([]), "{st:#}");
    let n = d.notifications(Duration::from_millis(300));
    assert!(
        n.windows(2)
            .any(|w| w[0] == "FDSTOREREMOVE=1" && w[1] == name),
        "released from the fd store: {n:?}"
    );
}

#[test]
fn claimed_loop_disk_detaches_only_once_audit_releases_the_claim() {
    let Some(_g) = lock() else { return };
    let mut l = Loop::new(16 * MIB);
    let dev = l.dev.display().to_string();
    let d = Daemon::start(
        &[&l.name],
        "[filter]\nmode = \"enforce\"\nallow_users = [\"root\"]\nallow_groups = []\n",
    );
    d.ctl(&["label", "CLAIMLO", &dev]).ok();
    assert_eq!(
        claim_open(&dev).unwrap_err().raw_os_error(),
        Some(libc::EBUSY)
    );
    let file = loop_backing_file(&l.name);
    assert!(!file.is_empty(), "attached before the test");
    // losetup -d succeeds, but the loop driver only marks the device: it is open
    l.detach();
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(
        loop_backing_file(&l.name),
        file,
        "still attached while the daemon holds its claim"
    );
    // audit lets the claim go; with the last close the device detaches
    d.ctl(&["filter", "audit", "CLAIMLO"]).ok();
    let t = Instant::now();
    while !loop_backing_file(&l.name).is_empty() && t.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(
        loop_backing_file(&l.name),
        "",
        "detached once the claim was released"
    );
}

/// A mode set for a disk ends with that disk's label, moves with a rename, and
/// a new label starts in the configured mode (issue: audit followed the
/// label's name, so `filter audit R1; unlabel R1; label R1 <disk>` gave a new
/// disk in audit, and `rename R1 R2; rename R2 R1` brought audit back).
#[test]
fn a_mode_belongs_to_the_disk_not_to_the_label_name() {
    let Some(_g) = lock() else { return };
    let a = Loop::new(16 * MIB);
    let b = Loop::new(16 * MIB);
    let (da, db) = (a.dev.display().to_string(), b.dev.display().to_string());
    let d = Daemon::start(
        &[&a.name, &b.name],
        "[filter]\nmode = \"enforce\"\nallow_users = [\"nobody\"]\nallow_groups = []\n",
    );
    let filtering = |label: &str| disk(&d.lsdsk(), label)["filtering"].clone();
    let enforce = "enforce (cgroup_device, open-time only)";
    let audit = "audit (cgroup_device, open-time only)";

    // rename carries the disk's mode; renaming back does not lose it
    d.ctl(&["label", "MODER1", &da]).ok();
    d.ctl(&["filter", "audit", "MODER1"]).ok();
    assert_eq!(filtering("MODER1"), audit);
    d.ctl(&["rename", "MODER1", "MODER2"]).ok();
    assert_eq!(filtering("MODER2"), audit, "the disk keeps its mode");
    assert!(write_open(&da).is_ok(), "audit allows on the renamed disk");
    d.ctl(&["rename", "MODER2", "MODER1"]).ok();
    assert_eq!(filtering("MODER1"), audit);

    // unlabel ends the mode: the same name on the same disk starts enforcing
    d.ctl(&["unlabel", "MODER1"]).ok();
    d.ctl(&["label", "MODER1", &da]).ok();
    assert_eq!(filtering("MODER1"), enforce, "a new label: configured mode");
    assert!(denied(&da));

    // and the name on another disk does not inherit it either
    d.ctl(&["filter", "audit", "MODER1"]).ok();
    d.ctl(&["unlabel", "MODER1"]).ok();
    d.ctl(&["label", "MODER1", &db]).ok();
    assert_eq!(filtering("MODER1"), enforce);
    assert!(denied(&db), "a new disk with an old name is protected");

    // a mode kept for a disk that went away (no unlabel) can be cleared by
    // `enable`; other modes need a disk that carries the label
    d.ctl(&["filter", "audit", "MODER1"]).ok();
    let mut b = b;
    b.detach();
    let gone = d.wait_for(Duration::from_secs(10), |v| {
        v["disks"]
            .as_array()
            .is_some_and(|a| a.iter().all(|x| x["label"] != "MODER1"))
    });
    assert!(gone.is_some(), "the detached disk leaves lsdsk");
    d.ctl(&["filter", "enable", "MODER1"]).ok();
    let o = d.ctl(&["filter", "enable", "MODER1"]);
    assert_eq!(o.code, 3, "nothing left to clear: {o:?}");
    let o = d.ctl(&["filter", "audit", "MODER1"]);
    assert_eq!(
        o.code, 3,
        "audit needs a disk that carries the label: {o:?}"
    );
}

/// `[daemon] runtime_dir` is where the filter's runtime state goes (not the
/// socket's directory, the default), and a restarted daemon reads it back.
#[test]
fn runtime_state_goes_to_the_configured_runtime_dir() {
    let Some(_g) = lock() else { return };
    let l = Loop::new(16 * MIB);
    let dev = l.dev.display().to_string();
    let run = tempfile::tempdir().unwrap();
    let cfg = format!(
        "[filter]\nmode = \"enforce\"\nallow_users = [\"nobody\"]\nallow_groups = []\n\
         [daemon]\nruntime_dir = {:?}\n",
        run.path().display().to_string()
    );
    let mut d = Daemon::start(&[&l.name], &cfg);
    d.ctl(&["label", "RUNDIR1", &dev]).ok();
    d.ctl(&["filter", "audit", "RUNDIR1"]).ok();
    let state = std::fs::read_to_string(run.path().join("filter.state")).unwrap();
    assert!(state.starts_with("mode RUNDIR1 audit "), "{state:?}");
    assert!(
        !d.socket.with_file_name("filter.state").exists(),
        "nothing in the socket's directory"
    );
    // a restart with the same runtime_dir keeps the disk's mode
    d.stop();
    let d = Daemon::start(&[&l.name], &cfg);
    assert_eq!(
        disk(&d.lsdsk(), "RUNDIR1")["filtering"],
        "audit (cgroup_device, open-time only)"
    );
}

/// `bpftool`'s answer for the map pinned at `pin`: its id.
fn pinned_map_id(pin: &std::path::Path) -> Option<u32> {
    let o = sh("bpftool", &["map", "show", "pinned", pin.to_str().unwrap()]);
    o.stdout.split(':').next()?.trim().parse().ok()
}

/// Another process with the same pin directory (the lock keeps a second
/// asmguardd out, not bpftool or an older daemon) changes the filter under
/// the daemon: it deletes the disk from the pinned device map (the disk is
/// writable at once), then pins a map of its own at the device map's path.
/// The daemon notices each within its 2 s check, or at its next write of the
/// maps (a rescan right after the deletion): an ERROR line, protection
/// `degraded` with the reason in `status`, and its own put back (the disk is
/// refused again, the pin names its map again).
#[test]
fn the_daemon_notices_its_pinned_filter_changed_under_it() {
    let Some(_g) = lock() else { return };
    if sh("bpftool", &["version"]).code != 0 {
        panic!("bpftool is needed (scripts/deps.sh installs it)");
    }
    let l = Loop::new(16 * MIB);
    let dev = l.dev.display().to_string();
    let d = Daemon::start(
        &[&l.name],
        "[filter]\nmode = \"enforce\"\nallow_users = []\nallow_groups = []\n",
    );
    d.ctl(&["label", "PINNED", &dev]).ok();
    assert!(denied(&dev));
    let blk = d.pin_dir.join("maps").join("ag_blk");
    let own = pinned_map_id(&blk).expect("the daemon's ag_blk");
    let changed = |n: usize| {
        d.log_text()
            .lines()
            .filter(|l| l.contains("ERROR") && l.contains("changed under this daemon"))
            .count()
            >= n
    };
    assert!(!changed(1), "nothing changed yet: {}", d.log_text());

    // 1. the disk's entry deleted from the pinned map: writable until noticed
    let rdev = std::fs::metadata(&dev).map(|m| {
        use std::os::unix::fs::MetadataExt;
        m.rdev()
    });
    let rdev = rdev.unwrap();
    let (maj, min) = (libc::major(rdev), libc::minor(rdev));
    let key = ((maj << 20) | min).to_le_bytes();
    let hex: Vec<String> = key.iter().map(|b| format!("{b:02x}")).collect();
    let mut args = vec![
        "map",
        "delete",
        "pinned",
        blk.to_str().unwrap(),
        "key",
        "hex",
    ];
    args.extend(hex.iter().map(String::as_str));
    sh("bpftool", &args).ok();
    assert!(write_open(&dev).is_ok(), "the deletion took effect");
    // a rescan writes the maps right after the change (the label's own
    // device event did, by chance, and its write put the entry back without
    // a word): the write says what it found, not only the 2 s check
    d.ctl(&["scan"]).ok();
    d.until_check("the deletion noticed and undone", &|| {
        changed(1) && denied(&dev)
    });
    let st = d.ctl(&["status", "--json"]).ok().json();
    assert_eq!(st["protection"], "degraded", "{st:#}");
    let why = st["filter_reason"]["changed"].as_str().unwrap_or_default();
    assert!(why.contains("managed-device map"), "{st:#}");
    let text = d.ctl(&["status"]).ok().stdout;
    assert!(
        text.contains("; CHANGED BY ANOTHER PROCESS (put back; ") && text.contains(why),
        "{text}"
    );

    // 2. a map of another process's pinned in place of the device map
    std::fs::remove_file(&blk).unwrap();
    sh(
        "bpftool",
        &[
            "map",
            "create",
            blk.to_str().unwrap(),
            "type",
            "hash",
            "key",
            "4",
            "value",
            "8",
            "entries",
            "16",
            "name",
            "ag_blk",
        ],
    )
    .ok();
    assert_ne!(pinned_map_id(&blk), Some(own), "replaced");
    d.until_check("the replaced pin noticed and pinned again", &|| {
        changed(2) && pinned_map_id(&blk) == Some(own)
    });
    assert!(denied(&dev), "still protected");
    let log = d.log_text();
    assert!(
        log.lines().any(|l| l.contains("ERROR")
            && l.contains("named map")
            && l.contains(&format!("this daemon's map {own}"))),
        "{log}"
    );
}

/// A process with `CAP_SYS_ADMIN` zeroes the `ag_majors` word of the loop
/// major through the pinned map (what a write by map id does too): the
/// programs skip every loop disk and the labelled one is writable. The
/// daemon's 2 s check compares every map it fills with what it last wrote,
/// not only the device maps: within it the word is put back (the disk is
/// refused again), with an ERROR line naming `ag_majors`, protection
/// `degraded` and the reason in `status`; an allow-list entry added behind
/// its back is taken out the same way, and so are, by map id (no pin
/// needed), the pin directories' entries deleted and a container place
/// added. `status` says the pins are watched, not guarded, on this backend
/// (the host's kernel refuses the `bpf` hook's trampoline), and its JSON gives
/// each attached program's run time and count (`filter_program_runs`).
#[test]
fn a_zeroed_majors_word_is_put_back_within_the_check() {
    let Some(_g) = lock() else { return };
    if sh("bpftool", &["version"]).code != 0 {
        panic!("bpftool is needed (scripts/deps.sh installs it)");
    }
    let l = Loop::new(16 * MIB);
    let dev = l.dev.display().to_string();
    let d = Daemon::start(
        &[&l.name],
        "[filter]\nmode = \"enforce\"\nallow_users = []\nallow_groups = []\n",
    );
    d.ctl(&["label", "MAJORS", &dev]).ok();
    assert!(denied(&dev));
    let st = d.ctl(&["status", "--json"]).ok().json();
    assert_eq!(st["filter_pins"], "watched", "{st:#}");
    assert_eq!(st["protection"], "degraded", "the fallback: {st:#}");
    let text = d.ctl(&["status"]).ok().stdout;
    assert!(text.contains("watched, not guarded"), "{text}");
    // what each attached program ran: name, run time and count (the lab's
    // cost benches read it where bpftool cannot open guarded programs)
    let progs: Vec<&str> = st["filter_programs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    let runs = st["filter_program_runs"].as_array().unwrap();
    assert!(!progs.is_empty(), "{st:#}");
    assert!(
        st["filter_programs"]
            .as_array()
            .unwrap()
            .iter()
            .all(|p| p["id"].as_u64().is_some_and(|i| i > 0) && p["hook"].is_string()),
        "{st:#}"
    );
    for p in &progs {
        let row = runs.iter().find(|r| r["name"] == *p);
        assert!(
            row.is_some_and(|r| r["run_time_ns"].is_u64() && r["run_cnt"].is_u64()),
            "{p}: {runs:?}"
        );
    }
    let changed = |what: &str| {
        d.log_text().lines().any(|l| {
            l.contains("ERROR") && l.contains("changed under this daemon") && l.contains(what)
        })
    };
    assert!(!changed(""), "nothing changed yet: {}", d.log_text());

    // the word of block majors 0-63 (loop is 7): key 0, value 0
    let majors = d.pin_dir.join("maps").join("ag_majors");
    let zero = |key: &[&str]| {
        let mut args = vec![
            "map",
            "update",
            "pinned",
            majors.to_str().unwrap(),
            "key",
            "hex",
        ];
        args.extend(key);
        args.extend([
            "value", "hex", "00", "00", "00", "00", "00", "00", "00", "00",
        ]);
        sh("bpftool", &args).ok();
    };
    zero(&["00", "00", "00", "00"]);
    assert!(
        write_open(&dev).is_ok(),
        "the zeroed word took effect: the disk is writable"
    );
    d.until_check("the zeroed ag_majors word noticed and put back", &|| {
        changed("ag_majors") && denied(&dev)
    });
    let st = d.ctl(&["status", "--json"]).ok().json();
    assert_eq!(st["protection"], "degraded", "{st:#}");
    let why = st["filter_reason"]["changed"].as_str().unwrap_or_default();
    assert!(why.contains("ag_majors"), "{st:#}");
    assert!(
        !why.contains("managed-device map"),
        "only ag_majors was changed: {why}"
    );

    // an allow-list entry added behind the daemon's back: uid 0 in ag_rule_uids
    // (its value is whatever the map takes; the check does not know it)
    let uids = d.pin_dir.join("maps").join("ag_rule_uids");
    let vsize = map_value_size(&["pinned", uids.to_str().unwrap()]);
    let mut args = vec![
        "map",
        "update",
        "pinned",
        uids.to_str().unwrap(),
        "key",
        "hex",
        "00",
        "00",
        "00",
        "00",
        "value",
        "hex",
    ];
    args.extend(std::iter::repeat_n("ff", vsize));
    sh("bpftool", &args).ok();
    d.until_check("the added allow-list entry noticed and taken out", &|| {
        changed("ag_rule_uids")
    });
    d.until_check("root refused again", &|| denied(&dev));
    let dump = sh(
        "bpftool",
        &["map", "dump", "pinned", uids.to_str().unwrap()],
    )
    .ok();
    assert!(
        !dump.stdout.contains("00 00 00 00"),
        "uid 0 is out of ag_rule_uids again: {}",
        dump.stdout
    );

    // by map id, no pin needed (BPF_MAP_GET_FD_BY_ID): every entry of the
    // pin directories deleted, a container (cgroup id 1) added to the places
    let by_id = |name: &str| {
        pinned_map_id(&d.pin_dir.join("maps").join(name))
            .unwrap_or_else(|| panic!("no id for {name}"))
            .to_string()
    };
    let key_words = |name: &str| -> Vec<Vec<String>> {
        let o = sh("bpftool", &["-j", "map", "dump", "id", &by_id(name)]).ok();
        let v: serde_json::Value = serde_json::from_str(&o.stdout).unwrap();
        v.as_array()
            .unwrap()
            .iter()
            .map(|e| {
                e["key"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|b| b.as_str().unwrap().trim_start_matches("0x").to_string())
                    .collect()
            })
            .collect()
    };
    let dirs = key_words("ag_pin_dirs");
    assert_eq!(dirs.len(), 3, "the pin directory, maps/ and links/");
    for k in &dirs {
        let id = by_id("ag_pin_dirs");
        let mut args = vec!["map", "delete", "id", id.as_str(), "key", "hex"];
        args.extend(k.iter().map(String::as_str));
        sh("bpftool", &args).ok();
    }
    let places = by_id("ag_places");
    let vsize = map_value_size(&["id", &places]);
    let mut args = vec!["map", "update", "id", places.as_str(), "key", "hex"];
    args.extend([
        "01", "00", "00", "00", "00", "00", "00", "00", "value", "hex",
    ]);
    args.extend(std::iter::repeat_n("ff", vsize));
    sh("bpftool", &args).ok();
    d.until_check("the pin directories and the places put back", &|| {
        changed("ag_pin_dirs") && changed("ag_places")
    });
    assert_eq!(
        key_words("ag_pin_dirs"),
        dirs,
        "the pin directories put back"
    );
    assert!(
        key_words("ag_places").is_empty(),
        "the added place taken out"
    );
}

/// The value size of a map (`bpftool map show WHICH...`: `pinned PATH` or `id N`).
fn map_value_size(which: &[&str]) -> usize {
    let mut args = vec!["map", "show"];
    args.extend_from_slice(which);
    let info = sh("bpftool", &args).ok();
    info.stdout
        .split_whitespace()
        .skip_while(|w| *w != "value")
        .nth(1)
        .and_then(|v| v.trim_end_matches('B').parse().ok())
        .unwrap_or_else(|| panic!("no value size in: {}", info.stdout))
}

/// A shared-writable mapping made before the disk is protected keeps writing
/// (the kernel judges a mapping only when it is made): once the disk is
/// protected again (`filter enable` after a maintenance window) the daemon's
/// periodic check finds it, `status` exits 7 naming the process, `lsdsk`
/// says exposed and an event is kept; when the process is gone, `status`
/// exits 0 again within the check.
#[test]
fn a_mapping_made_before_protection_makes_the_disk_exposed() {
    let Some(_g) = lock() else { return };
    let l = Loop::new(16 * MIB);
    let dev = l.dev.display().to_string();
    let d = Daemon::start(
        &[&l.name],
        "[filter]\nmode = \"enforce\"\nallow_users = [\"nobody\"]\nallow_groups = []\n",
    );
    d.ctl(&["label", "EXPOSE1", &dev]).ok();
    assert!(denied(&dev));
    // a maintenance window: the filter is off for the disk, a process maps it
    d.ctl(&["filter", "disable", "EXPOSE1"]).ok();
    let mut child = std::process::Command::new("python3")
        .args([
            "-c",
            "import mmap, os, sys, time\n\
             fd = os.open(sys.argv[1], os.O_RDWR)\n\
             m = mmap.mmap(fd, 4096, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE, offset=1 << 20)\n\
             os.close(fd)\n\
             print('mapped', flush=True)\n\
             sys.stdin.read()\n\
             m[0] = 1\n\
             m.flush()\n",
            &dev,
        ])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("python3");
    let pid = child.id();
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(child.stdout.take().unwrap()),
        &mut line,
    )
    .unwrap();
    assert_eq!(line.trim(), "mapped");
    // the window ends: protected again, but the mapping is still there
    d.ctl(&["filter", "enable", "EXPOSE1"]).ok();
    assert!(denied(&dev), "new write-opens are refused");
    let t0 = Instant::now();
    let o = loop {
        let o = d.ctl(&["status"]);
        if o.code != 0 || t0.elapsed() > CHECK_WITHIN {
            break o;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    let seen = t0.elapsed();
    o.refused(
        7,
        &[
            "exposed",
            "EXPOSE1 mapped shared-writable by pid",
            &format!("pid {pid} (python3)"),
            "since before protection",
        ],
    );
    assert!(o.stdout.contains("exposed:"), "{o:?}");
    let st = d.ctl(&["status", "--json"]);
    assert_eq!(st.code, 7, "{st:?}");
    let e = &st.json()["exposed"][0];
    assert!(
        e["label"] == "EXPOSE1" && e["pid"] == pid && e["comm"] == "python3",
        "{e}"
    );
    assert_eq!(disk(&d.lsdsk(), "EXPOSE1")["exposed"], true);
    assert!(d.ctl(&["lsdsk"]).ok().stdout.contains("exposed"));
    let e = wait_event(&d, |e| e["noticed"]["kind"] == "exposed" && e["pid"] == pid);
    assert_eq!(e["label"], "EXPOSE1", "{e}");
    let text = d.ctl(&["events"]).ok().stdout;
    assert!(
        text.contains("EXPOSED label=EXPOSE1") && text.contains(&format!("pid={pid}")),
        "{text}"
    );
    let metrics = || {
        let port = d.metrics_port.unwrap();
        run(std::process::Command::new("curl")
            .args(["-sf", &format!("http://127.0.0.1:{port}/metrics")]))
        .stdout
    };
    assert!(
        metrics().contains("asmguard_disk_exposed{disk=\"EXPOSE1\"} 1"),
        "{}",
        metrics()
    );
    // what the filter cannot take back: a write through the old mapping lands
    drop(child.stdin.take());
    assert!(child.wait().unwrap().success());
    let mut b = [0u8; 1];
    std::os::unix::fs::FileExt::read_exact_at(&std::fs::File::open(&dev).unwrap(), &mut b, MIB)
        .unwrap();
    assert_eq!(b, [1], "the old mapping wrote the protected disk");
    // the process is gone: no longer exposed within the check
    d.until_check("no longer exposed", &|| d.ctl(&["status"]).code == 0);
    assert_ne!(disk(&d.lsdsk(), "EXPOSE1")["exposed"], true);
    assert!(!metrics().contains("asmguard_disk_exposed{"));
    wait_event(&d, |e| {
        e["noticed"]["kind"] == "exposure_ended" && e["pid"] == pid
    });
    eprintln!(
        "exposed seen after {seen:?}, cleared after {:?}",
        t0.elapsed()
    );
}
