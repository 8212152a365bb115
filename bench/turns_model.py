"""``python -m bench.turns_model``: the turns benchmark's model, a local OpenAI-compatible
server (:class:`agentsdk.testing.ScriptedOpenAIServer`) answering every chat completion at
once with the same short text. It runs in its own process so its HTTP threads do not share
the agents' interpreter (and GIL); it prints ``listening on 127.0.0.1:PORT`` once serving.
"""

from __future__ import annotations

import argparse
import threading
from typing import Any

from agentsdk.testing import ScriptedOpenAIServer

REPLY = "Noted; passing the turn on."


def answer(request: dict[str, Any]) -> str:
    """Every request gets the same reply at once."""
    return REPLY


def main() -> None:
    """Serve until terminated."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args()
    server = ScriptedOpenAIServer(rule=answer, port=args.port).start()
    print(f"listening on {server.base_url.removeprefix('http://').removesuffix('/v1')}", flush=True)
    threading.Event().wait()


if __name__ == "__main__":
    main()
