//! The World: everything the daemon makes the system match, in one value,
//! and [`next`], the one pure step from a World and an [`Input`] to the next.
//!
//! A [`World`] is the configuration in force ([`conf`]), the disks a scan
//! found ([`model`]), the configured containers as last resolved
//! ([`Containers`]), the host's allow rules as last resolved ([`HostRules`]),
//! the disks a reclaim fences and the protected disks a mapping made before
//! protection still writes. Each input (`crate::inputs`: device events, the
//! label watch, the containers and rules threads, SIGHUP, the control socket,
//! the periodic check) reads what changed and sends an [`Input`]; the apply
//! side (`crate::apply::Applier`, one holder at a time) computes
//! `next(&last, input)` and makes the system match it, then publishes what it
//! achieved (`crate::apply::Applied`), which every view reads.

pub mod check;
pub mod conf;
pub mod exposed;
pub mod model;
pub mod modes;

use crate::world::conf::Conf;
use crate::world::model::Model;
use asmguard_devices::KernelDev;
use modes::Modes;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// The containers' part of the World: defined beside their resolution.
pub use crate::apply::filter::containers::Containers;

/// The host's allow rules as resolved from the configuration, the Oracle
/// homes and the `[[rule]]`s' places (names through NSS), with what
/// `status` shows of them.
#[derive(Debug, Clone, Default)]
pub struct HostRules {
    /// The rules the filter's maps get.
    pub rules: asmguard_guard::guard::Rules,
    /// `status`: the rules as configured.
    pub lines: Vec<asmguard_proto::AllowRule>,
    /// `status`: what the rules cannot do on this host, names that did not resolve.
    pub notes: Vec<asmguard_proto::RuleNote>,
    /// `status` and `lsdsk`: the Oracle homes found.
    pub homes: Vec<asmguard_proto::OracleHome>,
    /// `status` and `lsdsk`: binaries no home has any more that still run.
    pub retired: Vec<asmguard_proto::OracleBinary>,
    /// (home, binary, owner uid) of every allowed Oracle binary (the metric).
    pub binaries: Vec<(String, String, u32)>,
    /// The places of the `[[rule]]`s they were resolved from: rule name ->
    /// the ids of the cgroups its units and patterns match.
    pub places: BTreeMap<String, Vec<u64>>,
}

impl HostRules {
    /// The plain allow-list's uids and gids (for the logs).
    pub fn ids(&self) -> (Vec<u32>, Vec<u32>) {
        self.rules
            .rules
            .first()
            .map(|r| (r.uids.clone(), r.gids.clone()))
            .unwrap_or_default()
    }
}

pub use exposed::Exposed;

/// What the daemon makes the system match.
#[derive(Debug, Clone)]
pub struct World {
    /// The configuration the World was built with.
    pub conf: Arc<Conf>,
    /// The disks, conflicts and unmanaged devices of the last scan or
    /// refresh (the label conflicts' keepers resolved: `crate::apply::kept`).
    pub model: Model,
    /// Whether a scan has run (before it the model is empty: nothing the
    /// disks make, links, nodes, claims, is taken away).
    pub scanned: bool,
    /// The configured containers as last resolved.
    pub containers: Arc<Containers>,
    /// The host's allow rules as last resolved (`None` until the first
    /// resolution: a re-adopted map keeps the previous daemon's).
    pub rules: Option<Arc<HostRules>>,
    /// The filter modes an administrator set: per disk, and the whole
    /// filter off (`modes`).
    pub modes: Arc<Modes>,
    /// The disks a reclaim runs on, by label: their mode is `fenced` (only
    /// the daemon's process writes) for as long as the job runs.
    pub fenced: Arc<BTreeSet<String>>,
    /// Protected disks written through a mapping made before protection.
    pub exposed: Arc<Exposed>,
    /// Descriptors open for writing on protected disks, opened before
    /// protection (their writes are refused: named in `status` only).
    pub writers: Arc<Exposed>,
    /// Loop devices over protected disks, set up before protection (they
    /// joined the disk's devices: named in `status`, `lsdsk`, an event).
    pub loops: Arc<exposed::Loops>,
}

/// What changed, as an input sends it.
#[derive(Debug)]
pub enum Input {
    /// SIGHUP: the configuration read again and what it decides found again
    /// with it (the host's rules, the containers, the disks), as one input:
    /// the World never holds the new configuration beside the old rules or
    /// disks, and the system is made to match once.
    Reload(Box<Reload>),
    /// A full scan or a refresh: the disks now.
    Model(Model),
    /// The configured containers resolved again.
    Containers(Arc<Containers>),
    /// The host's rules resolved again (start, SIGHUP, a home or place changed).
    Rules(Arc<HostRules>),
    /// A reclaim fences its disks (`on`) or its fence is lifted.
    Fence { labels: Vec<String>, on: bool },
    /// The periodic check found these exposures (shared-writable mappings
    /// made before protection) and these descriptors open for writing since
    /// before protection, and these loop devices set up over a protected
    /// disk before its protection.
    Found {
        exposed: Exposed,
        writers: Exposed,
        loops: exposed::Loops,
    },
    /// `asmguardctl filter ACTION [LABEL]` (checked against the World first:
    /// `modes::Modes::with`).
    Mode {
        label: Option<String>,
        action: asmguard_proto::FilterAction,
    },
    /// A label write ended these labels (`unlabel`, a label written over
    /// one): the modes set for them end.
    Forget(Vec<String>),
    /// `rename`: the disk keeps its mode under its new label.
    Renamed { old: String, new: String },
    /// Nothing changed in the World; make the disks' part match it again
    /// (a label write ended and its claims may be taken, an administrator
    /// set a filter mode).
    Again,
    /// The label sector of this device was written (by this daemon, or by
    /// another host, as the label watch found): udev is to probe it again
    /// and move its link.
    Relink(String),
    /// The periodic check: are the filter's pins and maps still as applied
    /// (another process may change them)? Put back what differs.
    Verify,
}

/// What a SIGHUP brings ([`Input::Reload`]).
#[derive(Debug)]
pub struct Reload {
    pub conf: Arc<Conf>,
    pub rules: Arc<HostRules>,
    pub containers: Arc<Containers>,
    /// The disks as a full scan under the new configuration found them
    /// (`None`: the scan failed, the disks stay as they were).
    pub model: Option<Model>,
}

impl Input {
    /// Whether it can change the disks' part of the system (the filter's
    /// set and modes, container rules, links, nodes, claims, the tracer):
    /// the apply side makes that part match only then. Exhaustive, so a new
    /// input says which it is (the periodic check's inputs never do: they
    /// come every 2 s).
    pub fn touches_disks(&self) -> bool {
        match self {
            Input::Model(_)
            | Input::Containers(_)
            | Input::Fence { .. }
            | Input::Mode { .. }
            | Input::Again
            | Input::Reload(_) => true,
            // a label write's end of a mode takes effect with the refresh
            // that follows it
            Input::Forget(_) | Input::Renamed { .. } => false,
            Input::Rules(_) => false,
            Input::Found { .. } | Input::Verify | Input::Relink(_) => false,
        }
    }
}

impl World {
    /// Before the first scan: no disk, no container resolved, no rules.
    pub fn empty(conf: Arc<Conf>) -> World {
        World {
            conf,
            model: Model::default(),
            scanned: false,
            containers: Arc::new(Containers::default()),
            rules: None,
            modes: Arc::default(),
            fenced: Arc::default(),
            exposed: Arc::default(),
            writers: Arc::default(),
            loops: Arc::default(),
        }
    }
}

/// `n` (the next World of `w`) with the disks `m`: a mode binds to the
/// disk that carries its label now.
fn take_model(w: &World, n: &mut World, m: Model) {
    n.model = m;
    n.scanned = true;
    let settled = w.modes.settled(&tops(&n.model));
    if settled != *w.modes {
        n.modes = Arc::new(settled);
    }
}

/// The World after `input`: the part it brings replaced, the rest as it was.
/// Pure: reads nothing but its arguments.
pub fn next(w: &World, input: Input) -> Result<World, modes::Refused> {
    let mut n = w.clone();
    match input {
        Input::Reload(r) => {
            let Reload {
                conf,
                rules,
                containers,
                model,
            } = *r;
            n.conf = conf;
            n.rules = Some(rules);
            n.containers = containers;
            if let Some(m) = model {
                take_model(w, &mut n, m);
            }
        }
        Input::Model(m) => take_model(w, &mut n, m),
        Input::Mode { label, action } => {
            let cfg = w.conf.cfg.filter.mode;
            let m = w
                .modes
                .with(label.as_deref(), action, &tops(&w.model), cfg)?;
            if m != *w.modes {
                // protection changed (`filter enable` after a disable, say):
                // what is open or set up now predates it, as the next
                // check finds (a check between two changes may not run)
                n.writers = Arc::new(exposed::without(&w.writers, label.as_deref()));
                n.loops = Arc::new(exposed::without(&w.loops, label.as_deref()));
                n.modes = Arc::new(m);
            }
        }
        Input::Forget(labels) => {
            let mut m = (*w.modes).clone();
            for l in &labels {
                m = m.forget(l);
            }
            if m != *w.modes {
                n.modes = Arc::new(m);
            }
        }
        Input::Renamed { old, new } => n.modes = Arc::new(w.modes.renamed(&old, &new)),
        Input::Containers(c) => n.containers = c,
        Input::Rules(r) => n.rules = Some(r),
        Input::Fence { labels, on } => {
            let mut f = (*w.fenced).clone();
            for l in labels {
                if on {
                    f.insert(l);
                } else {
                    f.remove(&l);
                }
            }
            n.fenced = Arc::new(f);
        }
        Input::Found {
            exposed,
            writers,
            loops,
        } => {
            if *w.exposed != exposed {
                n.exposed = Arc::new(exposed);
            }
            if *w.writers != writers {
                n.writers = Arc::new(writers);
            }
            if *w.loops != loops {
                n.loops = Arc::new(loops);
            }
        }
        Input::Again | Input::Verify | Input::Relink(_) => {}
    }
    Ok(n)
}

/// Each label's disk (its top device) in `m`: what a mode is bound to.
pub fn tops(m: &Model) -> BTreeMap<String, KernelDev> {
    model::managed_set(&m.disks)
        .into_iter()
        .filter_map(|(l, d)| d.top.map(|t| (l, t)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn world() -> World {
        World::empty(Arc::new(Conf::new(asmguard_config::Config::default())))
    }

    /// The next World of an input that cannot be refused.
    fn next(w: &World, i: Input) -> World {
        super::next(w, i).expect("not refused")
    }

    /// `filter enable LABEL` for a label no disk carries is refused by the
    /// World itself (the operation answers with it: one check, where the
    /// change is made), and the World is left as it was.
    #[test]
    fn a_mode_for_an_unknown_label_is_refused_and_changes_nothing() {
        use asmguard_proto::FilterAction::Audit;
        let w = next(&world(), Input::Model(Model::default()));
        let r = super::next(
            &w,
            Input::Mode {
                label: Some("NOSUCH".into()),
                action: Audit,
            },
        );
        assert_eq!(r.err(), Some(modes::Refused::UnknownLabel("NOSUCH".into())));
        // the whole filter at once is never refused
        let all = super::next(
            &w,
            Input::Mode {
                label: None,
                action: asmguard_proto::FilterAction::Disable,
            },
        )
        .expect("all disks");
        assert!(all.modes.disabled && !w.modes.disabled);
    }

    #[test]
    fn each_input_replaces_its_part_and_keeps_the_rest() {
        let w = world();
        let c = Arc::new(Containers::default());
        let w1 = next(&w, Input::Containers(c.clone()));
        assert!(Arc::ptr_eq(&w1.containers, &c));
        assert!(Arc::ptr_eq(&w1.conf, &w.conf) && !w1.scanned);
        let w2 = next(&w1, Input::Model(Model::default()));
        assert!(w2.scanned && Arc::ptr_eq(&w2.containers, &c));
        let r = Arc::new(HostRules {
            lines: vec![asmguard_proto::AllowRule::Daemon],
            ..Default::default()
        });
        let w3 = next(&w2, Input::Rules(r.clone()));
        assert!(Arc::ptr_eq(w3.rules.as_ref().unwrap(), &r));
        assert!(w2.rules.is_none(), "the input World is not changed");
    }

    /// A SIGHUP is one input: the configuration, the rules, the containers
    /// and the disks change together; a scan that failed leaves the disks.
    #[test]
    fn a_reload_replaces_its_four_parts_at_once() {
        let w = next(&world(), Input::Model(Model::default()));
        let reload = |model| {
            Input::Reload(Box::new(Reload {
                conf: Arc::new(Conf::new(asmguard_config::Config::default())),
                rules: Arc::new(HostRules {
                    lines: vec![asmguard_proto::AllowRule::Daemon],
                    ..Default::default()
                }),
                containers: Arc::new(Containers::default()),
                model,
            }))
        };
        let i = reload(Some(Model::default()));
        assert!(
            i.touches_disks(),
            "a reload makes the disks' part match once"
        );
        let Input::Reload(r) = &i else { unreachable!() };
        let (conf, rules, containers) = (r.conf.clone(), r.rules.clone(), r.containers.clone());
        let w1 = next(&w, i);
        assert!(Arc::ptr_eq(&w1.conf, &conf) && !Arc::ptr_eq(&w.conf, &conf));
        assert!(Arc::ptr_eq(w1.rules.as_ref().unwrap(), &rules));
        assert!(Arc::ptr_eq(&w1.containers, &containers) && w1.scanned);
        assert!(w.rules.is_none(), "the input World is not changed");
        // the scan failed: the rest is taken, the disks stay
        let mut disks = Model::default();
        disks.disks.push(crate::world::model::tests::plain_disk(
            "KEPT",
            "sdk",
            "8:160".parse().unwrap(),
        ));
        let w2 = next(&w, Input::Model(disks));
        let w3 = next(&w2, reload(None));
        assert_eq!(w3.model.disks.len(), 1);
        assert!(w3.rules.is_some());
    }

    /// The periodic check's inputs (every 2 s) never make the disks' part
    /// match again: that reads the filter's maps, the links, the nodes and
    /// the claims each time.
    #[test]
    fn the_periodic_inputs_leave_the_disks_alone() {
        for i in [
            Input::Found {
                exposed: Exposed::new(),
                writers: Exposed::new(),
                loops: exposed::Loops::new(),
            },
            Input::Verify,
        ] {
            assert!(!i.touches_disks(), "{i:?}");
        }
        assert!(Input::Model(Model::default()).touches_disks());
        assert!(Input::Again.touches_disks());
    }

    /// `filter disable` then `enable` between two checks: the writers and
    /// loop devices found before are forgotten, so the next check takes what
    /// it finds as predating protection.
    #[test]
    fn a_protection_change_forgets_what_was_found_before() {
        let lo = exposed::LoopBefore {
            label: "DATA1".into(),
            name: "loop4".into(),
            device: asmguard_devices::KernelDev::new(7, 4).unwrap(),
            backing: "/dev/sdb".into(),
            read_only: false,
        };
        let found = |w: &World| {
            next(
                w,
                Input::Found {
                    exposed: Exposed::new(),
                    writers: Exposed::from([("DATA1".to_string(), vec![])]),
                    loops: exposed::Loops::from([("DATA1".to_string(), vec![lo.clone()])]),
                },
            )
        };
        let mode = |w: &World, action| {
            next(
                w,
                Input::Mode {
                    label: None,
                    action,
                },
            )
        };
        use asmguard_proto::FilterAction::{Disable, Enable};
        let before = found(&world());
        assert_eq!((before.writers.len(), before.loops.len()), (1, 1));
        let off = mode(&before, Disable);
        assert!(off.writers.is_empty() && off.loops.is_empty());
        // enabled again: a change, forgotten again
        let on = found(&off);
        let on = mode(&on, Enable);
        assert_ne!(*on.modes, *off.modes);
        assert!(on.writers.is_empty() && on.loops.is_empty());
        // the same mode once more: no change, nothing forgotten
        let found_on = found(&on);
        let kept = mode(&found_on, Enable);
        assert_eq!(*kept.modes, *found_on.modes);
        assert_eq!((kept.writers.len(), kept.loops.len()), (1, 1));
    }

    #[test]
    fn a_fence_holds_until_lifted_and_only_its_labels() {
        let w = world();
        let on = next(
            &w,
            Input::Fence {
                labels: vec!["DATA1".into(), "DATA2".into()],
                on: true,
            },
        );
        assert_eq!(on.fenced.len(), 2);
        let off = next(
            &on,
            Input::Fence {
                labels: vec!["DATA1".into()],
                on: false,
            },
        );
        assert_eq!(*off.fenced, BTreeSet::from(["DATA2".to_string()]));
        let again = next(&off, Input::Model(Model::default()));
        assert_eq!(again.fenced, off.fenced, "a scan keeps the fence");
        assert!(w.fenced.is_empty());
    }

    #[test]
    fn an_unchanged_exposure_keeps_its_value_and_again_changes_nothing() {
        let w = world();
        let e1 = next(
            &w,
            Input::Found {
                exposed: Exposed::new(),
                writers: Exposed::new(),
                loops: exposed::Loops::new(),
            },
        );
        assert!(Arc::ptr_eq(&e1.exposed, &w.exposed));
        let c = next(&e1, Input::Again);
        assert!(Arc::ptr_eq(&c.exposed, &e1.exposed) && Arc::ptr_eq(&c.conf, &e1.conf));
        assert_eq!(c.scanned, e1.scanned);
    }
}
