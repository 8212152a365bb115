"""Server reflection on both ``grpc.reflection.v1`` and ``grpc.reflection.v1alpha``.

grpcio-reflection serves only ``v1alpha``, while current clients (grpcurl, Postman,
grpc-go's and grpc-java's reflection clients) ask ``v1`` first. The two protocols have
the same messages with the same field numbers, only the package differs, so the
``v1alpha`` servicer answers ``v1`` calls byte for byte. So that a client can also
*describe* the ``v1`` service, its file descriptor (``v1alpha``'s under the ``v1``
package) is added to the default descriptor pool once.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import grpc
from google.protobuf import descriptor_pb2, descriptor_pool
from grpc_reflection.v1alpha import reflection, reflection_pb2, reflection_pb2_grpc

V1ALPHA_SERVICE_NAME: str = reflection.SERVICE_NAME
"""``grpc.reflection.v1alpha.ServerReflection``."""
V1_SERVICE_NAME = "grpc.reflection.v1.ServerReflection"
"""The reflection service name current clients try first."""

_V1_FILE = "grpc/reflection/v1/reflection.proto"
_V1ALPHA_PREFIX = ".grpc.reflection.v1alpha."
_V1_PREFIX = ".grpc.reflection.v1."


def _as_v1(type_name: str) -> str:
    return _V1_PREFIX + type_name.removeprefix(_V1ALPHA_PREFIX) if type_name.startswith(_V1ALPHA_PREFIX) else type_name


def ensure_v1_descriptor(pool: descriptor_pool.DescriptorPool | None = None) -> None:
    """Add ``grpc/reflection/v1/reflection.proto`` to ``pool`` (default: the default pool) unless it is there."""
    pool = pool or descriptor_pool.Default()
    try:
        pool.FindFileByName(_V1_FILE)
        return
    except KeyError:
        pass
    file = descriptor_pb2.FileDescriptorProto()
    reflection_pb2.DESCRIPTOR.CopyToProto(file)
    file.name = _V1_FILE
    file.package = "grpc.reflection.v1"
    file.options.Clear()
    file.options.go_package = "google.golang.org/grpc/reflection/grpc_reflection_v1"
    file.options.java_package = "io.grpc.reflection.v1"
    file.options.java_multiple_files = True
    file.options.java_outer_classname = "ServerReflectionProto"
    for message in file.message_type:
        for field in message.field:
            if field.HasField("type_name"):
                field.type_name = _as_v1(field.type_name)
    for service in file.service:
        for method in service.method:
            method.input_type = _as_v1(method.input_type)
            method.output_type = _as_v1(method.output_type)
    pool.AddSerializedFile(file.SerializeToString())


def enable_reflection(service_names: Sequence[str], server: grpc.aio.Server) -> None:
    """Serve reflection for ``service_names`` (plus both reflection services) on ``v1`` and ``v1alpha``."""
    ensure_v1_descriptor()
    names = [*service_names, V1_SERVICE_NAME, V1ALPHA_SERVICE_NAME]
    servicer: Any = reflection.aio.ReflectionServicer(names)
    reflection_pb2_grpc.add_ServerReflectionServicer_to_server(servicer, server)
    v1 = grpc.method_handlers_generic_handler(
        V1_SERVICE_NAME,
        {
            "ServerReflectionInfo": grpc.stream_stream_rpc_method_handler(
                servicer.ServerReflectionInfo,
                request_deserializer=reflection_pb2.ServerReflectionRequest.FromString,
                response_serializer=reflection_pb2.ServerReflectionResponse.SerializeToString,
            )
        },
    )
    server.add_generic_rpc_handlers((v1,))
