"""Accelerators this machine shows: GPUs listed by ``nvidia-smi`` (run with a timeout), ``npu-smi``, and how many
``CUDA_VISIBLE_DEVICES`` leaves visible."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Mapping

from pydantic import BaseModel, Field

from ..core import Finding
from .findings import probe_finding

SRC_PG_CHECKS = "xtuner/v1/rl/utils/ray_accelerator_worker.py:94-122"


class GpuInfo(BaseModel):
    index: int
    name: str
    memory_total_mib: int | None = None


class AcceleratorsReport(BaseModel):
    nvidia_smi: str | None
    npu_smi: str | None
    gpus: list[GpuInfo] = Field(default_factory=list)
    cuda_visible_devices: str | None = None
    visible_count: int | None = Field(default=None, description="GPUs visible after CUDA_VISIBLE_DEVICES, if known")
    error: str = ""


def visible_count(cvd: str | None, physical: int | None) -> int | None:
    if cvd is None:
        return physical
    ids = [x for x in cvd.split(",") if x.strip()]
    # CUDA stops at the first invalid entry; '-1' or empty hides every device.
    count = 0
    for x in ids:
        if x.strip().startswith("-"):
            break
        count += 1
    return count if physical is None else min(count, physical)


def check_accelerators(environ: Mapping[str, str], timeout: float) -> AcceleratorsReport:
    smi = shutil.which("nvidia-smi")
    report = AcceleratorsReport(
        nvidia_smi=smi, npu_smi=shutil.which("npu-smi"), cuda_visible_devices=environ.get("CUDA_VISIBLE_DEVICES")
    )
    physical: int | None = None
    if smi:
        try:
            out = subprocess.run(
                [smi, "--query-gpu=index,name,memory.total", "--format=csv,noheader,nounits"],
                capture_output=True,
                text=True,
                timeout=max(0.5, timeout),
                stdin=subprocess.DEVNULL,
            )
            if out.returncode == 0:
                for line in out.stdout.splitlines()[:256]:
                    parts = [p.strip() for p in line.split(",")]
                    if len(parts) >= 3 and parts[0].isdigit():
                        mem = int(parts[2]) if parts[2].isdigit() else None
                        report.gpus.append(GpuInfo(index=int(parts[0]), name=parts[1], memory_total_mib=mem))
                physical = len(report.gpus)
            else:
                report.error = f"nvidia-smi exit {out.returncode}: {(out.stderr or out.stdout).strip()[:300]}"
        except subprocess.TimeoutExpired:
            report.error = f"nvidia-smi did not answer within {timeout:.1f}s"
        except OSError as exc:
            report.error = f"nvidia-smi could not run: {exc}"
    report.visible_count = visible_count(report.cuda_visible_devices, physical)
    return report


def accelerator_findings(acc: AcceleratorsReport) -> list[Finding]:
    if acc.gpus or acc.npu_smi:
        return []
    return [
        probe_finding(
            "no_local_accelerators",
            "info",
            "missing_env_var_or_path",
            "No GPU or NPU visible on this machine (the cluster's nodes may still have them)",
            "resource-checks",
            source=SRC_PG_CHECKS,
            evidence=acc.error or ("0 GPUs listed by nvidia-smi" if acc.nvidia_smi else "nvidia-smi/npu-smi not found"),
            fix="Check the Ray nodes' GPU counts in the 'ray' section; each node registers what it sees (or "
            "--num-gpus).",
            owner="cluster_setup",
        )
    ]
