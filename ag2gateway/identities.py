"""AG2 registrations as hub identities, and AG2 re-attaches as their credentials.

The gateway keeps no state, so an identity's hub credential is re-derived from what its AG2 client
presents. A registration is a hub ``Register`` with an idempotency key derived from the passport's
name and its auth claim, and a canonical content (the passport alone: resume, skill and rule are set
afterwards with their own RPCs). The hub derives the identity's id and credential from the key and
that content, so a later ``hello`` with the same name and claim repeats the same ``Register`` and
gets the same identity and credential back, on any gateway in front of any hub replica; a wrong claim
derives another key, whose ``Register`` the hub refuses (the name is taken), and the hello fails
with ``auth_failed``.

Schemes: ``api_key`` — the claim's ``token`` (at least 16 characters) is the secret; ``none`` — only
with ``--allow-none-auth``: the key is derived from the name and the gateway's secret, so anyone who
can reach the gateway can act as any such identity (AG2's NoAuth). Any other scheme is refused.

Discovery reads AG2 allows before any identity is bound (``find_agent_id``, ``get_agent`` …) run as
the gateway's own directory identity, registered the same way from the gateway's secret.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Mapping
from typing import Any

from agentnet.v1 import hub_pb2, identity_pb2

from ag2gateway import frames, records
from ag2gateway.hub import HubLink
from ag2gateway.refusals import Ag2Refusal
from agentsdk.rpc import HubRpc
from netkernel.errors import AlreadyExists, InvalidArgument, NotFound

MIN_TOKEN_CHARS = 16
"""Shortest api_key token: the hub credential is derived from it, so it must be hard to guess."""


class Identities:
    """Registers and re-attaches AG2 identities on the hub."""

    def __init__(self, hub: HubLink, secret: str, *, allow_none_auth: bool) -> None:
        self.hub = hub
        self._secret = secret.encode()
        self.allow_none_auth = allow_none_auth
        self.directory_name = "ag2-gateway-" + self._mac("directory-name")[:12]
        """The passport name of the gateway's directory identity (the same for every gateway sharing the secret)."""
        self.directory: HubRpc | None = None

    def _mac(self, what: str) -> str:
        return hmac.new(self._secret, what.encode(), hashlib.sha256).hexdigest()

    async def start(self) -> None:
        """Register (or find again) the directory identity."""
        request = hub_pb2.RegisterHumanRequest(
            passport=identity_pb2.Passport(
                name=self.directory_name,
                kind=identity_pb2.PASSPORT_KIND_HUMAN,
                description="The AG2 gateway's directory identity (discovery reads of unbound AG2 connections).",
            ),
            idempotency_key=self._mac("directory-key"),
        )
        response = await self.hub.rpc().register_human(request)
        self.directory = self.hub.rpc(response.credential)

    def directory_rpc(self) -> HubRpc:
        """The directory identity's RPCs."""
        assert self.directory is not None, "Identities.start() first"
        return self.directory

    def key(self, name: str, scheme: str, claim: Mapping[str, Any]) -> str:
        """The registration key of ``name`` presenting ``claim`` under ``scheme`` (auth_failed: unusable)."""
        if scheme == "api_key":
            token = claim.get("token")
            if not isinstance(token, str) or len(token) < MIN_TOKEN_CHARS:
                raise Ag2Refusal(
                    frames.AUTH_FAILED,
                    f"api_key claim needs a string 'token' of at least {MIN_TOKEN_CHARS} characters "
                    "(the hub credential is derived from it)",
                )
            return hashlib.sha256(f"ag2.api_key\0{name}\0{token}".encode()).hexdigest()
        if scheme == "none":
            if not self.allow_none_auth:
                raise Ag2Refusal(
                    frames.AUTH_FAILED,
                    "this gateway does not accept the 'none' auth scheme (anyone could act as the identity); "
                    "register with scheme 'api_key', or start the gateway with --allow-none-auth",
                )
            return self._mac(f"none\0{name}")
        raise Ag2Refusal(
            frames.AUTH_FAILED,
            f"unknown auth scheme: {scheme!r}; this gateway accepts 'api_key' (and 'none' if allowed)",
        )

    async def _register(self, passport: identity_pb2.Passport, key: str) -> tuple[identity_pb2.AgentRecord, str]:
        rpc = self.hub.rpc()
        if passport.kind == identity_pb2.PASSPORT_KIND_HUMAN:
            human = await rpc.register_human(hub_pb2.RegisterHumanRequest(passport=passport, idempotency_key=key))
            return human.agent, human.credential
        agent = await rpc.register(hub_pb2.RegisterRequest(passport=passport, idempotency_key=key))
        return agent.agent, agent.credential

    async def register(self, params: Mapping[str, Any]) -> tuple[identity_pb2.AgentRecord, str]:
        """AG2's ``register`` op: the identity (created, or found again with the same claim) and its credential."""
        raw = params.get("passport")
        passport = records.passport_from_ag2(raw)
        assert isinstance(raw, dict)
        auth = raw.get("auth")
        claim: dict[str, Any] = {}
        if isinstance(auth, dict) and isinstance(auth.get("claim"), dict):
            claim = auth["claim"]
        key = self.key(passport.name, records.scheme_of(raw), claim)
        resume = records.resume_from_ag2(params.get("resume"))
        rule_json = records.rule_from_ag2(params.get("rule"))
        skill = params.get("skill_md")
        if skill is not None and not isinstance(skill, str):
            raise InvalidArgument("params.skill_md must be a string or null")
        try:
            record, credential = await self._register(passport, key)
        except InvalidArgument as err:
            if (err.metadata or {}).get("field") == "idempotency_key":
                raise Ag2Refusal(frames.AUTH_FAILED, f"{passport.name!r} is registered with other content") from None
            raise
        rpc = self.hub.rpc(credential)
        if resume.ByteSize():
            await rpc.set_resume(hub_pb2.SetResumeRequest(resume=resume))
            record.resume.CopyFrom(resume)
        if skill is not None:
            await rpc.set_skill(hub_pb2.SetSkillRequest(skill_md=skill))
        if rule_json or record.rule_json:  # a re-registration with the same claim replaces the rule, as in AG2
            record = (await rpc.set_rule(hub_pb2.SetRuleRequest(rule_json=rule_json))).agent
        return record, credential

    async def attach(self, name: str, scheme: str, claim: Mapping[str, Any]) -> tuple[identity_pb2.AgentRecord, str]:
        """AG2's ``hello``: the registered identity ``name`` and its credential, if ``claim`` is its claim."""
        try:
            described = await self.directory_rpc().describe_agent(hub_pb2.DescribeAgentRequest(name=name))
        except NotFound:
            raise Ag2Refusal(frames.NOT_FOUND, f"unknown name: {name}") from None
        stored = described.agent.passport
        registered = stored.labels.get(records.AUTH_SCHEME_LABEL)
        if registered is None:
            raise Ag2Refusal(
                frames.AUTH_FAILED, f"{name!r} was not registered through an AG2 gateway; it cannot attach here"
            )
        if scheme != registered:
            raise Ag2Refusal(
                frames.AUTH_FAILED, f"auth scheme {scheme!r} does not match {name!r}'s registered scheme {registered!r}"
            )
        key = self.key(name, scheme, claim)
        try:
            record, credential = await self._register(stored, key)
        except (AlreadyExists, InvalidArgument):
            raise Ag2Refusal(frames.AUTH_FAILED, f"{scheme} claim does not match {name!r}") from None
        if record.agent_id != described.agent.agent_id:
            raise Ag2Refusal(frames.AUTH_FAILED, f"{scheme} claim does not match {name!r}")
        return record, credential
