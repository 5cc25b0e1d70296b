# Everyday commands. CI runs .ci/run, which does the same checks.
GO ?= go
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
GOLANGCI_LINT ?= github.com/golangci/golangci-lint/v2/cmd/golangci-lint@v2.15.0
BIN ?= bin/distributor

.PHONY: all build test test-race vet lint bench fmt clean

all: vet lint test build

# The binary reports VERSION in `distributor version` and in the catalogs it writes.
build:
	$(GO) build -ldflags "-X main.version=$(VERSION)" -o $(BIN) ./cmd/distributor

test:
	$(GO) test -count=1 ./...

test-race:
	$(GO) test -race -count=1 -timeout 30m ./...

vet:
	$(GO) vet ./...

# Pinned golangci-lint through go run: nothing to install.
lint:
	$(GO) run $(GOLANGCI_LINT) run ./...

bench:
	$(GO) test -run '^$$' -bench . -benchmem ./...

fmt:
	gofmt -w $$(git ls-files '*.go')

clean:
	rm -rf bin
