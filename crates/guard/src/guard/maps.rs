//! The map table: one row per map of `bpf/guard.bpf.c` and its headers, the
//! userspace side's one list of their names (beside the program table,
//! `asmguard_filter_types::hooks`'s `PROGRAMS`). The loader pins the pinned
//! ones under `<pin dir>/maps/`, re-adopts them, guards them
//! (`ag_guarded`) and checks them every 2 s; a test holds the table to the
//! compiled object's maps.

/// One map of the filter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MapDef {
    /// Its name in the object (`ag_...`).
    pub name: &'static str,
    /// The header (or the program file) that defines it.
    pub header: &'static str,
    /// Whether it is pinned (`<pin dir>/maps/NAME`) and outlives the daemon.
    pub pinned: bool,
    /// What it holds.
    pub what: &'static str,
}

macro_rules! map_table {
    ($( $konst:ident = $name:literal, $header:literal, $pinned:literal, $what:literal; )*) => {
        $( #[doc = $what] pub const $konst: &str = $name; )*
        /// Every map, one row each.
        pub const MAPS: &[MapDef] = &[ $( MapDef {
            name: $name,
            header: $header,
            pinned: $pinned,
            what: $what,
        }, )* ];
    };
}

map_table! {
    BLK = "ag_blk", "devices.h", true, "The managed block devices by kernel dev_t: mode and disk id.";
    CHR = "ag_chr", "devices.h", true, "The managed character devices (sg, NVMe generic) by dev_t.";
    MAJORS = "ag_majors", "devices.h", true, "The majors with a managed node, block and character apart.";
    RULES = "ag_rules", "rules.h", true, "The allow rules, each with its conditions.";
    RULE_UIDS = "ag_rule_uids", "rules.h", true, "uid -> the rules whose users hold it.";
    RULE_GIDS = "ag_rule_gids", "rules.h", true, "gid -> the rules whose groups hold it.";
    RULE_EXES = "ag_rule_exes", "rules.h", true, "Executable (inode, device) -> the rules that name it.";
    PLACES = "ag_places", "rules.h", true, "cgroup id -> the rules whose units or cgroups match it.";
    SELF = "ag_self", "rules.h", true, "The daemon's own process (its label and reclaim writes).";
    EVENTS = "ag_events", "guard.bpf.c", true, "The ring buffer of denials and audits.";
    STATS = "ag_stats", "guard.bpf.c", true, "Per-hook counters of the programs' decisions.";
    COUNTS = "ag_counts", "guard.bpf.c", true, "(disk id, hook, mode) -> the exact number of denials.";
    PIN_DIRS = "ag_pin_dirs", "pins.h", true, "The pin directory and its maps/ and links/ by inode.";
    GUARDED = "ag_guarded", "guardian.h", true, "The ids of asmguard's maps, programs and links (the bpf hook's rule).";
    GUARDIAN = "ag_guardian", "guardian.h", true, "The daemon's process that may use them.";
    BORROWED = "ag_borrowed", "rules.h", true, "Tasks whose identity was borrowed (ptrace, pidfd_getfd): rules of executables no longer hold for them.";
    DM_IOCTL = "ag_dm_ioctl", "rules.h", true, "The device-mapper ioctls a rule lets through.";
    OPEN_ASKED = "ag_open_asked", "guard.bpf.c", false, "tid -> the device its open asked about (one report per open).";
}

/// The pinned maps' names, in table order.
pub fn pinned() -> impl Iterator<Item = &'static str> {
    MAPS.iter().filter(|m| m.pinned).map(|m| m.name)
}
