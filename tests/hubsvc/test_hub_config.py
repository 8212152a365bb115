"""Hub flags over environment variables over defaults."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from hubsvc.config import HubConfig, hub_option_specs, parse_args
from hubsvc.core.options import HubOptions, Range, option_specs


def test_defaults_environment_and_flags(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in [v for v in os.environ if v.startswith("AGENTNET_")]:
        monkeypatch.delenv(var)
    assert parse_args([]) == HubConfig()
    monkeypatch.setenv("AGENTNET_HUB_PORT", "6000")
    monkeypatch.setenv("AGENTNET_A2A_TOKEN_TTL", "60")
    monkeypatch.setenv("AGENTNET_DATA_DIR", "/srv/hub")
    config = parse_args(["--port", "7000"])
    assert (config.port, config.a2a_token_ttl, config.data_dir) == (7000, 60.0, Path("/srv/hub"))
    assert config.options().a2a_token_ttl == 60.0
    assert config.operator_token_path == Path("/srv/hub/hub-operator.token")
    assert parse_args(["--operator-token-file", "/etc/op"]).operator_token_path == Path("/etc/op")


def test_a_non_positive_token_lifetime_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        parse_args(["--a2a-token-ttl", "0"])
    assert "--a2a-token-ttl (AGENTNET_A2A_TOKEN_TTL) must be positive" in capsys.readouterr().err


def test_the_call_token_cap_is_a_flag_and_an_environment_variable(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for var in [v for v in os.environ if v.startswith("AGENTNET_")]:
        monkeypatch.delenv(var)
    assert parse_args([]).options().a2a_max_tokens == 16
    assert parse_args(["--a2a-max-tokens", "4"]).options().a2a_max_tokens == 4
    monkeypatch.setenv("AGENTNET_HUB_A2A_MAX_TOKENS", "8")
    assert parse_args([]).options().a2a_max_tokens == 8
    with pytest.raises(SystemExit):
        parse_args(["--a2a-max-tokens", "0"])
    assert "--a2a-max-tokens (AGENTNET_HUB_A2A_MAX_TOKENS) must be at least 1" in capsys.readouterr().err


def test_the_call_token_grace_is_a_flag_and_an_environment_variable(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for var in [v for v in os.environ if v.startswith("AGENTNET_")]:
        monkeypatch.delenv(var)
    assert parse_args([]).options().a2a_token_grace == 3600.0
    assert parse_args(["--a2a-token-grace", "60"]).options().a2a_token_grace == 60.0
    monkeypatch.setenv("AGENTNET_HUB_A2A_TOKEN_GRACE", "0")
    assert parse_args([]).options().a2a_token_grace == 0.0
    with pytest.raises(SystemExit):
        parse_args(["--a2a-token-grace", "-1"])
    assert "--a2a-token-grace (AGENTNET_HUB_A2A_TOKEN_GRACE) must be 0 or more seconds" in capsys.readouterr().err


def test_request_limits_are_flags_and_environment_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in [v for v in os.environ if v.startswith("AGENTNET_")]:
        monkeypatch.delenv(var)
    monkeypatch.setenv("AGENTNET_MAX_ID_BYTES", "512")
    monkeypatch.setenv("AGENTNET_MAX_STREAM_ENTRIES", "7")
    options = parse_args(
        [
            "--max-event-data-bytes",
            "100",
            "--max-skill-bytes",
            "200",
            "--max-text-bytes",
            "300",
            "--max-repeated-items",
            "400",
        ]
    ).options()
    assert (
        options.max_event_data_bytes,
        options.max_skill_bytes,
        options.max_id_bytes,
        options.max_text_bytes,
        options.max_repeated_items,
        options.max_stream_entries,
    ) == (100, 200, 512, 300, 400, 7)


def test_a_non_positive_size_limit_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        parse_args(["--max-repeated-items", "0"])
    assert "--max-repeated-items (AGENTNET_MAX_REPEATED_ITEMS) must be positive" in capsys.readouterr().err


def test_the_request_limits_are_flags(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("AGENTNET_MAX_JSON_DEPTH", "16")
    options = parse_args(["--max-ttl-seconds", "3600", "--max-wait-seconds", "60"]).options()
    assert (options.max_json_depth, options.max_ttl_seconds, options.max_wait_seconds) == (16, 3600.0, 60.0)
    for flag in ("--max-ttl-seconds", "--max-wait-seconds"):
        with pytest.raises(SystemExit):
            parse_args([flag, "inf"])
    with pytest.raises(SystemExit):
        parse_args(["--max-json-depth", "0"])
    assert "--max-json-depth (AGENTNET_MAX_JSON_DEPTH) must be at least 1" in capsys.readouterr().err


def test_the_cursor_flush_interval_is_a_flag(capsys: pytest.CaptureFixture[str]) -> None:
    assert parse_args(["--cursor-flush-interval", "0.05"]).options().cursor_flush_interval == 0.05
    for bad in ("0", "nan", "61"):
        with pytest.raises(SystemExit):
            parse_args(["--cursor-flush-interval", bad])
    assert (
        "--cursor-flush-interval (AGENTNET_HUB_CURSOR_FLUSH_INTERVAL) must be in (0, 60] seconds"
        in capsys.readouterr().err
    )


def test_the_batch_limits_are_flags(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("AGENTNET_HUB_MAX_BATCH", "32")
    options = parse_args(["--max-batch-bytes", "65536"]).options()
    assert (options.max_batch, options.max_batch_bytes) == (32, 65536)
    with pytest.raises(SystemExit):
        parse_args(["--max-batch", "0"])
    assert "--max-batch (AGENTNET_HUB_MAX_BATCH) must be in [1, 100000]" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        parse_args(["--max-batch-bytes", str(16 * 1024 * 1024)])  # a batch must fit in one gRPC message
    assert "--max-batch-bytes (AGENTNET_HUB_MAX_BATCH_BYTES) must be in (0, 8388608]" in capsys.readouterr().err


def test_the_store_is_a_flag_and_an_environment_variable(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for var in [v for v in os.environ if v.startswith("AGENTNET_")]:
        monkeypatch.delenv(var)
    assert parse_args([]).store == "sqlite"
    assert parse_args(["--store", "redis://10.0.0.5:6379/2"]).store == "redis://10.0.0.5:6379/2"
    monkeypatch.setenv("AGENTNET_HUB_STORE", "rediss://cache.internal:6380/0")
    assert parse_args([]).store == "rediss://cache.internal:6380/0"
    for bad, why in [
        ("postgres://db:5432/hub", "must be 'sqlite', a redis://HOST:PORT/DB URL or a redis+cluster://"),
        ("redis://:6379/0", "needs a host and a numeric port"),
        ("redis://host:port/0", "needs a host and a numeric port"),
        ("redis://host:6379/hub", "database must be a number"),
    ]:
        with pytest.raises(SystemExit):
            parse_args(["--store", bad])
        err = capsys.readouterr().err
        assert "--store (AGENTNET_HUB_STORE)" in err and why in err, err


def test_a_redis_cluster_store_is_a_list_of_seed_nodes_and_a_bad_one_says_what_is_wrong(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for var in [v for v in os.environ if v.startswith("AGENTNET_")]:
        monkeypatch.delenv(var)
    for good in ["redis+cluster://10.0.0.1:7000", "redis+cluster://10.0.0.1:7000,10.0.0.2:7001/",
                 "rediss+cluster://hub:s3cret@[::1]:7000,cache.internal:7000"]:  # fmt: skip
        assert parse_args(["--store", good]).store == good
    for bad, why in [
        ("redis+cluster://", "needs a host and a port in 1..65535"),
        ("redis+cluster://10.0.0.1:7000,10.0.0.2", "needs a host and a port in 1..65535, not '10.0.0.2'"),
        ("redis+cluster://10.0.0.1:70000", "not '10.0.0.1:70000'"),
        ("redis+cluster://10.0.0.1:7000/2", "a Redis Cluster has only database 0"),
        ("redis+sentinel://10.0.0.1:7000", "must be 'sqlite', a redis://HOST:PORT/DB URL or a redis+cluster://"),
    ]:
        with pytest.raises(SystemExit):
            parse_args(["--store", bad])
        err = capsys.readouterr().err
        assert "--store (AGENTNET_HUB_STORE)" in err and why in err, err


def test_the_redis_timeout_is_a_flag_and_an_environment_variable(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for var in [v for v in os.environ if v.startswith("AGENTNET_")]:
        monkeypatch.delenv(var)
    assert parse_args([]).redis_timeout == 5.0
    assert parse_args(["--redis-timeout", "0.25"]).redis_timeout == 0.25
    monkeypatch.setenv("AGENTNET_HUB_REDIS_TIMEOUT", "12")
    assert parse_args([]).redis_timeout == 12.0
    for bad in ("0", "-1", "nan", "3601"):
        with pytest.raises(SystemExit):
            parse_args(["--redis-timeout", bad])
        assert "--redis-timeout (AGENTNET_HUB_REDIS_TIMEOUT) must be in (0, 3600] seconds" in capsys.readouterr().err


def test_the_sqlite_inline_write_limit_is_a_flag_and_an_environment_variable(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for var in [v for v in os.environ if v.startswith("AGENTNET_")]:
        monkeypatch.delenv(var)
    assert parse_args([]).sqlite_inline_rows == 16
    assert parse_args(["--sqlite-inline-rows", "0"]).sqlite_inline_rows == 0
    monkeypatch.setenv("AGENTNET_HUB_SQLITE_INLINE_ROWS", "64")
    assert parse_args([]).sqlite_inline_rows == 64
    for bad in ("-1", "3001"):
        with pytest.raises(SystemExit):
            parse_args(["--sqlite-inline-rows", bad])
        assert "--sqlite-inline-rows (AGENTNET_HUB_SQLITE_INLINE_ROWS) must be in [0, 3000]" in capsys.readouterr().err


def _as_text(value: object) -> str:
    """How an operator writes ``value`` on the command line."""
    return ",".join(value) if isinstance(value, tuple) else str(value)


def test_every_option_is_declared_once_with_a_flag_a_variable_and_help() -> None:
    specs = hub_option_specs()
    assert len(specs) > 40
    flags = [spec.flag for _, spec in specs]
    envs = [spec.env for _, spec in specs]
    assert len(set(flags)) == len(flags) and len(set(envs)) == len(envs)
    for name, spec in specs:
        assert spec.flag.startswith("--") and spec.env.startswith("AGENTNET_") and spec.help.strip(), name
    # Every core option an operator can set is one of them: the parser covers the whole declaration.
    assert {f.name for f, _ in option_specs(HubOptions)} <= {name for name, _ in specs}


def test_the_derived_parser_round_trips_every_default_through_its_flag_and_its_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for var in [v for v in os.environ if v.startswith("AGENTNET_")]:
        monkeypatch.delenv(var)
    defaults = HubConfig()
    assert parse_args([]) == defaults
    assert parse_args([]).options() == HubOptions()
    for name, spec in hub_option_specs():
        default = getattr(defaults, name)
        if default is None or default == () or isinstance(default, bool):
            continue  # unset, or a switch (--tls-bind-identity needs TLS: tests/system/security/test_server_tls.py)
        text = _as_text(default)
        assert getattr(parse_args([spec.flag, text]), name) == default, spec.flag
        monkeypatch.setenv(spec.env, text)
        assert parse_args([]) == defaults, spec.env
        monkeypatch.delenv(spec.env)


def test_every_bound_is_checked_for_the_flag_and_the_variable_alike(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for var in [v for v in os.environ if v.startswith("AGENTNET_")]:
        monkeypatch.delenv(var)
    checked = [(name, spec) for name, spec in hub_option_specs() if isinstance(spec.check, Range)]
    assert len(checked) > 25
    for _, spec in checked:
        assert isinstance(spec.check, Range) and spec.check.low is not None
        below = str(spec.check.low - 1)
        with pytest.raises(SystemExit):
            parse_args([spec.flag, below])
        assert f"{spec.flag} ({spec.env}) must be" in capsys.readouterr().err
        monkeypatch.setenv(spec.env, below)
        with pytest.raises(SystemExit):
            parse_args([])
        assert f"{spec.flag} ({spec.env}) must be" in capsys.readouterr().err
        monkeypatch.delenv(spec.env)


def test_an_environment_variable_that_is_not_a_number_says_which_one(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("AGENTNET_HUB_MAX_BATCH", "lots")
    with pytest.raises(SystemExit):
        parse_args([])
    assert "AGENTNET_HUB_MAX_BATCH='lots' is not a valid value for --max-batch (int)" in capsys.readouterr().err


def test_docs_list_every_declared_flag_with_its_variable() -> None:
    """docs/operations.md names each flag beside its environment variable, so the page cannot drift."""
    lines = (Path(__file__).resolve().parents[2] / "docs" / "operations.md").read_text().splitlines()
    missing = [
        spec.flag
        for _, spec in hub_option_specs()
        if not any(f"`{spec.flag}`" in line and spec.env in line for line in lines)
    ]
    assert missing == []


def test_replica_tls_flags_need_tls(capsys: pytest.CaptureFixture[str]) -> None:
    for flags in (["--replica-tls-ca", "/etc/replicas-ca.pem"], ["--replica-tls-server-name", "hub.internal"]):
        with pytest.raises(SystemExit):
            parse_args(flags)
        assert "need --tls-cert and --tls-key" in capsys.readouterr().err
