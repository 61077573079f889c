# unwindlab — the two commands of the README:
#   make        install what is missing, build, and run the main job
#   make test   install what is missing, then the whole test suite
# Everything else here is optional (fuzzing, benchmarks).

SHELL := /bin/bash
CARGO ?= cargo
FUZZ_SECONDS ?= 600

# Debian packages the build and the tests need: the cross toolchains and
# qemu-user (guests, toolchain tests), cmake and libclang-dev (Unicorn),
# Chromium (the HTML report is checked in a real browser).
APT_PACKAGES := build-essential binutils cmake libclang-dev pkg-config \
	gcc-aarch64-linux-gnu binutils-aarch64-linux-gnu \
	gcc-s390x-linux-gnu binutils-s390x-linux-gnu qemu-user \
	chromium fonts-dejavu-core

.PHONY: all deps build run test lint fuzz bench-sframe bench-kmodel bench-emu clean

all: deps build run

deps:
	@scripts/install-deps.sh $(APT_PACKAGES)

build:
	$(CARGO) build --release --locked

# The main job: what unwindlab can do today, on real SFrame data.
run: build
	@scripts/main-job.sh target/release/unwindlab

lint:
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --locked --workspace --all-targets -- -D warnings

test: deps lint
	$(CARGO) test --locked --workspace --all-targets

# Coverage-guided fuzzing of the SFrame reader (needs a nightly toolchain
# and cargo-fuzz; seeds come from the committed test vectors).
fuzz:
	scripts/fuzz-sframe.sh $(FUZZ_SECONDS)

# Lookup speed against simple-frame-rs, as ratios from one run.
bench-sframe:
	$(CARGO) bench --locked -p sframe --bench sframe_lookup
	@python3 scripts/criterion-ratios.py sframe_lookup_V2 sframe_lookup_V3

# The kernel model's throughput: deferred requests vs the classic baselines,
# and the stitcher.
bench-kmodel:
	$(CARGO) bench --locked -p kmodel --bench deferred_model
	@python3 scripts/criterion-ratios.py kmodel

# Guest instructions per second: no hooks, shadow stack, + NMIs.
bench-emu:
	scripts/emu-throughput.sh

clean:
	$(CARGO) clean
