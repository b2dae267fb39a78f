//! What the workspace's tests share: the root check and lock of the tests that
//! need root, running a program (for its output, or asserting it succeeded), a
//! config file in a temporary directory, and the on-disk test vectors of
//! `crates/format/tests/vectors`.
//!
//! Not for: loop devices, BPF pins and daemons of the root-only host tests
//! (`tests/host`), nor anything a product binary links (dev-dependency only).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::{Mutex, MutexGuard};

/// True when a test that needs root may run. Without root it fails, unless
/// `ASMGUARD_HOST_TESTS=skip` is set (then it prints SKIPPED and passes).
pub fn require_root() -> bool {
    // SAFETY: geteuid(2) has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } == 0 {
        return true;
    }
    if std::env::var("ASMGUARD_HOST_TESTS").as_deref() == Ok("skip") {
        eprintln!("SKIPPED: host tests need root (ASMGUARD_HOST_TESTS=skip)");
        return false;
    }
    panic!("host tests need root and loop devices; set ASMGUARD_HOST_TESTS=skip to skip them");
}

/// [`require_root`], then this test binary's lock, which serialises its tests
/// that use loop devices, pins or other global state. `None`: skip the test.
pub fn root_lock() -> Option<MutexGuard<'static, ()>> {
    static LOCK: Mutex<()> = Mutex::new(());
    require_root().then(|| LOCK.lock().unwrap_or_else(|p| p.into_inner()))
}

/// Runs `cmd` to its end; panics naming it when it cannot start.
pub fn output(cmd: &mut Command) -> Output {
    cmd.output()
        .unwrap_or_else(|e| panic!("running {cmd:?}: {e}"))
}

/// Runs `cmd`, asserts it succeeded (else panics with its output), and
/// returns its standard output.
pub fn run_ok(cmd: &mut Command) -> String {
    let out = output(cmd);
    assert!(
        out.status.success(),
        "{cmd:?} failed ({}):\n{}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Runs `program` with `args`: its exit code (-1 when killed by a signal),
/// standard output and standard error.
pub fn run_code(program: impl AsRef<Path>, args: &[&str]) -> (i32, String, String) {
    let o = output(Command::new(program.as_ref()).args(args));
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// Asserts `text` holds every one of `needles` (naming the first it lacks).
#[track_caller]
pub fn assert_contains_all(text: &str, needles: &[&str]) {
    if let Some(n) = needles.iter().find(|n| !text.contains(*n)) {
        panic!("{n:?} missing from:\n{text}");
    }
}

/// A config file holding `text` in a fresh temporary directory (removed when
/// the returned guard drops).
pub fn config_file(text: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let p = dir.path().join("asmguard.toml");
    std::fs::write(&p, text).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    (dir, p)
}

/// The directory of the on-disk test vectors (real ASM and ASMLib dumps).
pub fn vectors_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../format/tests/vectors")
}

/// The bytes of the test vector `name`.
pub fn vector(name: &str) -> Vec<u8> {
    let p = vectors_dir().join(name);
    std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_report_code_and_output() {
        assert_eq!(run_ok(Command::new("echo").arg("hi")), "hi\n");
        let (code, out, err) = run_code("sh", &["-c", "echo o; echo e >&2; exit 3"]);
        assert_eq!((code, out.as_str(), err.as_str()), (3, "o\n", "e\n"));
        let r = std::panic::catch_unwind(|| run_ok(&mut Command::new("false")));
        assert!(r.is_err(), "a failed command must fail the test");
        assert_contains_all("a b c", &["a", "c"]);
        let r = std::panic::catch_unwind(|| assert_contains_all("a b", &["a", "x"]));
        assert!(r.is_err(), "a missing needle must fail the test");
    }

    #[test]
    fn config_files_hold_their_text_and_vectors_exist() {
        let (dir, p) = config_file("[filter]\nmode = \"audit\"\n");
        assert_eq!(
            std::fs::read_to_string(&p).unwrap(),
            "[filter]\nmode = \"audit\"\n"
        );
        drop(dir);
        assert!(!p.exists());
        assert!(vectors_dir().join("SHA256SUMS").is_file());
    }
}
