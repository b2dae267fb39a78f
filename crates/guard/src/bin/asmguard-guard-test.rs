//! `asmguard-guard-test`: drives the write filter ([`asmguard_guard::Guard`])
//! without the daemon, for the VM lab and the host tests.
//!
//! ```text
//! asmguard-guard-test load   [OPTIONS] [DEVICE...]   load or re-adopt, add devices, exit
//! asmguard-guard-test hold   [OPTIONS] [DEVICE...]   the same, then print events until killed
//! asmguard-guard-test events [--count N] [--timeout SECONDS]
//! asmguard-guard-test stats | disks | majors | unload
//! OPTIONS: --backend lsm|cgroup  --pin-dir DIR  --cgroup DIR
//!          --claim (claim the objects as the daemon does: ag_guardian)
//!          --uid N  --gid N  --exe PATH (repeatable; replace the allow-list when any is given)
//!          --mode enforce|audit|off (default enforce)  --id N (disk id, default 1)
//! ```
//!
//! `load` prints `ready backend=<b> adopted=<yes|no> programs=<p,..> reason=<...>`.
//! Events print as one line each: `event pid=.. uid=.. euid=.. comm=.. exe=..
//! dev=b7:3 disk=1 hook=file_open op=write-open mode=enforce`.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use asmguard_guard::{Backend, Denial, DevKey, ExeId, Guard, Mode, Options};

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(msg) => {
            eprintln!("asmguard-guard-test: error: {msg}");
            ExitCode::from(1)
        }
    }
}

/// The guard's options below the running system's roots (this program's
/// entry point builds them).
struct Opts(Options);

impl Default for Opts {
    fn default() -> Opts {
        Opts(Options::new(&asmguard_paths::Paths::default()))
    }
}

impl std::ops::Deref for Opts {
    type Target = Options;
    fn deref(&self) -> &Options {
        &self.0
    }
}

impl std::ops::DerefMut for Opts {
    fn deref_mut(&mut self) -> &mut Options {
        &mut self.0
    }
}

#[derive(Default)]
struct Args {
    opts: Opts,
    uids: Vec<u32>,
    gids: Vec<u32>,
    exes: Vec<PathBuf>,
    allow_given: bool,
    mode: Option<Mode>,
    id: u32,
    count: Option<usize>,
    timeout: Option<f64>,
    devices: Vec<PathBuf>,
}

fn parse(mut it: impl Iterator<Item = String>) -> Result<Args, String> {
    let mut a = Args {
        id: 1,
        ..Default::default()
    };
    // a tool beside the daemon or in turn with it: no claim unless asked
    a.opts.claim = false;
    while let Some(arg) = it.next() {
        let mut val = |name: &str| it.next().ok_or(format!("{name} needs a value"));
        let num = |s: String| s.parse::<u32>().map_err(|e| format!("{s:?}: {e}"));
        match arg.as_str() {
            "--backend" => {
                a.opts.backend = Some(match val("--backend")?.as_str() {
                    "lsm" => Backend::Lsm,
                    "fmod_ret" => Backend::FmodRet,
                    "cgroup" | "cgroup_device" => Backend::CgroupDevice,
                    o => return Err(format!("unknown backend {o:?}")),
                })
            }
            "--pin-dir" => a.opts.pin_dir = PathBuf::from(val("--pin-dir")?),
            "--cgroup" => a.opts.cgroup = Some(PathBuf::from(val("--cgroup")?)),
            "--claim" => a.opts.claim = true,
            "--uid" => {
                a.uids.push(num(val("--uid")?)?);
                a.allow_given = true;
            }
            "--gid" => {
                a.gids.push(num(val("--gid")?)?);
                a.allow_given = true;
            }
            "--exe" => {
                a.exes.push(PathBuf::from(val("--exe")?));
                a.allow_given = true;
            }
            "--mode" => a.mode = Some(val("--mode")?.parse()?),
            "--id" => a.id = num(val("--id")?)?,
            "--count" => a.count = Some(num(val("--count")?)? as usize),
            "--timeout" => {
                let v = val("--timeout")?;
                a.timeout = Some(v.parse().map_err(|e| format!("{v:?}: {e}"))?)
            }
            s if s.starts_with("--") => return Err(format!("unknown option {s}")),
            _ => a.devices.push(PathBuf::from(arg)),
        }
    }
    Ok(a)
}

fn event_line(e: &Denial) -> String {
    format!(
        "event pid={} uid={} euid={} fsuid={} egid={} comm={} exe={} dev={} disk={} hook={} op={} mode={}",
        e.pid,
        e.uid,
        e.euid,
        e.fsuid,
        e.egid,
        e.comm,
        if e.exe.is_empty() { "?" } else { &e.exe },
        format_args!("{}{}", e.device_kind(), e.device),
        e.disk_id,
        e.hook(),
        e.operation.to_string().replace(' ', "_"),
        e.mode
    )
}

fn setup(a: &Args) -> Result<Guard, String> {
    let g = Guard::open(&a.opts).map_err(|e| e.to_string())?;
    if a.allow_given {
        let exes = a
            .exes
            .iter()
            .map(|p| ExeId::of_path(p).map_err(|e| e.to_string()))
            .collect::<Result<Vec<_>, _>>()?;
        g.set_allow(&a.uids, &a.gids, &exes)
            .map_err(|e| e.to_string())?;
    }
    let devs = a
        .devices
        .iter()
        .map(|p| DevKey::of_path(p).map_err(|e| e.to_string()))
        .collect::<Result<Vec<_>, _>>()?;
    if !devs.is_empty() {
        g.set_disk(&devs, a.mode.unwrap_or(Mode::Enforce), a.id)
            .map_err(|e| e.to_string())?;
    }
    println!(
        "ready backend={} coverage={:?} adopted={} programs={} reason={}",
        g.backend(),
        g.backend().coverage().describe(""),
        if g.adopted() { "yes" } else { "no" },
        g.programs().join(","),
        g.reason()
    );
    std::io::stdout().flush().map_err(|e| e.to_string())?;
    Ok(g)
}

fn print_events(g: &Guard, count: Option<usize>, timeout: Option<f64>) -> Result<(), String> {
    let mut reader = g.event_reader().map_err(|e| e.to_string())?;
    let deadline = timeout.map(|t| Instant::now() + Duration::from_secs_f64(t));
    let mut seen = 0usize;
    loop {
        for e in reader
            .poll(Duration::from_millis(100))
            .map_err(|e| e.to_string())?
        {
            println!("{}", event_line(&e));
            seen += 1;
        }
        std::io::stdout().flush().map_err(|e| e.to_string())?;
        if count.is_some_and(|c| seen >= c) {
            return Ok(());
        }
        if deadline.is_some_and(|d| Instant::now() >= d) {
            return if count.is_some() {
                Err(format!("timed out after {seen} events"))
            } else {
                Ok(())
            };
        }
    }
}

fn run() -> Result<(), String> {
    let mut it = std::env::args().skip(1);
    let cmd = it.next().unwrap_or_default();
    let a = parse(it)?;
    match cmd.as_str() {
        "load" => setup(&a).map(drop),
        "hold" => {
            let g = setup(&a)?;
            print_events(&g, None, None)
        }
        "events" => {
            let g = Guard::open(&a.opts).map_err(|e| e.to_string())?;
            print_events(&g, a.count, a.timeout)
        }
        "stats" => {
            let g = Guard::open(&a.opts).map_err(|e| e.to_string())?;
            let s = g.stats().map_err(|e| e.to_string())?;
            let fmt = |m: &std::collections::BTreeMap<asmguard_guard::Hook, u64>| {
                m.iter()
                    .map(|(h, n)| format!("{h}:{n}"))
                    .collect::<Vec<_>>()
                    .join(",")
            };
            println!(
                "denied={} by_hook={} audited={} drops={}",
                s.denied_total(),
                fmt(&s.denied),
                fmt(&s.audited),
                s.ringbuf_drops
            );
            Ok(())
        }
        "disks" => {
            let g = Guard::open(&a.opts).map_err(|e| e.to_string())?;
            for (k, (mode, id)) in g.disks().map_err(|e| e.to_string())? {
                println!("{k} {mode} {id}");
            }
            Ok(())
        }
        "majors" => {
            let m = asmguard_guard::pinned_majors(&a.opts.pin_dir).map_err(|e| e.to_string())?;
            println!("majors {}", asmguard_guard::majors_text(&m));
            Ok(())
        }
        "unload" => asmguard_guard::remove_pins(&a.opts.paths, &a.opts.pin_dir).map_err(|e| e.to_string()),
        _ => Err(
            "usage: asmguard-guard-test load|hold|events|stats|disks|majors|unload [OPTIONS] [DEVICE...]"
                .into(),
        ),
    }
}
