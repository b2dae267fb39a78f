//! Checks over the whole workspace, not over one crate: its tests read the
//! sources and manifests of every crate (`tests/circles.rs`: the daemon's
//! modules import no circle; `tests/literals.rs`: absolute path literals only in
//! `asmguard-paths`, `main` and tests; `tests/unify.rs`: the release build and the
//! test build resolve the same dependency features). The library itself is empty.
