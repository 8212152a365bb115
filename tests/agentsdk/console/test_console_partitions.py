"""The console's overview shows how the replicas divide the channels (docs/scale-out.md "Channels divided
among the replicas"): the partitions this replica holds, the channels it follows, each holder with its
address and how many partitions it holds; nothing of it when every replica holds every channel."""

from __future__ import annotations

from types import SimpleNamespace

from agentnet.v1 import operator_pb2

from agentsdk.console.app import Console


def overview(status: operator_pb2.GetStatusResponse) -> str:
    """The overview page as the console renders it for ``status``."""
    console = Console("127.0.0.1:1")
    page = console.templates.get_template("overview.html")
    return page.render(status=status, session=SimpleNamespace(csrf="c"), hub=console.hub, active="overview")


def test_the_overview_shows_the_partition_holders() -> None:
    owners = [
        operator_pb2.PartitionOwner(partition=0, replica_id="r1", address="10.0.0.1:5001"),
        operator_pb2.PartitionOwner(partition=1, replica_id="r2", address="10.0.0.2:5001"),
        operator_pb2.PartitionOwner(partition=2, replica_id="r1", address="10.0.0.1:5001"),
    ]
    status = operator_pb2.GetStatusResponse(
        replica_id="r1",
        partitions=operator_pb2.PartitionStatus(count=4, held=[0, 2], followed_channels=3, owners=owners),
    )
    html = overview(status)
    assert "2 of 4 held by this replica; 3 live channels held elsewhere delivered here" in html
    assert "r1 (10.0.0.1:5001): 2; r2 (10.0.0.2:5001): 1" in html


def test_an_undivided_hub_shows_no_partitions() -> None:
    assert "partition" not in overview(operator_pb2.GetStatusResponse(replica_id="r1"))
