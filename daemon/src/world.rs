//! The World: everything the daemon makes the system match, in one value.
//!
//! A [`World`] is the configuration in force ([`crate::conf`]), the disks a
//! scan found ([`crate::model`]) and the configured containers as last
//! resolved ([`Containers`], by `crate::filter::containers::resolve`, off the
//! scan path). Each is built by a step that only reads; a scan or refresh
//! brings a new model, the `containers` task a new resolution, SIGHUP a new
//! configuration, and each hands the next World (the last one with its part
//! replaced) to [`crate::state::Daemon::apply`], the one place a World takes
//! effect: the filter's managed set, each disk's mode, the container rules, the
//! links, the containers' device nodes, the exclusive claims, the tracer and
//! the exporter, in that order. Answers (`lsdsk`, `status`, the metrics) read
//! the World as last applied.

use crate::conf::Conf;
use crate::filter::containers::ContainerRule;
use crate::model::Model;
use asmguard_config::Container;
use asmguard_containers::Found;
use asmguard_proto::ContainerStatus;
use std::sync::Arc;

/// What the daemon makes the system match.
#[derive(Debug, Clone)]
pub struct World {
    /// The configuration the World was built with.
    pub conf: Arc<Conf>,
    /// The disks, conflicts and unmanaged devices of the last scan or refresh.
    pub model: Model,
    /// The configured containers as last resolved.
    pub containers: Arc<Containers>,
}

impl World {
    /// Before the first scan: no disk, no container resolved.
    pub fn empty(conf: Arc<Conf>) -> World {
        World {
            conf,
            model: Model::default(),
            containers: Arc::new(Containers::default()),
        }
    }

    /// This World with the disks of `model`.
    pub fn with_model(&self, conf: Arc<Conf>, model: Model) -> World {
        World {
            conf,
            model,
            containers: self.containers.clone(),
        }
    }

    /// This World with the containers resolved as `c`.
    pub fn with_containers(&self, conf: Arc<Conf>, c: Arc<Containers>) -> World {
        World {
            conf,
            model: self.model.clone(),
            containers: c,
        }
    }
}

/// One configured container as last resolved.
#[derive(Debug, Clone, PartialEq)]
pub struct Resolved {
    /// Its `[[container]]` section.
    pub config: Container,
    /// The filter's rule (who in it may write, as host ids).
    pub rule: ContainerRule,
    /// What `status` shows of it.
    pub view: ContainerStatus,
    /// Its cgroups, the process whose id maps translate its ids.
    pub found: Found,
    /// Its device nodes' host uid and gid, or why they are not known
    /// (`crate::present::owner_of`).
    pub owner: Result<(u32, u32), String>,
    /// Its files (`/etc/passwd`, `/etc/group`, the id maps) did not answer
    /// within the deadline the last time: this is the last good resolution
    /// (or, when there never was one, a rule that allows nobody).
    pub stalled: bool,
    /// This is a last good resolution kept through a stall or a failed pick:
    /// its rule, owner and nodes stand, and the next resolution that cannot
    /// read the container keeps it again (a stall is seen at every try).
    pub kept: bool,
}

/// The configured containers as last resolved, in configuration order
/// (container ids 1..).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Containers {
    pub each: Vec<Resolved>,
}

impl Containers {
    /// What was found of container `name`.
    pub fn found(&self, name: &str) -> Option<&Found> {
        self.each
            .iter()
            .find(|r| r.config.name == name)
            .map(|r| &r.found)
    }

    /// The filter's container rules.
    pub fn rules(&self) -> Vec<ContainerRule> {
        self.each.iter().map(|r| r.rule.clone()).collect()
    }

    /// Each container's name, in order.
    pub fn names(&self) -> Vec<String> {
        self.each.iter().map(|r| r.config.name.clone()).collect()
    }

    /// Whether a container runs (has cgroups) but was not found with a
    /// process whose id maps are written, or its users could not be
    /// translated (a runtime may start the first process before the
    /// container's /etc/passwd is in place): worth resolving again soon.
    pub fn pending(&self) -> bool {
        self.each.iter().any(|r| {
            !r.found.cgroups.is_empty()
                && (r.found.pid.is_none() || !r.view.problems.is_empty())
                && !r.config.allow_all
        })
    }
}
