# asmguard: the two commands a fresh machine needs are `make demo` and `make test`.
.PHONY: all deps build demo test test-host test-vm fuzz lint install uninstall package clean

CARGO ?= cargo

all: build

deps:
	@scripts/deps.sh

build: deps
	$(CARGO) build --release --workspace

# The main job: a sparse-file loop device, labelled, protected, measured. The
# script builds the two binaries it runs (one cargo build).
demo: deps
	@scripts/demo.sh

# Every test: lint, host tests (loop devices), a fuzz smoke, and the VM lab on the
# Debian 5.10 (twice), 6.1, 6.12 and newest kernels, then the system lab (the .deb on a
# booted Debian 12 with systemd, udevd and multipathd, tests/system/). Ends with one
# `total: N passed, M failed` line.
test: deps
	@scripts/test.sh

# Quicker loops while developing.
test-host: deps
	@ASMGUARD_SKIP_VM=1 scripts/test.sh
test-vm: build
	@tests/vm/all.sh

lint:
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings

# Longer fuzzing (FUZZ_SECONDS per target; needs the nightly toolchain).
fuzz:
	@FUZZ_SECONDS=$${FUZZ_SECONDS:-600} scripts/fuzz.sh

# Install binaries, the udev rules, the systemd unit, the man page and a default config
# (an existing /etc/asmguard/asmguard.toml is never overwritten). DESTDIR is honoured.
install: build
	@scripts/install.sh

# Removes the write filter's pinned BPF programs first, then the installed files
# (the configuration stays unless PURGE=1).
uninstall:
	@scripts/uninstall.sh

# target/package/asmguard_<version>_amd64.deb and asmguard-<version>-1.x86_64.rpm: the
# files install.sh installs, with maintainer scripts (config created only when absent,
# udev reload, unit enabled).
package: build
	@BIN=target/release scripts/package.sh all

clean:
	$(CARGO) clean
