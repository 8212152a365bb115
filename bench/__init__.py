"""The benchmarks (``make bench``; bench/README.md).

Every benchmark process starts gRPC as agentnet's own processes do (netkernel/grpc_env.py): the floor
relay as the hub, the clients (floor, lean and SDK alike) as a program that imports ``agentsdk`` first.
The ratios then compare the hub's and the SDK's own work, not two configurations of gRPC. The
peers (AutoGen's runtime) start without the setting: they run as released.
"""

import os

from netkernel.grpc_env import GRPC_EXPERIMENTS

PEER_ENV = dict(os.environ)
"""The environment the peers' processes (AutoGen's runtime) start with: as this one was, so they run
as released, on gRPC's defaults unless you set the variable yourself."""
os.environ.setdefault("GRPC_EXPERIMENTS", GRPC_EXPERIMENTS)
