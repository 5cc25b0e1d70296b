# Everyday commands. CI runs .ci/run, which does the same checks.
GO ?= go
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
GOLANGCI_LINT ?= github.com/golangci/golangci-lint/v2/cmd/golangci-lint@v2.15.0
BIN ?= bin/distributor

CROSS ?= darwin/amd64 darwin/arm64 windows/amd64 windows/arm64 freebsd/amd64 freebsd/arm64

.PHONY: all build test test-race vet cross lint bench fmt clean

all: vet cross lint test build

# The binary reports VERSION in `distributor version` and in the catalogs it writes.
build:
	$(GO) build -ldflags "-X main.version=$(VERSION)" -o $(BIN) ./cmd/distributor

test:
	$(GO) test -count=1 ./...

test-race:
	$(GO) test -race -count=1 -timeout 30m ./...

vet:
	$(GO) vet ./...

# Build and vet (which compiles the tests too) for the other systems; CI
# (.ci/run) runs the same.
cross:
	@for t in $(CROSS); do \
		echo "-- $$t"; \
		GOOS=$${t%/*} GOARCH=$${t#*/} $(GO) build ./... && \
		GOOS=$${t%/*} GOARCH=$${t#*/} $(GO) vet ./... || exit 1; \
	done

# Pinned golangci-lint through go run: nothing to install.
lint:
	$(GO) run $(GOLANGCI_LINT) run ./...

bench:
	$(GO) test -run '^$$' -bench . -benchmem ./...

fmt:
	gofmt -w $$(git ls-files '*.go')

clean:
	rm -rf bin
