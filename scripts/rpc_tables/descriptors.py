"""The services of ``proto/`` as plain data: each RPC's name, request, response, streaming shape and
leading comment, read from a descriptor set that protoc (from grpcio-tools, pinned) writes with its
source info. Every table generator reads this and nothing else, so all three languages agree.
"""

from __future__ import annotations

import re
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from google.protobuf import descriptor_pb2

# FileDescriptorProto field numbers used in SourceCodeInfo paths.
_SERVICE_FIELD = 6
_METHOD_FIELD = 2


@dataclass(frozen=True)
class MessageRef:
    """A request or response message: ``full_name`` "agentnet.v1.PostEnvelopeRequest", ``name``
    "PostEnvelopeRequest", and the proto file that declares it ("agentnet/v1/hub.proto")."""

    full_name: str
    name: str
    proto_file: str

    @property
    def module(self) -> str:
        """The file's base name without ``.proto`` ("hub"), which names its generated modules."""
        return Path(self.proto_file).stem


@dataclass(frozen=True)
class Method:
    """One RPC of a service."""

    name: str
    request: MessageRef
    response: MessageRef
    client_streaming: bool
    server_streaming: bool
    comment: str

    @property
    def snake(self) -> str:
        """The RPC's name in snake case ("PostEnvelope" -> "post_envelope", "ListA2ATasks" ->
        "list_a2a_tasks")."""
        return snake_case(self.name)

    @property
    def unary(self) -> bool:
        """Neither side streams."""
        return not (self.client_streaming or self.server_streaming)


@dataclass(frozen=True)
class Service:
    """One service of ``proto/``, its methods in declaration order."""

    name: str
    full_name: str
    proto_file: str
    comment: str
    methods: tuple[Method, ...]


def snake_case(name: str) -> str:
    """``PostEnvelope`` -> ``post_envelope``; a run of capitals stays one word (``A2A`` -> ``a2a``)."""
    words = re.findall(r"[A-Z0-9]+(?![a-z])|[A-Z][a-z0-9]*", name)
    return "_".join(word.lower() for word in words)


def _comment(locations: dict[tuple[int, ...], descriptor_pb2.SourceCodeInfo.Location], path: tuple[int, ...]) -> str:
    location = locations.get(path)
    if location is None:
        return ""
    lines = [line.strip() for line in location.leading_comments.strip().splitlines()]
    return "\n".join(lines)


def read_descriptor_set(data: bytes) -> list[Service]:
    """The services of a serialized ``FileDescriptorSet`` written with ``--include_source_info``
    and ``--include_imports``, in file then declaration order."""
    files = descriptor_pb2.FileDescriptorSet.FromString(data).file
    declared: dict[str, MessageRef] = {}
    for proto in files:
        for message in proto.message_type:
            full = f"{proto.package}.{message.name}"
            declared[full] = MessageRef(full, message.name, proto.name)
    services: list[Service] = []
    for proto in files:
        locations = {tuple(loc.path): loc for loc in proto.source_code_info.location}
        for s_index, service in enumerate(proto.service):
            methods = tuple(
                Method(
                    name=method.name,
                    request=declared[method.input_type.lstrip(".")],
                    response=declared[method.output_type.lstrip(".")],
                    client_streaming=method.client_streaming,
                    server_streaming=method.server_streaming,
                    comment=_comment(locations, (_SERVICE_FIELD, s_index, _METHOD_FIELD, m_index)),
                )
                for m_index, method in enumerate(service.method)
            )
            services.append(
                Service(
                    name=service.name,
                    full_name=f"{proto.package}.{service.name}",
                    proto_file=proto.name,
                    comment=_comment(locations, (_SERVICE_FIELD, s_index)),
                    methods=methods,
                )
            )
    return services


def load(proto_root: Path) -> list[Service]:
    """Every service under ``proto_root``'s ``agentnet`` tree, read through grpcio-tools' protoc."""
    import grpc_tools
    from grpc_tools import protoc

    well_known = Path(grpc_tools.__file__).parent / "_proto"
    protos = sorted(str(p.relative_to(proto_root)) for p in (proto_root / "agentnet").rglob("*.proto"))
    with tempfile.TemporaryDirectory() as scratch:
        out = Path(scratch) / "set.pb"
        status = protoc.main(
            [
                "protoc",
                f"-I{proto_root}",
                f"-I{well_known}",
                "--include_source_info",
                "--include_imports",
                f"--descriptor_set_out={out}",
                *protos,
            ]
        )
        if status != 0:
            raise RuntimeError(f"protoc failed ({status}) reading {proto_root}")
        return read_descriptor_set(out.read_bytes())


def by_name(services: list[Service], full_name: str) -> Service:
    """The service called ``full_name`` ("agentnet.v1.HubService")."""
    for service in services:
        if service.full_name == full_name:
            return service
    raise KeyError(full_name)


def generated_methods(
    service: Service, hand_written: frozenset[str], listed_in: str, refusal: Callable[[Method], str | None]
) -> list[Method]:
    """The RPCs of ``service`` a table generates, in declaration order: all but ``hand_written``. A name
    in ``hand_written`` the service does not have is refused (naming ``listed_in``, where it is listed),
    and so is an RPC not listed there for which ``refusal`` gives a reason (it has no uniform method:
    the reason says to write it by hand) — the rule of every language's table."""
    unknown = hand_written - {m.name for m in service.methods}
    if unknown:
        raise ValueError(f"{service.full_name} has no RPC {sorted(unknown)} (listed in {listed_in})")
    chosen = [m for m in service.methods if m.name not in hand_written]
    for method in chosen:
        reason = refusal(method)
        if reason:
            raise ValueError(f"{service.full_name}.{method.name} {reason}")
    return chosen
