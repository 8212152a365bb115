"""HubClient: a connection to a running hub (``HubClient.connect(target)``, an async context manager)
and the identities registered or resumed through it. Import it from :mod:`agentsdk.network` (or
:mod:`agentsdk.network.hub_client`, beside the embedded :class:`~agentsdk.network.hub_client.Hub`)."""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, TypeVar

from agentnet.v1 import envelope_pb2, hub_pb2, identity_pb2
from opentelemetry.trace import TracerProvider

from agentsdk.a2a.remote import RemoteA2AAgent
from agentsdk.a2a.settings import A2ASettings
from agentsdk.backoff import RateLimitBackoff
from agentsdk.model_check import check_model as check_model_config
from agentsdk.network._cursors import CursorBook, CursorStore, JsonFileCursorStore
from agentsdk.network._delivery import DeliveryStream
from agentsdk.network.agent_client import AgentClient
from agentsdk.network.channel import ChannelMetadata
from agentsdk.network.clients import (
    DEFAULT_MAX_QUEUED_BYTES,
    DEFAULT_MAX_QUEUED_ENVELOPES,
    EnvelopeCallback,
    HumanClient,
    NetworkClient,
    check_queue_bounds,
)
from agentsdk.network.credentials import CredentialFile, SavedIdentity
from agentsdk.network.directory import AgentSummary, NameBook
from agentsdk.network.plugin import NetworkPlugin
from agentsdk.rpc import HubRpc
from agentsdk.targets import HubTargets
from agentsdk.tls import TlsSetting
from agentsdk.transport import DEFAULT_MAX_QUEUED_DELIVERY_BYTES, ClosedOnExit, HubConnection
from netkernel.envelope import EV_TEXT, Envelope
from netkernel.errors import FailedPrecondition, InvalidArgument, NotParticipant, PermissionDenied, Unauthenticated
from netkernel.identity import Passport, PassportKind, Resume, kind_from_wire, kind_to_wire
from netkernel.wire import envelope_from_wire

if TYPE_CHECKING:
    from agentsdk.agent import Agent

ClientT = TypeVar("ClientT", bound=NetworkClient)


async def _ignore(envelope: Envelope) -> None:
    """The handler of a client registered with attach_default_handler=False."""


class HubClient(ClosedOnExit):
    """A connection to a hub, and the identities registered through it."""

    def __init__(self, connection: HubConnection, *, registration_token: str = "") -> None:
        self.connection = connection
        self.rpc = HubRpc(connection, registration_token)
        """The hub's RPCs, typed, without an identity (registration, with ``registration_token`` as the
        bearer when given); ``rpc.as_identity(credential)`` for the rest."""
        self._clients: dict[str, NetworkClient] = {}
        self._book = NameBook()

    @classmethod
    @asynccontextmanager
    async def connect(
        cls,
        target: HubTargets,
        *,
        tls: TlsSetting = None,
        rate_limit_backoff: RateLimitBackoff | None = None,
        registration_token: str = "",
        tracer_provider: TracerProvider | None = None,
        max_queued_delivery_bytes: int = DEFAULT_MAX_QUEUED_DELIVERY_BYTES,
        follow_redirects: bool = True,
    ) -> AsyncIterator[HubClient]:
        """Connect to the hub at ``host:port``; disconnects every identity on exit.

        ``target`` may list several hub replicas (``["10.0.0.1:50051", "10.0.0.2:50051"]`` or
        ``"10.0.0.1:50051,10.0.0.2:50051"``; IP addresses of one family) or be one DNS name with
        several addresses (``"dns:///hub.example:50051"``): gRPC connects to the first that answers
        and moves to another when it fails; streams resume from their cursors
        (:mod:`agentsdk.targets`, docs/scale-out.md "Client failover"). A bad list raises
        InvalidArgument. With TLS and several addresses, ``TlsConfig(server_name=...)`` is required.

        ``tls``: ``True`` (verify the hub against gRPC's default roots), a
        :class:`~agentsdk.tls.TlsConfig` (private CA, client certificate for mTLS, server name), or
        None for plaintext (a hub on loopback, or one started with ``--insecure``).
        ``rate_limit_backoff`` bounds how the calls that post retry on RATE_LIMITED
        (default: 5 attempts, 30 s of waiting; :class:`~agentsdk.backoff.RateLimitBackoff`).
        ``registration_token`` is sent with ``register`` / ``register_human``: the hub's operator
        token, which a hub whose policy closes registration requires (docs/governance.md).
        ``tracer_provider`` records the SDK's spans (each post, each handler turn; None: OpenTelemetry's
        global provider); the trace context travels in each envelope's ``trace_id`` (docs/operations.md).
        ``max_queued_delivery_bytes`` bounds the deliveries each identity's stream holds for its handlers
        (default 64 MiB): beyond it the stream stops reading until they catch up (backpressure; nothing
        is dropped; docs/network.md). ``follow_redirects``: with the channels divided among hub replicas,
        each identity's stream moves to the replica a hub's Redirect names, the one holding most of its
        channels (False: streams stay on ``target``; docs/scale-out.md "Session steering")."""
        connection = HubConnection(
            target,
            tls,
            rate_limit_backoff=rate_limit_backoff,
            tracer_provider=tracer_provider,
            max_queued_delivery_bytes=max_queued_delivery_bytes,
            follow_redirects=follow_redirects,
        )
        client = cls(connection, registration_token=registration_token)
        try:
            yield client
        finally:
            await client.close()

    async def close(self) -> None:
        """Disconnect every identity and close the channel."""
        for c in list(self._clients.values()):
            await c.disconnect()
        await self.connection.close()

    def forget_identity(self, agent_id: str) -> None:
        """Drop ``agent_id`` from the identities and names this hub client knows, once the hub removed it.

        SDK-internal: :meth:`NetworkClient.unregister` calls it after its ``Unregister`` succeeded (it is
        not part of the documented API; to retire an identity call ``unregister`` on its client). An id
        this hub client does not know is ignored."""
        self._clients.pop(agent_id, None)
        self._book.forget(agent_id)

    # -- names ------------------------------------------------------------------------

    def remember_names(self, metadata: ChannelMetadata) -> None:
        """Learn the names of a channel's participants."""
        for p in metadata.participants:
            self._book.learn(p.agent_id, p.name)

    def name_for(self, agent_id: str, *, default: str | None = None) -> str:
        """The passport name of ``agent_id`` when known (:meth:`NameBook.name_for`): else ``default``, or
        the id itself (a safe ``NameResolver`` for views). Learnt from registrations, channels, ``list_agents``."""
        return self._book.name_for(agent_id, default=default)

    def id_for(self, name_or_id: str) -> str:
        """The agent id of a known name (ids pass through)."""
        return self._book.id_for(name_or_id)

    # -- identities -------------------------------------------------------------------

    async def _register(
        self,
        passport: Passport,
        resume: Resume | None,
        *,
        human: bool,
        skill_md: str | None = None,
        a2a: A2ASettings | None = None,
        rule: dict[str, Any] | None = None,
    ) -> tuple[str, str, Passport]:
        """Register; the new identity's id, credential and passport as the hub registered it (its
        ``kind`` filled in: ``"human"`` for a human, ``"agent"`` when none was given)."""
        response: hub_pb2.RegisterHumanResponse | hub_pb2.RegisterResponse
        rule_json = json.dumps(rule) if rule is not None else ""
        if human:
            response = await self.rpc.register_human(
                hub_pb2.RegisterHumanRequest(
                    passport=passport.to_wire(), resume=(resume or Resume()).to_wire(), rule_json=rule_json
                )
            )
        else:
            request = hub_pb2.RegisterRequest(
                passport=passport.to_wire(), resume=(resume or Resume()).to_wire(), rule_json=rule_json
            )
            if skill_md is not None:
                request.skill_md = skill_md
            if a2a is not None:
                request.a2a.CopyFrom(a2a.to_wire())
            response = await self.rpc.register(request)
        self._book.learn(response.agent.agent_id, passport.name)
        registered = Passport.from_wire(response.agent.passport) if response.agent.HasField("passport") else passport
        return response.agent.agent_id, response.credential, registered

    async def register_remote_a2a_agent(
        self,
        card_url: str,
        passport: Passport | None = None,
        *,
        a2a: A2ASettings | None = None,
        rule: dict[str, Any] | None = None,
    ) -> RemoteA2AAgent:
        """Register an outside A2A agent: the hub fetches its Agent Card from ``card_url`` (the card's URL,
        or the agent's base URL) and creates an identity of kind remote_agent that discovery lists and
        ``invoke_agent`` calls (the hub makes the call). ``passport`` defaults to the card's name and
        description; of ``a2a`` only ``enabled`` and ``allowed_callers`` count (default: enabled, anyone
        of the project), the rest comes from the card. The hub must allow the destination
        (``--a2a-outbound-allow``): else FailedPrecondition (outbound calls off) or PermissionDenied."""
        request = hub_pb2.RegisterRemoteA2AAgentRequest(
            card_url=card_url, rule_json=json.dumps(rule) if rule is not None else ""
        )
        if passport is not None:
            request.passport.CopyFrom(passport.to_wire())
        if a2a is not None:
            request.a2a.CopyFrom(a2a.to_wire())
        response = await self.rpc.register_remote_a2a_agent(request)
        self._book.learn(response.agent.agent_id, response.agent.passport.name)
        return RemoteA2AAgent.from_record(response.agent, response.credential)

    async def refresh_remote_a2a_agent(self, agent: RemoteA2AAgent) -> RemoteA2AAgent:
        """Have the hub fetch ``agent``'s Agent Card again (its description, skills and interface)."""
        rpc = self.rpc.as_identity(agent.credential)
        response = await rpc.refresh_remote_a2a_agent(hub_pb2.RefreshRemoteA2AAgentRequest())
        return RemoteA2AAgent.from_record(response.agent, agent.credential)

    async def register_human(
        self,
        passport: Passport,
        *,
        resume: Resume | None = None,
        rule: dict[str, Any] | None = None,
        auto_ack_invites: bool = True,
        cursor_store: CursorStore | None = None,
        credential_file: str | os.PathLike[str] | None = None,
        on_envelope: EnvelopeCallback | None = None,
        pull: bool | None = None,
        max_queued_envelopes: int = DEFAULT_MAX_QUEUED_ENVELOPES,
        max_queued_bytes: int = DEFAULT_MAX_QUEUED_BYTES,
        client_class: type[HumanClient] = HumanClient,
    ) -> HumanClient:
        """Register a non-LLM participant and connect it.

        ``client_class`` is the class of the returned client: a :class:`HumanClient` subclass,
        e.g. one overriding :meth:`~NetworkClient.receive_chunk` to show streamed replies as
        they grow (AG2's way; docs/network.md "Streaming a reply").

        ``credential_file`` makes the identity outlive this process: the first call registers it
        and saves its credential there (0600); later calls resume it from the file (see
        :meth:`register`). ``cursor_store`` persists its delivery cursors so a restarted process
        resumes without repeats (with a ``credential_file``, a file beside it by default).
        ``on_envelope`` adds a push callback before the client connects, so it also sees the
        backlog a resumed identity is sent first. ``pull``, ``max_queued_envelopes`` and
        ``max_queued_bytes`` set the pull queue (see :class:`HumanClient`).

        ``rule`` is this participant's own governance rule (the ``rule`` part of the hub's
        policy file, e.g. ``{"access": {"channel_types": ["consulting"]}}``; docs/governance.md):
        the hub enforces it on everything the participant does, and it can only narrow what the
        hub's policy allows. An invalid rule raises InvalidArgument naming the problem. It is
        set at registration; resuming from ``credential_file`` keeps the rule registered then.
        """
        make = self._human_maker(auto_ack_invites, pull, max_queued_envelopes, max_queued_bytes, client_class)

        file = CredentialFile(credential_file) if credential_file is not None else None
        saved = file.load() if file is not None else None
        if saved is not None:
            client = await self._resume(saved.credential, make, human=True, expected_name=passport.name, file=file)
            await self._update_resume(client, resume)
        else:
            agent_id, credential, registered = await self._register(passport, resume, human=True, rule=rule)
            client = make(agent_id, credential, registered)
            client._resume = resume or Resume()
            self._save(client, file, "human")
        if on_envelope is not None:
            client.on_envelope(on_envelope)
        await self._attach(client, cursor_store, file)
        return client

    def _human_maker(
        self,
        auto_ack_invites: bool,
        pull: bool | None,
        max_queued_envelopes: int,
        max_queued_bytes: int,
        client_class: type[HumanClient] = HumanClient,
    ) -> Callable[[str, str, Passport], HumanClient]:
        """Builds the HumanClient of an identity with these options (checked once, here)."""
        check_queue_bounds(max_queued_envelopes, max_queued_bytes)
        if not (isinstance(client_class, type) and issubclass(client_class, HumanClient)):
            raise InvalidArgument(f"client_class must be HumanClient or a subclass of it, not {client_class!r}.")

        def make(agent_id: str, credential: str, passport: Passport) -> HumanClient:
            return client_class(
                self,
                agent_id,
                credential,
                passport,
                auto_ack_invites=auto_ack_invites,
                pull=pull,
                max_queued_envelopes=max_queued_envelopes,
                max_queued_bytes=max_queued_bytes,
            )

        return make

    async def resume_human(
        self,
        credential: str,
        *,
        auto_ack_invites: bool = True,
        cursor_store: CursorStore | None = None,
        on_envelope: EnvelopeCallback | None = None,
        pull: bool | None = None,
        max_queued_envelopes: int = DEFAULT_MAX_QUEUED_ENVELOPES,
        max_queued_bytes: int = DEFAULT_MAX_QUEUED_BYTES,
        client_class: type[HumanClient] = HumanClient,
    ) -> HumanClient:
        """Reconnect an existing human identity by its credential (e.g. after a process restart).

        With the same ``cursor_store`` as before, delivery resumes exactly where it stopped.
        ``register_human(..., credential_file=...)`` does this for you. ``client_class`` as for
        :meth:`register_human`.
        """
        make = self._human_maker(auto_ack_invites, pull, max_queued_envelopes, max_queued_bytes, client_class)

        client = await self._resume(credential, make, human=True)
        if on_envelope is not None:
            client.on_envelope(on_envelope)
        await self._attach(client, cursor_store, None)
        return client

    async def register(
        self,
        agent: Agent,
        passport: Passport | None = None,
        resume: Resume | None = None,
        *,
        skill_md: str | None = None,
        a2a: A2ASettings | str | os.PathLike[str] | None = None,
        attach_plugin: bool = True,
        attach_default_handler: bool = True,
        cursor_store: CursorStore | None = None,
        credential_file: str | os.PathLike[str] | None = None,
        on_envelope: EnvelopeCallback | None = None,
        rule: dict[str, Any] | None = None,
        check_model: bool = False,
    ) -> AgentClient:
        """Register ``agent`` (kind agent or remote_agent) and connect it.

        ``check_model=True`` first makes one cheap call to the agent's model endpoint (``GET /models``)
        and raises :class:`~agentsdk.model_check.ModelCheckFailed` naming what is wrong (no API key, a
        refused key, an unreachable or silent ``base_url``, a model it does not serve) before anything
        is registered (docs/network.md "Failed turns").

        ``rule`` is the agent's own governance rule, as for :meth:`register_human`: it can only
        narrow what the hub's policy allows (set at registration, kept on resume).

        ``a2a`` sets its agent-to-agent settings (an :class:`~agentsdk.a2a.A2ASettings` or the
        path of an ``agent.yaml`` with an ``a2a:`` section; when enabled, the A2A tools are added);
        ``attach_plugin`` adds the five network tools and the network prompt prefix;
        ``attach_default_handler=False`` leaves the client without a handler until
        ``client.on_envelope(...)`` sets one (envelopes are then acked unhandled);
        ``on_envelope`` sets the handler before the client connects (a resumed identity's
        backlog arrives at once, so a service with its own handler passes it here).

        ``credential_file`` makes the identity outlive this process. When the file does not
        exist, the agent is registered and its credential saved there (mode 0600, in a 0700
        directory, written atomically). When it exists, the same identity is resumed instead:
        same agent id, the A2A settings, skill and resume the hub keeps (those given here
        replace them when they differ), and delivery continues from the cursors saved in
        ``<credential_file>.cursors.json`` (unless ``cursor_store`` is given). A credential the
        hub no longer knows raises Unauthenticated; a file of another identity name raises
        FailedPrecondition. ``client.unregister()`` retires the identity and deletes the file.
        """

        passport = passport or Passport(name=agent.name)
        if passport.kind == "human":
            raise InvalidArgument(
                "register() refuses kind='human': register non-LLM participants with "
                "hc.register_human(Passport(name=..., kind='human'))."
            )
        if check_model:
            await check_model_config(agent.config)
        await agent.start()  # its MCP servers: one that cannot start fails here, before registering
        settings = A2ASettings.coerce(a2a) if a2a is not None else None

        def make(agent_id: str, credential: str, passport: Passport) -> AgentClient:
            return AgentClient(self, agent_id, credential, passport, agent)

        file = CredentialFile(credential_file) if credential_file is not None else None
        saved = file.load() if file is not None else None
        if saved is not None:
            client = await self._resume(saved.credential, make, human=False, expected_name=passport.name, file=file)
            await self._update_resume(client, resume)
            record = client._resumed_record
            if (
                skill_md is not None
                and record is not None
                and skill_md != ("" if record.skill_is_fallback else record.skill_md)
            ):
                await client.rpc.set_skill(hub_pb2.SetSkillRequest(skill_md=skill_md))
            if settings is not None and settings != client.a2a_settings:
                await client.set_a2a_settings(settings)
        else:
            agent_id, credential, registered = await self._register(
                passport, resume, human=False, skill_md=skill_md, a2a=settings, rule=rule
            )
            client = make(agent_id, credential, registered)
            client._resume = resume or Resume()
            if settings is not None:
                client.a2a_settings = settings
            self._save(client, file, registered.kind or "agent")
        await self._equip_and_attach(
            client, agent, attach_plugin, attach_default_handler, on_envelope, cursor_store, file
        )
        return client

    async def resume_agent(
        self,
        agent: Agent,
        credential: str,
        *,
        attach_plugin: bool = True,
        attach_default_handler: bool = True,
        cursor_store: CursorStore | None = None,
        on_envelope: EnvelopeCallback | None = None,
    ) -> AgentClient:
        """Reconnect an existing agent identity by its credential, for ``agent`` (the agent twin of
        :meth:`resume_human`); ``register(..., credential_file=...)`` does this for you."""

        def make(agent_id: str, credential: str, passport: Passport) -> AgentClient:
            return AgentClient(self, agent_id, credential, passport, agent)

        await agent.start()
        client = await self._resume(credential, make, human=False)
        await self._equip_and_attach(
            client, agent, attach_plugin, attach_default_handler, on_envelope, cursor_store, None
        )
        return client

    async def _equip_and_attach(
        self,
        client: AgentClient,
        agent: Agent,
        attach_plugin: bool,
        attach_default_handler: bool,
        on_envelope: EnvelopeCallback | None,
        cursor_store: CursorStore | None,
        file: CredentialFile | None,
    ) -> None:
        """Give ``agent`` the network tools (and the A2A tools its settings enable), set the handler, connect."""
        if attach_plugin:
            client.plugin = NetworkPlugin(client)
            client.plugin.register(agent)
        agent.tools.extend(client.a2a_tools())  # A2A tools follow the A2A settings, not attach_plugin
        if on_envelope is not None or not attach_default_handler:
            client.on_envelope(on_envelope or _ignore)
        await self._attach(client, cursor_store, file)

    async def _resume(
        self,
        credential: str,
        make: Callable[[str, str, Passport], ClientT],
        *,
        human: bool,
        expected_name: str | None = None,
        file: CredentialFile | None = None,
    ) -> ClientT:
        """The client of the identity holding ``credential``, as the hub knows it (passport, skill, A2A)."""
        agent_id = credential.partition(".")[0]
        try:
            response = await self.rpc.as_identity(credential).describe_agent(
                hub_pb2.DescribeAgentRequest(agent_id=agent_id)
            )
        except Unauthenticated as err:
            if file is None:
                raise
            raise Unauthenticated(
                f"the hub at {self.connection.target} does not know the credential in {file.path} "
                "(the identity was unregistered, or the file belongs to another hub). Nothing was "
                "registered; delete the file to register a new identity.",
                metadata={"credential_file": str(file.path), **err.metadata},
            ) from None
        record = response.agent
        passport = Passport.from_wire(record.passport)
        where = f" (from {file.path})" if file is not None else ""
        if (passport.kind == "human") != human:
            other = "resume_human / register_human" if passport.kind == "human" else "resume_agent / register"
            raise FailedPrecondition(
                f"identity {passport.name!r}{where} is of kind {passport.kind}; reconnect it with {other}.",
                metadata={"agent_id": agent_id},
            )
        if expected_name is not None and passport.name != expected_name:
            raise FailedPrecondition(
                f"{file.path if file else 'the credential'} holds identity {passport.name!r} ({agent_id}), "
                f"not {expected_name!r}: give each identity its own credential file.",
                metadata={"agent_id": agent_id, "name": passport.name},
            )
        self._book.learn(agent_id, passport.name)
        client = make(agent_id, credential, passport)
        client.a2a_settings = A2ASettings.from_wire(record.a2a)
        client._resumed_record = record
        client._resume = Resume.from_wire(record.resume)
        return client

    @staticmethod
    async def _update_resume(client: NetworkClient, resume: Resume | None) -> None:
        """Replace a resumed identity's resume when the caller gave a different one."""
        record = client._resumed_record
        if resume is not None and record is not None and resume != Resume.from_wire(record.resume):
            await client.set_resume(resume)

    @staticmethod
    def _save(client: NetworkClient, file: CredentialFile | None, kind: str) -> None:
        if file is not None:
            file.save(SavedIdentity(client.agent_id, client.name, kind, client.credential))

    async def can_send(self, channel_id: str, agent_id: str, event_type: str = EV_TEXT) -> bool:
        """Whether ``agent_id`` (registered through this client) may post ``event_type`` in the channel now."""
        client = self._clients.get(agent_id)
        if client is None:
            raise PermissionDenied(f"agent {agent_id!r} was not registered through this client.")
        return await client.can_send(channel_id, event_type)

    async def _attach(
        self, client: NetworkClient, cursor_store: CursorStore | None, file: CredentialFile | None
    ) -> None:
        if file is not None:
            client.credential_file = file
            cursor_store = cursor_store or JsonFileCursorStore(file.cursors_path)
        self._clients[client.agent_id] = client
        await client._start(
            DeliveryStream(
                self.connection,
                client.credential,
                client._dispatch,
                cursors=CursorBook(cursor_store),
                on_fatal=client._stream_ended,
                on_welcome=client._welcomed,
            )
        )

    def _any_credential(self) -> str:
        for c in self._clients.values():
            return c.credential
        raise FailedPrecondition("register an identity through this client first; hub queries act on its behalf.")

    async def list_agents(
        self,
        *,
        kind: PassportKind | None = None,
        capability: str = "",
        query: str = "",
        sort_by: str = "",
        limit: int = 0,
    ) -> list[AgentSummary]:
        """Identities on the hub, filtered (kind "agent" / "human" / "remote_agent")."""
        request = hub_pb2.ListAgentsRequest(
            kind=kind_to_wire(kind) if kind else identity_pb2.PASSPORT_KIND_UNSPECIFIED,
            capability=capability,
            query=query,
            sort_by=sort_by,
            limit=limit,
        )
        response = await self.rpc.as_identity(self._any_credential()).list_agents(request)
        out = []
        for a in response.agents:
            self._book.learn(a.agent_id, a.name)
            out.append(
                AgentSummary(
                    a.agent_id, a.name, kind_from_wire(a.kind), a.description, list(a.claimed_capabilities), a.online
                )
            )
        return out

    async def get_resume(self, agent: str) -> Resume:
        """The resume of an identity (by id or passport name) as the hub holds it, with the hub's
        observed track record (AG2's ``get_resume``): ``resume.observed[capability]`` counts how its
        tasks tagged with that capability ended, ``resume.last_updated`` says when that last changed."""
        request = hub_pb2.DescribeAgentRequest(agent_id=agent)  # the hub resolves an id or a name
        response = await self.rpc.as_identity(self._any_credential()).describe_agent(request)
        self._book.learn(response.agent.agent_id, response.agent.passport.name)
        return Resume.from_wire(response.agent.resume)

    async def read_wal_as(
        self, credential: str, channel_id: str, *, from_seq: int = 0, until_seq: int = 0
    ) -> list[Envelope]:
        """A channel's WAL as the identity holding ``credential`` may see it."""
        wires = await self.read_wal_wire_as(credential, channel_id, from_seq=from_seq, until_seq=until_seq)
        return [envelope_from_wire(wire) for wire in wires]

    async def read_wal_wire_as(
        self, credential: str, channel_id: str, *, from_seq: int = 0, until_seq: int = 0
    ) -> list[envelope_pb2.Envelope]:
        """:meth:`read_wal_as`, the envelopes as they came off the wire."""
        request = hub_pb2.ReadWalRequest(channel_id=channel_id, from_seq=from_seq, until_seq=until_seq)
        return [item.envelope async for item in self.rpc.as_identity(credential).read_wal(request)]

    async def read_wal(self, channel_id: str) -> list[Envelope]:
        """A channel's WAL in admission order, read by one of this client's identities that participates."""
        last: Exception | None = None
        for c in self._clients.values():
            try:
                return await self.read_wal_as(c.credential, channel_id)
            except (NotParticipant, PermissionDenied) as err:  # not this identity's channel: try the next one
                last = err
        raise last or FailedPrecondition("register an identity through this client first.")

    async def set_skill(self, agent_id: str, skill_md: str) -> None:
        """Replace the skill markdown of an identity registered through this client (audited)."""
        client = self._clients.get(agent_id)
        if client is None:
            raise PermissionDenied(f"agent {agent_id!r} was not registered through this client; it sets its own skill.")
        await client.rpc.set_skill(hub_pb2.SetSkillRequest(skill_md=skill_md))
