//! The inputs: each reads what changed (device events, the label watch, the
//! containers, the Oracle homes and rule places, SIGHUP, the control socket)
//! and sends it to the World as an [`crate::world::Input`].

pub mod containers;
pub mod exposed;
pub mod fence_watch;
pub mod peer;
pub mod server;
pub mod tasks;
pub mod watch;
pub mod wire;
