//! asmguard-synth-asm: writes a SYNTHETIC ASM disk (capname ASMGUARD_SYNTHETIC,
//! built by `asmguard_format::synth`) onto an image file or a block device, for
//! the VM lab and the reclaim benchmark. Never for production disks.
//!
//! ```text
//! asmguard-synth-asm write PATH --label L [--group G] [--aus N] [--allocated SPEC] [--fill | --fill-aus SPEC]
//! asmguard-synth-asm hash  PATH [--aus N] [--allocated SPEC]
//! ```
//! SPEC: AU ranges that are allocated, `2-10,12-20,50` (AUs 0 and 1 always are).
//! `write --fill` first fills every AU with pseudo-random data (free ones too: the
//! space a dropped tablespace leaves), then writes the metadata; it prints the free
//! AUs reclaim may hand back (reserved AUs 0, 1, 11 and the first AU of every
//! stride excluded) and their bytes. `--fill-aus SPEC` fills only those AUs: a
//! sparse multi-stride disk (a stride is 113,792 AUs of 1 MiB, about 111 GiB)
//! whose backing file holds only what the test looks at. Every stride's
//! allocation table is written (the first AU of each stride).
//! `hash` prints one FNV-1a hash over every AU reclaim must keep (allocated, and
//! 0, 1, 11), read with O_DIRECT (with `--fill-aus`, only those of SPEC).

use asmguard_devices::Device;
use asmguard_format::label::Label;
use asmguard_format::synth::SynthDisk;
use std::fs::OpenOptions;
use std::os::unix::fs::FileExt;
use std::path::Path;

const MIB: u64 = 1 << 20;

fn die(m: String) -> ! {
    eprintln!("asmguard-synth-asm: {m}");
    std::process::exit(2)
}

fn spec(s: &str, n: usize) -> Vec<bool> {
    let mut v = vec![false; n];
    for part in s.split(',').filter(|p| !p.is_empty()) {
        let (a, b) = part.split_once('-').unwrap_or((part, part));
        let a: usize = a
            .trim()
            .parse()
            .unwrap_or_else(|_| die(format!("bad SPEC {s}")));
        let b: usize = b
            .trim()
            .parse()
            .unwrap_or_else(|_| die(format!("bad SPEC {s}")));
        for slot in v.iter_mut().take(b.saturating_add(1)).skip(a) {
            *slot = true;
        }
    }
    v
}

fn size_of(p: &Path) -> u64 {
    Device::open_read(p)
        .map(|d| d.size)
        .unwrap_or_else(|e| die(e.to_string()))
}

fn fill(seed: u64, buf: &mut [u8]) {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    for c in buf.chunks_mut(8) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let b = x.to_le_bytes();
        c.copy_from_slice(&b[..c.len()]);
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.len() < 2 {
        die("usage: asmguard-synth-asm write|hash PATH [--label L] [--group G] [--aus N] [--allocated SPEC] [--fill | --fill-aus SPEC]".into());
    }
    let (cmd, path) = (args[0].as_str(), Path::new(&args[1]));
    let mut label = None;
    let mut group = "DATA".to_string();
    let mut aus: Option<usize> = None;
    let mut alloc = String::new();
    let mut do_fill = false;
    let mut fill_aus: Option<String> = None;
    let mut dsknum = 0u16;
    let mut i = 2;
    while i < args.len() {
        let val = || {
            args.get(i + 1)
                .cloned()
                .unwrap_or_else(|| die(format!("{} needs a value", args[i])))
        };
        match args[i].as_str() {
            "--label" => label = Some(val()),
            "--group" => group = val(),
            "--aus" => aus = Some(val().parse().unwrap_or_else(|_| die("bad --aus".into()))),
            "--allocated" => alloc = val(),
            "--fill-aus" => fill_aus = Some(val()),
            "--dsknum" => dsknum = val().parse().unwrap_or_else(|_| die("bad --dsknum".into())),
            "--fill" => {
                do_fill = true;
                i += 1;
                continue;
            }
            o => die(format!("unknown option {o}")),
        }
        i += 2;
    }
    let n = aus.unwrap_or_else(|| (size_of(path) / MIB) as usize);
    let allocated = spec(&alloc, n);
    let mfact = SynthDisk::new(1).mfact() as usize;
    let only = fill_aus.as_deref().map(|f| spec(f, n));
    let wanted = |au: usize| only.as_ref().is_none_or(|o| o[au]);
    let kept = |au: usize| au < 2 || au == 11 || au % mfact == 0 || allocated[au];
    match cmd {
        "write" => {
            let mut s = SynthDisk::new(n);
            s.allocated = allocated.clone();
            s.grpname = group.clone();
            s.dsknum = dsknum;
            s.dskname = format!("{group}_{dsknum:04}");
            s.fgname = s.dskname.clone();
            if let Some(l) = &label {
                s.label = Some(Label::new(l).unwrap_or_else(|e| die(e.to_string())));
            }
            let md = s.metadata().unwrap_or_else(|e| die(e));
            let f = OpenOptions::new()
                .write(true)
                .open(path)
                .unwrap_or_else(|e| die(format!("{}: {e}", path.display())));
            if do_fill || only.is_some() {
                let mut buf = vec![0u8; MIB as usize];
                for au in (0..n).filter(|a| wanted(*a)) {
                    fill(au as u64 + 1, &mut buf);
                    f.write_all_at(&buf, au as u64 * MIB)
                        .unwrap_or_else(|e| die(format!("write AU {au}: {e}")));
                }
            }
            for (off, b) in md {
                f.write_all_at(&b, off)
                    .unwrap_or_else(|e| die(format!("write at {off}: {e}")));
            }
            f.sync_all().unwrap_or_else(|e| die(format!("fsync: {e}")));
            let free: usize = (0..n).filter(|a| !kept(*a)).count();
            println!(
                "synthetic ASM disk: {n} AUs of 1 MiB, group {group}, free_aus {free} free_bytes {}",
                free as u64 * MIB
            );
        }
        "hash" => {
            let d = Device::open_read(path).unwrap_or_else(|e| die(e.to_string()));
            let mut h = 0xcbf2_9ce4_8422_2325u64;
            for au in (0..n).filter(|a| kept(*a) && wanted(*a)) {
                let b = d
                    .read_at(au as u64 * MIB, MIB as usize)
                    .unwrap_or_else(|e| die(e.to_string()));
                for x in b {
                    h ^= x as u64;
                    h = h.wrapping_mul(0x0100_0000_01b3);
                }
            }
            println!("{h:016x}");
        }
        o => die(format!("unknown command {o}")),
    }
}
