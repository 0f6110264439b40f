# dockerlet developer tasks. `make help` lists them.

SHELL := /bin/bash

NODE ?= dockerlet-dev
CARGO ?= cargo
# Integration tests each start an agent and containers; 4 at a time keeps a 2-core machine busy
# without starving the agents. Override with `make test TEST_THREADS=8`.
TEST_THREADS ?= 4
BIN := ./target/debug/dockerlet

.PHONY: help build image docker run test test-vm test-vm-pair lint fmt bench chaos chaos-quick clean-containers test-apiserver fuzz hot-code

help:
	@echo "make build             cargo build --workspace --bins"
	@echo "make image             build the local dockerlet.local/busybox:1 image"
	@echo "make run [NODE=name]   run the agent on manifests/ (default NODE=$(NODE))"
	@echo "make test              unit + integration tests (needs Docker), then make test-vm and test-vm-pair"
	@echo "make test-vm           host_compat tests in a Debian 12 VM (qemu; root to build its image)"
	@echo "make test-vm-pair      two Debian 12 VMs as two nodes: pods reach each other by pod IP (CNI)"
	@echo "make lint              rustfmt check + layering and file circles + licences/duplicates + clippy -D warnings"
	@echo "make fmt               rustfmt"
	@echo "make bench             benchmarks against Docker (BENCH_QUICK=1: under 3 minutes)"
	@echo "make fuzz              libFuzzer targets (fuzz/), FUZZ_SECONDS=300 each, and the streaming proptest"
	@echo "make chaos             fault scenarios with pass criteria (restarts dockerd; CHAOS_QUICK=1: short)"
	@echo "make chaos-quick       the short chaos run on the debug build (CI)"
	@echo "make hot-code          profile the release agent (callgrind) and rewrite agent/hot-code/hot.ld"
	@echo "make clean-containers  remove every container labelled io.dockerlet.node"
	@echo "make test-apiserver    in-memory API server on $(APISERVER_LISTEN), kubeconfig in .run/kubeconfig"

build:
	$(CARGO) build --workspace --bins

docker:
	scripts/ensure-docker.sh

image: docker
	scripts/build-busybox-image.sh

run: docker image build
	@mkdir -p .run/root
	@echo "dockerlet: node $(NODE), manifests from ./manifests"
	@echo "  pods:    curl http://127.0.0.1:10255/pods"
	@echo "  healthz: curl http://127.0.0.1:10248/healthz"
	@echo "  actors:  curl http://127.0.0.1:10265/debug/actors"
	$(BIN) --pod-manifest-path manifests --root-dir .run/root --hostname-override $(NODE) \
		--read-only-port 10255 --healthz-port 10248 --debug-address 127.0.0.1:10265

test: docker image
	scripts/ensure-test-tools.sh
	$(CARGO) build --workspace --bins
	@mkdir -p target
	set -o pipefail; $(CARGO) test --workspace --all-targets -- --test-threads=$(TEST_THREADS) 2>&1 | tee target/test-output.log
	@awk '/^test result:/ { p += $$4; f += $$6 } END { printf "%d passed, %d failed\n", p, f }' target/test-output.log
	scripts/test-vm.sh
	scripts/test-vm-pair.sh

# The host_compat tests (integration-tests/tests/host_compat.rs) in a Debian 12 guest under
# qemu: systemd, cgroup v2, Docker on its default systemd cgroup driver. The guest image is
# built once (root, debootstrap) and cached in target/vm/; VM_TEST_ARGS go to the test binary.
test-vm: docker image build
	scripts/test-vm.sh

# Two guests of the same image as two nodes of one test API server on this host, joined by a
# qemu socket network: each gets its pod CIDR from the API server, and a pod on one reaches a
# pod on the other by pod IP through Debian's CNI plugins and host-gw routes.
test-vm-pair: docker image build
	scripts/test-vm-pair.sh

# The layering rule (scripts/check-layers.py: crate dependencies transitively, no actix below the
# actor layer, no source files importing each other in a circle), the dependencies' licences and
# duplicate versions (scripts/check-deps.py, cargo-deny's checks over `cargo metadata`) and,
# through actors/clippy.toml, no blocking std::fs or std::thread::sleep in actor code. CI runs it
# (.ci/run) before `make test`.
lint:
	$(CARGO) fmt --all -- --check
	python3 scripts/check-layers.py
	python3 scripts/check-deps.py
	$(CARGO) clippy --workspace --all-targets -- -D warnings

fmt:
	$(CARGO) fmt --all

# The streaming protocols' proptest fuzzer (streaming/tests/fuzz.rs) with 100x its `cargo test`
# case count: random and mutated SPDY frames into the decoder and session, WebSocket messages.
# Then the libFuzzer targets (fuzz/: manifests, kubelet API queries, probe responses, cgroup and
# kmsg files, SPDY and WebSocket framing) for FUZZ_SECONDS each, one at a time (scripts/fuzz.sh;
# FUZZ_TARGETS="spdy kmsg" picks some). CI runs `make fuzz FUZZ_SECONDS=60`.
FUZZ_SECONDS ?= 300

fuzz:
	PROPTEST_CASES=$${PROPTEST_CASES:-51200} $(CARGO) test -p dockerlet-streaming --test fuzz
	FUZZ_SECONDS=$(FUZZ_SECONDS) scripts/fuzz.sh

# Benchmarks (BENCHMARKS.md): the release agent against the real Docker engine, beside a
# bollard-only baseline. `make bench BENCH_QUICK=1` (or `BENCH_QUICK=1 make bench`) runs fewer
# pods and repetitions; BENCH_ONLY=p1,p1c,p1v,p2,p3,p5,p5b,p7,p8,c1,d1,e1 picks scenarios. Prints a markdown table
# and writes target/bench/latest.json.
BENCH_QUICK ?=
BENCH_ONLY ?=

# The bench binary is run as built: `cargo run -p dockerlet-bench` alone would resolve other
# features for the crates it shares with the agent (dockerlet-pod, through the fake API server)
# and build them, and the LTO bench binary, a second time.
bench: docker image
	$(CARGO) build --release -p dockerlet -p dockerlet-bench
	BENCH_QUICK=$(BENCH_QUICK) BENCH_ONLY=$(BENCH_ONLY) DOCKERLET_BIN=target/release/dockerlet \
		target/release/dockerlet-bench

# The fault scenarios (bench/src/chaos/, BENCHMARKS.md's reliability table): the release agent
# SIGKILLed, its actors panicking, dockerd stopped and started, an engine 500 ms late, the API
# server away, --root-dir's file system full and hostile HTTP clients, each with its pass
# criteria; fails when one is missed. It stops and starts dockerd (every container on the engine
# stops). CHAOS_QUICK=1 runs fewer pods and shorter outages; `make chaos-quick` does so on the
# debug build `make test` made (CI); CHAOS_ONLY=kill,panic,engine,slow,api,disk,http picks.
CHAOS_QUICK ?=
CHAOS_ONLY ?=

chaos: docker image
	$(CARGO) build --release -p dockerlet -p dockerlet-bench
	CHAOS_QUICK=$(CHAOS_QUICK) CHAOS_ONLY=$(CHAOS_ONLY) DOCKERLET_BIN=target/release/dockerlet \
		target/release/dockerlet-bench chaos

chaos-quick: docker image build
	CHAOS_QUICK=1 CHAOS_ONLY=$(CHAOS_ONLY) DOCKERLET_BIN=$(BIN) target/debug/dockerlet-bench chaos

# For humans: removes the containers of every dockerlet node on this engine (tests clean up
# their own; this is for a `make run` that was killed, or a crashed test run).
# The release agent's code layout (agent/hot-code/README.md): the agent under callgrind in a
# standalone and an API-mode run, the functions that ran written to agent/hot-code/hot.ld.
# About 15 minutes; rerun when the agent's everyday work changes.
hot-code: docker image
	scripts/hot-code.sh

clean-containers:
	@ids=$$(docker ps -aq --filter label=io.dockerlet.node; docker ps -aq --filter label=io.dockerlet.claim); \
	if [ -n "$$ids" ]; then docker rm -f $$ids; else echo "no dockerlet containers"; fi

# For humans: the in-memory Kubernetes API server the tests use (a test fixture, plain HTTP),
# to try API-server mode without a cluster. Serves until Ctrl-C; then, in another shell:
#   kubectl --kubeconfig .run/kubeconfig get nodes
#   ./target/debug/dockerlet --kubeconfig .run/kubeconfig --hostname-override $(NODE) --root-dir .run/root
APISERVER_LISTEN ?= 127.0.0.1:6443

test-apiserver:
	@mkdir -p .run
	$(CARGO) run --release -p dockerlet-fake-apiserver --bin test-apiserver -- \
		--listen $(APISERVER_LISTEN) --kubeconfig-out .run/kubeconfig
