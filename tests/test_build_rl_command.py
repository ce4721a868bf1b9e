"""build_rl_command semantics: env, argv, Ray commands, findings and input errors, checked against XTuner b934f46.

Configs are real files in tmp_path; the tool is called directly and through the real in-memory MCP client.
The launch scripts themselves are run (with stub ``python`` and ``ray``) in test_build_rl_command_shell.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from xtuner_rl_mcp.config_analysis.view import view_of_source
from xtuner_rl_mcp.core import CATEGORIES, PathPolicy, RunContext, ToolInputError
from xtuner_rl_mcp.knowledge import docs
from xtuner_rl_mcp.operations.build_rl_command import Params, run

FLAGS = {"sglang": "XTUNER_USE_SGLANG", "vllm": "XTUNER_USE_VLLM", "lmdeploy": "XTUNER_USE_LMDEPLOY"}

COLOCATE = """\
import os
from xtuner.v1.rl.utils import AcceleratorResourcesConfig
from xtuner.v1.train.rl_trainer import RLColocateTrainerConfig
work_dir = os.environ["WORK_DIR"]
model_path = os.environ["MODEL_PATH"]
data_path = os.environ["DATA_PATH"]
eval_data_path = os.environ["EVAL_DATA_PATH"]
NNODE = int(os.environ.get("WORLD_SIZE", "1"))
resources = AcceleratorResourcesConfig(num_workers=8 * NNODE, num_cpus_per_worker=12, cpu_memory_per_worker=16 * 1024**3)
trainer = RLColocateTrainerConfig(resources=resources, work_dir=work_dir)
"""

DISAGG = """\
import os
from xtuner.v1.train.rl_trainer import RLDisaggregatedTrainerConfig
work_dir = os.environ["WORK_DIR"]
trainer = RLDisaggregatedTrainerConfig(train_resources=None, rollout_resources=None)
"""


@pytest.fixture
def root(tmp_path: Path) -> Path:
    (tmp_path / "colocate.py").write_text(COLOCATE)
    (tmp_path / "disagg.py").write_text(DISAGG)
    (tmp_path / "model").mkdir()
    (tmp_path / "train.jsonl").write_text("{}\n")
    (tmp_path / "eval.jsonl").write_text("{}\n")
    return tmp_path


def _ctx(root: Path) -> RunContext:
    return RunContext(paths=PathPolicy.from_strings([root]))


def _plan(root: Path, **kw):
    args = {
        "config": str(root / "colocate.py"),
        "backend": "lmdeploy",
        "model_path": str(root / "model"),
        "data_path": str(root / "train.jsonl"),
        "eval_data_path": str(root / "eval.jsonl"),
        "work_dir": str(root / "work"),
    }
    args.update(kw)
    return run(Params(**args), _ctx(root))


def _ids(result) -> dict[str, str]:
    return {f.id: f.severity for f in result.findings}


def test_single_node_lmdeploy_plan(root: Path) -> None:
    r = _plan(root)
    assert list(r.env) == [
        "XTUNER_USE_LMDEPLOY",
        "PYTORCH_CUDA_ALLOC_CONF",
        "WORLD_SIZE",
        "WORK_DIR",
        "MODEL_PATH",
        "DATA_PATH",
        "EVAL_DATA_PATH",
    ]
    assert r.env["XTUNER_USE_LMDEPLOY"] == "1"
    assert r.env["PYTORCH_CUDA_ALLOC_CONF"] == "expandable_segments:True"
    assert r.env["WORLD_SIZE"] == "1"
    assert r.env["WORK_DIR"] == str(root / "work")  # exported although --work-dir is passed too
    assert r.unset == ["XTUNER_USE_SGLANG", "XTUNER_USE_VLLM", "RAY_ADDRESS"]
    assert r.argv == [
        "python",
        "-m",
        "xtuner.v1.train.cli.rl",
        "--config",
        str(root / "colocate.py"),
        "--work-dir",
        str(root / "work"),
        "--num-workers",
        "8",
    ]
    assert r.num_workers == 8 and r.trainer_kind == "colocate"
    assert r.ray_start.head_argv == ["ray", "start", "--head", "--port=6379", "--num-gpus=8"]
    assert r.ray_start.worker is None and r.ray_start.worker_script is None
    assert r.ray_start.expected_gpus == 8
    assert r.findings == [] and "0 blocker(s)" in r.summary
    assert set(r.env_origin) == set(r.env) | set(r.unset)
    assert "run_rl.sh:69" in r.env_origin["PYTORCH_CUDA_ALLOC_CONF"]
    assert any("ray stop --force" in n and "ray_utils.py:117-156" in n for n in r.notes)


def test_script_order_exports_before_ray_start(root: Path) -> None:
    r = _plan(root, backend="sglang")
    s = r.script
    assert s.startswith("#!/usr/bin/env bash\n") and "\nset -euo pipefail\n" in s
    order = [
        s.index("set -euo pipefail"),
        s.index("unset -v XTUNER_USE_VLLM XTUNER_USE_LMDEPLOY RAY_ADDRESS PYTORCH_CUDA_ALLOC_CONF"),
        s.index("export XTUNER_USE_SGLANG=1"),
        s.index("ray start --head"),
        s.index("ray status"),
        s.index(r.command),
    ]
    assert order == sorted(order)
    assert r.exports in s


@pytest.mark.parametrize("backend", ["lmdeploy", "sglang", "vllm"])
def test_exactly_one_backend_flag(root: Path, backend: str) -> None:
    r = _plan(root, backend=backend, allow_unsupported=True)
    flags = {k: v for k, v in r.env.items() if k.startswith("XTUNER_USE_")}
    assert flags == {FLAGS[backend]: "1"}
    assert sorted(n for n in r.unset if n.startswith("XTUNER_USE_")) == sorted(set(FLAGS.values()) - {FLAGS[backend]})
    if backend == "sglang":
        assert "PYTORCH_CUDA_ALLOC_CONF" in r.unset and "PYTORCH_CUDA_ALLOC_CONF" not in r.env
        assert r.env["SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN"] == "1"
        assert r.env["SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION"] == "False"
    else:
        assert r.env["PYTORCH_CUDA_ALLOC_CONF"] == "expandable_segments:True"


def test_extra_env_overrides_backend_default(root: Path) -> None:
    r = _plan(root, backend="sglang", extra_env={"PYTORCH_CUDA_ALLOC_CONF": "x", "XTUNER_USE_FA3": "1"})
    assert "PYTORCH_CUDA_ALLOC_CONF" not in r.unset
    assert list(r.env)[-2:] == ["PYTORCH_CUDA_ALLOC_CONF", "XTUNER_USE_FA3"]
    assert r.env["PYTORCH_CUDA_ALLOC_CONF"] == "x"
    assert r.env_origin["XTUNER_USE_FA3"].startswith("extra_env")


def test_vllm_blocked_then_allowed(root: Path) -> None:
    blocked = _plan(root, backend="vllm")
    f = blocked.findings[0]
    assert (f.id, f.severity, f.category) == ("cmd.backend_vllm_unsupported", "blocker", "backend_unsupported")
    assert f.source == "xtuner/v1/rl/rollout/vllm.py:135-142"
    assert "do not launch" in blocked.summary
    allowed = _plan(root, backend="vllm", allow_unsupported=True)
    assert _ids(allowed) == {"cmd.backend_vllm_unsupported": "warning"}
    assert allowed.env["XTUNER_USE_VLLM"] == "1"


def test_disaggregated_num_workers_warning(root: Path) -> None:
    r = _plan(root, config=str(root / "disagg.py"), num_workers=4)
    assert r.trainer_kind == "disaggregated"
    assert _ids(r) == {"cmd.num_workers_ignored_disagg": "warning"}
    f = r.findings[0]
    assert "train_resources.num_workers" in f.fix and "rollout_resources.num_workers" in f.fix
    assert f.source == "xtuner/v1/train/cli/rl.py:58-61" and f.location == f"{root / 'disagg.py'}:4"
    assert "--num-workers" not in r.argv and r.num_workers is None
    quiet = _plan(root, config=str(root / "disagg.py"))
    assert quiet.findings == [] and "--num-workers" not in quiet.argv
    assert any("Disaggregated" in n for n in quiet.notes)


def test_num_workers_default_and_exceeding(root: Path) -> None:
    ok = _plan(root, nodes=2, gpus_per_node=4, head_address="head-0")
    assert ok.argv[-2:] == ["--num-workers", "8"] and ok.findings == []
    assert _plan(root, num_workers=8).findings == []
    over = _plan(root, num_workers=9)
    f = over.findings[0]
    assert (f.id, f.severity, f.category) == (
        "cmd.num_workers_exceeds_gpus",
        "blocker",
        "resource_mismatch_num_workers",
    )
    assert "8.0 less than 9" in f.evidence and over.argv[-1] == "9"


def test_config_missing_trainer(root: Path) -> None:
    (root / "no_trainer.py").write_text("import os\ntrainer_cfg = dict()\n")
    r = _plan(root, config=str(root / "no_trainer.py"))
    assert r.trainer_kind == "missing"
    f = r.findings[0]
    assert (f.id, f.severity, f.category) == ("cmd.config_missing_trainer", "blocker", "config_load_error")
    assert "not callable" in f.evidence and f.source == "xtuner/v1/train/cli/rl.py:62"


def test_config_syntax_error_and_suffix(root: Path) -> None:
    (root / "broken.py").write_text("trainer = (\n")
    assert _ids(_plan(root, config=str(root / "broken.py"))) == {"cmd.config_syntax_error": "blocker"}
    (root / "cfg.yaml").write_text("trainer: {}\n")
    assert _ids(_plan(root, config=str(root / "cfg.yaml"))) == {"cmd.config_not_python": "blocker"}


def test_config_env_vars_the_plan_does_not_set(root: Path) -> None:
    r = _plan(root, eval_data_path=None)
    (f,) = r.findings
    assert f.id == "cmd.config_env_var_unset" and f.severity == "warning"
    assert f.location == f"{root / 'colocate.py'}:7" and "eval_data_path" in f.fix
    (root / "custom.py").write_text('import os\nx = os.environ["GSM8K_DATA_PATH"]\ntrainer = 1\n')
    r = _plan(root, config=str(root / "custom.py"))
    assert [f.title for f in r.findings] == [
        "the config reads os.environ['GSM8K_DATA_PATH'] but the plan does not set it"
    ]
    assert _plan(root, config=str(root / "custom.py"), extra_env={"GSM8K_DATA_PATH": "/d"}).findings == []


def test_config_env_var_guarded_reads_are_not_flagged(root: Path) -> None:
    (root / "guarded.py").write_text(
        "import os\n"
        'n = int(os.environ["STEPS"]) if os.environ.get("STEPS") else None\n'
        'm = os.environ["MEDIA"] if "MEDIA" in os.environ else ""\n'
        'k = os.environ["K"]\n'
        "trainer = RLColocateTrainerConfig()\n"
    )
    r = _plan(root, config=str(root / "guarded.py"))
    assert [(f.id, f.location) for f in r.findings] == [("cmd.config_env_var_unset", f"{root / 'guarded.py'}:4")]


def test_config_with_a_non_rl_trainer(root: Path) -> None:
    (root / "sft.py").write_text("from xtuner.v1.train import TrainerConfig\ntrainer = TrainerConfig()\n")
    r = _plan(root, config=str(root / "sft.py"))
    assert _ids(r) == {"cmd.config_not_rl_trainer": "warning"}
    assert "TrainerConfig" in r.findings[0].title and r.trainer_kind == "unknown"


@pytest.mark.parametrize(
    "source,kind",
    [
        ("from x import RLColocateTrainerConfig as C\ntrainer = C()\n", "unknown"),
        ("from x import *\n", "unknown"),
        ("from cfgs import trainer\n", "unknown"),
        ("cfg = RLDisaggregatedTrainerConfig()\ntrainer = cfg\n", "disaggregated"),
        ("if True:\n    trainer = x.RLColocateTrainerConfig()\n", "colocate"),
        ("def trainer():\n    pass\n", "unknown"),
        ("def f():\n    trainer = RLColocateTrainerConfig()\n", "missing"),
        ("try:\n    import a\nexcept ImportError:\n    trainer = RLColocateTrainerConfig()\n", "colocate"),
    ],
)
def test_trainer_detection(source: str, kind: str) -> None:
    assert view_of_source("cfg.py", source, None).facts.trainer == kind


def test_check_paths(root: Path, tmp_path_factory) -> None:
    outside = tmp_path_factory.mktemp("elsewhere")
    (outside / "c.py").write_text(COLOCATE)
    r = _plan(
        root,
        check_paths=True,
        model_path=str(root / "missing-model"),
        data_path=str(root / "model"),  # a directory: allowed for data (kind "any")
        eval_data_path=str(outside / "c.py"),
        work_dir=str(root / "not-yet"),  # the trainer creates it: no finding
    )
    by_loc = {f.location: (f.id, f.severity) for f in r.findings}
    assert by_loc == {
        "/model_path": ("cmd.path_missing", "warning"),
        "/eval_data_path": ("cmd.path_not_checked", "info"),
    }
    assert all(f.category in CATEGORIES for f in r.findings)
    assert "another machine" in r.findings[0].fix
    wrong = _plan(root, check_paths=True, model_path=str(root / "train.jsonl"))
    assert {f.location: f.id for f in wrong.findings} == {"/model_path": "cmd.path_wrong_kind"}
    assert _plan(root, check_paths=True).findings == []


def test_config_outside_roots_is_not_read(root: Path, tmp_path_factory) -> None:
    outside = tmp_path_factory.mktemp("other")
    (outside / "c.py").write_text("x = 1\n")  # would be config_missing_trainer if it were read
    r = _plan(root, config=str(outside / "c.py"))
    assert r.findings == [] and r.trainer_kind == "unknown"
    assert any("not analysed" in n and "outside the allowed roots" in n for n in r.notes)


def test_script_entry_and_leading_dash(root: Path) -> None:
    r = _plan(root, entry="script", config="-cfg.py", work_dir="--w", python="/opt/venv/bin/python3")
    assert r.argv[:2] == ["/opt/venv/bin/python3", "xtuner/v1/train/cli/rl.py"]
    assert r.argv[2:6] == ["--config", "./-cfg.py", "--work-dir", "./--w"]
    assert r.env["WORK_DIR"] == "--w"
    assert any("repository root" in n for n in r.notes)


def test_multi_node(root: Path) -> None:
    r = _plan(root, backend="sglang", nodes=3, gpus_per_node=4, head_address="10.1.2.3", ray_port=6380)
    assert r.env["WORLD_SIZE"] == "3"
    assert r.ray_start.head_argv == ["ray", "start", "--head", "--port=6380", "--num-gpus=4"]
    assert r.ray_start.worker_argv == ["ray", "start", "--address=10.1.2.3:6380", "--num-gpus=4"]
    assert r.ray_start.expected_gpus == 12 and "xtuner_rl_expected_gpus=12" in r.script
    ws = r.ray_start.worker_script
    assert ws is not None and r.exports in ws and ws.index(r.exports) < ws.index("ray start --address")
    assert "ray start --head" not in ws and "xtuner.v1.train.cli.rl" not in ws
    assert r.argv[-1] == "12"


def test_tilde_and_dollar_paths_warn(root: Path) -> None:
    r = _plan(root, model_path="~/models/x", data_path="$DATA/train.jsonl")
    assert sorted(f.location for f in r.findings if f.id == "cmd.path_not_expanded") == ["/data_path", "/model_path"]
    assert r.env["MODEL_PATH"] == "~/models/x"


@pytest.mark.parametrize(
    "kw,code",
    [
        ({"config": "a\nb.py"}, "unsafe_shell_value"),
        ({"model_path": "m\x00"}, "unsafe_shell_value"),
        ({"data_path": "d\r"}, "unsafe_shell_value"),
        ({"work_dir": "w\tx"}, "unsafe_shell_value"),
        ({"work_dir": "w\u202ex"}, "unsafe_shell_value"),
        ({"work_dir": ""}, "value_empty"),
        ({"extra_env": {"A": "1\n2"}}, "unsafe_shell_value"),
        ({"extra_env": {"1A": "x"}}, "invalid_env_name"),
        ({"extra_env": {"A-B": "x"}}, "invalid_env_name"),
        ({"extra_env": {"PATH": "/x"}}, "reserved_env_name"),
        ({"extra_env": {"BASH_ENV": "/x"}}, "reserved_env_name"),
        ({"extra_env": {"xtuner_rl_check": "1"}}, "reserved_env_name"),
        ({"extra_env": {"XTUNER_USE_SGLANG": "1"}}, "env_conflict"),
        ({"extra_env": {"WORK_DIR": "/w"}}, "env_conflict"),
        ({"extra_env": {"WORLD_SIZE": "2"}}, "env_conflict"),
        ({"python": "eval"}, "invalid_program"),
        ({"python": "if"}, "invalid_program"),
        ({"python": "py thon"}, "invalid_program"),
        ({"python": "A=b"}, "invalid_program"),
        ({"nodes": 2}, "head_address_required"),
        ({"nodes": 2, "head_address": "-h"}, "invalid_head_address"),
        ({"nodes": 2, "head_address": "h;x"}, "invalid_head_address"),
    ],
)
def test_input_errors(root: Path, kw: dict, code: str) -> None:
    with pytest.raises(ToolInputError) as exc:
        _plan(root, **kw)
    assert exc.value.code == code and exc.value.message


def test_findings_are_well_formed(root: Path) -> None:
    (root / "bad.yaml").write_text("x: 1\n")
    r = _plan(root, backend="vllm", config=str(root / "bad.yaml"), num_workers=100, check_paths=True, model_path="~/m")
    assert len(r.findings) >= 3
    sev = [f.severity for f in r.findings]
    assert sev == sorted(sev, key=["blocker", "warning", "info"].index)
    (root / "sft.py").write_text("trainer = TrainerConfig()\nx = os.environ['X']\n")
    (root / "disagg2.py").write_text(DISAGG)
    (root / "broken.py").write_text("trainer = (\n")
    (root / "empty.py").write_text("\n")
    more = [
        *_plan(root, config=str(root / "sft.py"), model_path="$M").findings,
        *_plan(root, config=str(root / "disagg2.py"), num_workers=2, check_paths=True, data_path="/nope").findings,
        *_plan(
            root,
            config=str(root / "colocate.py"),
            eval_data_path=None,
            model_path=str(root / "eval.jsonl"),
            check_paths=True,
        ).findings,
    ]
    more += _plan(root, config=str(root / "broken.py")).findings + _plan(root, config=str(root / "empty.py")).findings
    more += _plan(root, check_paths=True, model_path=str(root / "absent")).findings
    ids = set()
    for f in [*r.findings, *more]:
        ids.add(f.id)
        assert f.id.startswith("cmd.") and f.category in CATEGORIES and f.fix
        assert docs.resolve_reference_uri(f.reference) is not None, f.reference  # the cited section exists
    assert len(ids) == 12, ids


# ---------------------------------------------------------------------------------------------------------
# Through the real MCP client
# ---------------------------------------------------------------------------------------------------------


def _error(result) -> dict:
    text = result.content[0].text
    return json.loads(text[text.index("{") :])["error"]


@pytest.mark.anyio
async def test_mcp_listed_with_schema(mcp_client) -> None:
    tools = {t.name: t for t in (await mcp_client.list_tools()).tools}
    tool = tools["build_rl_command"]
    assert tool.input_schema["required"] == ["config", "backend"]
    assert tool.input_schema["properties"]["backend"]["enum"] == ["lmdeploy", "sglang", "vllm"]
    assert "Use when:" in tool.description and "Not for:" in tool.description
    assert tool.output_schema["properties"]["summary"]["type"] == "string"
    assert tool.annotations.read_only_hint and not tool.annotations.open_world_hint


@pytest.mark.anyio
async def test_mcp_call_structured(mcp_client, tmp_path: Path) -> None:
    (tmp_path / "cfg.py").write_text(DISAGG)
    r = await mcp_client.call_tool(
        "build_rl_command",
        {
            "config": "cfg.py",
            "backend": "sglang",
            "work_dir": "/w",
            "num_workers": 2,
            "extra_env": {"B": "2", "A": "1"},
        },
    )
    assert not r.is_error
    out = r.structured_content
    assert out["trainer_kind"] == "disaggregated"
    assert [f["id"] for f in out["findings"]] == ["cmd.num_workers_ignored_disagg"]
    assert list(out["env"])[-2:] == ["B", "A"]  # caller's order kept
    assert out["argv"] == ["python", "-m", "xtuner.v1.train.cli.rl", "--config", "cfg.py", "--work-dir", "/w"]


@pytest.mark.anyio
async def test_mcp_input_errors_are_structured(mcp_client) -> None:
    r = await mcp_client.call_tool("build_rl_command", {"config": "a\nb.py", "backend": "sglang"})
    assert r.is_error and _error(r)["code"] == "unsafe_shell_value"
    r = await mcp_client.call_tool("build_rl_command", {"config": "a.py", "backend": "tensorrt"})
    assert r.is_error and "backend" in r.content[0].text  # rejected by the SDK's argument validation
    r = await mcp_client.call_tool("build_rl_command", {"config": "a.py", "backend": "sglang", "gpus": 8})
    assert r.is_error
    assert "Traceback" not in r.content[0].text


def test_ray_need_from_the_config_and_pinned_resources(root: Path) -> None:
    """16 workers x (12 CPU, 16 GiB): 202 CPUs and 266 GiB in total; each 8-GPU node holds 96 CPUs and 128 GiB of
    bundles; the +10 headroom is cluster-wide, so the same ray start on both nodes needs 101 CPUs and 133 GiB."""
    r = _plan(root, nodes=2, head_address="10.0.0.1")
    n = r.ray_need
    assert (n.known, n.accelerators, n.cpus, n.memory_gib) == (True, 16, 202, 266)
    assert (n.per_node_cpus, n.per_node_memory_gib) == (96, 128)
    assert (n.uniform_node_cpus, n.uniform_node_memory_gib) == (101, 133)
    assert "16 workers × 12 CPU + 10 = 202 CPUs" in n.arithmetic and "colocate.py:" in n.arithmetic
    assert "Ray must offer 16 GPUs, 202 CPUs, 266 GiB (each node holds 96 CPUs, 128 GiB of worker bundles" in r.summary
    assert "same ray start on every node needs 101 CPUs, 133 GiB" in r.summary
    assert (r.ray_start.expected_cpus, r.ray_start.expected_memory_gib) == (202, 266)
    assert "--num-cpus" not in r.ray_start.head  # not pinned unless asked; the script checks instead
    pinned = _plan(root, nodes=2, head_address="10.0.0.1", ray_num_cpus=100, ray_memory_gib=200)
    assert pinned.ray_start.head_argv[-2:] == ["--num-cpus=100", f"--memory={200 * 1024**3}"]
    assert pinned.ray_start.worker_argv[-2:] == ["--num-cpus=100", f"--memory={200 * 1024**3}"]
    f = {x.id: x for x in pinned.findings}
    assert f["cmd.ray_cpus_pinned_short"].severity == "blocker"
    assert "ray_num_cpus=101" in f["cmd.ray_cpus_pinned_short"].fix
    assert "cmd.ray_memory_pinned_short" not in f  # 2 x 200 GiB covers 266 GiB
    assert pinned.summary.startswith("lmdeploy launch on 2 node(s)") and "first: ray_num_cpus=100" in pinned.summary


def test_ray_need_unknown_says_why(root: Path) -> None:
    r = _plan(root, config=str(root / "disagg.py"))
    assert not r.ray_need.known and r.ray_need.why_unknown
    assert "Ray CPUs/memory not computed" in r.summary and "# 3b." not in r.script
