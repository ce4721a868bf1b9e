"""Is a model or data path present, and what is it: the one existence check the environment, launch and preflight
tools share, always through the server's allowed-roots policy (a path outside it is reported, never read)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

from ..core import Finding, PathKind, PathPolicy, ToolInputError, read_guarded
from .findings import probe_finding

#: Where a missing path is explained (the failure-mode catalog).
PATH_NOT_FOUND_REF = "xtuner-rl://failure-modes/path_not_found"
#: A model's config.json is a few KiB; a larger file is no model config.
MAX_MODEL_CONFIG_BYTES = 4 << 20


@dataclass(frozen=True)
class PathCheck:
    """One look at a path. ``code`` and ``message`` are the path policy's when the look failed (else empty)."""

    value: str
    real: Path | None = None
    code: str = ""
    message: str = ""

    @property
    def outside_roots(self) -> bool:
        return self.code == "path_outside_roots"

    @property
    def exists(self) -> bool | None:
        """True: present with the wanted kind; False: not found; None: could not tell (or wrong kind)."""
        if self.real is not None:
            return True
        return False if self.code == "path_not_found" else None

    @property
    def kind(self) -> Literal["file", "dir"] | None:
        if self.real is None:
            return None
        return "dir" if self.real.is_dir() else "file"


def check_path(policy: PathPolicy, value: str, *, what: str, kind: PathKind = "any") -> PathCheck:
    """Look at ``value`` inside the allowed roots; a missing, unreadable or outside path is an answer, not an error."""
    try:
        real = policy.check(value, kind=kind, what=what)
    except ToolInputError as exc:
        return PathCheck(value, code=exc.code, message=exc.message)
    return PathCheck(value, real=real)


class PathInfo(BaseModel):
    name: str = Field(description="Env var name or 'path[i]' / 'model_path'")
    value: str | None
    set: bool
    checkable: bool = Field(description="False when the path is outside the server's allowed roots")
    exists: bool | None = None
    kind: Literal["file", "dir"] | None = None
    error: str = ""


class ModelReport(BaseModel):
    path: str | None
    checkable: bool = Field(description="False when outside the server's allowed roots (not read)")
    exists: bool | None = None
    config_json: bool | None = None
    model_type: str | None = None
    architectures: list[str] = Field(default_factory=list)
    error: str = ""


def path_info(policy: PathPolicy, name: str, value: str | None) -> PathInfo:
    """An env var's or argument's path: set or not, checkable, present, file or directory."""
    if value is None or not value.strip():
        return PathInfo(name=name, value=value, set=False, checkable=False)
    look = check_path(policy, value, what=name)
    if look.outside_roots:
        return PathInfo(
            name=name,
            value=value,
            set=True,
            checkable=False,
            error="outside the server's allowed roots: not checked (start the server with --allow-root)",
        )
    return PathInfo(
        name=name, value=value, set=True, checkable=True, exists=look.exists, kind=look.kind, error=look.message
    )


def check_model(policy: PathPolicy, raw: str | None) -> ModelReport:
    """The model directory: present, with a readable config.json, and what model it names."""
    if raw is None or not raw.strip():
        return ModelReport(path=raw, checkable=False, error="no model path (pass model_path or set MODEL_PATH)")
    look = check_path(policy, raw, what="model path", kind="dir")
    if look.outside_roots:
        return ModelReport(path=raw, checkable=False, error="outside the server's allowed roots: not checked")
    if look.real is None:
        return ModelReport(path=raw, checkable=True, exists=look.exists, error=look.message)
    cfg_look = check_path(policy, str(look.real / "config.json"), what="config.json", kind="file")
    if cfg_look.real is None:
        return ModelReport(path=raw, checkable=True, exists=True, config_json=False, error=cfg_look.message)
    try:
        text = read_guarded(policy, cfg_look.real, what="config.json", limit=MAX_MODEL_CONFIG_BYTES)
    except ToolInputError as exc:
        error = "config.json is larger than 4 MiB" if exc.code == "file_too_large" else exc.message
        return ModelReport(path=raw, checkable=True, exists=True, config_json=True, error=error)
    try:
        data = json.loads(text.decode("utf-8", errors="replace"))
    except (ValueError, RecursionError) as exc:
        return ModelReport(
            path=raw, checkable=True, exists=True, config_json=True, error=f"config.json is not valid JSON: {exc}"
        )
    if not isinstance(data, dict):
        return ModelReport(
            path=raw, checkable=True, exists=True, config_json=True, error="config.json is not a JSON object"
        )
    archs = data.get("architectures")
    return ModelReport(
        path=raw,
        checkable=True,
        exists=True,
        config_json=True,
        model_type=str(data["model_type"]) if data.get("model_type") is not None else None,
        architectures=[str(a) for a in archs[:8]] if isinstance(archs, list) else [],
    )


def path_findings(paths: list[PathInfo]) -> list[Finding]:
    """Extra paths the caller asked about that do not exist."""
    return [
        probe_finding(
            "path_missing",
            "warning",
            "missing_env_var_or_path",
            f"{p.value} does not exist",
            "",
            evidence=p.error,
            location=p.value,
            fix="Check the path.",
            owner="environment",
        ).model_copy(update={"reference": PATH_NOT_FOUND_REF})
        for p in paths
        if p.exists is False
    ]


def model_findings(model: ModelReport, from_env: bool) -> list[Finding]:
    if not model.checkable or model.path is None:
        return []
    if model.exists is False:
        if from_env:
            return []  # already reported as probe.env_path_missing.MODEL_PATH
        return [
            probe_finding(
                "model_path_missing",
                "blocker",
                "missing_env_var_or_path",
                "The model path does not exist",
                "",
                evidence=model.error,
                location=model.path,
                fix="Pass an existing Hugging Face model directory.",
                owner="model_files",
            ).model_copy(update={"reference": PATH_NOT_FOUND_REF})
        ]
    if model.config_json is not True or model.error:
        return [
            probe_finding(
                "model_config_missing",
                "blocker",
                "model_loading",
                "The model path is not a Hugging Face model directory (config.json missing or unreadable)",
                "",
                source="xtuner/v1/train/rl_trainer.py:622-625",
                evidence=f"{model.path}: {model.error}",
                fix="Point MODEL_PATH / hf_checkpoint at a directory with config.json and the weights.",
                owner="model_files",
            ).model_copy(update={"reference": "xtuner-rl://failure-modes/load_from_not_hf"})
        ]
    return []
