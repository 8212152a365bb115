# agent-network build entry points. Everything installs itself on first use:
# a fresh clone needs only `make serve` or `make test`.

SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
include tools/versions.env
# Worker processes of the test suite: tests mostly wait on sockets and timers, so more workers than cores pays.
TEST_WORKERS ?= 3
AG2_VERSION ?= 1.2.1
# The tests start hundreds of Python processes (hubs, services, CLIs, example scripts): let each reuse the
# bytecode of the project's modules (__pycache__/, ignored by git) instead of compiling them again, even where
# the environment sets PYTHONDONTWRITEBYTECODE (an empty value turns it off).
export PYTHONDONTWRITEBYTECODE :=

.PHONY: ag2-venv help setup proto check-gen lint test test-fast test-bridges test-bridges-go test-bridges-ts test-deps debian-packages serve bench bench-bridges tools node-deps go-deps bridges-deps redis-server chromium clean

help: ## list targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/'

# uv (PyPI's `uv`, pinned in tools/versions.env, installed into .venv by its pip) installs the packages: it
# resolves the same versions as pip in a fraction of the time and downloads in parallel. --compile-bytecode
# writes site-packages' bytecode up front as pip does, so processes started with PYTHONDONTWRITEBYTECODE=1 do
# not compile grpc, protobuf or pydantic again each time.
UV := $(VENV)/bin/uv
UV_READY := $(VENV)/.uv-$(UV_VERSION)
UV_INSTALL = $(UV) pip install -q --compile-bytecode

$(UV_READY):
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q "uv==$(UV_VERSION)"
	@touch $@

$(VENV)/.installed: pyproject.toml | $(UV_READY)
	$(UV_INSTALL) --python $(PY) -e ".[dev]"
	@touch $@

setup: $(VENV)/.installed ## create .venv and install the project with dev tools

tools/bin/protoc-gen-go:
	GOBIN=$(CURDIR)/tools/bin go install google.golang.org/protobuf/cmd/protoc-gen-go@$(PROTOC_GEN_GO_VERSION)

tools/bin/protoc-gen-go-grpc:
	GOBIN=$(CURDIR)/tools/bin go install google.golang.org/grpc/cmd/protoc-gen-go-grpc@$(PROTOC_GEN_GO_GRPC_VERSION)

tools/node_modules/.installed: tools/package.json tools/package-lock.json
	cd tools && npm ci --no-audit --no-fund --loglevel=error
	@touch $@

tools: $(VENV)/.installed tools/bin/protoc-gen-go tools/bin/protoc-gen-go-grpc tools/node_modules/.installed ## install the pinned code generators under tools/

gen/ts/node_modules/.installed: gen/ts/package.json gen/ts/package-lock.json
	cd gen/ts && npm ci --no-audit --no-fund --loglevel=error
	@touch $@

node-deps: gen/ts/node_modules/.installed ## install npm packages of the TypeScript stubs

go-deps: ## download Go modules of the Go stubs and the Go bridge
	cd gen/go && go mod download
	cd bridges/go && go mod download

bridges/ts/node_modules/.installed: bridges/ts/package.json bridges/ts/package-lock.json
	cd bridges/ts && npm ci --no-audit --no-fund --loglevel=error
	@touch $@

bridges-deps: bridges/ts/node_modules/.installed ## install npm packages of the TypeScript bridge

# The two suites run side by side (each mostly waits on its hubs; -O prints each one's output in one piece),
# but never beside pytest (see test). Their tests wait on hub processes more than they compute, so each suite
# runs more tests at once than the machine has cores: Go's -parallel and node's --test-concurrency default to
# the core count (node: one less), which left a 2-core machine mostly idle (Go 39 s -> 18 s, TS 22 s -> 10 s).
test-bridges: setup go-deps bridges-deps ## the Go and TypeScript bridge test suites (each starts its own hub)
	@$(MAKE) --no-print-directory -j2 -O test-bridges-go test-bridges-ts

test-bridges-go:
	cd bridges/go && go vet ./... && go test -count=1 -parallel 4 ./...

test-bridges-ts:
	cd bridges/ts && npm test

APT_INSTALL := apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq

redis-server: ## install Debian's redis-server when it is missing (tests start their own instances)
	@command -v redis-server >/dev/null || { $(APT_INSTALL) redis-server >/dev/null; }

chromium: ## install Debian's chromium and chromium-driver when missing (the console's browser tests drive them)
	@command -v chromium >/dev/null && command -v chromedriver >/dev/null || { $(APT_INSTALL) chromium chromium-driver >/dev/null; }

# redis-server and chromium in one apt-get run (two at once would fight over apt's lock).
debian-packages:
	@pkgs=; command -v redis-server >/dev/null || pkgs=redis-server; \
	  command -v chromium >/dev/null && command -v chromedriver >/dev/null || pkgs="$$pkgs chromium chromium-driver"; \
	  test -z "$$pkgs" || { $(APT_INSTALL) $$pkgs >/dev/null; }

# What make test installs, all at once: the downloads and apt wait on the network more than on the cores.
test-deps:
	@$(MAKE) --no-print-directory -j4 setup node-deps go-deps bridges-deps debian-packages ag2-venv

proto: tools ## regenerate every stub tree under gen/ and the SDK's client tables from proto/
	bash scripts/gen_proto.sh

# Everything `make proto` writes: the stub trees and the SDK's generated client tables.
GENERATED := gen agentsdk/_generated_rpc.py bridges/go/rpc_generated.go bridges/ts/src/rpc_generated.ts

check-gen: proto ## regenerate and fail if gen/ (or a generated client table) differs from what is committed
	@if [ -n "$$(git status --porcelain -- $(GENERATED))" ]; then \
	  echo "generated code is out of date with proto/: run 'make proto' and commit the result"; \
	  git status --porcelain -- $(GENERATED); git diff --stat -- $(GENERATED); exit 1; fi
	@echo "$(GENERATED) match proto/"

lint: setup ## ruff, mypy on hand-written code, buf lint
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy
	cd proto && ../$(VENV)/bin/buf lint

# The bridge suites run first, then pytest on TEST_WORKERS processes. (Running them alongside pytest saved
# about a minute of wall time on two cores but made the suite's process-killing and replica tests time out.)
test: test-deps ## run the whole test suite
	@$(MAKE) --no-print-directory test-bridges
	$(PY) -m pytest -q -n $(TEST_WORKERS)

test-fast: setup node-deps debian-packages ag2-venv ## the inner loop: the Python suite without the slow crash tests, stopping at the first failure
	$(PY) -m pytest -q -n $(TEST_WORKERS) -x -m "not slow"

serve: setup ## run the hub (:50051) and knowledge service (:50052) on embedded SQLite; Ctrl-C stops both
	@test -f gen/python/agentnet/v1/hub_pb2.py || $(MAKE) proto
	bash scripts/serve.sh

ag2-venv: .venv-ag2/.installed ## the released AG2 1.2.1 in its own venv (the AG2 gateway's tests drive it as a subprocess)

# AG2's client pins its own pydantic / websockets ranges, so it gets a venv of its own, as AutoGen does
# (both installed by .venv's uv).
.venv-ag2/.installed: | $(UV_READY)
	@test -x .venv-ag2/bin/python || $(PYTHON) -m venv .venv-ag2
	$(UV_INSTALL) --python .venv-ag2/bin/python "ag2==$(AG2_VERSION)" "websockets>=15,<18" "watchdog>=7.1"
	@touch $@

.venv-autogen/.installed: | $(UV_READY)
	@test -x .venv-autogen/bin/python || $(PYTHON) -m venv .venv-autogen
	$(UV_INSTALL) --python .venv-autogen/bin/python "autogen-core==$(AUTOGEN_VERSION)" "autogen-ext[grpc]==$(AUTOGEN_VERSION)"
	@touch $@

bench: setup redis-server .venv-autogen/.installed .venv-ag2/.installed ## run the benchmarks in bench/ (not tests); AutoGen gets its own venv, the Redis rows a redis-server
	$(PY) -m bench $(BENCH_ARGS)

BENCH_BRIDGES_TIME ?= 3s
bench-bridges: setup go-deps bridges-deps ## the Go and TypeScript bridges on bench/hub_bench.py's workloads against a real hub (not tests; BENCH_BRIDGES_TIME per Go benchmark, BENCH_BRIDGES_ARGS for the TS script)
	cd bridges/go && go test -run '^$$' -bench . -benchtime $(BENCH_BRIDGES_TIME) -timeout 20m .
	cd bridges/ts && npm run bench -- $(BENCH_BRIDGES_ARGS)

clean: ## remove build output and local tools (keeps data/)
	rm -rf tools/bin tools/node_modules gen/ts/node_modules gen/ts/dist build dist *.egg-info .venv-autogen .venv-ag2 \
	  bridges/ts/node_modules bridges/ts/dist bridges/ts/lib
