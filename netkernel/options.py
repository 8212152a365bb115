"""Options declared once: a dataclass field says its default, flag, environment variable, help and check.

Every service (``python -m hubsvc``, ``knowledgesvc``, ``a2agateway``, ``ag2gateway``) declares each of its
settings as one field made with :func:`option`. A group of options several services share (the served port's
TLS, the metrics endpoint, the gateways' TLS to the hub) is declared the same way once, its variables named
without the service's prefix, which :func:`prefixed` adds. Its argument parser (:func:`add_options`), the environment
defaults of its flags, the validation of their values (:func:`check_args`, :func:`check_declared`) and its
``--help`` are derived from those declarations, so a flag, a variable, a default or a bound is written in
one place only. The rules that tie two options together stay with the service that has them.
"""

from __future__ import annotations

import argparse
import math
import os
from collections.abc import Callable, Sequence
from dataclasses import Field, dataclass, field, fields, replace
from typing import Any, TypeVar

from netkernel.env_flags import env_flag

T = TypeVar("T")


def _number(value: float) -> str:
    """``value`` as an operator would write it (``3600``, not ``3600.0``)."""
    return str(int(value)) if float(value).is_integer() else str(value)


@dataclass(frozen=True)
class Range:
    """The numbers an option accepts: between ``low`` and ``high`` (None = unbounded on that side).

    ``brackets`` says which ends are included, as in interval notation: ``"(]"`` = above ``low``, up to
    and including ``high``. A float option without ``high`` must also be finite; NaN is never accepted.
    """

    low: float | None
    high: float | None = None
    brackets: str = "(]"
    unit: str = ""
    """Appended to the bound in the refusal, e.g. ``" seconds"``."""
    why: str = ""
    """Appended to the refusal, e.g. ``": a batch must fit in one gRPC message"``."""

    def describe(self, value: object = 0) -> str:
        """What a refused ``value`` is told it must be (without the option's name)."""
        low_closed, high_closed = self.brackets[0] == "[", self.brackets[1] == "]"
        if self.low is not None and self.high is not None:
            rule = f"in {self.brackets[0]}{_number(self.low)}, {_number(self.high)}{self.brackets[1]}{self.unit}"
        elif self.low == 0:
            rule = ("0 or more" if low_closed else "positive") + self.unit
        elif self.low is not None:
            rule = f"{'at least' if low_closed else 'more than'} {_number(self.low)}{self.unit}"
        else:
            assert self.high is not None
            rule = f"{'at most' if high_closed else 'below'} {_number(self.high)}{self.unit}"
        if isinstance(value, float) and self.high is None:
            rule += " and finite"
        return f"must be {rule}{self.why}"

    def __call__(self, value: Any) -> None:
        """Raise ValueError saying what ``value`` must be unless it is in the range."""
        low_closed, high_closed = self.brackets[0] == "[", self.brackets[1] == "]"
        ok = not (isinstance(value, float) and math.isnan(value))
        if ok and self.low is not None:
            ok = value >= self.low if low_closed else value > self.low
        if ok and self.high is not None:
            ok = value <= self.high if high_closed else value < self.high
        elif ok and isinstance(value, float):
            ok = math.isfinite(value)
        if not ok:
            raise ValueError(self.describe(value))


@dataclass(frozen=True)
class OptionSpec:
    """How one option is set from outside the process (see :func:`option`)."""

    flag: str
    """Command-line flag, e.g. ``--max-batch``."""
    env: str
    """Environment variable that sets the default of ``flag``."""
    help: str
    """Help text of the flag (one line for ``--help``; the service's docs page has the full story)."""
    check: Callable[[Any], object] | None = None
    """Raises ValueError saying what the parsed value must be (a :class:`Range`, or a function)."""
    parse: Callable[[str], Any] | None = None
    """Turns the flag's or variable's text into the value; None = the type of the default."""
    choices: tuple[str, ...] = ()
    """The only values accepted, when the option is one of a few words."""
    fallback_env: tuple[str, ...] = ()
    """Variables read, in order, when ``env`` is unset or empty (e.g. a gateway's ``--hub`` and ``AGENTNET_HUB``)."""

    def refusal(self, error: ValueError) -> str:
        """The message for a value ``check`` refused with ``error``: names the flag and the variable."""
        return f"{self.flag} ({self.env}) {error}"

    def environment_value(self) -> str | None:
        """The text the environment gives this option: ``env``, else the first set ``fallback_env``."""
        for name in (self.env, *self.fallback_env):
            raw = os.environ.get(name)
            if raw:
                return raw
        return os.environ.get(self.env)


_SPEC = "agentnet_option"


def option(
    default: T,
    flag: str,
    env: str,
    help: str,
    *,
    check: Callable[[Any], object] | None = None,
    parse: Callable[[str], Any] | None = None,
    choices: tuple[str, ...] = (),
    fallback_env: tuple[str, ...] = (),
) -> T:
    """A dataclass field with ``default`` that operators set with ``flag`` / ``env`` (see :class:`OptionSpec`)."""
    spec = OptionSpec(flag, env, help, check, parse, choices, fallback_env)
    declared: T = field(default=default, metadata={_SPEC: spec})
    return declared


def option_specs(cls: type) -> list[tuple[Field[Any], OptionSpec]]:
    """Every field of dataclass ``cls`` declared with :func:`option`, with its spec, in declaration order."""
    return [(f, f.metadata[_SPEC]) for f in fields(cls) if _SPEC in f.metadata]


def named_specs(cls: type) -> list[tuple[str, OptionSpec]]:
    """:func:`option_specs` as (field name, spec): what :func:`add_options` and :func:`check_args` take."""
    return [(f.name, spec) for f, spec in option_specs(cls)]


def prefixed(specs: Sequence[tuple[str, OptionSpec]], env_prefix: str) -> list[tuple[str, OptionSpec]]:
    """A shared group's ``specs`` (variables such as ``TLS_CERT``) as one service declares them: each variable
    (and fallback) after ``env_prefix`` (``AGENTNET_HUB_`` gives ``AGENTNET_HUB_TLS_CERT``)."""
    return [
        (
            name,
            replace(spec, env=env_prefix + spec.env, fallback_env=tuple(env_prefix + v for v in spec.fallback_env)),
        )
        for name, spec in specs
    ]


def comma_list(text: str) -> tuple[str, ...]:
    """``"a, b,,c"`` as ``("a", "b", "c")``."""
    return tuple(part.strip() for part in text.split(",") if part.strip())


POSITIVE = Range(0)
"""Above 0 (and finite, for a float)."""


_DURATION_UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


def duration(text: str) -> float:
    """Seconds written as a number (``3600``) or with a unit: ``90s``, ``15m``, ``12h``, ``30d``."""
    raw = text.strip().lower()
    unit = _DURATION_UNITS.get(raw[-1:], 0.0)
    try:
        return float(raw[:-1] if unit else raw) * (unit or 1.0)
    except ValueError:
        raise ValueError(f"{text!r} is not a duration: write seconds (3600) or 90s, 15m, 12h, 30d") from None


def add_option(parser: argparse.ArgumentParser, name: str, spec: OptionSpec, default: Any) -> None:
    """Add ``spec``'s flag (stored as ``name``); its default comes from its environment variable when set."""
    raw = spec.environment_value()
    if isinstance(default, bool):
        parser.add_argument(
            spec.flag,
            dest=name,
            action="store_true",
            default=env_flag(raw) if raw is not None else default,
            help=f"{spec.help} [{spec.env}=1]",
        )
        return
    parse = spec.parse or type(default)
    if raw:
        try:
            default = parse(raw)
        except ValueError:
            parser.error(f"{spec.env}={raw!r} is not a valid value for {spec.flag} ({parse.__name__})")
    parser.add_argument(
        spec.flag,
        dest=name,
        type=parse,
        default=default,
        choices=spec.choices or None,
        metavar=None if spec.choices else spec.flag[2:].replace("-", "_").upper(),
        help=f"{spec.help} [{spec.env}]",
    )


def add_options(parser: argparse.ArgumentParser, specs: Sequence[tuple[str, OptionSpec]], defaults: object) -> None:
    """Add the flag of every one of ``specs``, defaulting to the same-named attribute of ``defaults``."""
    for name, spec in specs:
        add_option(parser, name, spec, getattr(defaults, name))


def check_args(
    parser: argparse.ArgumentParser, args: argparse.Namespace, specs: Sequence[tuple[str, OptionSpec]]
) -> dict[str, Any]:
    """The parsed value of every one of ``specs`` by name, once each passed its check; else ``parser.error``
    with the refusal naming the flag and its variable (the process stops with status 2)."""
    for name, spec in specs:
        if spec.check is not None:
            try:
                spec.check(getattr(args, name))
            except ValueError as exc:
                parser.error(spec.refusal(exc))
    return {name: getattr(args, name) for name, _ in specs}


def check_declared(settings: object) -> None:
    """Raise ValueError (naming the flag and its variable) unless every option of dataclass instance
    ``settings`` passes its check: for a ``__post_init__``, so code that builds the settings itself is held to
    the same bounds as the command line."""
    for f, spec in option_specs(type(settings)):
        if spec.check is not None:
            try:
                spec.check(getattr(settings, f.name))
            except ValueError as exc:
                raise ValueError(spec.refusal(exc)) from None
