# TxGate: `make run` starts the demo, `make test` runs the whole suite (and each fuzz target for 20 s). Both install what is missing.
SHELL := /bin/bash
GATEWAY_CONFIG ?= gateway.json
# `make fuzz`: each libFuzzer target (Fuzz/) runs this long, two at a time (FUZZ_PARALLEL).
FUZZ_SECONDS ?= 60
DEMO_LISTEN ?= 127.0.0.1:9000

.PHONY: deps build run test fuzz fuzz-smoke bench clean

deps:
	@bash scripts/install-deps.sh

build: deps
	swift build -c release

run: build
	@bash scripts/run-demo.sh "$(GATEWAY_CONFIG)" "$(DEMO_LISTEN)"

test: deps
	swift build --build-tests
	TXGATE_BIN_DIR="$$(swift build --show-bin-path)" swift test --skip-build
	bash scripts/fuzz.sh 20

# libFuzzer targets in their own package (Fuzz/Package.swift); fails if any target crashes.
fuzz:
	@bash scripts/install-deps.sh --build
	bash scripts/fuzz.sh $(FUZZ_SECONDS)

# Every target for 20 s: the last step of `make test` (about 2.5 min from a clean Fuzz/.build on 2 cores).
fuzz-smoke:
	@bash scripts/install-deps.sh --build
	bash scripts/fuzz.sh 20

bench:
	@bash scripts/install-deps.sh --bench
	bash bench/proxy.sh
	bash bench/stepup.sh

clean:
	rm -rf .build
