"""Knowledge-service configuration and the bearer-token rules."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from agentsdk.errors import PermissionDenied, Unauthenticated
from knowledgesvc.auth import TokenAuthority, TokensFileError, bearer_token, ensure_generated_token, parse_tokens
from knowledgesvc.config import parse_args
from knowledgesvc.servicer import MAX_RESPONSE_BYTES

GOOD = "abcdefghijklmnopqrstuvwxyz"


def test_flags_and_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("AGENTNET_KNOWLEDGE_TOKENS_FILE", str(tmp_path / "tokens"))
    monkeypatch.setenv("AGENTNET_KNOWLEDGE_MAX_WRITE_BYTES", "2048")
    config = parse_args(["--backend", "disk", "--redis-prefix", "p:"])
    assert config.tokens_file == tmp_path / "tokens"
    assert config.max_write_bytes == 2048
    assert (config.backend, config.redis_prefix) == ("disk", "p:")
    assert parse_args(["--max-write-bytes", "10", "--tokens-file", "t"]).max_write_bytes == 10
    monkeypatch.delenv("AGENTNET_KNOWLEDGE_TOKENS_FILE")
    monkeypatch.delenv("AGENTNET_KNOWLEDGE_MAX_WRITE_BYTES")
    defaults = parse_args([])
    assert defaults.tokens_file is None and defaults.max_write_bytes == 8 * 1024 * 1024
    with pytest.raises(SystemExit):
        parse_args(["--max-write-bytes", "0"])
    assert defaults.read_budget_bytes == 64 * 1024 * 1024
    monkeypatch.setenv("AGENTNET_KNOWLEDGE_READ_BUDGET_BYTES", "4096")
    assert parse_args([]).read_budget_bytes == 4096
    assert parse_args(["--read-budget-bytes", "100"]).read_budget_bytes == 100
    with pytest.raises(SystemExit):
        parse_args(["--read-budget-bytes", "0"])


def test_read_many_limits_from_flags_and_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    defaults = parse_args([])
    assert (defaults.read_many_max_items, defaults.read_many_max_bytes) == (256, 4 * 1024 * 1024)
    monkeypatch.setenv("AGENTNET_KNOWLEDGE_READ_MANY_MAX_ITEMS", "8")
    monkeypatch.setenv("AGENTNET_KNOWLEDGE_READ_MANY_MAX_BYTES", "1000")
    config = parse_args([])
    assert (config.read_many_max_items, config.read_many_max_bytes) == (8, 1000)
    config = parse_args(["--read-many-max-items", "3", "--read-many-max-bytes", "99"])
    assert (config.read_many_max_items, config.read_many_max_bytes) == (3, 99)
    for bad in (["--read-many-max-items", "0"], ["--read-many-max-bytes", str(MAX_RESPONSE_BYTES + 1)]):
        with pytest.raises(SystemExit):
            parse_args(bad)


def test_help_documents_the_knowledge_flags() -> None:
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-m", "knowledgesvc", "--help"], capture_output=True, text=True, check=True)
    for flag in (
        "--backend",
        "--tokens-file",
        "--max-write-bytes",
        "--read-budget-bytes",
        "--read-many-max-items",
        "--read-many-max-bytes",
        "--redis-prefix",
        "AGENTNET_KNOWLEDGE_TOKENS_FILE",
    ):
        assert flag in out.stdout


def test_parse_tokens() -> None:
    text = f"# comment\n\n{GOOD} team-*,shared\n{GOOD}2 *\n"
    assert parse_tokens(text, "t") == {GOOD: ["team-*", "shared"], GOOD + "2": ["*"]}
    for bad, message in [
        ("short *", "at least 16"),
        (f"{GOOD}", "expected"),
        (f"{GOOD} a b", "expected"),
        (f"{GOOD} ,", "at least one"),
        ("# nothing\n", "no tokens"),
    ]:
        with pytest.raises(TokensFileError, match=message):
            parse_tokens(bad, "t")


def test_authority() -> None:
    authority = TokenAuthority({GOOD: ["team-*", "shared"]})
    authority.authorize([("authorization", f"Bearer {GOOD}")], "team-a")
    authority.authorize([("Authorization", f"bearer {GOOD}".encode())], "shared")
    with pytest.raises(PermissionDenied):
        authority.authorize([("authorization", f"Bearer {GOOD}")], "other")
    with pytest.raises(Unauthenticated):
        authority.authorize([("authorization", "Bearer wrong-token-wrong-token")], "team-a")
    with pytest.raises(Unauthenticated):
        authority.authorize([], "team-a")
    with pytest.raises(Unauthenticated):
        authority.authorize([("authorization", f"Basic {GOOD}")], "team-a")
    assert bearer_token([("x", "y"), ("authorization", "Bearer  tok ")]) == "tok"


def test_generated_token_is_private_random_and_stable(tmp_path: Path) -> None:
    token, path = ensure_generated_token(tmp_path)
    assert len(token) >= 32
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert ensure_generated_token(tmp_path) == (token, path)  # reused on restart
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    assert ensure_generated_token(elsewhere)[0] != token
    assert sorted(p.name for p in tmp_path.iterdir()) == ["elsewhere", "knowledge.token"]  # no temp files left
