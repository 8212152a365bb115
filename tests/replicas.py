"""The tests' name for :mod:`localprocs.replicas` (moved there so the benchmarks need not import the tests)."""

from localprocs.replicas import Replicas, replicas

__all__ = ["Replicas", "replicas"]
