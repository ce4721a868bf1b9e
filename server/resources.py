"""MCP resources and prompts over references/, as data the server's handlers serve; the reading lives in
``knowledge/docs.py``.

Resources:
- ``xtuner-rl://references/{name}``: one markdown reference (listed per document; also a template);
  ``xtuner-rl://references/{name}#{anchor}``: one section of it.
- ``xtuner-rl://failure-modes``: JSON index of the catalog; ``xtuner-rl://failure-modes/{id}``: one entry as JSON.
- ``xtuner-rl://schemas/{name}``: a JSON Schema file (e.g. ``rl-sample.schema.json``).
- ``xtuner-rl://skill``: the Agent Skill (``skill.md``).
Unknown names raise :class:`ResourceNotFound` (answered as JSON-RPC -32602, no traceback).
"""

from __future__ import annotations

import dataclasses
import functools
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ..knowledge import docs

MARKDOWN = "text/markdown"
JSON = "application/json"
SCHEMA_JSON = "application/schema+json"


class ResourceNotFound(LookupError):
    """An unknown resource or prompt name; the server answers it as JSON-RPC invalid params (-32602)."""


def _not_found(kind: str, name: str, known: list[str]) -> ResourceNotFound:
    listed = ", ".join(known[:30]) + (" ..." if len(known) > 30 else "")
    return ResourceNotFound(f"no {kind} named {name[:200]!r}; known: {listed or '(none)'}")


def _entry_to_json(entry: Any) -> dict[str, Any]:
    """A catalog entry as plain JSON, whatever shape the catalog module gives it."""
    if hasattr(entry, "model_dump"):
        return entry.model_dump(mode="json")
    if dataclasses.is_dataclass(entry) and not isinstance(entry, type):
        return json.loads(json.dumps(dataclasses.asdict(entry), default=str))
    if isinstance(entry, dict):
        return json.loads(json.dumps(entry, default=str))
    return json.loads(json.dumps(vars(entry), default=str))


def _catalog() -> list[Any]:
    return docs._load_catalog_entries()


def failure_mode_index() -> str:
    """JSON list of every catalog entry: id, title, category, uri."""
    rows = [
        {
            "id": s.anchor,
            "title": s.heading,
            "category": s.extra.get("category", ""),
            "uri": s.uri,
        }
        for s in docs.catalog_sections()
    ]
    return json.dumps({"count": len(rows), "failure_modes": rows}, ensure_ascii=False, indent=1)


def failure_mode(entry_id: str) -> str:
    for entry in _catalog():
        data = _entry_to_json(entry)
        if data.get("id") == entry_id:
            data.setdefault("uri", f"{docs.FAILURE_MODE_SCHEME}{entry_id}")
            return json.dumps(data, ensure_ascii=False, indent=1)
    raise _not_found("failure mode", entry_id, [s.anchor for s in docs.catalog_sections()])


def reference(name: str) -> str:
    text = docs.read_doc(name)
    if text is None:
        raise _not_found("reference", name, list(docs.list_docs()))
    return text


def reference_section(name: str, anchor: str) -> str:
    if docs.read_doc(name) is None:
        raise _not_found("reference", name, list(docs.list_docs()))
    section = docs.find_section(name, anchor)
    if section is None:
        raise _not_found(f"section of {name}", anchor, [s.anchor for s in docs.sections(name)])
    return f"{'#' * section.level} {section.heading}\n\n{section.text}\n"


def schema(name: str) -> str:
    text = docs.read_schema(name)
    if text is None:
        raise _not_found("schema", name, list(docs.list_schemas()))
    return text


def skill() -> str:
    text = docs.read_skill()
    if text is None:  # pragma: no cover - skill.md ships with the package
        raise ResourceNotFound("skill.md is not installed with this package")
    return text


@dataclass(frozen=True)
class StaticResource:
    """One listed resource and how to read it."""

    uri: str
    name: str
    title: str
    description: str
    mime_type: str
    read: Callable[[], str]


@dataclass(frozen=True)
class TemplateResource:
    """One URI template: listed under resources/templates/list, read by :func:`read_resource`."""

    uri_template: str
    name: str
    title: str
    description: str
    mime_type: str


def static_resources() -> list[StaticResource]:
    """Every listed resource: each reference, the catalog index, each schema, the skill."""
    out = [
        StaticResource(
            f"{docs.REFERENCE_SCHEME}{name}",
            f"reference-{name}",
            f"XTuner RL reference: {name}",
            f"XTuner V1 RL reference '{name}' (markdown, true to InternLM/xtuner@b934f46)",
            MARKDOWN,
            functools.partial(reference, name),
        )
        for name in docs.list_docs()
    ]
    out.append(
        StaticResource(
            docs.FAILURE_MODE_SCHEME.rstrip("/"),
            "failure-modes",
            "Failure-mode catalog index",
            "Every catalog entry: id, title, category and the URI of its full JSON",
            JSON,
            failure_mode_index,
        )
    )
    out += [
        StaticResource(
            f"{docs.SCHEMA_SCHEME}{name}",
            f"schema-{name}",
            f"JSON Schema {name}",
            "JSON Schema (2020-12) shipped with the server",
            SCHEMA_JSON,
            functools.partial(schema, name),
        )
        for name in docs.list_schemas()
    ]
    out.append(
        StaticResource(
            docs.SKILL_URI,
            "skill",
            "Agent Skill: XTuner RL with this server",
            "When to route here, the fast operating procedure and worked hard cases (skill.md)",
            MARKDOWN,
            skill,
        )
    )
    return out


TEMPLATES: tuple[TemplateResource, ...] = (
    TemplateResource(
        f"{docs.REFERENCE_SCHEME}{{name}}",
        "reference",
        "XTuner RL reference document",
        "One markdown reference by name: workflows, cluster-and-backends, api-reference, data-contract, "
        "troubleshooting",
        MARKDOWN,
    ),
    TemplateResource(
        f"{docs.REFERENCE_SCHEME}{{name}}{{#anchor}}",
        "reference-section",
        "One section of an XTuner RL reference",
        "One section by document name and heading anchor, as cited by findings",
        MARKDOWN,
    ),
    TemplateResource(
        docs.FAILURE_MODE_SCHEME + "{id}",
        "failure-mode",
        "One failure-mode catalog entry",
        "Catalog entry as JSON: category, title, log patterns, cause, ordered fix steps, the tool that confirms it, "
        "reference anchor and XTuner source line",
        JSON,
    ),
    TemplateResource(
        f"{docs.SCHEMA_SCHEME}{{name}}",
        "schema",
        "JSON Schema by name",
        "A JSON Schema shipped with the server, e.g. rl-sample.schema.json (a training/eval JSONL line)",
        SCHEMA_JSON,
    ),
)


def read_resource(uri: str) -> tuple[str, str]:
    """(text, mime type) of a resource URI, listed or matching a template; :class:`ResourceNotFound` otherwise."""
    for res in static_resources():
        if res.uri == uri:
            return res.read(), res.mime_type
    if uri.startswith(docs.REFERENCE_SCHEME):
        name, hashmark, anchor = uri[len(docs.REFERENCE_SCHEME) :].partition("#")
        return (reference_section(name, anchor) if hashmark else reference(name)), MARKDOWN
    if uri.startswith(docs.FAILURE_MODE_SCHEME):
        return failure_mode(uri[len(docs.FAILURE_MODE_SCHEME) :]), JSON
    if uri.startswith(docs.SCHEMA_SCHEME):
        return schema(uri[len(docs.SCHEMA_SCHEME) :]), SCHEMA_JSON
    raise ResourceNotFound(f"no resource {uri[:200]!r}; list them with resources/list and resources/templates/list")


# --------------------------------------------------------------------------------------------------------
# Prompts
# --------------------------------------------------------------------------------------------------------


def plan_prompt(
    nodes: str = "1",
    gpus_per_node: str = "8",
    model: str = "<MODEL_PATH>",
    backend: str = "lmdeploy",
    train_data: str = "<train.jsonl>",
    eval_data: str = "",
    mode: str = "auto",
) -> str:
    eval_line = (
        f"- eval data: {eval_data}\n" if eval_data else "- eval data: none given (evaluation is on by default)\n"
    )
    return f"""\
Plan an XTuner V1 GRPO run with the xtuner-rl tools. Do not launch anything; produce a checked plan.

Inputs
- nodes: {nodes}, GPUs per node: {gpus_per_node}
- model (Hugging Face directory): {model}
- rollout backend: {backend} (LMDeploy or SGLang; vLLM rollout raises NotImplementedError at b934f46)
- train data: {train_data}
{eval_line}- topology wish: {mode} (sync, async, disaggregated, or auto)

Steps, in order; quote each tool's `summary` and keep its finding ids:
1. choose_topology with the node/GPU counts and the topology wish: colocated sync, colocated async or
   disaggregated, plus the async knobs and the effective staleness.
2. check_reward_data on the train file (and the eval file): every line needs `prompt` (a list of messages),
   `data_source` and `reward_model.ground_truth` (a string for GSM8K).
3. inspect_config on the Python config if the user has one: it must define a module-level `trainer`.
4. probe_environment: backend package importable, exactly one XTUNER_USE_* flag set to 1, Ray running with
   enough GPUs, CPUs (12 per worker + 10) and memory (16 GiB per worker + 10 GiB).
5. build_rl_command: the launch script (exports before `ray start`, WORK_DIR, then the rl.py entry point).
6. preflight for one go/no-go over everything above.
When a step raises a question, call lookup_reference (e.g. "what does max_staleness do") or read
xtuner-rl://references/workflows and xtuner-rl://references/cluster-and-backends.
Answer with: the topology and why, blockers with their fixes, then the exact commands.
"""


def diagnose_prompt(log_excerpt: str = "", log_path: str = "") -> str:
    if log_excerpt:
        evidence = f"The log excerpt to diagnose:\n\n```\n{log_excerpt[:20000]}\n```\n"
    elif log_path:
        evidence = f"The log file to diagnose: {log_path}\n"
    else:
        evidence = "Ask the user for the failing log (the last ~200 lines, or the path of the log file).\n"
    return f"""\
Diagnose a failed or stuck XTuner V1 RL run with the xtuner-rl tools. Do not restart Ray or rerun training.

{evidence}
Steps, in order:
1. diagnose_symptom with the log text (or the log path): it matches the failure-mode catalog and returns
   ranked causes with catalog ids, evidence lines and fixes.
2. Confirm the top cause with the tool its catalog entry names:
   - data or reward errors (KeyError 'prompt', missing ground_truth) -> check_reward_data on the JSONL;
   - config errors ('Config' object is not callable, validation errors, interval rules) -> inspect_config;
   - Ray, backend flag, package or resource errors -> probe_environment;
   - launch problems (Ray stopped on exit, env vars not reaching workers) -> build_rl_command.
3. Read the entry (xtuner-rl://failure-modes/<id>) or its reference anchor, or call lookup_reference with the
   exact error text, for the explanation and the XTuner source line.
Answer with: the cause (quote the evidence line), the confirming tool result, and the ordered fix steps.
"""


@dataclass(frozen=True)
class PromptSpec:
    """One prompt: its listed arguments (all optional, with descriptions) and the text it renders."""

    name: str
    title: str
    description: str
    arguments: tuple[tuple[str, str], ...]  # (name, description)
    render: Callable[..., str]


PROMPTS: tuple[PromptSpec, ...] = (
    PromptSpec(
        "plan_grpo_run",
        "Plan an XTuner GRPO run",
        "Checked launch plan for a GRPO run: which tools to call, in which order, with your inputs",
        (
            ("nodes", "Number of nodes"),
            ("gpus_per_node", "GPUs per node"),
            ("model", "Hugging Face model directory"),
            ("backend", "Rollout backend: lmdeploy or sglang"),
            ("train_data", "Training JSONL path"),
            ("eval_data", "Evaluation JSONL path (optional)"),
            ("mode", "Topology wish: sync, async, disaggregated or auto"),
        ),
        plan_prompt,
    ),
    PromptSpec(
        "diagnose_failed_run",
        "Diagnose a failed XTuner RL run",
        "Which tools to call, in which order, to find the cause of a failed or stuck run",
        (
            ("log_excerpt", "The failing log text (last lines, traceback)"),
            ("log_path", "Path of the log file, if no excerpt is given"),
        ),
        diagnose_prompt,
    ),
)


def render_prompt(name: str, arguments: Mapping[str, str] | None) -> tuple[PromptSpec, str]:
    """The prompt named ``name`` rendered with ``arguments``; unknown names or arguments raise ResourceNotFound."""
    spec = next((p for p in PROMPTS if p.name == name), None)
    if spec is None:
        raise ResourceNotFound(f"no prompt {name[:100]!r}; known: {', '.join(p.name for p in PROMPTS)}")
    known = {a for a, _ in spec.arguments}
    given = {k: str(v) for k, v in (arguments or {}).items()}
    unknown = sorted(set(given) - known)
    if unknown:
        raise ResourceNotFound(f"prompt {name!r} has no argument(s) {', '.join(unknown)[:200]}")
    return spec, spec.render(**given)
