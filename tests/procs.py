"""The tests' name for :mod:`localprocs.procs` (moved there so the benchmarks need not import the tests)."""

from localprocs.procs import ROOT, ServiceProcess, interrupt, serving, start_service

__all__ = ["ROOT", "ServiceProcess", "interrupt", "serving", "start_service"]
