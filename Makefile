# strata's two entry points for a fresh machine:
#   go run ./examples/prefill     the main job
#   make test                     installs what the tests need (Debian packages, as root) and runs every test
SHELL := /bin/bash
DEBIAN_PACKAGES := clang-16 libopenblas0 python3-numpy python3-pytest
PYTHON ?= /usr/bin/python3

.PHONY: test deps go-test race vet darwin-vet msl-check py-test

test: deps vet darwin-vet msl-check go-test race py-test

# Installs the Debian packages the tests use when running as root and any is missing.
deps:
	@missing=""; for p in $(DEBIAN_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ]; then echo "installing:$$missing"; apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; \
	  else echo "missing Debian packages:$$missing (run as root, or install them)"; exit 1; fi; \
	fi

vet:
	go vet ./...

# The Metal host code is cgo-free: it must vet and build for Apple silicon from Linux.
darwin-vet:
	GOOS=darwin GOARCH=arm64 CGO_ENABLED=0 go vet ./...
	GOOS=darwin GOARCH=arm64 CGO_ENABLED=0 go build ./...

# strata's kernels through the emulator's strict MSL front end (mslc), the host's shared header first.
msl-check:
	go run ./metal/emu/cmd/mslc $(addprefix -include ,$(wildcard metal/kernels/*.h)) metal/kernels/*.metal

go-test:
	go test -count=1 -timeout 40m ./...

# Many goroutines and threads share one device and model in these packages' tests.
race:
	go test -race -count=1 -timeout 20m ./strata ./capi

py-test:
	@if ls python/tests/*.py >/dev/null 2>&1; then $(PYTHON) -m pytest -q python/tests; else echo "no python tests yet"; fi
