//! Nothing but its Cargo.toml: the dependency features the test build turns on,
//! turned on in the release build too, so that `cargo test --release` reuses the
//! release build's artifacts instead of building them a second time.
