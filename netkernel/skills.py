"""Skill markdown: parsing its YAML frontmatter and rendering a fallback skill.

The hub stores skills verbatim and renders :func:`render_fallback_skill` when an
agent registers without one, so ``peers(action="describe")`` never returns an
empty handle.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import yaml

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
            try:
                data = yaml.safe_load(header) if header.strip() else {}
            except yaml.YAMLError:
                return ParsedSkill({}, text)
            if not isinstance(data, dict):
                return ParsedSkill({}, text)
            return ParsedSkill(data, body)
    return ParsedSkill({}, text)


def render_fallback_skill(passport: Passport, resume: Resume | None = None) -> str:
    """Render skill markdown (with frontmatter) from a passport and resume."""
    resume = resume or Resume()
    front: dict[str, Any] = {"title": passport.name, "kind": passport.kind or "agent", "generated": True}
    if resume.claimed_capabilities:
        front["capabilities"] = list(resume.claimed_capabilities)
    if resume.domains:
        front["domains"] = list(resume.domains)
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
    if resume.examples:
        lines += ["", "## Good requests", ""] + [f"- {e}" for e in resume.examples]
    if not (about or resume.claimed_capabilities or resume.domains):
        lines += ["", "No resume was provided; ask this agent what it can do."]
    return "\n".join(lines) + "\n"
