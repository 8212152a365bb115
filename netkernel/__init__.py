"""The protocol kernel: what the hub, the knowledge service and the SDK all speak.

* :mod:`netkernel.envelope` — the ``Envelope`` model, event types, the visibility rule.
* :mod:`netkernel.wire` — every conversion between these models and the protobuf messages
  (each enum ↔ string map written once), and exact JSON.
* :mod:`netkernel.errors` — the one exception hierarchy and its mapping to gRPC statuses.
* :mod:`netkernel.tool_schemas` — the network tools' argument models (JSON schemas).
* :mod:`netkernel.identity`, :mod:`netkernel.skills` — passports, resumes, skill markdown.

It depends only on the generated stubs (``agentnet.v1``) and well-kept libraries, never on
the SDK or on a service. See ``docs/architecture.md``.
"""
