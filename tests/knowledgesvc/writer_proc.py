"""A second OS process using a shared store (run by the cross-process tests).

python -m tests.knowledgesvc.writer_proc disk ROOT write PATH TEXT
python -m tests.knowledgesvc.writer_proc redis URL#PREFIX append-lines PATH TAG COUNT
"""

from __future__ import annotations

import asyncio
import sys

from agentsdk.knowledge import DiskKnowledgeStore, RedisKnowledgeStore, StoreBase


def open_store(backend: str, location: str) -> StoreBase:
    """The shared store named on the command line."""
    if backend == "disk":
        return DiskKnowledgeStore(location)
    url, _, prefix = location.partition("#")
    return RedisKnowledgeStore(url, prefix=prefix)


async def main(argv: list[str]) -> None:
    """Write then append to a file, or append COUNT tagged lines, then print the offsets."""
    backend, location, action, path, *rest = argv
    async with open_store(backend, location) as store:
        if action == "write":
            await store.write(path, rest[0])
            print(await store.append(path, " + appended"), flush=True)
        elif action == "append-lines":
            tag, count = rest[0], int(rest[1])
            for i in range(count):
                print(await store.append(path, f"{tag} line-{i:04d} ✓\n"), flush=True)
        else:
            raise SystemExit(f"unknown action {action}")


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1:]))
