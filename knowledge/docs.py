"""The markdown references shipped in the package, split into addressable sections.

Everything here reads package data through ``importlib.resources`` so it works from a wheel as well as from the
source tree. Sections are keyed by ``(doc, anchor)`` where the anchor is the GitHub-style slug of the heading, the
same fragment a ``xtuner-rl://references/<doc>#<anchor>`` URI carries. Results are cached: the files never change
while the server runs.
"""

from __future__ import annotations

import logging
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from typing import TYPE_CHECKING, TypedDict

from .catalog import FailureMode, load_catalog

if TYPE_CHECKING:
    if sys.version_info >= (3, 11):
        from importlib.resources.abc import Traversable
    else:
        from importlib.abc import Traversable

log = logging.getLogger("xtuner_rl_mcp")

REFERENCE_SCHEME = "xtuner-rl://references/"
FAILURE_MODE_SCHEME = "xtuner-rl://failure-modes/"
SCHEMA_SCHEME = "xtuner-rl://schemas/"
SKILL_URI = "xtuner-rl://skill"

_ROOT_PACKAGE = (__package__ or "xtuner_rl_mcp.knowledge").rsplit(".", 1)[0]
#: The knowledge itself (markdown, catalog, schemas) is package data of ``references/``.
_PACKAGE = f"{_ROOT_PACKAGE}.references"

_HEADING = re.compile(r"^(#{1,6})\s+(.+?)\s*#*\s*$")
_FENCE = re.compile(r"^\s*(```|~~~)")
#: A citation line: ``Source: path:line[, path:line-line ...]`` (backticks optional).
_SOURCE_LINE = re.compile(r"^\s*(?:\*\*)?Sources?:(?:\*\*)?\s*(.+)$", re.IGNORECASE)
_CITATION = re.compile(
    r"`?([A-Za-z0-9_./-]+\.(?:py|sh|md|toml|txt|rst|cfg|json|yaml|yml)):(\d+(?:-\d+)?(?:,\d+(?:-\d+)?)*)`?"
)


class FailureModeFacts(TypedDict, total=False):
    """What a failure-mode section carries besides its text (a reference section carries none of it)."""

    patterns: list[str]
    examples: list[str]
    category: str
    phrases: list[str]
    matches: Callable[[str], bool]  # the entry's own matcher (patterns and anti-patterns)


@dataclass(frozen=True)
class Section:
    """One heading of one reference document (or one catalog entry, ``kind='failure_mode'``)."""

    doc: str
    heading: str
    anchor: str
    level: int
    text: str
    sources: tuple[str, ...] = ()
    kind: str = "reference"
    extra: FailureModeFacts = field(default_factory=FailureModeFacts, compare=False, hash=False)

    @property
    def uri(self) -> str:
        if self.kind == "failure_mode":
            return f"{FAILURE_MODE_SCHEME}{self.anchor}"
        return f"{REFERENCE_SCHEME}{self.doc}#{self.anchor}"


def slugify(heading: str) -> str:
    """GitHub-style anchor of a heading: markup dropped, lower case, punctuation removed, spaces to hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # links keep their text
    text = re.sub(r"<[^>]+>", "", text)  # inline html
    text = text.strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)  # keeps letters, digits, underscore, hyphen, space
    return text.replace(" ", "-")


def _doc_files() -> dict[str, Traversable]:
    root = resources.files(_PACKAGE)
    return {p.name[:-3]: p for p in root.iterdir() if p.name.endswith(".md") and p.is_file()}


@lru_cache(maxsize=1)
def list_docs() -> tuple[str, ...]:
    """Names of the shipped markdown references (without ``.md``), sorted."""
    return tuple(sorted(_doc_files()))


def _normalise_name(name: str) -> str:
    name = name.strip()
    return name[:-3] if name.endswith(".md") else name


@lru_cache(maxsize=32)
def read_doc(name: str) -> str | None:
    """The markdown text of one reference, or None if there is no such document."""
    files = _doc_files()
    path = files.get(_normalise_name(name))
    return None if path is None else path.read_text(encoding="utf-8")


def parse_sources(text: str) -> tuple[str, ...]:
    """The ``path:line`` citations found on the ``Source:`` lines of a block of markdown."""
    out: list[str] = []
    for line in text.splitlines():
        m = _SOURCE_LINE.match(line)
        if not m:
            continue
        for path, lines in _CITATION.findall(m.group(1)):
            cite = f"{path}:{lines}"
            if cite not in out:
                out.append(cite)
    return tuple(out)


def split_sections(doc: str, markdown: str) -> list[Section]:
    """Split one document at every heading (fenced code is not scanned for headings).

    A section's text is its own body up to the next heading of any level; duplicate slugs get ``-1``, ``-2``
    suffixes as on GitHub.
    """
    sections: list[Section] = []
    seen: dict[str, int] = {}
    current: tuple[int, str] | None = None
    body: list[str] = []
    in_fence = False

    def flush() -> None:
        if current is None:
            return
        level, heading = current
        base = slugify(heading)
        n = seen.get(base, 0)
        seen[base] = n + 1
        anchor = base if n == 0 else f"{base}-{n}"
        text = "\n".join(body).strip()
        sections.append(Section(doc, heading, anchor, level, text, parse_sources(text)))

    for line in markdown.splitlines():
        if _FENCE.match(line):
            in_fence = not in_fence
        m = None if in_fence else _HEADING.match(line)
        if m:
            flush()
            current = (len(m.group(1)), m.group(2).strip())
            body = []
        else:
            body.append(line)
    flush()
    return sections


@lru_cache(maxsize=1)
def all_sections() -> tuple[Section, ...]:
    """Every section of every shipped reference, in document order."""
    out: list[Section] = []
    for name in list_docs():
        text = read_doc(name)
        if text is not None:
            out.extend(split_sections(name, text))
    return tuple(out)


def sections(doc: str | None = None) -> list[Section]:
    """Sections of one document (or of all documents)."""
    if doc is None:
        return list(all_sections())
    name = _normalise_name(doc)
    return [s for s in all_sections() if s.doc == name]


def find_section(doc: str, anchor: str) -> Section | None:
    """The section of ``doc`` whose anchor is ``anchor``; an empty anchor means the document's first section."""
    secs = sections(doc)
    if not secs:
        return None
    if not anchor:
        return secs[0]
    anchor = anchor.lower()
    return next((s for s in secs if s.anchor == anchor), None)


# --------------------------------------------------------------------------------------------------------
# The failure-mode catalog (owned by the diagnose work) seen as sections, so one index serves both.
# --------------------------------------------------------------------------------------------------------


def _load_catalog_entries() -> list[FailureMode]:
    try:
        return list(load_catalog().entries)
    except Exception:  # a missing or broken catalog must not take the references down with it
        log.warning("failure-mode catalog unavailable; references served without it", exc_info=True)
        return []


@lru_cache(maxsize=1)
def catalog_sections() -> tuple[Section, ...]:
    """One pseudo-section per failure-mode catalog entry (empty if the catalog is not available)."""
    out: list[Section] = []
    for entry in _load_catalog_entries():
        out.append(
            Section(
                doc="failure-modes",
                heading=entry.title or entry.id,
                anchor=entry.id,
                level=2,
                text="\n".join([entry.cause, *entry.fix, entry.category]),
                sources=tuple(entry.source),
                kind="failure_mode",
                extra={
                    "patterns": list(entry.patterns),
                    "examples": list(entry.examples),
                    "category": entry.category,
                    "matches": entry.matches,
                },
            )
        )
    return tuple(out)


def find_failure_mode(entry_id: str) -> Section | None:
    return next((s for s in catalog_sections() if s.anchor == entry_id), None)


def resolve_reference_uri(uri: str) -> Section | None:
    """The section a ``xtuner-rl://references/<doc>[#anchor]`` (or ``xtuner-rl://failure-modes/<id>``) URI names.

    Returns None when the document, anchor or catalog entry does not exist.
    """
    if uri.startswith(REFERENCE_SCHEME):
        rest = uri[len(REFERENCE_SCHEME) :]
        doc, _, anchor = rest.partition("#")
        if not doc or "/" in doc:
            return None
        return find_section(doc, anchor)
    if uri.startswith(FAILURE_MODE_SCHEME):
        entry_id = uri[len(FAILURE_MODE_SCHEME) :]
        return find_failure_mode(entry_id) if entry_id else None
    return None


# --------------------------------------------------------------------------------------------------------
# Other shipped files: JSON Schemas and the skill.
# --------------------------------------------------------------------------------------------------------


@lru_cache(maxsize=1)
def list_schemas() -> tuple[str, ...]:
    """File names under ``references/schemas/`` (e.g. ``rl-sample.schema.json``)."""
    root = resources.files(_PACKAGE).joinpath("schemas")
    if not root.is_dir():
        return ()
    return tuple(sorted(p.name for p in root.iterdir() if p.is_file() and p.name.endswith(".json")))


def read_schema(name: str) -> str | None:
    """The text of one schema; ``name`` may omit ``.json`` or ``.schema.json``."""
    names = list_schemas()
    for candidate in (name, f"{name}.json", f"{name}.schema.json"):
        if candidate in names:
            return resources.files(_PACKAGE).joinpath("schemas").joinpath(candidate).read_text(encoding="utf-8")
    return None


@lru_cache(maxsize=1)
def read_skill() -> str | None:
    """The top-level ``skill.md`` shipped with the package."""
    path = resources.files(_ROOT_PACKAGE).joinpath("skill.md")
    return path.read_text(encoding="utf-8") if path.is_file() else None
