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

.PHONY: ag2-venv help setup proto check-gen lint test test-fast test-bridges serve bench bench-bridges tools node-deps go-deps bridges-deps redis-server chromium clean

help: ## list targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/'

$(VENV)/.installed: pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e ".[dev]"
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

test-bridges: setup go-deps bridges-deps ## the Go and TypeScript bridge test suites (each starts its own hub)
	cd bridges/go && go vet ./... && go test -count=1 ./...
	cd bridges/ts && npm test

redis-server: ## install Debian's redis-server when it is missing (tests start their own instances)
	@command -v redis-server >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server >/dev/null; }

chromium: ## install Debian's chromium and chromium-driver when missing (the console's browser tests drive them)
	@command -v chromium >/dev/null && command -v chromedriver >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >/dev/null; }

proto: tools ## regenerate every stub tree under gen/ from proto/
	bash scripts/gen_proto.sh

check-gen: proto ## regenerate and fail if gen/ differs from what is committed
	@if [ -n "$$(git status --porcelain -- gen)" ]; then \
	  echo "gen/ is out of date with proto/: run 'make proto' and commit the result"; \
	  git status --porcelain -- gen; git diff --stat -- gen; exit 1; fi
	@echo "gen/ matches proto/"

lint: setup ## ruff, mypy on hand-written code, buf lint
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy
	cd proto && ../$(VENV)/bin/buf lint

# The bridge suites run first, then pytest on TEST_WORKERS processes. (Running them alongside pytest saved
# about a minute of wall time on two cores but made the suite's process-killing and replica tests time out.)
test: setup node-deps go-deps bridges-deps redis-server chromium ag2-venv test-bridges ## run the whole test suite
	$(PY) -m pytest -q -n $(TEST_WORKERS)

test-fast: setup node-deps redis-server chromium ag2-venv ## the inner loop: the Python suite without the slow crash tests, stopping at the first failure
	$(PY) -m pytest -q -n $(TEST_WORKERS) -x -m "not slow"

serve: setup ## run the hub (:50051) and knowledge service (:50052) on embedded SQLite; Ctrl-C stops both
	@test -f gen/python/agentnet/v1/hub_pb2.py || $(MAKE) proto
	bash scripts/serve.sh

ag2-venv: .venv-ag2/.installed ## the released AG2 1.2.1 in its own venv (the AG2 gateway's tests drive it as a subprocess)

# AG2's client pins its own pydantic / websockets ranges, so it gets a venv of its own, as AutoGen does.
.venv-ag2/.installed:
	@test -x .venv-ag2/bin/python || $(PYTHON) -m venv .venv-ag2
	.venv-ag2/bin/python -m pip install -q "ag2==$(AG2_VERSION)" "websockets>=15,<18" "watchdog>=7.1"
	@touch $@

.venv-autogen/.installed:
	@test -x .venv-autogen/bin/python || $(PYTHON) -m venv .venv-autogen
	.venv-autogen/bin/python -m pip install -q "autogen-core==$(AUTOGEN_VERSION)" "autogen-ext[grpc]==$(AUTOGEN_VERSION)"
	@touch $@

bench: setup redis-server .venv-autogen/.installed .venv-ag2/.installed ## run the benchmarks in bench/ (not tests); AutoGen gets its own venv, the Redis rows a redis-server
	$(PY) -m bench $(BENCH_ARGS)

BENCH_BRIDGES_TIME ?= 3s
bench-bridges: setup go-deps bridges-deps ## the Go and TypeScript bridges on bench/hub_bench.py's workloads against a real hub (not tests; BENCH_BRIDGES_TIME per Go benchmark, BENCH_BRIDGES_ARGS for the TS script)
	cd bridges/go && go test -run '^$$' -bench . -benchtime $(BENCH_BRIDGES_TIME) -timeout 20m .
	cd bridges/ts && npm run bench -- $(BENCH_BRIDGES_ARGS)

clean: ## remove build output and local tools (keeps data/)
	rm -rf tools/bin tools/node_modules gen/ts/node_modules gen/ts/dist build dist *.egg-info .venv-autogen .venv-ag2 \
	  bridges/ts/node_modules bridges/ts/dist
