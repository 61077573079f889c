# unwindlab — the two commands of the README:
#   make        install what is missing, build, and run the main job
#   make test   install what is missing, then the whole test suite
# Everything else here is optional (fuzzing, benchmarks).

SHELL := /bin/bash
CARGO ?= cargo
FUZZ_SECONDS ?= 600

# The Debian packages the build and the tests need are named, each with its
# reason, in scripts/debian-packages.txt (installed without Recommends).

.PHONY: all deps preflight build run test lint fuzz bench-sframe bench-walk bench-kmodel bench-emu bench-validate bench-perf-data bench-exec bench-growth bench-explore clean

all: deps preflight build run

# The Debian packages the host needs, then Debian's static busybox and bash
# and its dynamically linked coreutils, sed, grep, … with their libraries,
# for amd64, arm64 and s390x, for tests/conformance.rs, then the kernel's
# kernel/unwind/ and the headers it needs from Debian's linux-source-7.x, for
# kupstream's C harness, then Debian's perf 7.x (linux-perf) with every
# library it needs in a root of its own, which scripts/perf runs (caches;
# quick once fetched).
deps:
	@scripts/install-deps.sh
	@scripts/fetch-debian-programs.sh
	@scripts/fetch-linux-source.sh
	@scripts/fetch-linux-perf.sh

# Seconds, not minutes: every tool answers and a static hello runs on each
# architecture; otherwise one line names the Debian package to install.
preflight:
	@scripts/preflight.sh

build:
	$(CARGO) build --release --locked

# The main job: what unwindlab can do today, on real SFrame data.
run: build
	@scripts/main-job.sh target/release/unwindlab

lint:
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --locked --workspace --all-targets -- -D warnings
	scripts/import-cycles.sh

test: deps preflight lint
	$(CARGO) test --locked --workspace --all-targets

# Coverage-guided fuzzing of the SFrame reader (needs a nightly toolchain
# and cargo-fuzz; seeds come from the committed test vectors).
fuzz:
	scripts/fuzz-sframe.sh $(FUZZ_SECONDS)

# Lookup speed against simple-frame-rs, as ratios from one run.
bench-sframe:
	$(CARGO) bench --locked -p sframe --bench sframe_lookup
	@python3 scripts/criterion-ratios.py sframe_lookup_V2 sframe_lookup_V3

# Whole stack walks on stacks captured from the guests: SFrame against
# framehop's .eh_frame unwinder, ns per frame (the table in BENCHMARKS.md).
bench-walk:
	$(CARGO) bench --locked -p emu --bench walk

# The kernel model's throughput: deferred requests vs the classic baselines,
# and the stitcher.
bench-kmodel:
	$(CARGO) bench --locked -p kmodel --bench deferred_model
	@python3 scripts/criterion-ratios.py kmodel

# Guest instructions per second: no hooks, shadow stack, + NMIs.
bench-emu:
	scripts/emu-throughput.sh

# validate --every 997 against exec on Debian's static busybox, three
# architectures, side by side in one run.
bench-validate: deps build
	scripts/bench-validate.sh

# unwindlab exec against qemu-user on Debian's programs (bash forks, xz -T2,
# sort), three architectures, side by side, with and without ground truth.
bench-exec: deps build
	python3 scripts/bench-exec.py target/release/unwindlab

# perf.data bytes per sample, deferred callchains against --call-graph
# dwarf's 8 KiB stack copies, on the same runs (shallow to 1,000 deep).
bench-perf-data: build
	python3 scripts/bench-perf-data.py target/release/unwindlab

# How cost grows as work grows: exec, validate and run against samples,
# stack depth, threads and processes; a table and two SVG charts in
# docs/bench.
bench-growth: deps build
	python3 scripts/bench-growth.py target/release/unwindlab docs/bench

# How long the explorer takes to open runs of 5,000 and 50,000 events in
# headless Chromium (BENCHMARKS.md "EXPLORER").
bench-explore: deps build
	python3 scripts/bench-explore.py target/release/unwindlab

clean:
	$(CARGO) clean

# Coverage-guided fuzzing of scenario files (generated, mutated and raw
# JSON; guests with corrupted ELF headers); nightly and cargo-fuzz, as above.
.PHONY: fuzz-scenario
fuzz-scenario:
	scripts/fuzz-scenario.sh $(FUZZ_SECONDS)
