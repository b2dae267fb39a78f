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
use crate::model::Model;
use std::collections::BTreeSet;
use std::sync::Arc;

/// The containers' part of the World: defined beside their resolution.
pub use crate::filter::containers::Containers;

/// What the daemon makes the system match.
#[derive(Debug, Clone)]
pub struct World {
    /// The configuration the World was built with.
    pub conf: Arc<Conf>,
    /// The disks, conflicts and unmanaged devices of the last scan or refresh.
    pub model: Model,
    /// The configured containers as last resolved.
    pub containers: Arc<Containers>,
    /// The disks a reclaim runs on, by label: their mode is `fenced` (only
    /// the daemon's process writes) for as long as the job runs.
    pub fenced: Arc<BTreeSet<String>>,
}

impl World {
    /// Before the first scan: no disk, no container resolved.
    pub fn empty(conf: Arc<Conf>) -> World {
        World {
            conf,
            model: Model::default(),
            containers: Arc::new(Containers::default()),
            fenced: Arc::default(),
        }
    }

    /// This World with the disks of `model`.
    pub fn with_model(&self, conf: Arc<Conf>, model: Model) -> World {
        World {
            conf,
            model,
            containers: self.containers.clone(),
            fenced: self.fenced.clone(),
        }
    }

    /// This World with the containers resolved as `c`.
    pub fn with_containers(&self, conf: Arc<Conf>, c: Arc<Containers>) -> World {
        World {
            conf,
            model: self.model.clone(),
            containers: c,
            fenced: self.fenced.clone(),
        }
    }

    /// This World with `labels` fenced (`on`) or no longer fenced.
    pub fn with_fence(&self, labels: &[String], on: bool) -> World {
        let mut f = (*self.fenced).clone();
        for l in labels {
            if on {
                f.insert(l.clone());
            } else {
                f.remove(l);
            }
        }
        World {
            conf: self.conf.clone(),
            model: self.model.clone(),
            containers: self.containers.clone(),
            fenced: Arc::new(f),
        }
    }
}
