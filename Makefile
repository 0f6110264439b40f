# dockerlet developer tasks. `make help` lists them.

SHELL := /bin/bash

NODE ?= dockerlet-dev
CARGO ?= cargo
# Integration tests each start an agent and containers; 4 at a time keeps a 2-core machine busy
# without starving the agents. Override with `make test TEST_THREADS=8`.
TEST_THREADS ?= 4
BIN := ./target/debug/dockerlet

.PHONY: help build image docker run test lint fmt bench clean-containers

help:
	@echo "make build             cargo build --workspace --bins"
	@echo "make image             build the local dockerlet.local/busybox:1 image"
	@echo "make run [NODE=name]   run the agent on manifests/ (default NODE=$(NODE))"
	@echo "make test              unit + integration tests (needs Docker)"
	@echo "make lint              rustfmt check + clippy -D warnings"
	@echo "make fmt               rustfmt"
	@echo "make bench             benchmarks (not yet)"
	@echo "make clean-containers  remove every container labelled io.dockerlet.node"

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
	$(CARGO) build --workspace --bins
	@mkdir -p target
	set -o pipefail; $(CARGO) test --workspace --all-targets -- --test-threads=$(TEST_THREADS) 2>&1 | tee target/test-output.log
	@awk '/^test result:/ { p += $$4; f += $$6 } END { printf "%d passed, %d failed\n", p, f }' target/test-output.log

lint:
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings

fmt:
	$(CARGO) fmt --all

bench:
	@echo "benchmarks arrive with issue 5"

# For humans: removes the containers of every dockerlet node on this engine (tests clean up
# their own; this is for a `make run` that was killed, or a crashed test run).
clean-containers:
	@ids=$$(docker ps -aq --filter label=io.dockerlet.node); \
	if [ -n "$$ids" ]; then docker rm -f $$ids; else echo "no dockerlet containers"; fi
