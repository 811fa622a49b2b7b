# berth: see README.md. `make test` is what CI runs (.ci/run).
GO        ?= go
VERSION   := $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS   := -s -w -X main.version=$(VERSION)
PKGS      := ./cmd/... ./manifest/... ./cri/... ./agent/...

.PHONY: all build test vet unit e2e fuzz testbed clean

all: build

build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o bin/berth ./cmd/berth

vet:
	@unformatted=$$(gofmt -l $$(git ls-files '*.go')); \
	if [ -n "$$unformatted" ]; then echo "gofmt needed:"; echo "$$unformatted"; exit 1; fi
	$(GO) vet -tags e2e ./...

unit:
	$(GO) test -race -count=1 $(PKGS)

e2e: build testbed
	$(GO) test -race -count=1 -tags e2e -timeout 25m ./cri/... ./e2e/...

test: vet unit e2e

clean:
	rm -rf bin
