"""The failure-mode catalog: one TOML data file, validated once, rendered into ``troubleshooting.md``.

``failure_modes.toml`` is the single source of truth. ``load_catalog()`` validates it (unique ids, categories from
the fixed set, regexes compile, examples match their own entry) and caches the result; ``render_troubleshooting()``
turns it into the markdown that ships next to it. ``python -m xtuner_rl_mcp.knowledge.catalog`` rewrites that file.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from functools import cached_property, lru_cache
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from ..core import CATEGORIES, Category, Severity

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

HERE = Path(__file__).resolve().parent.parent / "references"
CATALOG_PATH = HERE / "failure_modes.toml"
TROUBLESHOOTING_PATH = HERE / "troubleshooting.md"

#: Tools a catalog entry may name in ``confirm_with``.
ConfirmTool = Literal[
    "check_reward_data", "probe_environment", "inspect_config", "build_rl_command", "choose_topology", "preflight"
]
#: Where a question belongs when this server is not the right place to fix it.
Route = Literal["data_preparation", "sft_training", "model_backends", "legacy_cli"]

_ID_RE = re.compile(r"^[a-z][a-z0-9_]*$")
_SOURCE_RE = re.compile(r"^(xtuner|examples|recipe|docs)/[\w./-]+\.(py|md|sh)(:\d+(-\d+)?)?$|^external:[\w.-]+$")

CATEGORY_TITLES: dict[str, str] = {
    "ray_not_running": "Ray not running or not reachable",
    "ray_resources_insufficient": "Ray resources and placement groups",
    "backend_not_installed": "Rollout backend not installed",
    "backend_flag_missing_or_multiple": "Rollout backend flag (XTUNER_USE_*)",
    "backend_unsupported": "Unsupported backend or transport",
    "backend_runtime_error": "Rollout server lifecycle and requests",
    "missing_env_var_or_path": "Missing environment variables or paths",
    "config_load_error": "Config loading and config-type mismatches",
    "reward_data_missing_ground_truth": "Reward data without ground truth",
    "data_format_other": "Data format, reward and judger",
    "resource_mismatch_num_workers": "Worker counts and parallel sizes",
    "staleness_or_partial_rollout": "Staleness and async production",
    "eval_or_interval_config": "Evaluation and interval settings",
    "debug_trace_output": "Debug and trace",
    "model_loading": "Model loading and memory",
    "other": "Other",
}


class ToolCall(BaseModel):
    """A call of one of this server's tools that confirms the diagnosis.

    String argument values may be ``{data_path}``, ``{config_path}``, ``{log_path}``, ``{backend}`` or ``{nodes}``;
    diagnose_symptom fills them from its own inputs and lists the ones it cannot fill as missing.
    """

    model_config = ConfigDict(extra="forbid")

    tool: ConfirmTool = Field(description="Tool name")
    arguments: dict[str, Any] = Field(default_factory=dict, description="Arguments to pass")


class FailureMode(BaseModel):
    """One known way an XTuner RL run fails, with how to recognise, explain, fix and confirm it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(description="Stable snake_case id; also the troubleshooting.md anchor")
    category: Category
    severity: Severity = "blocker"
    title: str
    patterns: list[str] = Field(min_length=1, description="Regexes over one normalised log line (case-sensitive)")
    anti_patterns: list[str] = Field(default_factory=list, description="A line matching one of these is not a hit")
    specificity: int = Field(default=3, ge=1, le=5, description="5: names the exact cause; 1: generic symptom")
    hang: bool = Field(default=False, description="A silent-hang signal (progress/pending lines, no exception)")
    wrapper: bool = Field(
        default=False, description="A header around a more specific message (dropped when one matched next to it)"
    )
    consequence: bool = Field(
        default=False, description="Usually a symptom of another failure (ranked below a cause found in the same log)"
    )
    cause: str
    fix: list[str] = Field(min_length=1)
    confirm_with: list[ToolCall] = Field(default_factory=list)
    source: list[str] = Field(min_length=1, description="XTuner 'path:line' at b934f46, or 'external:<project>'")
    examples: list[str] = Field(min_length=1, description="Real message texts this entry must match")
    phrases: list[str] = Field(
        default_factory=list,
        description="How people describe this failure (English, Chinese, neighbouring stacks' wording); "
        "matched on normalised words by diagnose_symptom when no signature decides",
    )
    route: Route | None = None

    @field_validator("id")
    @classmethod
    def _id_shape(cls, v: str) -> str:
        if not _ID_RE.match(v):
            raise ValueError(f"id {v!r} must be snake_case")
        return v

    @field_validator("patterns", "anti_patterns")
    @classmethod
    def _compiles(cls, v: list[str]) -> list[str]:
        for p in v:
            try:
                re.compile(p)
            except re.error as exc:
                raise ValueError(f"regex {p!r} does not compile: {exc}") from None
        return v

    @field_validator("source")
    @classmethod
    def _source_shape(cls, v: list[str]) -> list[str]:
        for s in v:
            if not _SOURCE_RE.match(s):
                raise ValueError(f"source {s!r} is not 'path:line' nor 'external:<name>'")
        return v

    @model_validator(mode="after")
    def _examples_match(self) -> FailureMode:
        for ex in self.examples:
            if not self.matches(ex):
                raise ValueError(f"{self.id}: example {ex!r} is not matched by the entry's patterns")
        return self

    @cached_property
    def compiled(self) -> tuple[re.Pattern[str], ...]:
        return tuple(re.compile(p) for p in self.patterns)

    @cached_property
    def compiled_anti(self) -> tuple[re.Pattern[str], ...]:
        return tuple(re.compile(p) for p in self.anti_patterns)

    def match(self, line: str) -> re.Match[str] | None:
        """First pattern match on ``line`` unless an anti-pattern also matches."""
        for rx in self.compiled:
            m = rx.search(line)
            if m:
                if any(a.search(line) for a in self.compiled_anti):
                    return None
                return m
        return None

    def matches(self, line: str) -> bool:
        return self.match(line) is not None

    @property
    def uri(self) -> str:
        return f"xtuner-rl://failure-modes/{self.id}"

    @property
    def doc_uri(self) -> str:
        return f"xtuner-rl://references/troubleshooting#{self.id}"


class Catalog(BaseModel):
    """All failure modes, in file order."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    version: int = 1
    failure_mode: list[FailureMode]

    @model_validator(mode="after")
    def _unique(self) -> Catalog:
        seen: set[str] = set()
        for fm in self.failure_mode:
            if fm.id in seen:
                raise ValueError(f"duplicate failure-mode id {fm.id!r}")
            seen.add(fm.id)
        return self

    @cached_property
    def by_id(self) -> dict[str, FailureMode]:
        return {fm.id: fm for fm in self.failure_mode}

    @property
    def entries(self) -> list[FailureMode]:
        return list(self.failure_mode)

    @cached_property
    def prefilter(self) -> Prefilter:
        return build_prefilter(self.failure_mode)


# --------------------------------------------------------------------------------------------------------
# Literal prefilter: every pattern implies that a line contains one of a few short "anchor" strings, so a
# large log is scanned with a handful of C-speed bytes.find passes and only lines holding an anchor are
# decoded and run through the per-entry regexes.
# --------------------------------------------------------------------------------------------------------

if sys.version_info >= (3, 11):
    import re._constants as _sc
    import re._parser as _sp
else:  # pragma: no cover - Python 3.10
    import sre_constants as _sc
    import sre_parse as _sp

#: Markers of error-looking lines: exception names, log levels, Python traceback and pydantic structure. Every
#: real failure line carries one (the exception type, or the logger's [ERROR]/[WARNING] level), so large logs
#: are scanned for these few strings only (each one is a C-speed pass over the data: keep the list short).
FAST_MARKERS: tuple[str, ...] = (
    "rror",  # ValueError:, error, RayTaskError(...), Value error, (pydantic)
    "ERROR",  # [ERROR], ERROR:
    "WARN",  # [WARNING], WARN
    "Warning",  # Ray autoscaler "Warning: ... cannot be scheduled", UserWarning:
    "Traceback",  # the scanner then reads every line of the traceback, not only marked ones
    "Killed",  # the shell's note when the OOM killer ends a process (no traceback is printed)
)
#: More markers searched in small inputs (exact mode), where extra passes cost little.
EXTRA_MARKERS: tuple[str, ...] = (
    "RROR",
    "xception",
    "ailed",
    "AILED",
    "arning",
    "FATAL",
    "Fatal",
    "CRITICAL",
    "killed",
    "ssert",
    "imeout",
    "imed out",
    "Errno",
    "[type=",
    "nfeasible",
    "aiting for",
    "pending",
    "Segmentation fault",
    "[AsyncioDiag",
    'File "',  # traceback frames (and, through them, the source line printed below each frame)
    "XTUNER_USE_",  # the backend flag in launch commands: fills the backend of suggested tool calls
)
ERROR_MARKERS: tuple[str, ...] = FAST_MARKERS + EXTRA_MARKERS


_MIN_LITERAL = 4


def required_literals(pattern: str) -> list[str] | None:
    """Literal strings of which at least one occurs in every match of ``pattern`` (None if none is known)."""
    try:
        parsed = _sp.parse(pattern)
    except re.error:
        return None
    return _required(list(parsed.data))


def _strength(alts: list[str]) -> int:
    return min(len(a) for a in alts)


def _required(items: list[Any]) -> list[str] | None:
    """The literal strings one of which every match of the parsed pattern contains; ``items`` are the parser's
    (opcode, argument) pairs, whose argument's shape depends on the opcode (hence ``Any``)."""
    runs: list[str] = []
    cur: list[str] = []
    best_alts: list[str] | None = None

    def flush() -> None:
        if cur:
            runs.append("".join(cur))
            cur.clear()

    def offer(alts: list[str] | None) -> None:
        nonlocal best_alts
        if alts and (best_alts is None or _strength(alts) > _strength(best_alts)):
            best_alts = alts

    for op, av in items:
        if op is _sc.LITERAL:
            cur.append(chr(av))
        elif op is _sc.SUBPATTERN:
            inner = list(av[-1])
            if inner and all(o is _sc.LITERAL for o, _ in inner):
                cur.extend(chr(a) for _, a in inner)
            else:
                flush()
                offer(_required(inner))
        elif op is _sc.BRANCH:
            flush()
            branches = [_required(list(b)) for b in av[1]]
            required = [b for b in branches if b]
            if len(required) == len(branches):
                offer([x for b in required for x in b])
        elif op in (_sc.MAX_REPEAT, _sc.MIN_REPEAT) and av[0] >= 1:
            flush()
            offer(_required(list(av[2])))
        elif op is _sc.AT:
            continue
        else:
            flush()
    flush()
    options: list[list[str]] = []
    if runs:
        options.append([max(runs, key=len)])
    if best_alts:
        options.append(best_alts)
    return max(options, key=_strength) if options else None


@dataclass(frozen=True)
class Prefilter:
    """Anchor strings for the scan and the entries each anchor can lead to.

    ``full`` holds every pattern's required literals plus the markers (exact: no line that any pattern can
    match is skipped); ``fast`` holds the markers only (used for large logs, where a scan per literal would
    be too slow). ``entries_for`` maps an anchor to the indices of the entries whose patterns need it.
    """

    full: tuple[bytes, ...]
    fast: tuple[bytes, ...]
    entries_for: dict[str, tuple[int, ...]]


def build_prefilter(entries: list[FailureMode]) -> Prefilter:
    """Collect the required literal of every pattern; refuse patterns without one (they would scan slowly)."""
    needs: dict[str, set[int]] = {}
    for idx, fm in enumerate(entries):
        for pat in fm.patterns:
            alts = required_literals(pat)
            if not alts or _strength(alts) < _MIN_LITERAL:
                raise ValueError(f"{fm.id}: pattern {pat!r} needs a literal of at least {_MIN_LITERAL} characters")
            for lit in alts:
                needs.setdefault(lit, set()).add(idx)
    literals = sorted(needs)
    # a literal that contains a marker or a shorter literal adds nothing to the scan
    kept = [
        lit
        for lit in literals
        if not any(m in lit for m in ERROR_MARKERS) and not any(o != lit and o in lit for o in literals)
    ]
    return Prefilter(
        full=tuple(x.encode() for x in (*ERROR_MARKERS, *kept)),
        fast=tuple(m.encode() for m in FAST_MARKERS),
        entries_for={lit: tuple(sorted(v)) for lit, v in needs.items()},
    )


def parse_catalog(text: str) -> Catalog:
    """Parse and validate catalog TOML text (raises on any problem)."""
    return Catalog.model_validate(tomllib.loads(text))


@lru_cache(maxsize=1)
def load_catalog() -> Catalog:
    """The validated catalog shipped with the package (cached)."""
    return parse_catalog(CATALOG_PATH.read_text(encoding="utf-8"))


def get_failure_mode(failure_mode_id: str) -> FailureMode | None:
    """The entry with this id, or None."""
    return load_catalog().by_id.get(failure_mode_id)


def _md(text: str) -> str:
    """One line of prose; angle brackets escaped so placeholders like <dir> stay visible."""
    return " ".join(text.split()).replace("<", "&lt;").replace(">", "&gt;")


def _code(text: str) -> str:
    """Inline code (no escaping inside backticks)."""
    return " ".join(text.split()).replace("`", "'")


def _render_call(call: ToolCall) -> str:
    if not call.arguments:
        return f"`{call.tool}()`"
    import json

    return f"`{call.tool}({json.dumps(call.arguments, ensure_ascii=False, sort_keys=True)})`"


def _described_as(phrases: list[str], limit: int = 8) -> str:
    """A few of the entry's phrases, English first then Chinese, as a reader would search for them."""
    zh = [p for p in phrases if any("\u4e00" <= ch <= "\u9fff" for ch in p)]
    en = [p for p in phrases if p not in zh]
    picked = en[: limit - min(3, len(zh))] + zh[:3]
    return ", ".join(f"“{_md(p)}”" for p in picked)


def render_troubleshooting(catalog: Catalog | None = None) -> str:
    """Markdown troubleshooting guide generated from the catalog: one ``###`` section per entry, by category."""
    cat = catalog or load_catalog()
    out: list[str] = [
        "# Troubleshooting XTuner V1 RL (GRPO) runs",
        "",
        "<!-- Generated from failure_modes.toml by `python -m xtuner_rl_mcp.knowledge.catalog`; do not edit. -->",
        "",
        "Each section is one entry of the failure-mode catalog (resource `xtuner-rl://failure-modes/<id>`); the",
        "section anchor is the entry id. Sources are `path:line` in InternLM/xtuner at commit b934f46.",
        "The `diagnose_symptom` tool matches logs and tracebacks against these entries, and descriptions in words",
        "(English or Chinese, other stacks' wording) against the phrases each entry lists.",
        "",
    ]
    for category in CATEGORIES:
        members = [fm for fm in cat.failure_mode if fm.category == category]
        if not members:
            continue
        out += [f"## {CATEGORY_TITLES.get(category, category)} (`{category}`)", ""]
        for fm in members:
            head = f"**{_md(fm.title)}** — severity: {fm.severity}, category: `{fm.category}`"
            if fm.route:
                head += f", belongs to: {fm.route}"
            out += [f'<a id="{fm.id}"></a>', "", f"### {fm.id}", "", head]
            out += ["", "What you see:", ""]
            out += [f"- `{_code(ex)}`" for ex in fm.examples]
            if fm.phrases:
                out += ["", "How it is often described: " + _described_as(fm.phrases)]
            out += ["", f"Cause: {_md(fm.cause)}", "", "Fix:", ""]
            out += [f"{i}. {_md(step)}" for i, step in enumerate(fm.fix, 1)]
            if fm.confirm_with:
                out += ["", "Confirm with: " + ", ".join(_render_call(c) for c in fm.confirm_with)]
            out += ["", "XTuner source: " + ", ".join(f"`{s}`" for s in fm.source), ""]
    return "\n".join(out).rstrip("\n") + "\n"


def main() -> None:
    """Rewrite troubleshooting.md from the catalog."""
    load_catalog.cache_clear()
    TROUBLESHOOTING_PATH.write_text(render_troubleshooting(), encoding="utf-8")
    print(f"wrote {TROUBLESHOOTING_PATH} ({len(load_catalog().failure_mode)} entries)")


if __name__ == "__main__":
    main()
