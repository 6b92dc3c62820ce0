# TxGate: `make run` starts the demo, `make test` runs the whole suite (and each fuzz target for
# 20 s). Both install what is missing: `make run` only what building and running need, `make
# test` also the test set. `make install` (PREFIX=/usr/local, DESTDIR honoured) puts txgate and
# demo-bank in $(PREFIX)/bin, the systemd unit in $(PREFIX)/lib/systemd/system and, if there is
# none, a sample /etc/txgate/gateway.json; `make install-service` also enables the unit
# (docs/OPERATIONS-SYSTEMD.md). BUILT=<folder> installs binaries built there, without building.
SHELL := /bin/bash
GATEWAY_CONFIG ?= gateway.json
# `make fuzz`: each libFuzzer target (Fuzz/) runs this long, two at a time (FUZZ_PARALLEL).
FUZZ_SECONDS ?= 60
DEMO_LISTEN ?= 127.0.0.1:9000
PREFIX ?= /usr/local
BINDIR ?= $(PREFIX)/bin
UNITDIR ?= $(PREFIX)/lib/systemd/system
SYSCONFDIR ?= /etc
BUILT ?=
INSTALL_VARS = DESTDIR="$(DESTDIR)" PREFIX="$(PREFIX)" BINDIR="$(BINDIR)" UNITDIR="$(UNITDIR)" SYSCONFDIR="$(SYSCONFDIR)"
# The commit baked into the binaries (`txgate --version`, the start-up log line); Package.swift
# reads it from the environment. Outside a git checkout it stays "unknown".
TXGATE_COMMIT ?= $(shell git describe --always --dirty --abbrev=12 --exclude '*' 2>/dev/null || echo unknown)
export TXGATE_COMMIT

# `make docs`: the DocC archive of the client library, TxGateClient, here; a static site to serve
# from its root (`python3 -m http.server -d .build/docs/TxGateClient.doccarchive`, then
# /documentation/txgateclient).
DOCS_DIR ?= .build/docs

.PHONY: deps test-deps build run install install-service uninstall test docs fuzz fuzz-smoke tsan bench clean

deps:
	@bash scripts/install-deps.sh --build

test-deps:
	@bash scripts/install-deps.sh

# Release binaries carry the Swift runtime and Foundation inside (--static-swift-stdlib), as the
# Docker image's do: an installed txgate loads nothing from the toolchain's folder, so the service
# starts wherever the toolchain lives (swiftly puts it in a home folder, which the unit's
# ProtectHome=yes hides) and after it is upgraded or removed; the bench scripts build the same way.
# By product: the test-support target, which imports Testing, has no static form.
RELEASE_BUILD = swift build -c release --static-swift-stdlib

build: deps
	$(RELEASE_BUILD) --product txgate
	$(RELEASE_BUILD) --product demo-bank

run: build
	@bash scripts/run-demo.sh "$(GATEWAY_CONFIG)" "$(DEMO_LISTEN)"

# Builds as the calling user; only the copies use sudo, and only when a destination is not writable.
install: $(if $(BUILT),,build)
	@$(INSTALL_VARS) BUILT="$(or $(BUILT),$$($(RELEASE_BUILD) --show-bin-path))" bash scripts/install.sh install

install-service: install
	@$(INSTALL_VARS) bash scripts/install.sh enable

uninstall:
	@$(INSTALL_VARS) bash scripts/install.sh uninstall

# Most tests block the thread they run on (sockets, child processes), and Swift Testing starts
# every test at once on a pool of one thread per core: a test's time limit then starts long
# before the test gets a thread, and a test that takes a second failed its one-minute limit on
# a busy run. With at most one test case per core admitted at a time, a time limit measures the
# test itself; the suite takes as long as before (about 3.5 min on 2 cores).
test: test-deps
	$(MAKE) docs
	swift build --build-tests
	TXGATE_BIN_DIR="$$(swift build --show-bin-path)" SWT_EXPERIMENTAL_MAXIMUM_PARALLELIZATION_WIDTH="$$(nproc)" \
	  swift test --skip-build
	bash scripts/fuzz.sh 20

# The API documentation of TxGateClient (Sources/TxGateClient/TxGateClient.docc and the doc comments),
# offline: swift-docc-plugin is a package dependency and docc comes with the toolchain. Fails on any
# DocC warning (a broken symbol link, a parameter documented under a name the function does not
# have) and, through scripts/check-doc-coverage.swift on the symbol graph DocC was given, on a public
# symbol without a doc comment of its own. About 7 s from a warm .build on 2 cores (the first run
# also builds the plugin's SymbolKit, about 10 s more). The symbol graphs are removed first so that
# the check reads only this run's.
docs:
	rm -rf "$(DOCS_DIR)/TxGateClient.doccarchive" .build/*/extracted-symbols/*/TxGateClient
	mkdir -p "$(DOCS_DIR)"
	swift package --allow-writing-to-directory "$(DOCS_DIR)" generate-documentation --target TxGateClient \
	  --output-path "$(DOCS_DIR)/TxGateClient.doccarchive" --transform-for-static-hosting --warnings-as-errors
	swift scripts/check-doc-coverage.swift TxGateClient .build/*/extracted-symbols/*/TxGateClient/*.symbols.json
	@echo "documentation: $(DOCS_DIR)/TxGateClient.doccarchive (index.html)"

# libFuzzer targets in their own package (Fuzz/Package.swift); fails if any target crashes.
fuzz:
	@bash scripts/install-deps.sh --build
	bash scripts/fuzz.sh $(FUZZ_SECONDS)

# Every target for 20 s: the last step of `make test` (about 2.5 min from a clean Fuzz/.build on 2 cores).
fuzz-smoke:
	@bash scripts/install-deps.sh --build
	bash scripts/fuzz.sh 20

# The suite under ThreadSanitizer (its own build in .build/tsan); fails on a data race. About 8 min on 2 cores.
tsan: test-deps
	bash scripts/tsan.sh

bench:
	@bash scripts/install-deps.sh --bench
	bash bench/proxy.sh
	bash bench/stepup.sh

clean:
	rm -rf .build
