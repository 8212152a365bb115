"""Skill markdown: parsing its YAML frontmatter and rendering a fallback skill.

The hub stores skills verbatim and renders :func:`render_fallback_skill` when an
agent registers without one, so ``peers(action="describe")`` never returns an
empty handle.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from netkernel.identity import Passport, Resume


@dataclass(frozen=True)
class ParsedSkill:
    """A skill split into its frontmatter mapping and its markdown body."""

    frontmatter: dict[str, Any] = field(default_factory=dict)
    body: str = ""


def parse_skill_frontmatter(skill_md: str) -> ParsedSkill:
    """Split ``skill_md`` into YAML frontmatter (between leading ``---`` lines) and body.

    Markdown without frontmatter, or with frontmatter that is not a YAML mapping,
    yields an empty frontmatter and the whole text as body.
    """
    text = skill_md.lstrip("\ufeff")
    lines = text.splitlines(keepends=True)
    if not lines or lines[0].strip() != "---":
        return ParsedSkill({}, text)
    for i in range(1, len(lines)):
        if lines[i].strip() == "---":
            header = "".join(lines[1:i])
            body = "".join(lines[i + 1 :]).lstrip("\n")
            import yaml  # loaded on the first skill read, not at every service's start

            try:
                data = yaml.safe_load(header) if header.strip() else {}
            except yaml.YAMLError:
                return ParsedSkill({}, text)
            if not isinstance(data, dict):
                return ParsedSkill({}, text)
            return ParsedSkill(data, body)
    return ParsedSkill({}, text)


EXAMPLES_HEADING = "## Examples"
"""The section of a skill listing the agent's examples (the fallback skill's, and where
``add_example`` adds to a custom skill)."""
TRACK_RECORD_HEADING = "## Track record"
"""The fallback skill's section of the hub's observed counts (``Resume.observed``)."""


def fallback_description(passport: Passport, resume: Resume) -> str:
    """The ``description`` of a fallback skill: the resume's summary, else the passport's
    description, else a sentence saying what the identity is."""
    return resume.summary or passport.description or f"Network-registered {passport.kind or 'agent'}."


def render_fallback_skill(passport: Passport, resume: Resume | None = None) -> str:
    """Render skill markdown (with frontmatter) from a passport and resume.

    The frontmatter has ``name`` and ``description`` (what a skill's frontmatter carries, AG2's
    fallback included: :func:`fallback_description`), ``title``, ``kind``, ``generated: true`` and,
    when the resume has them, ``capabilities`` and ``domains``. A resume with the hub's observed
    counts gets a ``## Track record`` section (one line per capability, as AG2's fallback has)."""
    resume = resume or Resume()
    front: dict[str, Any] = {
        "name": passport.name,
        "description": fallback_description(passport, resume),
        "title": passport.name,
        "kind": passport.kind or "agent",
        "generated": True,
    }
    if resume.claimed_capabilities:
        front["capabilities"] = list(resume.claimed_capabilities)
    if resume.domains:
        front["domains"] = list(resume.domains)
    import yaml

    lines = [
        "---",
        yaml.safe_dump(front, sort_keys=False, allow_unicode=True).rstrip(),
        "---",
        "",
        f"# {passport.name}",
    ]
    about = resume.summary or passport.description
    if about:
        lines += ["", about]
    facts = [
        ("Owner", passport.owner),
        ("Model", " / ".join(x for x in (passport.provider, passport.model) if x)),
        ("Project", passport.project),
    ]
    known = [(k, v) for k, v in facts if v]
    if known:
        lines += [""] + [f"- {k}: {v}" for k, v in known]
    if resume.claimed_capabilities:
        lines += ["", "## Capabilities", ""] + [f"- {c}" for c in resume.claimed_capabilities]
    if resume.domains:
        lines += ["", "## Domains", ""] + [f"- {d}" for d in resume.domains]
    if resume.observed:
        lines += ["", TRACK_RECORD_HEADING, ""] + [
            f"- {cap}: {stat.completed} completed / {stat.failed} failed / {stat.expired} expired"
            f" / {stat.cancelled} cancelled (n={stat.n})"
            for cap, stat in sorted(resume.observed.items())
        ]
    if resume.examples:
        lines += ["", EXAMPLES_HEADING, ""] + [f"- {e}" for e in resume.examples]
    if not (about or resume.claimed_capabilities or resume.domains):
        lines += ["", "No resume was provided; ask this agent what it can do."]
    return "\n".join(lines) + "\n"


def add_skill_example(skill_md: str, example: str) -> str:
    """``skill_md`` with ``- <example>`` added at the end of its ``## Examples`` section (a section
    appended at the end when it has none)."""
    lines = skill_md.rstrip("\n").split("\n")
    start = next((i for i, line in enumerate(lines) if line.strip() == EXAMPLES_HEADING), None)
    if start is None:
        return "\n".join([*lines, "", EXAMPLES_HEADING, "", f"- {example}"]) + "\n"
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("#")), len(lines))
    while end > start + 1 and not lines[end - 1].strip():
        end -= 1
    return "\n".join([*lines[:end], f"- {example}", *lines[end:]]) + "\n"
