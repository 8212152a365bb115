"""Generators of the per-RPC client tables (Python, Go, TypeScript), run by ``make proto``.

Each language's table is written from the proto descriptors (:mod:`scripts.rpc_tables.descriptors`),
so an RPC added to ``proto/`` reaches every client table without a hand-written line.
"""
