//! Helpers for the host integration tests (loop devices, a daemon under test).
