"""The shipped references: required anchors, a citation on every section, citations that exist upstream, skill.md."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest
from xtuner_rl_mcp.knowledge import docs

from .upstream import COMMIT, MIRROR

#: Anchors other tools link to (issue 3); each document must keep headings with exactly these slugs.
REQUIRED_ANCHORS: dict[str, list[str]] = {
    "workflows": [
        "topologies",
        "colocated-sync",
        "colocated-async",
        "disaggregated",
        "choosing-a-topology",
        "async-knobs",
        "effective-staleness",
        "train-batch-size",
    ],
    "cluster-and-backends": [
        "ray-preparation",
        "exit-handler-stops-ray",
        "env-vars-reach-ray-workers",
        "backend-flags",
        "backend-support",
        "resource-checks",
        "external-cpu-pools",
        "divisibility-rules",
        "placement-group-reuse",
        "ports",
        "tracing-requirements",
    ],
    "api-reference": [
        "baserltrainerconfig",
        "interval-validation",
        "rlcolocatetrainerconfig",
        "rldisaggregatedtrainerconfig",
        "workerconfig",
        "rolloutconfig",
        "agentloopmanagerconfig",
        "taskspecconfig",
        "samplerconfig",
        "produce-strategies",
        "replay-buffers",
        "agent-loops",
        "judgers",
        "advantage-and-loss",
        "evaluatorconfig",
        "resources",
        "traceconfig",
        "sampleparams",
        "docstring-errata",
    ],
    "data-contract": [
        "line-contract",
        "prompt",
        "data-source",
        "reward-model",
        "extra-info",
        "gsm8k-scoring",
        "conversion",
        "length-limits",
        "common-mistakes",
    ],
}
MY_DOCS = sorted(REQUIRED_ANCHORS)


@pytest.mark.parametrize("doc", MY_DOCS)
def test_required_anchors_exist(doc: str) -> None:
    anchors = {s.anchor for s in docs.sections(doc)}
    missing = [a for a in REQUIRED_ANCHORS[doc] if a not in anchors]
    assert not missing, f"{doc}.md lacks headings for anchors {missing}"


@pytest.mark.parametrize("doc", MY_DOCS)
def test_every_section_cites_its_source(doc: str) -> None:
    secs = docs.sections(doc)
    assert len(secs) >= len(REQUIRED_ANCHORS[doc])
    uncited = [s.heading for s in secs if s.level in (2, 3) and not s.sources]
    assert not uncited, f"{doc}.md sections without a 'Source: path:line' line: {uncited}"


@pytest.mark.parametrize("doc", MY_DOCS)
def test_anchors_are_unique_and_linkable(doc: str) -> None:
    anchors = [s.anchor for s in docs.sections(doc)]
    assert len(anchors) == len(set(anchors))
    for a in anchors:
        assert re.fullmatch(r"[a-z0-9_-]+", a), a


def test_internal_links_resolve() -> None:
    """Relative links between the references ('file.md#anchor' or '#anchor') point at real sections."""
    link = re.compile(r"\]\((?:([a-z-]+)\.md)?#([a-z0-9_-]+)\)")
    broken = []
    for doc in MY_DOCS:
        text = docs.read_doc(doc)
        assert text is not None
        for target_doc, anchor in link.findall(text):
            if docs.find_section(target_doc or doc, anchor) is None:
                broken.append(f"{doc}: {target_doc or doc}#{anchor}")
    assert not broken, broken


def _upstream_files() -> dict[str, int]:
    """Path -> line count of every file at the pinned commit (needs the local mirror)."""
    if not MIRROR.is_dir() or shutil.which("git") is None:
        pytest.skip("XTuner mirror not available (CI has none)")
    names = subprocess.run(
        ["git", "-C", str(MIRROR), "ls-tree", "-r", "--name-only", COMMIT],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout.split()
    return dict.fromkeys(names, -1)


def _line_count(path: str) -> int:
    out = subprocess.run(
        ["git", "-C", str(MIRROR), "show", f"{COMMIT}:{path}"], capture_output=True, check=True, timeout=60
    ).stdout
    return out.count(b"\n") + (0 if out.endswith(b"\n") or not out else 1)


def test_cited_paths_and_lines_exist_upstream() -> None:
    files = _upstream_files()
    cited: dict[str, int] = {}
    for doc in MY_DOCS:
        for s in docs.sections(doc):
            for cite in s.sources:
                path, _, lines = cite.partition(":")
                last = max(int(x) for x in re.split(r"[-,]", lines))
                cited[path] = max(cited.get(path, 0), last)
    assert cited
    missing = sorted(p for p in cited if p not in files)
    assert not missing, f"cited files not in XTuner@{COMMIT}: {missing}"
    too_far = [f"{p}:{n}" for p, n in cited.items() if n > _line_count(p)]
    assert not too_far, f"citations beyond the end of the file: {too_far}"


@pytest.mark.parametrize(
    "heading,slug",
    [
        ("Backend flags", "backend-flags"),
        ("`RolloutConfig`", "rolloutconfig"),
        ("max_staleness", "max_staleness"),
        ("Advantage and loss", "advantage-and-loss"),
        ("sync_weights_interval and the other intervals", "sync_weights_interval-and-the-other-intervals"),
        ("Hard case 2: pre-launch diagnosis - no ground truth", "hard-case-2-pre-launch-diagnosis---no-ground-truth"),
        ("[Link](x.md) text", "link-text"),
    ],
)
def test_slugify_is_github_style(heading: str, slug: str) -> None:
    assert docs.slugify(heading) == slug


def test_split_sections_ignores_code_fences_and_numbers_duplicates() -> None:
    md = "# T\n\n## A\nSource: a.py:1\n```\n## not a heading\n```\n## A\nbody\n"
    secs = docs.split_sections("x", md)
    assert [(s.level, s.anchor) for s in secs] == [(1, "t"), (2, "a"), (2, "a-1")]
    assert secs[1].sources == ("a.py:1",)
    assert "## not a heading" in secs[1].text


def test_resolve_reference_uri() -> None:
    s = docs.resolve_reference_uri("xtuner-rl://references/cluster-and-backends#backend-flags")
    assert s is not None and s.heading == "Backend flags" and s.sources
    assert s.uri == "xtuner-rl://references/cluster-and-backends#backend-flags"
    whole = docs.resolve_reference_uri("xtuner-rl://references/data-contract")
    assert whole is not None and whole.doc == "data-contract" and whole.level == 1
    assert docs.resolve_reference_uri("xtuner-rl://references/data-contract#no-such-anchor") is None
    assert docs.resolve_reference_uri("xtuner-rl://references/nope#prompt") is None
    assert docs.resolve_reference_uri("xtuner-rl://references/../etc/passwd") is None
    assert docs.resolve_reference_uri("https://example.com/x") is None


def test_failure_mode_uris_resolve_through_the_catalog() -> None:
    entries = docs.catalog_sections()
    if not entries:
        pytest.skip("failure-mode catalog not available")
    first = entries[0]
    resolved = docs.resolve_reference_uri(f"xtuner-rl://failure-modes/{first.anchor}")
    assert resolved is not None and resolved.heading == first.heading
    assert docs.resolve_reference_uri("xtuner-rl://failure-modes/does_not_exist") is None


def test_docs_listed_and_read_from_package_data() -> None:
    names = docs.list_docs()
    assert set(MY_DOCS) <= set(names)
    assert docs.read_doc("workflows.md") == docs.read_doc("workflows")
    assert docs.read_doc("missing") is None
    assert docs.read_schema("rl-sample") is not None or "rl-sample.schema.json" not in docs.list_schemas()


def test_skill_front_matter_and_content() -> None:
    yaml = pytest.importorskip("yaml")
    text = docs.read_skill()
    assert text is not None and text.startswith("---\n")
    front, _, body = text[4:].partition("\n---\n")
    meta = yaml.safe_load(front)
    assert set(meta) >= {"name", "description"}
    assert re.fullmatch(r"[a-z0-9-]{1,64}", meta["name"])
    assert 50 <= len(meta["description"]) <= 1024
    for tool in (
        "lookup_reference",
        "choose_topology",
        "check_reward_data",
        "inspect_config",
        "probe_environment",
        "build_rl_command",
        "preflight",
        "diagnose_symptom",
    ):
        assert f"`{tool}`" in body, tool
    lowered = body.lower()
    for route in ("data preparation", "sft training", "model backends", "legacy cli"):
        assert route in lowered, route
    # the corrections the issue asks for
    for fact in ("NotImplementedError", "only `tasks`", "no `backend` field", "WORK_DIR", "ray stop --force"):
        assert fact in body, fact
    assert "Hard case 1" in body and "Hard case 2" in body


def test_audited_statements_say_what_the_code_does() -> None:
    """Statements an audit found wrong at b934f46, as the references now state them (each failed on the old text)."""
    workflows = docs.read_doc("workflows") or ""
    # One health check is bounded by RolloutConfig.health_check_timeout_seconds (15 s), not by
    # XTUNER_ROLLOUT_RAY_GET_TIMEOUT (health_manager.py:120-122, 344-349; worker.py:418-427).
    health = next(line for line in workflows.splitlines() if line.startswith("| one health check"))
    assert "15 s" in health and "health_check_timeout_seconds" in health
    ray_get = next(line for line in workflows.splitlines() if "XTUNER_ROLLOUT_RAY_GET_TIMEOUT" in line)
    assert "health" not in ray_get
    # The training NCCL groups are suspended after every colocated sync and resumed before the next train step
    # (rl_trainer.py:1844-1855, 955-959), not only after the first one.
    for doc in ("workflows", "cluster-and-backends"):
        paragraphs = re.split(r"\n(?=- |\| )", docs.read_doc(doc) or "")
        text = " ".join(next(p for p in paragraphs if "XTUNER_SUSPEND_TRAIN_NCCL_AFTER_SYNC" in p).split())
        assert "after every colocated weight sync" in text and "first" not in text, text
