"""What the config analysis reports besides findings: resolved settings, tasks, resource pools, CPU pools."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

#: Findings about config fields point into the API reference.
REF = "xtuner-rl://references/api-reference#"

# The ``Any`` fields below hold a config's values as it wrote them (JSON): a user may write a string where XTuner
# wants an int, and the report shows exactly that.


class Setting(BaseModel):
    name: str = Field(description="Dotted, e.g. 'trainer.sync_weights_interval'")
    value: Any = Field(default=None, description="Resolved value (JSON), null when unresolved")
    origin: str = Field(
        description=(
            "literal: in the file; default: XTuner's; env: supplied env; env_default: os.environ.get default (not "
            "supplied); unresolved"
        )
    )
    expression: str | None = Field(default=None, description="Source expression (always given when unresolved)")
    reason: str | None = Field(default=None, description="Why it is unresolved")
    env_vars: list[str] = Field(default_factory=list, description="Env vars the value depends on")
    location: str | None = Field(default=None, description="file:line")


class TaskInfo(BaseModel):
    manager: str = Field(description="'train' or 'eval' agent-loop manager")
    task_name: str | None = None
    spec_class: str | None = Field(default=None, description="TaskSpecConfig or DisaggTaskSpecConfig")
    weight: Any = None
    agent_loop: str | None = Field(default=None, description="Agent loop config class")
    judger: str | None = Field(default=None, description="Judger config class; null when none is configured")
    judger_name: Any = None
    produce_strategy: str | None = Field(default=None, description="Produce strategy class (default shown if unset)")
    prompt_repeat_k: Any = None
    data_paths: list[Any] = Field(default_factory=list, description="anno_path values of the task's datasets")
    location: str | None = None


class ResourcePool(BaseModel):
    role: str = Field(description="'shared' (colocated), 'train' or 'rollout' (disaggregated)")
    accelerator: Any = None
    num_workers: Any = None
    num_accelerators_per_worker: Any = None
    num_cpus_per_worker: Any = None
    cpu_memory_per_worker_bytes: Any = None
    unresolved: list[str] = Field(default_factory=list, description="Fields that could not be resolved")
    location: str | None = None


class CPUPool(BaseModel):
    owner: str = Field(description="What requests it, e.g. 'judger openai/gsm8k (task train_task)'")
    num_workers: Any = None
    num_cpus_per_worker: Any = None
    cpu_memory_per_worker_bytes: Any = None
    location: str | None = None
