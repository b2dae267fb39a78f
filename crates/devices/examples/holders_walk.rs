//! What one periodic check of protected disks costs: a walk of every
//! process (`holders`) beside a look at two named processes
//! (`holders_among`), side by side in one run on this host.
//!
//! `cargo run --release -p asmguard-devices --example holders_walk -- [PROCS] [FDS]`
//! forks PROCS children (default 600) holding FDS descriptors each (default
//! 150, on /dev/null) for the time of the run, as a database host's server
//! processes do, then times three rounds of each.

use asmguard_devices::holders::{holders, holders_among};
use asmguard_devices::KernelDev;
use std::path::Path;
use std::time::Instant;

fn main() {
    let mut args = std::env::args().skip(1);
    let procs: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(600);
    let fds: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(150);
    let mut children = Vec::new();
    for _ in 0..procs {
        // SAFETY: the child only opens files, sleeps and exits (no locks of
        // the parent's threads are taken: this process has one thread here).
        match unsafe { nix::unistd::fork() } {
            Ok(nix::unistd::ForkResult::Child) => {
                let held: Vec<std::fs::File> = (0..fds)
                    .filter_map(|_| std::fs::File::open("/dev/null").ok()) // literal path: the kernel's null device
                    .collect();
                std::thread::sleep(std::time::Duration::from_secs(120));
                drop(held);
                std::process::exit(0);
            }
            Ok(nix::unistd::ForkResult::Parent { child }) => children.push(child),
            Err(e) => {
                eprintln!("fork: {e}");
                break;
            }
        }
    }
    std::thread::sleep(std::time::Duration::from_secs(2)); // the children open theirs
    let proc = Path::new("/proc"); // literal path: the host's procfs, this tool's subject
    let dev = KernelDev::new(7, 4095).expect("a device number");
    let named: Vec<u32> = children.iter().take(2).map(|p| p.as_raw() as u32).collect();
    println!(
        "{} processes of {fds} descriptors (and this host's own)",
        children.len()
    );
    for _ in 0..3 {
        let t = Instant::now();
        let _ = holders(proc, &[dev], std::process::id());
        let all = t.elapsed().as_secs_f64() * 1e3;
        let t = Instant::now();
        let _ = holders_among(proc, &[dev], &named);
        let among = t.elapsed().as_secs_f64() * 1e3;
        println!(
            "every process {all:.1} ms, two named {among:.2} ms: {:.0}x",
            all / among
        );
    }
    for c in children {
        let _ = nix::sys::signal::kill(c, nix::sys::signal::Signal::SIGKILL);
        let _ = nix::sys::wait::waitpid(c, None);
    }
}
