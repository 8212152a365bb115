"""The gRPC core settings every agentnet process starts with: the services (``python -m hubsvc``,
``knowledgesvc``, ``a2agateway``, ``ag2gateway``) and any process that imports ``agentsdk`` before
it imports grpc.

:data:`GRPC_EXPERIMENTS` turns off gRPC's EventEngine endpoints (the default of grpcio 1.85) for
the streams a process accepts (``event_engine_listener``) and opens (``event_engine_client``). On
those endpoints every read is handed from an EventEngine poller thread to a worker thread and then
to grpc.aio's completion-queue thread; the older endpoints read on the completion-queue thread
itself. Measured on a hub serving ``bench/hub_bench.py``'s round-trip workload (two lean clients,
``strace -c -f -p <hub pid>`` over 3,000 round trips): 11.3 futex calls per round trip with gRPC's
defaults, 2.4 with this value; the hub's CPU per round trip fell from 1.37 to 1.17 ms (medians of
10 alternating rounds of 2,000). docs/operations.md has the table.

On the client side (the SDK in the same process as the benchmark's clients) the round trip's
p50 was 0.63-0.87 ms for the floor, 1.10-1.36 ms for the hub and 1.40-1.74 ms through the SDK,
against 1.07-3.85, 1.49-4.65 and 1.91-2.84 ms with EventEngine clients (three ``make bench``-style
runs each, quiet machine); one-way throughput did not change.

A process reads ``GRPC_EXPERIMENTS`` once, as grpc starts, so each ``__main__`` sets it before
anything imports grpc, ``agentsdk/__init__.py`` sets it only if grpc is not imported yet, and both
only when it is not set already: your own value (``GRPC_EXPERIMENTS=``, empty, keeps gRPC's
defaults) wins. This module imports nothing, so importing it first is safe.
"""

GRPC_EXPERIMENTS = "-event_engine_listener,-event_engine_client"
"""The value the services set unless the variable is set: both EventEngine endpoint kinds off."""
