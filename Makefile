# TxGate: `make run` starts the demo, `make test` runs the whole suite. Both install what is missing.
SHELL := /bin/bash
GATEWAY_CONFIG ?= gateway.json
DEMO_LISTEN ?= 127.0.0.1:9000

.PHONY: deps build run test bench clean

deps:
	@bash scripts/install-deps.sh

build: deps
	swift build -c release

run: build
	@bash scripts/run-demo.sh "$(GATEWAY_CONFIG)" "$(DEMO_LISTEN)"

test: deps
	swift build --build-tests
	TXGATE_BIN_DIR="$$(swift build --show-bin-path)" swift test --skip-build

bench:
	@bash scripts/install-deps.sh --bench
	bash bench/proxy.sh
	bash bench/stepup.sh

clean:
	rm -rf .build
