"""Every service process sets GRPC_EXPERIMENTS before grpc is first imported (gRPC reads it once, as it
starts), unless the variable is set already (netkernel/grpc_env.py, docs/operations.md)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from netkernel.grpc_env import GRPC_EXPERIMENTS
from tests.procs import ROOT

SERVICES = ["hubsvc", "knowledgesvc", "a2agateway", "ag2gateway", "ag2embedded"]

# Prints the variable's value at the moment anything first imports grpc, then runs the service's
# __main__ with --help (argparse prints and exits before serving anything).
PROBE = """
import os, runpy, sys

class FirstGrpcImport:
    def find_spec(self, name, path=None, target=None):
        if name == "grpc":
            print("GRPC_EXPERIMENTS at grpc import:", repr(os.environ.get("GRPC_EXPERIMENTS")), flush=True)
            sys.meta_path.remove(self)
        return None

sys.meta_path.insert(0, FirstGrpcImport())
sys.argv = [sys.argv[1], "--help"]
runpy.run_module(sys.argv[0], run_name="__main__", alter_sys=True)
"""


def probe(module: str, env: dict[str, str]) -> str:
    out = subprocess.run(
        [sys.executable, "-c", PROBE, module], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    lines = [line for line in out.stdout.splitlines() if line.startswith("GRPC_EXPERIMENTS at grpc import:")]
    assert len(lines) == 1, out.stdout
    return lines[0].split(":", 1)[1].strip()


@pytest.mark.parametrize("module", SERVICES)
def test_set_before_grpc_starts(module: str) -> None:
    env = {k: v for k, v in os.environ.items() if k != "GRPC_EXPERIMENTS"}
    assert probe(module, env) == repr(GRPC_EXPERIMENTS)


@pytest.mark.parametrize("module", SERVICES)
@pytest.mark.parametrize("value", ["", "-event_engine_client"])
def test_an_operators_value_wins(module: str, value: str) -> None:
    assert probe(module, {**os.environ, "GRPC_EXPERIMENTS": value}) == repr(value)


def sdk_probe(code: str, env: dict[str, str]) -> str:
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def test_importing_agentsdk_first_sets_it_and_after_grpc_does_not() -> None:
    env = {k: v for k, v in os.environ.items() if k != "GRPC_EXPERIMENTS"}
    show = "import os; print(repr(os.environ.get('GRPC_EXPERIMENTS')))"
    assert sdk_probe(f"import agentsdk.network; {show}", env) == repr(GRPC_EXPERIMENTS)
    assert sdk_probe(f"import grpc, agentsdk.network; {show}", env) == "None"  # too late to matter: left alone
    assert sdk_probe(f"import agentsdk; {show}", {**env, "GRPC_EXPERIMENTS": ""}) == "''"
