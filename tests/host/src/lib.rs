//! Helpers for the host integration tests: loop devices on sparse files, a daemon
//! under test with a throw-away config and socket, and the CLI.
//!
//! Everything created here is undone on drop, also when a test fails (panics unwind):
//! loop devices are detached and removed from the kernel, daemons are killed and
//! reaped, temporary files deleted. Tests that touch loop devices take [`lock`] so they
//! run one at a time. The daemon under test only ever includes the loop devices the
//! test made itself (`devices.include` lists their names), so no other disk is read.
//!
//! The tests need root and loop devices. Without root they fail, unless
//! `ASMGUARD_HOST_TESTS=skip` is set, which makes them print SKIPPED and pass.

use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::os::unix::net::{UnixDatagram, UnixStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How long a test waits for the daemon's 2 s check to notice a change.
/// Ample on purpose: under `make test` the labs' guests take both cores while
/// the host tests run, and an apply queued ahead of the check (a rescan after
/// udev's events) can take seconds; each wait prints the time it took.
pub const CHECK_WITHIN: Duration = Duration::from_secs(20);

/// Serialise tests that use loop devices or global state. `None`: skip the test.
pub use asmguard_testkit::root_lock as lock;

/// The directory of the workspace's binaries (`target/debug` or `target/release`).
pub fn bin_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("current_exe");
    // target/<profile>/deps/<test> -> target/<profile>
    exe.parent()
        .and_then(|p| p.parent())
        .expect("target dir")
        .to_path_buf()
}

fn newest_source(dir: &Path) -> Option<std::time::SystemTime> {
    let mut newest = None;
    for e in std::fs::read_dir(dir).ok()?.flatten() {
        let p = e.path();
        let t = if p.is_dir() {
            newest_source(&p)
        } else {
            e.metadata().ok().and_then(|m| m.modified().ok())
        };
        newest = newest.max(t);
    }
    newest
}

fn bin(name: &str) -> PathBuf {
    let p = bin_dir().join(name);
    assert!(
        p.exists(),
        "{} is missing: run `cargo test --workspace` (or `cargo build --workspace` first)",
        p.display()
    );
    // `cargo test -p asmguard-host-tests` alone does not rebuild the binaries: refuse to
    // test a stale one.
    let built = std::fs::metadata(&p).and_then(|m| m.modified()).unwrap();
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let own = if name == "asmguardd" {
        "daemon/src"
    } else {
        "ctl/src"
    };
    for dir in [
        own,
        "crates/proto/src",
        "crates/devices/src",
        "crates/config/src",
        "crates/format/src",
    ] {
        if let Some(t) = newest_source(&root.join(dir)) {
            assert!(
                t <= built,
                "{} is older than the sources in {dir}: run `cargo build -p asmguardd -p asmguardctl` or `cargo test --workspace`",
                p.display()
            );
        }
    }
    p
}

pub fn daemon_bin() -> PathBuf {
    bin("asmguardd")
}

pub fn ctl_bin() -> PathBuf {
    bin("asmguardctl")
}

/// A command's output, as text.
#[derive(Debug)]
pub struct Out {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Out {
    fn from(o: Output) -> Out {
        Out {
            code: o.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
        }
    }
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {:?} / {:?}", self.stdout, self.stderr))
    }
    /// Asserts the command failed with exit `code` and a message holding every one of `words`.
    #[track_caller]
    pub fn refused(&self, code: i32, words: &[&str]) {
        assert_eq!(self.code, code, "{self:?}");
        assert!(
            words.iter().all(|w| self.stderr.contains(w)),
            "{words:?} not all in: {self:?}"
        );
    }
    #[track_caller]
    pub fn ok(self) -> Out {
        assert_eq!(self.code, 0, "expected success: {self:?}");
        self
    }
}

/// The disk labelled `label` in an `lsdsk --json` answer.
pub fn disk<'a>(v: &'a serde_json::Value, label: &str) -> &'a serde_json::Value {
    v["disks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["label"] == label)
        .unwrap_or_else(|| panic!("no disk {label} in {v:#}"))
}

/// The repository's top directory.
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The repository's `scripts/NAME`, with `BIN` set to the built binaries.
pub fn script(name: &str) -> Command {
    let mut c = Command::new(repo_root().join("scripts").join(name));
    c.env("BIN", bin_dir());
    c
}

pub fn run(cmd: &mut Command) -> Out {
    Out::from(cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}")))
}

pub fn sh(prog: &str, args: &[&str]) -> Out {
    run(Command::new(prog).args(args))
}

/// A free loop device number that does not exist yet (high numbers, so `losetup -f`
/// users elsewhere on the machine do not take it while the test runs).
pub fn fresh_loop_number() -> u32 {
    use std::sync::atomic::{AtomicU32, Ordering};
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let base = 300 + (std::process::id() % 200) * 3;
    loop {
        let n = base + NEXT.fetch_add(1, Ordering::SeqCst) % 2000;
        if !Path::new(&format!("/sys/class/block/loop{n}")).exists()
            && !Path::new(&format!("/dev/loop{n}")).exists()
        {
            return n;
        }
    }
}

/// A loop device on a sparse file. Detached and removed on drop.
pub struct Loop {
    pub number: u32,
    pub name: String,
    pub dev: PathBuf,
    pub file: PathBuf,
    attached: bool,
    _dir: tempfile::TempDir,
}

nix::ioctl_write_int_bad!(loop_ctl_remove, 0x4C81);

impl Loop {
    /// A backing file of `size` bytes, not attached yet (for hotplug tests).
    pub fn prepare(size: u64) -> Loop {
        let dir = tempfile::Builder::new()
            .prefix("asmguard-host-")
            .tempdir()
            .unwrap();
        let file = dir.path().join("disk.img");
        let f = File::create(&file).unwrap();
        f.set_len(size).unwrap();
        let number = fresh_loop_number();
        Loop {
            number,
            name: format!("loop{number}"),
            dev: PathBuf::from(format!("/dev/loop{number}")),
            file,
            attached: false,
            _dir: dir,
        }
    }

    /// Attach (`losetup`, with `--sector-size` if given).
    pub fn attach(&mut self, sector_size: Option<u32>) {
        let mut c = Command::new("losetup");
        if let Some(s) = sector_size {
            c.arg("--sector-size").arg(s.to_string());
        }
        c.arg(&self.dev).arg(&self.file);
        let o = run(&mut c);
        assert_eq!(o.code, 0, "losetup {}: {}", self.dev.display(), o.stderr);
        self.attached = true;
    }

    pub fn new(size: u64) -> Loop {
        let mut l = Loop::prepare(size);
        l.attach(None);
        l
    }

    pub fn with_sector_size(size: u64, sector: u32) -> Loop {
        let mut l = Loop::prepare(size);
        l.attach(Some(sector));
        l
    }

    pub fn detach(&mut self) {
        if self.attached {
            let _ = sh("losetup", &["-d", &self.dev.display().to_string()]);
            self.attached = false;
        }
    }

    /// Write into the backing file (buffered; the loop device sees it after a flush of
    /// its page cache, so use [`Loop::write_dev`] when the device is attached).
    pub fn write_file(&self, off: u64, data: &[u8]) {
        let f = OpenOptions::new().write(true).open(&self.file).unwrap();
        f.write_all_at(data, off).unwrap();
        f.sync_all().unwrap();
    }

    /// Write through the device with `O_DIRECT` (`off` and `data.len()` aligned).
    pub fn write_dev(&self, off: u64, data: &[u8]) {
        let f = OpenOptions::new()
            .write(true)
            .custom_flags(libc::O_DIRECT)
            .open(&self.dev)
            .unwrap();
        let mut buf = aligned(data.len());
        buf.as_mut_slice().copy_from_slice(data);
        f.write_all_at(buf.as_slice(), off).unwrap();
        f.sync_all().unwrap();
    }

    /// Read through the device with `O_DIRECT`.
    pub fn read_dev(&self, off: u64, len: usize) -> Vec<u8> {
        let f = OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_DIRECT)
            .open(&self.dev)
            .unwrap();
        let mut buf = aligned(len);
        f.read_exact_at(buf.as_mut_slice(), off).unwrap();
        buf.as_slice().to_vec()
    }
}

impl Drop for Loop {
    fn drop(&mut self) {
        self.detach();
        // Remove the device node the test made (it did not exist before).
        if let Ok(ctl) = OpenOptions::new()
            .read(true)
            .write(true)
            .open("/dev/loop-control")
        {
            use std::os::fd::AsRawFd;
            for _ in 0..50 {
                // SAFETY: LOOP_CTL_REMOVE takes the device number as its argument and
                // touches no memory of ours; the fd is an open /dev/loop-control.
                match unsafe { loop_ctl_remove(ctl.as_raw_fd(), self.number as libc::c_int) } {
                    Err(nix::errno::Errno::EBUSY) => std::thread::sleep(Duration::from_millis(20)),
                    _ => break,
                }
            }
        }
    }
}

/// A page-aligned buffer (for `O_DIRECT`).
pub struct Aligned {
    raw: Vec<u8>,
    start: usize,
    len: usize,
}

impl Aligned {
    pub fn as_slice(&self) -> &[u8] {
        &self.raw[self.start..self.start + self.len]
    }
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        &mut self.raw[self.start..self.start + self.len]
    }
}

pub fn aligned(len: usize) -> Aligned {
    let raw = vec![0u8; len + 4096];
    let start = (4096 - raw.as_ptr() as usize % 4096) % 4096;
    Aligned { raw, start, len }
}

/// A daemon under test with its own config and socket.
pub struct Daemon {
    child: Option<Child>,
    /// The daemon's BPF pin directory.
    pub pin_dir: PathBuf,
    pub socket: PathBuf,
    pub config: PathBuf,
    pub dir: tempfile::TempDir,
    /// Time from spawn to READY=1.
    pub ready_after: Duration,
    pub log: PathBuf,
    /// The metrics port the daemon was given (a free one, never the production
    /// 9465), unless the test configured `[metrics]` itself.
    pub metrics_port: Option<u16>,
    /// sd_notify lines received since READY=1 and not yet taken by
    /// [`Daemon::notifications`], read as they come like systemd does (file
    /// descriptors sent with them, FDSTORE=1, are closed on receipt).
    notes: std::sync::Arc<Mutex<Vec<String>>>,
}

/// A TCP port on 127.0.0.1 that was free a moment ago.
/// The backing file of loop device `name` (`loop7`), empty once it is detached.
pub fn loop_backing_file(name: &str) -> String {
    std::fs::read_to_string(format!("/sys/class/block/{name}/loop/backing_file"))
        .unwrap_or_default()
        .trim()
        .to_string()
}

pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .unwrap()
}

/// Removes the pins (and so the programs) that earlier, killed test runs left
/// under `/sys/fs/bpf/asmguard-*test*`. Once per test binary, before its first
/// daemon or filter: test binaries run one after another.
pub fn remove_leftover_test_pins() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let Ok(entries) = std::fs::read_dir("/sys/fs/bpf") else {
            return;
        };
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if name.starts_with("asmguard-") && name.contains("test") {
                if let Err(err) =
                    asmguard_guard::remove_pins(&asmguard_paths::Paths::default(), &e.path())
                {
                    eprintln!("leftover {name}: {err}");
                }
            }
        }
    });
}

impl Daemon {
    /// Start with `devices.include` = exactly these kernel names, plus `extra` TOML
    /// (other sections). Waits for READY=1 on a private NOTIFY_SOCKET.
    pub fn start(include: &[&str], extra: &str) -> Daemon {
        Daemon::start_env(include, extra, &[])
    }

    /// [`Daemon::start`] with extra environment variables.
    pub fn start_env(include: &[&str], extra: &str, env: &[(&str, &str)]) -> Daemon {
        let dir = tempfile::Builder::new()
            .prefix("asmguardd-test-")
            .tempdir()
            .unwrap();
        std::fs::set_permissions(
            dir.path(),
            std::os::unix::fs::PermissionsExt::from_mode(0o755),
        )
        .unwrap();
        remove_leftover_test_pins();
        let socket = dir.path().join("asmguard.sock");
        let config = dir.path().join("asmguard.toml");
        // Never the production metrics port: a free one unless the test chose.
        let metrics_port = (!extra.contains("[metrics]")).then(free_port);
        let metrics = metrics_port
            .map(|p| format!("\n[metrics]\nlisten = \"127.0.0.1:{p}\"\n"))
            .unwrap_or_default();
        let inc: Vec<String> = include.iter().map(|n| format!("{n:?}")).collect();
        // The write filter stays out of the way of tests that write to labelled
        // disks themselves, unless a test configures it.
        let filter = if extra.contains("[filter]") {
            ""
        } else {
            "\n[filter]\nmode = \"off\"\n"
        };
        // The label watch's reads would disturb tests that count I/O exactly:
        // off unless the test sets `label_watch_seconds = N` (a line of
        // `extra`, moved into [devices]).
        let (watch, extra): (Vec<&str>, Vec<&str>) = extra.lines().partition(|l| {
            let l = l.trim_start();
            l.starts_with("label_watch_seconds") || l.starts_with("manage_asm_members")
        });
        let mut watch: Vec<String> = watch.iter().map(|l| l.to_string()).collect();
        if !watch.iter().any(|l| l.starts_with("label_watch_seconds")) {
            watch.push("label_watch_seconds = 0".into());
        }
        let watch = watch.join("\n");
        let extra = extra.join("\n") + "\n";
        let text = format!(
            "[devices]\ninclude = [{}]\nexclude = []\n{watch}\n\n[socket]\npath = {:?}\n{}{}{}",
            inc.join(", "),
            socket.display().to_string(),
            extra,
            filter,
            metrics
        );
        // Its own pin directory (never the real /sys/fs/bpf/asmguard), removed on drop.
        let pin_dir = PathBuf::from(format!(
            "/sys/fs/bpf/asmguard-hosttest-{}",
            dir.path()
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default()
        ));
        std::fs::write(&config, text).unwrap();
        let notify = dir.path().join("notify.sock");
        let ns = UnixDatagram::bind(&notify).unwrap();
        ns.set_read_timeout(Some(Duration::from_millis(200)))
            .unwrap();
        let log = dir.path().join("daemon.log");
        let t0 = Instant::now();
        let child = Command::new(daemon_bin())
            .arg("--config")
            .arg(&config)
            .arg("--bpf-pin-dir")
            .arg(&pin_dir)
            .env("NOTIFY_SOCKET", &notify)
            .env("ASMGUARD_LOG", "debug")
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(File::create(&log).unwrap())
            .spawn()
            .unwrap();
        let mut d = Daemon {
            child: Some(child),
            pin_dir,
            socket,
            config,
            dir,
            ready_after: Duration::ZERO,
            log,
            metrics_port,
            notes: Default::default(),
        };
        let mut buf = [0u8; 4096];
        loop {
            if let Ok(n) = ns.recv(&mut buf) {
                let msg = String::from_utf8_lossy(&buf[..n]);
                if msg.lines().any(|l| l == "READY=1") {
                    d.ready_after = t0.elapsed();
                    break;
                }
            }
            if let Some(st) = d.child.as_mut().unwrap().try_wait().unwrap() {
                panic!("asmguardd exited ({st}) before READY: {}", d.log_text());
            }
            assert!(
                t0.elapsed() < Duration::from_secs(30),
                "no READY=1 within 30 s: {}",
                d.log_text()
            );
        }
        let notes = std::sync::Arc::downgrade(&d.notes);
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            // until the Daemon is dropped (the socket has a 200 ms read timeout)
            while let Some(notes) = notes.upgrade() {
                if let Ok(n) = ns.recv(&mut buf) {
                    notes.lock().unwrap_or_else(|p| p.into_inner()).extend(
                        String::from_utf8_lossy(&buf[..n])
                            .lines()
                            .map(str::to_string),
                    );
                }
            }
        });
        d
    }

    /// sd_notify lines received since the last call (or READY=1), after
    /// waiting `during`.
    pub fn notifications(&self, during: Duration) -> Vec<String> {
        std::thread::sleep(during);
        std::mem::take(&mut *self.notes.lock().unwrap_or_else(|p| p.into_inner()))
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    pub fn alive(&mut self) -> bool {
        self.child
            .as_mut()
            .is_some_and(|c| c.try_wait().unwrap().is_none())
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().unwrap().id()
    }

    /// asmguardctl against this daemon.
    pub fn ctl(&self, args: &[&str]) -> Out {
        run(Command::new(ctl_bin())
            .arg("--socket")
            .arg(&self.socket)
            .args(args))
    }

    /// asmguardctl as another user (setpriv), e.g. `["--reuid","65534","--regid","65534","--clear-groups"]`.
    pub fn ctl_as(&self, setpriv: &[&str], args: &[&str]) -> Out {
        run(Command::new("setpriv")
            .args(setpriv)
            .arg(ctl_bin())
            .arg("--socket")
            .arg(&self.socket)
            .args(args))
    }

    /// `lsdsk --json`.
    pub fn lsdsk(&self) -> serde_json::Value {
        self.ctl(&["lsdsk", "--json"]).ok().json()
    }

    /// The labels lsdsk shows.
    pub fn labels(&self) -> Vec<String> {
        self.lsdsk()["disks"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d["label"].as_str().unwrap().to_string())
            .collect()
    }

    /// Send raw bytes on a new connection, read one response line.
    pub fn raw(&self, bytes: &[u8]) -> serde_json::Value {
        let mut s = UnixStream::connect(&self.socket).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        // The daemon may close early (an oversized request): the answer is still there.
        let _ = s.write_all(bytes);
        let mut line = String::new();
        BufReader::new(s).read_line(&mut line).unwrap();
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("bad response {line:?}: {e}"))
    }

    /// Poll until `f(lsdsk)` holds; the time it took, or None after `limit`.
    pub fn wait_for(
        &self,
        limit: Duration,
        f: impl Fn(&serde_json::Value) -> bool,
    ) -> Option<Duration> {
        let t0 = Instant::now();
        loop {
            if f(&self.lsdsk()) {
                return Some(t0.elapsed());
            }
            if t0.elapsed() > limit {
                return None;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// The daemon's threads' stacks on stderr, where `gdb` is installed (a
    /// check that never came: where is it stuck?).
    pub fn dump_threads(&self) {
        let pid = self.pid().to_string();
        let o = Command::new("gdb")
            .args(["-p", &pid, "-batch", "-ex", "thread apply all bt 30"])
            .output();
        if let Ok(o) = o {
            eprintln!(
                "the daemon's threads (gdb):\n{}",
                String::from_utf8_lossy(&o.stdout)
            );
        }
    }

    /// Polls `f` until it holds for something the daemon's 2 s check does
    /// (a pin, a map, an exposure noticed): panics after [`CHECK_WITHIN`],
    /// naming `what` and the log's last lines; prints how long it took.
    pub fn until_check(&self, what: &str, f: &dyn Fn() -> bool) {
        let t0 = Instant::now();
        while !f() {
            if t0.elapsed() > CHECK_WITHIN {
                self.dump_threads();
                let log = self.log_text();
                let tail: Vec<&str> = log.lines().rev().take(30).collect();
                let tail: Vec<&str> = tail.into_iter().rev().collect();
                panic!(
                    "{what}: not within {} s of the daemon's 2 s check; the log's end:\n{}",
                    CHECK_WITHIN.as_secs(),
                    tail.join("\n")
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        eprintln!("{what}: {} ms", t0.elapsed().as_millis());
    }

    pub fn stop(&mut self) -> Option<std::process::ExitStatus> {
        let mut c = self.child.take()?;
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(c.id() as i32),
            nix::sys::signal::Signal::SIGTERM,
        );
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_secs(5) {
            if let Ok(Some(st)) = c.try_wait() {
                return Some(st);
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = c.kill();
        c.wait().ok()
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        self.stop();
        // The filter's programs outlive the daemon by design: detach them.
        if let Err(e) =
            asmguard_guard::remove_pins(&asmguard_paths::Paths::default(), &self.pin_dir)
        {
            eprintln!("removing {}: {e}", self.pin_dir.display());
        }
    }
}

/// The label block a fresh `label` writes (4096 bytes, or `unit` if larger).
pub fn fresh_label_block(label: &str, unit: usize) -> Vec<u8> {
    let mut b = vec![0u8; unit.max(4096)];
    asmguard_format::label::write(&mut b, &asmguard_format::Label::new(label).unwrap()).unwrap();
    b
}

/// Raw ASMLib-style label bytes at 32 (as `oracleasm createdisk` leaves a blank disk).
pub fn asmlib_block(label: &str) -> Vec<u8> {
    fresh_label_block(label, 4096)
}

/// Assert two byte strings are equal, reporting the first difference (not the bytes).
#[track_caller]
pub fn assert_same(a: &[u8], b: &[u8], what: &str) {
    if a != b {
        let i = a
            .iter()
            .zip(b)
            .position(|(x, y)| x != y)
            .unwrap_or(a.len().min(b.len()));
        panic!(
            "{what}: differ at byte {i} (lengths {} and {}): {:02x?} vs {:02x?}",
            a.len(),
            b.len(),
            a.get(i..(i + 16).min(a.len())).unwrap_or(&[]),
            b.get(i..(i + 16).min(b.len())).unwrap_or(&[])
        );
    }
}

/// A stand-in container for the host tests, made of the kernel's own pieces as
/// a runtime makes them: a cgroup-v2 directory below the cgroup2 mount (the
/// test's `[[container]] cgroup` pattern) and processes moved into it; when
/// [`TestCgroup::start`]ed, an init process in a user namespace that maps
/// 0..65535 to `base`.. (the maps written from the host, as a runtime does: no
/// newuidmap needed) or in none (a privileged container), optionally in a pid
/// namespace of its own, with the container's own `/etc/passwd` and
/// `/etc/group` ([`CTR_PASSWD`], [`CTR_GROUP`]: bind mounts in its own mount
/// namespace). Every process in the cgroup is killed and the cgroup removed on
/// drop.
pub struct TestCgroup {
    /// The path below the cgroup2 mount (the pattern to configure).
    pub rel: String,
    /// The directory.
    pub path: PathBuf,
    etc: tempfile::TempDir,
}

/// The container's `/etc/passwd` of the stand-in containers: the lab's users.
pub const CTR_PASSWD: &str = "root:x:0:0:root:/root:/bin/sh\n\
    grid:x:54331:54321::/home/grid:/bin/sh\n\
    oracle:x:54321:54321::/home/oracle:/bin/sh\n\
    intruder:x:1001:1001::/home/intruder:/bin/sh\n";
/// Its `/etc/group`.
pub const CTR_GROUP: &str = "root:x:0:\noinstall:x:54321:grid,oracle\n\
    asmadmin:x:54329:grid\nintruder:x:1001:\n";

/// A started [`TestCgroup`]: its init process and namespaces. Stopped (every
/// process of the cgroup killed) on drop.
pub struct Running<'a> {
    cg: &'a TestCgroup,
    init: Child,
    /// A process in the container's namespaces (pid namespace included).
    ns_pid: u32,
    userns: bool,
    pidns: bool,
}

impl TestCgroup {
    /// A fresh, empty cgroup `asmguard-hosttest-<pid>-<name>` at the top of the
    /// cgroup2 hierarchy.
    pub fn new(name: &str) -> TestCgroup {
        let root = asmguard_guard::guard::cgroup2_root(&asmguard_paths::Paths::default().proc)
            .expect("a cgroup2 mount");
        let rel = format!("asmguard-hosttest-{}-{name}", std::process::id());
        let path = root.join(&rel);
        std::fs::create_dir(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let etc = tempfile::Builder::new()
            .prefix("asmguard-ctr-etc-")
            .tempdir()
            .unwrap();
        // the container's root (a host uid of the map) reads them to bind-mount them
        std::fs::set_permissions(
            etc.path(),
            std::os::unix::fs::PermissionsExt::from_mode(0o755),
        )
        .unwrap();
        std::fs::write(etc.path().join("passwd"), CTR_PASSWD).unwrap();
        std::fs::write(etc.path().join("group"), CTR_GROUP).unwrap();
        TestCgroup { rel, path, etc }
    }

    /// Starts the container's init (`sleep`): a user namespace based at
    /// `userns_base` (none: privileged), a pid namespace of its own if `pidns`.
    pub fn start(&self, userns_base: Option<u32>, pidns: bool) -> Running<'_> {
        let mut flags = vec!["--mount"];
        if userns_base.is_some() {
            flags.push("--user");
        }
        if pidns {
            flags.extend(["--pid", "--fork", "--kill-child"]);
        }
        let outer = format!(
            "echo $$ > {}/cgroup.procs && exec unshare {} -- sleep 3600",
            self.path.display(),
            flags.join(" ")
        );
        let mut init = Command::new("sh")
            .args(["-c", &outer])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let pid = init.id();
        // unshare has made its namespaces once its mount namespace is not ours
        let ours = std::fs::read_link("/proc/self/ns/mnt").unwrap();
        let t0 = Instant::now();
        let ns_pid = loop {
            let made = std::fs::read_link(format!("/proc/{pid}/ns/mnt")).is_ok_and(|n| n != ours);
            // with a pid namespace: its first process, unshare's child
            let child = std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
                .ok()
                .and_then(|c| c.split_whitespace().next()?.parse::<u32>().ok());
            match (made, pidns, child) {
                (true, false, _) => break pid,
                (true, true, Some(c)) => break c,
                _ => {}
            }
            if let Ok(Some(st)) = init.try_wait() {
                panic!("the container's init exited ({st})");
            }
            assert!(t0.elapsed() < Duration::from_secs(10), "no namespaces made");
            std::thread::sleep(Duration::from_millis(5));
        };
        if let Some(base) = userns_base {
            // written from here, as a runtime does
            for f in ["uid_map", "gid_map"] {
                std::fs::write(format!("/proc/{pid}/{f}"), format!("0 {base} 65536\n"))
                    .unwrap_or_else(|e| panic!("writing {f} of {pid}: {e}"));
            }
        }
        let r = Running {
            cg: self,
            init,
            ns_pid,
            userns: userns_base.is_some(),
            pidns,
        };
        let etc = self.etc.path().display().to_string();
        for f in ["passwd", "group"] {
            let o = r.enter(
                &[],
                &[
                    "mount",
                    "--bind",
                    &format!("{etc}/{f}"),
                    &format!("/etc/{f}"),
                ],
            );
            assert_eq!(o.code, 0, "bind-mounting the container's /etc/{f}: {o:?}");
        }
        r
    }

    /// The pids in the cgroup now.
    pub fn pids(&self) -> Vec<i32> {
        std::fs::read_to_string(self.path.join("cgroup.procs"))
            .unwrap_or_default()
            .lines()
            .filter_map(|l| l.trim().parse().ok())
            .collect()
    }

    /// Kills every process in the cgroup and waits until it is empty.
    pub fn kill_all(&self) {
        let t0 = Instant::now();
        loop {
            let pids = self.pids();
            if pids.is_empty() {
                return;
            }
            for p in pids {
                let _ = nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(p),
                    nix::sys::signal::Signal::SIGKILL,
                );
            }
            assert!(
                t0.elapsed() < Duration::from_secs(10),
                "{}: processes left",
                self.path.display()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Running<'_> {
    /// Runs `cmd` in the container (its cgroup and namespaces) as root there.
    fn enter(&self, setpriv: &[&str], cmd: &[&str]) -> Out {
        let mut ns = vec![format!("--target={}", self.ns_pid), "--mount".into()];
        if self.userns {
            ns.push("--user".into());
        }
        if self.pidns {
            ns.push("--pid".into());
        }
        let outer = format!(
            "echo $$ > {}/cgroup.procs && exec nsenter {} -- \"$@\"",
            self.cg.path.display(),
            ns.join(" ")
        );
        let mut c = Command::new("sh");
        c.args(["-c", &outer, "sh"]);
        if !setpriv.is_empty() {
            c.arg("setpriv").args(setpriv).arg("--");
        }
        run(c.args(cmd))
    }

    /// Runs `cmd` in the container as `uid`, `gid` and `groups` as the
    /// container sees them.
    pub fn run_as(&self, uid: u32, gid: u32, groups: &[u32], cmd: &[&str]) -> Out {
        let groups = if groups.is_empty() {
            "--clear-groups".to_string()
        } else {
            let g: Vec<String> = groups.iter().map(|g| g.to_string()).collect();
            format!("--groups={}", g.join(","))
        };
        let (u, g) = (format!("--reuid={uid}"), format!("--regid={gid}"));
        self.enter(&[&u, &g, &groups], cmd)
    }

    /// Stops the container: every process of its cgroup killed.
    pub fn stop(mut self) {
        self.cg.kill_all();
        let _ = self.init.wait();
    }
}

impl Drop for Running<'_> {
    fn drop(&mut self) {
        self.cg.kill_all();
        let _ = self.init.kill();
        let _ = self.init.wait();
    }
}

impl Drop for TestCgroup {
    fn drop(&mut self) {
        self.kill_all();
        for _ in 0..100 {
            if std::fs::remove_dir(&self.path).is_ok() || !self.path.exists() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        eprintln!("{}: could not remove the cgroup", self.path.display());
    }
}

/// A FUSE file system that never answers: it answers the kernel's INIT and
/// the attributes of its root directory (so that it can be mounted and bind
/// mounted), and nothing else, so every lookup, open or read below it waits
/// until the file system goes (on drop: its `/dev/fuse` descriptor closed, the
/// waiting calls fail with ENOTCONN, and it is unmounted). What a container's
/// `/etc` on a stalled network or FUSE file system looks like to the daemon.
pub struct StalledFuse {
    /// Where it is mounted.
    pub dir: tempfile::TempDir,
    /// Its fusectl connection number (its device's minor).
    conn: Option<u32>,
    fd: Option<std::os::fd::OwnedFd>,
    server: Option<std::thread::JoinHandle<()>>,
}

impl StalledFuse {
    pub fn mount() -> StalledFuse {
        use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
        let dir = tempfile::Builder::new()
            .prefix("asmguard-stalled-")
            .tempdir()
            .unwrap();
        // fusectl, where the connection is aborted on drop
        if !std::fs::read_to_string("/proc/self/mounts")
            .unwrap_or_default()
            .contains(" /sys/fs/fuse/connections fusectl ")
        {
            let _ = nix::mount::mount(
                Some("fusectl"),
                "/sys/fs/fuse/connections",
                Some("fusectl"),
                nix::mount::MsFlags::empty(),
                None::<&str>,
            );
        }
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open("/dev/fuse")
            .expect("/dev/fuse (the fuse module)");
        let fd: OwnedFd = f.into();
        let opts = format!(
            "fd={},rootmode=40000,user_id=0,group_id=0,allow_other",
            fd.as_raw_fd()
        );
        nix::mount::mount(
            Some("agstalled"),
            dir.path(),
            Some("fuse.agstalled"),
            nix::mount::MsFlags::MS_NOSUID | nix::mount::MsFlags::MS_NODEV,
            Some(opts.as_str()),
        )
        .expect("mounting the stalled FUSE file system");
        // SAFETY: dup(2) of a descriptor this function owns; the copy is owned
        // by the server thread alone.
        let srv = unsafe { OwnedFd::from_raw_fd(libc::dup(fd.as_raw_fd())) };
        let server = std::thread::spawn(move || fuse_serve(srv));
        // while its root's attributes are answered (and cached)
        let conn = {
            use std::os::unix::fs::MetadataExt;
            std::fs::metadata(dir.path())
                .ok()
                .map(|m| libc::minor(m.dev()))
        };
        StalledFuse {
            dir,
            conn,
            fd: Some(fd),
            server: Some(server),
        }
    }
}

/// The server loop of [`StalledFuse`]: INIT and the root's GETATTR answered,
/// every other request read and left waiting.
fn fuse_serve(fd: std::os::fd::OwnedFd) {
    let mut f = std::fs::File::from(fd);
    let mut buf = vec![0u8; 1 << 20];
    use std::io::{Read, Write};
    let u32_at = |b: &[u8], o: usize| u32::from_ne_bytes(b[o..o + 4].try_into().unwrap());
    let u64_at = |b: &[u8], o: usize| u64::from_ne_bytes(b[o..o + 8].try_into().unwrap());
    loop {
        let n = match f.read(&mut buf) {
            Ok(n) if n >= 40 => n,
            Ok(_) => continue,
            Err(e) if e.raw_os_error() == Some(libc::EINTR) => continue,
            Err(_) => return, // unmounted or the connection closed
        };
        let b = &buf[..n];
        // struct fuse_in_header: len, opcode, unique, nodeid, ...
        let (opcode, unique, nodeid) = (u32_at(b, 4), u64_at(b, 8), u64_at(b, 16));
        let mut body: Vec<u8> = Vec::new();
        match opcode {
            // FUSE_INIT: struct fuse_init_in {major, minor, max_readahead, flags}
            26 => {
                let minor = u32_at(b, 44).min(31);
                let readahead = u32_at(b, 48);
                for v in [7u32, minor, readahead, 0] {
                    body.extend(v.to_ne_bytes());
                }
                body.extend(16u16.to_ne_bytes()); // max_background
                body.extend(12u16.to_ne_bytes()); // congestion_threshold
                body.extend(4096u32.to_ne_bytes()); // max_write
                body.extend(1u32.to_ne_bytes()); // time_gran
                body.resize(64, 0); // max_pages, map_alignment, flags2, unused
            }
            // FUSE_GETATTR of the root: struct fuse_attr_out
            3 if nodeid == 1 => {
                body.extend(3600u64.to_ne_bytes()); // attr_valid
                body.extend([0u8; 8]); // attr_valid_nsec, dummy
                body.extend(1u64.to_ne_bytes()); // ino
                body.extend([0u8; 8 * 5 + 4 * 3]); // size .. ctimensec
                body.extend((libc::S_IFDIR | 0o755).to_ne_bytes()); // mode
                body.extend(2u32.to_ne_bytes()); // nlink
                body.extend([0u8; 4 * 5]); // uid, gid, rdev, blksize, flags
            }
            // FUSE_STATX: "not implemented" (the kernel asks GETATTR instead)
            52 => {}
            _ => continue, // left waiting
        }
        let error = if opcode == 52 { -libc::ENOSYS } else { 0 };
        let mut out = Vec::with_capacity(16 + body.len());
        out.extend(((16 + body.len()) as u32).to_ne_bytes());
        out.extend(error.to_ne_bytes());
        out.extend(unique.to_ne_bytes());
        out.extend(body);
        if f.write_all(&out).is_err() {
            return;
        }
    }
}

impl Drop for StalledFuse {
    fn drop(&mut self) {
        // every waiting request fails once the connection is aborted
        if let Some(conn) = self.conn {
            let _ = std::fs::write(format!("/sys/fs/fuse/connections/{conn}/abort"), "1");
        }
        let _ = nix::mount::umount2(self.dir.path(), nix::mount::MntFlags::MNT_DETACH);
        self.fd.take();
        if let Some(s) = self.server.take() {
            let _ = s.join();
        }
    }
}

/// Undo what `udevadm test` does on a host without udevd: the links it made
/// to `dev` (under asmguard's, ASMLib's, AFD's and udev's own directories),
/// its database record, the rules file the test installed, the directories
/// it created, and the node's owner and mode (root:disk 0660).
pub struct UdevCleanup {
    /// The device node.
    pub dev: PathBuf,
    /// Directories the test created, removed last first.
    pub created: Vec<PathBuf>,
    /// The rules file the test installed.
    pub rules: PathBuf,
    /// The device's record in udev's database, made by the test.
    pub db: PathBuf,
}

impl Drop for UdevCleanup {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.rules);
        let _ = std::fs::remove_file(&self.db);
        let target = self.dev.file_name().unwrap().to_string_lossy().to_string();
        for root in [
            "/dev/asmguard",
            "/dev/oracleasm",
            "/dev/oracleafd",
            "/dev/disk",
            "/dev/block",
        ] {
            let _ = remove_links_to(Path::new(root), &target);
        }
        let _ = nix::unistd::chown(&self.dev, Some(0.into()), Some(6.into()));
        let _ = std::fs::set_permissions(
            &self.dev,
            std::os::unix::fs::PermissionsExt::from_mode(0o660),
        );
        for p in self.created.iter().rev() {
            let _ = std::fs::remove_dir_all(p);
        }
    }
}

/// Removes the symlinks below `dir` whose target's file name is `target`.
fn remove_links_to(dir: &Path, target: &str) -> std::io::Result<()> {
    for e in std::fs::read_dir(dir)? {
        let p = e?.path();
        let m = std::fs::symlink_metadata(&p)?;
        if m.is_dir() {
            let _ = remove_links_to(&p, target);
        } else if m.file_type().is_symlink()
            && std::fs::read_link(&p)?
                .file_name()
                .is_some_and(|f| f == target)
        {
            std::fs::remove_file(&p)?;
        }
    }
    Ok(())
}
