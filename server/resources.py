"""MCP resources and prompts over references/: MCP wiring only, the reading lives in ``references/docs.py``.

Resources:
- ``xtuner-rl://references/{name}``: one markdown reference (listed per document; also a template);
  ``xtuner-rl://references/{name}#{anchor}``: one section of it.
- ``xtuner-rl://failure-modes``: JSON index of the catalog; ``xtuner-rl://failure-modes/{id}``: one entry as JSON.
- ``xtuner-rl://schemas/{name}``: a JSON Schema file (e.g. ``rl-sample.schema.json``).
- ``xtuner-rl://skill``: the Agent Skill (``skill.md``).
Unknown names raise the SDK's ``ResourceNotFoundError`` (JSON-RPC -32602, no traceback).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from typing import Annotated, Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ResourceNotFoundError
from pydantic import Field

from ..knowledge import docs

MARKDOWN = "text/markdown"
JSON = "application/json"


def _not_found(kind: str, name: str, known: list[str]) -> ResourceNotFoundError:
    listed = ", ".join(known[:30]) + (" ..." if len(known) > 30 else "")
    return ResourceNotFoundError(f"no {kind} named {name!r}; known: {listed or '(none)'}")


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
        raise ResourceNotFoundError("skill.md is not installed with this package")
    return text


def _bound(read: Callable[[str], str], name: str) -> Callable[[], str]:
    """A no-argument reader for one static resource (the SDK rejects handler parameters without URI variables)."""

    def handler() -> str:
        return read(name)

    handler.__name__ = f"read_{name}"
    return handler


def _register_resources(server: MCPServer) -> None:
    for name in docs.list_docs():
        server.resource(
            f"{docs.REFERENCE_SCHEME}{name}",
            name=f"reference-{name}",
            title=f"XTuner RL reference: {name}",
            description=f"XTuner V1 RL reference '{name}' (markdown, true to InternLM/xtuner@b934f46)",
            mime_type=MARKDOWN,
        )(_bound(reference, name))

    @server.resource(
        f"{docs.REFERENCE_SCHEME}{{name}}",
        name="reference",
        title="XTuner RL reference document",
        description="One markdown reference by name: workflows, cluster-and-backends, api-reference, "
        "data-contract, troubleshooting",
        mime_type=MARKDOWN,
    )
    def _reference(name: str) -> str:
        return reference(name)

    @server.resource(
        f"{docs.REFERENCE_SCHEME}{{name}}{{#anchor}}",
        name="reference-section",
        title="One section of an XTuner RL reference",
        description="One section by document name and heading anchor, as cited by findings",
        mime_type=MARKDOWN,
    )
    def _reference_section(name: str, anchor: str) -> str:
        return reference_section(name, anchor)

    @server.resource(
        docs.FAILURE_MODE_SCHEME.rstrip("/"),
        name="failure-modes",
        title="Failure-mode catalog index",
        description="Every catalog entry: id, title, category and the URI of its full JSON",
        mime_type=JSON,
    )
    def _failure_modes() -> str:
        return failure_mode_index()

    @server.resource(
        f"{docs.FAILURE_MODE_SCHEME}{{id}}",
        name="failure-mode",
        title="One failure-mode catalog entry",
        description="Catalog entry as JSON: category, title, log patterns, cause, ordered fix steps, the tool "
        "that confirms it, reference anchor and XTuner source line",
        mime_type=JSON,
    )
    def _failure_mode(id: str) -> str:
        return failure_mode(id)

    for name in docs.list_schemas():
        server.resource(
            f"{docs.SCHEMA_SCHEME}{name}",
            name=f"schema-{name}",
            title=f"JSON Schema {name}",
            description="JSON Schema (2020-12) shipped with the server",
            mime_type="application/schema+json",
        )(_bound(schema, name))

    @server.resource(
        f"{docs.SCHEMA_SCHEME}{{name}}",
        name="schema",
        title="JSON Schema by name",
        description="A JSON Schema shipped with the server, e.g. rl-sample.schema.json (a training/eval JSONL line)",
        mime_type="application/schema+json",
    )
    def _schema(name: str) -> str:
        return schema(name)

    @server.resource(
        docs.SKILL_URI,
        name="skill",
        title="Agent Skill: XTuner RL with this server",
        description="When to route here, the fast operating procedure and worked hard cases (skill.md)",
        mime_type=MARKDOWN,
    )
    def _skill() -> str:
        return skill()


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


def _register_prompts(server: MCPServer) -> None:
    @server.prompt(
        name="plan_grpo_run",
        title="Plan an XTuner GRPO run",
        description="Checked launch plan for a GRPO run: which tools to call, in which order, with your inputs",
    )
    def plan_grpo_run(
        nodes: Annotated[str, Field(description="Number of nodes")] = "1",
        gpus_per_node: Annotated[str, Field(description="GPUs per node")] = "8",
        model: Annotated[str, Field(description="Hugging Face model directory")] = "<MODEL_PATH>",
        backend: Annotated[str, Field(description="Rollout backend: lmdeploy or sglang")] = "lmdeploy",
        train_data: Annotated[str, Field(description="Training JSONL path")] = "<train.jsonl>",
        eval_data: Annotated[str, Field(description="Evaluation JSONL path (optional)")] = "",
        mode: Annotated[str, Field(description="Topology wish: sync, async, disaggregated or auto")] = "auto",
    ) -> str:
        return plan_prompt(nodes, gpus_per_node, model, backend, train_data, eval_data, mode)

    @server.prompt(
        name="diagnose_failed_run",
        title="Diagnose a failed XTuner RL run",
        description="Which tools to call, in which order, to find the cause of a failed or stuck run",
    )
    def diagnose_failed_run(
        log_excerpt: Annotated[str, Field(description="The failing log text (last lines, traceback)")] = "",
        log_path: Annotated[str, Field(description="Path of the log file, if no excerpt is given")] = "",
    ) -> str:
        return diagnose_prompt(log_excerpt, log_path)


def register(server: MCPServer) -> None:
    """Register resources and prompts."""
    _register_resources(server)
    _register_prompts(server)
