//! `asmguardctl inspect` against images made by real tools, and util-linux blkid
//! against images labelled by the project's format code.
//!
//! Needs: blkid, mkfs.ext2/3/4, mkfs.xfs, mkfs.btrfs, mkswap, sfdisk, cryptsetup,
//! and (as root, with loop devices) pvcreate and losetup. `make test` installs them.

use asmguard_format::label::{self, Label};
use asmguard_format::synth::SynthDisk;
use asmguard_testkit::run_ok as run;
use std::fs::OpenOptions;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::process::Command;

fn ctl() -> Command {
    Command::new(env!("CARGO_BIN_EXE_asmguardctl"))
}

fn image(dir: &Path, name: &str, size: u64) -> PathBuf {
    let p = dir.join(name);
    let f = std::fs::File::create(&p).unwrap();
    f.set_len(size).unwrap();
    p
}

/// Writes a partition table on `p` from an sfdisk `script`.
fn sfdisk(p: &Path, script: &[u8]) {
    use std::io::Write;
    let mut child = Command::new("sfdisk")
        .arg("-q")
        .arg(p)
        .stdin(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(script).unwrap();
    assert!(child.wait().unwrap().success());
}

/// `blkid -p -o export` as key/value pairs.
fn blkid(p: &Path) -> Vec<(String, String)> {
    let out = Command::new("blkid")
        .args(["-p", "-o", "export"])
        .arg(p)
        .output()
        .expect("blkid is installed");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn get<'a>(kv: &'a [(String, String)], k: &str) -> Option<&'a str> {
    kv.iter().find(|(a, _)| a == k).map(|(_, v)| v.as_str())
}

fn inspect_json(p: &Path) -> serde_json::Value {
    let out = run(ctl().arg("inspect").arg("--json").arg(p));
    serde_json::from_str(&out).unwrap()
}

fn write_at(p: &Path, off: u64, data: &[u8]) {
    let f = OpenOptions::new().write(true).open(p).unwrap();
    f.write_all_at(data, off).unwrap();
}

#[test]
fn blkid_reports_labels_written_by_the_format_code() {
    let dir = tempfile::tempdir().unwrap();
    // A blank disk labelled the ASMLib/AFD way.
    let p = image(dir.path(), "plain.img", 16 << 20);
    let mut b = vec![0u8; 4096];
    label::write(&mut b, &Label::new("demo_1").unwrap()).unwrap();
    write_at(&p, 0, &b);
    let kv = blkid(&p);
    assert_eq!(get(&kv, "TYPE"), Some("oracleasm"), "{kv:?}");
    assert_eq!(get(&kv, "LABEL"), Some("DEMO_1"), "{kv:?}");

    // A synthetic ASM member disk with a header, labelled with --migrate semantics.
    let p = image(dir.path(), "member.img", 16 << 20);
    let mut disk = SynthDisk::new(16);
    disk.label = None;
    for (off, blk) in disk.metadata().unwrap() {
        write_at(&p, off, &blk);
    }
    assert_eq!(get(&blkid(&p), "TYPE"), Some("oracleasm"));
    assert_eq!(get(&blkid(&p), "LABEL"), None);
    let mut b0 = disk.header_block();
    label::write(&mut b0, &Label::new("DATA01").unwrap()).unwrap();
    write_at(&p, 0, &b0);
    let kv = blkid(&p);
    assert_eq!(get(&kv, "TYPE"), Some("oracleasm"), "{kv:?}");
    assert_eq!(get(&kv, "LABEL"), Some("DATA01"), "{kv:?}");
    // And inspect agrees, with the header intact.
    let j = inspect_json(&p);
    assert_eq!(j["verdict"], "asm_disk_header");
    assert_eq!(j["disk_header"]["checksum"], "valid");
    assert_eq!(j["disk_header"]["grpname"], "DATA");
    assert_eq!(j["label"]["label"], "DATA01");
}

/// The label as util-linux blkid reads it (and so udev's `ID_FS_LABEL`, the
/// links and ASM) is the label the format code reads, byte for byte, for the
/// label fields that trip a stricter reader: bytes after a NUL, trailing
/// blanks, lower case, a leading NUL.
#[test]
fn the_format_code_reads_labels_as_blkid_does() {
    let dir = tempfile::tempdir().unwrap();
    for (i, field) in [
        &b"DATA1\0X"[..],
        b"DATA1\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0ZZ",
        b"DATA1   ",
        b"DATA1 \t",
        b"data1",
        b"Data_1",
        b"\0DATA1",
        b"DATA1",
        b"ABCDEFGHIJKLMNOPQRSTUVWX",
    ]
    .iter()
    .enumerate()
    {
        let p = image(dir.path(), &format!("l{i}.img"), 1 << 20);
        let mut b = vec![0u8; 4096];
        b[0x20..0x28].copy_from_slice(b"ORCLDISK");
        b[0x28..0x28 + field.len()].copy_from_slice(field);
        write_at(&p, 0, &b);
        let kv = blkid(&p);
        assert_eq!(get(&kv, "TYPE"), Some("oracleasm"), "{field:?}: {kv:?}");
        let ours = match label::read(&b) {
            label::LabelState::Marked { label, .. } => label,
            s => panic!("{field:?}: {s:?}"),
        };
        assert_eq!(
            ours.as_deref(),
            get(&kv, "LABEL"),
            "{:?}: blkid {kv:?}",
            String::from_utf8_lossy(field)
        );
    }
}

#[test]
fn inspect_shows_every_header_field_as_text() {
    let dir = tempfile::tempdir().unwrap();
    let p = image(dir.path(), "member.img", 8 << 20);
    let mut disk = SynthDisk::new(8);
    disk.label = Some(Label::new("TXT1").unwrap());
    for (off, blk) in disk.metadata().unwrap() {
        write_at(&p, off, &blk);
    }
    let out = run(ctl().arg("inspect").arg(&p));
    let s = out;
    asmguard_testkit::assert_contains_all(
        &s,
        &[
            "kfbh.endian",
            "kfbh.type",
            "kfbh.check",
            "kfdhdb.driver.provstr",
            "kfdhdb.compat",
            "kfdhdb.dsknum",
            "kfdhdb.grptyp",
            "kfdhdb.hdrsts",
            "kfdhdb.dskname",
            "kfdhdb.grpname",
            "kfdhdb.fgname",
            "kfdhdb.crestmp",
            "kfdhdb.mntstmp",
            "kfdhdb.secsize",
            "kfdhdb.blksize",
            "kfdhdb.ausize",
            "kfdhdb.dsksize",
        ],
    );
    assert!(s.contains("MEMBER"), "{s}");
    assert!(s.contains("KFBTYP_DISKHEAD"), "{s}");
    assert!(s.contains("TXT1 (ORCLDISK)"), "{s}");
    assert!(s.contains("(valid)"), "{s}");
}

/// Foreign data made by the real tools is recognised, and named as blkid names it.
#[test]
fn foreign_signatures_from_real_tools() {
    let dir = tempfile::tempdir().unwrap();
    type Maker = fn(&Path);
    let cases: Vec<(&str, &str, Maker)> = vec![
        ("ext2", "TYPE", |p| {
            drop(run(Command::new("mkfs.ext2").args(["-q", "-F"]).arg(p)))
        }),
        ("ext3", "TYPE", |p| {
            drop(run(Command::new("mkfs.ext3").args(["-q", "-F"]).arg(p)))
        }),
        ("ext4", "TYPE", |p| {
            drop(run(Command::new("mkfs.ext4").args(["-q", "-F"]).arg(p)))
        }),
        ("xfs", "TYPE", |p| {
            drop(run(Command::new("mkfs.xfs").args(["-q", "-f"]).arg(p)))
        }),
        ("btrfs", "TYPE", |p| {
            drop(run(Command::new("mkfs.btrfs").args(["-q", "-f"]).arg(p)))
        }),
        ("swap", "TYPE", |p| drop(run(Command::new("mkswap").arg(p)))),
        ("crypto_LUKS", "TYPE", |p| {
            // cryptsetup wants a non-empty key: feed one through a file.
            let key = p.with_extension("key");
            std::fs::write(&key, b"test-key").unwrap();
            let mut c = Command::new("cryptsetup");
            c.args([
                "luksFormat",
                "-q",
                "--pbkdf",
                "pbkdf2",
                "--pbkdf-force-iterations",
                "1000",
                "--key-file",
            ])
            .arg(&key)
            .arg(p);
            drop(run(&mut c));
        }),
        ("dos", "PTTYPE", |p| sfdisk(p, b"label: dos\n,,83\n")),
        ("gpt", "PTTYPE", |p| sfdisk(p, b"label: gpt\n,,L\n")),
    ];
    for (name, key, make) in cases {
        let p = image(dir.path(), &format!("{name}.img"), 320 << 20);
        make(&p);
        let kv = blkid(&p);
        assert_eq!(get(&kv, key), Some(name), "blkid on {name}: {kv:?}");
        let j = inspect_json(&p);
        assert_eq!(j["verdict"], "foreign_data", "{name}: {j}");
        let kinds: Vec<String> = j["signatures"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["kind"].as_str().unwrap().to_string())
            .collect();
        let want = match name {
            "crypto_LUKS" => "luks",
            "dos" => "mbr",
            n => n,
        };
        assert!(kinds.iter().any(|k| k == want), "{name}: found {kinds:?}");
    }
}

/// An LVM2 physical volume (pvcreate needs a block device: a loop device, as root).
#[test]
fn lvm2_physical_volume_is_foreign() {
    if !nix_is_root() {
        panic!("this test needs root (loop devices); run the suite as root");
    }
    let dir = tempfile::tempdir().unwrap();
    let p = image(dir.path(), "pv.img", 64 << 20);
    let out = run(Command::new("losetup").args(["-f", "--show"]).arg(&p));
    let dev = out.trim().to_string();
    let res = std::panic::catch_unwind(|| {
        run(Command::new("pvcreate")
            .args(["-ff", "-y", "--devicesfile", ""])
            .arg(&dev));
        let j = inspect_json(Path::new(&dev));
        assert_eq!(j["verdict"], "foreign_data", "{j}");
        assert_eq!(j["signatures"][0]["kind"], "lvm2", "{j}");
        assert_eq!(j["kind"], "block_device");
        assert_eq!(j["logical_block_size"], 512);
    });
    let _ = Command::new("losetup").arg("-d").arg(&dev).status();
    res.unwrap();
}

/// A 4096-byte-sector loop device: sizes reported, label found.
#[test]
fn block_device_with_4k_sectors() {
    assert!(nix_is_root(), "this test needs root (loop devices)");
    let dir = tempfile::tempdir().unwrap();
    let p = image(dir.path(), "4k.img", 32 << 20);
    let mut b = vec![0u8; 4096];
    label::write(&mut b, &Label::new("FOURK").unwrap()).unwrap();
    write_at(&p, 0, &b);
    let out = run(Command::new("losetup")
        .args(["-f", "--show", "--sector-size", "4096", "--direct-io=off"])
        .arg(&p));
    let dev = out.trim().to_string();
    let res = std::panic::catch_unwind(|| {
        let j = inspect_json(Path::new(&dev));
        assert_eq!(j["logical_block_size"], 4096, "{j}");
        assert_eq!(j["label"]["label"], "FOURK", "{j}");
        assert_eq!(j["verdict"], "asm_label");
        assert_eq!(j["size_bytes"], 32 << 20);
    });
    let _ = Command::new("losetup").arg("-d").arg(&dev).status();
    res.unwrap();
}

fn nix_is_root() -> bool {
    nix::unistd::geteuid().is_root()
}

fn expect_error(args: &[&str], code: i32, needle: &str) {
    let out = ctl().args(args).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(code), "{args:?}: {err}");
    assert!(err.contains(needle), "{args:?}: {err}");
    assert_eq!(err.trim().lines().count(), 1, "one line: {err}");
    assert!(out.stdout.is_empty());
}

#[test]
fn clear_one_line_errors() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing.img");
    expect_error(&["inspect", missing.to_str().unwrap()], 3, "no such file");
    expect_error(
        &["inspect", dir.path().to_str().unwrap()],
        3,
        "is a directory",
    );
    let small = image(dir.path(), "small.img", 1000);
    expect_error(&["inspect", small.to_str().unwrap()], 3, "too small");
    let fifo = dir.path().join("fifo");
    run(Command::new("mkfifo").arg(&fifo));
    expect_error(&["inspect", fifo.to_str().unwrap()], 3, "is a fifo");
    expect_error(&["inspect", "/dev/null"], 3, "character device");
    // Permission denied: a root-only image read by an unprivileged user.
    if nix_is_root() {
        let secret = image(dir.path(), "secret.img", 1 << 20);
        std::fs::set_permissions(&secret, std::os::unix::fs::PermissionsExt::from_mode(0o600))
            .unwrap();
        std::fs::set_permissions(
            dir.path(),
            std::os::unix::fs::PermissionsExt::from_mode(0o755),
        )
        .unwrap();
        let out = Command::new("setpriv")
            .args(["--reuid", "65534", "--regid", "65534", "--clear-groups"])
            .arg(env!("CARGO_BIN_EXE_asmguardctl"))
            .arg("inspect")
            .arg(&secret)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(3), "{err}");
        assert!(err.contains("permission denied"), "{err}");
    }
    // Usage errors are clap's (exit 2).
    let out = ctl().args(["inspect"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn inspect_never_writes() {
    let dir = tempfile::tempdir().unwrap();
    let p = image(dir.path(), "ro.img", 4 << 20);
    run(Command::new("mkfs.ext4").args(["-q", "-F"]).arg(&p));
    let before = std::fs::read(&p).unwrap();
    inspect_json(&p);
    run(ctl().arg("inspect").arg(&p));
    assert_eq!(std::fs::read(&p).unwrap(), before);
}
