#!/usr/bin/env bash
# Regenerates every stub tree under gen/, and the SDK's client tables, from proto/. Run through `make proto`,
# which first installs the pinned generators (see tools/versions.env).
# Output is deterministic: the same pinned tools give byte-identical files.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT"
source tools/versions.env

PY="${PYTHON:-.venv/bin/python}"
# betterproto2-compiler formats its output with ruff: use the pinned one from the venv.
export PATH="$ROOT/.venv/bin:$PATH"
WKT="$("$PY" -c 'import grpc_tools, os; print(os.path.join(os.path.dirname(grpc_tools.__file__), "_proto"))')"
PROTOS=$(cd proto && find agentnet -name '*.proto' | LC_ALL=C sort)
protoc() { "$PY" -m grpc_tools.protoc -Iproto -I"$WKT" "$@"; }

# Python (grpcio + protobuf upb, with mypy-protobuf .pyi) -- the wire layer we run on.
rm -rf gen/python/agentnet
mkdir -p gen/python
protoc --python_out=gen/python --grpc_python_out=gen/python \
  --plugin=protoc-gen-mypy=.venv/bin/protoc-gen-mypy --mypy_out=gen/python \
  --plugin=protoc-gen-mypy_grpc=.venv/bin/protoc-gen-mypy_grpc --mypy_grpc_out=gen/python \
  $PROTOS
touch gen/python/agentnet/__init__.py gen/python/agentnet/v1/__init__.py gen/python/agentnet/py.typed

# The SDK's per-RPC client tables (one mixin per service, formatted by the pinned ruff), read from the
# same protos (scripts/rpc_tables): agentsdk's HubRpc / OperatorRpc / KnowledgeRpc mix them in.
"$PY" -m scripts.rpc_tables python agentsdk/_generated_rpc.py

# The Go and TypeScript bridges' per-RPC tables (HubRPC, gofmt-formatted; HubRpc), read from the same protos:
# the bridges' Client methods call them and write by hand only what is special.
"$PY" -m scripts.rpc_tables go bridges/go/rpc_generated.go
"$PY" -m scripts.rpc_tables ts bridges/ts/src/rpc_generated.ts

# Python betterproto2 dataclasses with async grpclib clients -- for bridge authors.
# betterproto2 output is one package (relative imports): agentnet_betterproto.agentnet.v1.
rm -rf gen/python_betterproto
mkdir -p gen/python_betterproto/agentnet_betterproto
protoc --plugin=protoc-gen-python_betterproto2=.venv/bin/protoc-gen-python_betterproto2 \
  --python_betterproto2_out=gen/python_betterproto/agentnet_betterproto \
  --python_betterproto2_opt=client_generation=async,server_generation=none \
  $PROTOS

# Go (protoc-gen-go + protoc-gen-go-grpc), module github.com/agent-network/agent-network/gen/go.
rm -rf gen/go/agentnet
mkdir -p gen/go
protoc --plugin=protoc-gen-go=tools/bin/protoc-gen-go --plugin=protoc-gen-go-grpc=tools/bin/protoc-gen-go-grpc \
  --go_out=gen/go --go_opt=module="$GO_MODULE" \
  --go-grpc_out=gen/go --go-grpc_opt=module="$GO_MODULE" \
  $PROTOS

# TypeScript (ts-proto for @grpc/grpc-js).
rm -rf gen/ts/src/agentnet gen/ts/src/google
mkdir -p gen/ts/src
protoc --plugin=protoc-gen-ts_proto=tools/node_modules/.bin/protoc-gen-ts_proto \
  --ts_proto_out=gen/ts/src \
  --ts_proto_opt=outputServices=grpc-js,esModuleInterop=true,env=node,useOptionals=messages,oneof=unions-value,useExactTypes=false,exportCommonSymbols=false \
  $PROTOS

echo "generated: gen/python agentsdk/_generated_rpc.py bridges/go/rpc_generated.go bridges/ts/src/rpc_generated.ts gen/python_betterproto gen/go gen/ts"
