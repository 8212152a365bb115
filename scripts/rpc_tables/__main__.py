"""``python -m scripts.rpc_tables LANGUAGE OUT``: write LANGUAGE's per-RPC client table to OUT (run from
the repository root by ``scripts/gen_proto.sh``, so ``make proto`` writes it and ``make check-gen``
checks it)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

from scripts.rpc_tables import go, python, ts
from scripts.rpc_tables.descriptors import Service, load

#: Each language's emitter: the services of proto/ and the repository root in, the table's source out.
EMITTERS: dict[str, Callable[[list[Service], Path], str]] = {
    "python": python.emit,
    "go": go.emit,
    "ts": ts.emit,
}


def main(argv: list[str]) -> int:
    """Write the table; a usage line and status 2 for unknown arguments."""
    if len(argv) != 2 or argv[0] not in EMITTERS:
        print(f"usage: python -m scripts.rpc_tables {{{','.join(sorted(EMITTERS))}}} OUT", file=sys.stderr)
        return 2
    language, out = argv
    root = Path.cwd()
    Path(out).write_text(EMITTERS[language](load(root / "proto"), root), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
