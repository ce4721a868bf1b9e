"""Rollout engine sizing: tensor/expert parallel size, XTuner's layout rules and backend caveats, the RolloutPlan."""

from __future__ import annotations

from ..core import Finding
from ..xtuner_rules import resources as rr
from .citations import CB, SRC_NCCL, WF
from .cluster_fit import ClusterShape
from .memory import ROLLOUT_WEIGHT_SHARE, rollout_weights_per_gpu
from .model_size import MODEL_SIZE_HINT
from .models import ModelInfo, PlanRequest, RolloutPlan, Topology


def auto_max_batch(context_length: int) -> int:
    """XTuner's default rollout_max_batch_size_per_instance (rollout/worker.py:510-520)."""
    if context_length <= 4096:
        return 1024
    if context_length <= 8192:
        return 512
    return 128


def _engine_sizes(gpus_per_node: int, limit: int) -> list[int]:
    """Candidate engine sizes: powers of two and divisors within a node, then whole-node multiples."""
    sizes = {d for d in range(1, gpus_per_node + 1) if gpus_per_node % d == 0}
    sizes |= {2**i for i in range(0, 12) if 2**i <= gpus_per_node}
    k = 2
    while gpus_per_node * k <= limit:
        sizes.add(gpus_per_node * k)
        k *= 2
    return sorted(sizes)


def _engine_ok_for_model(model: ModelInfo, size: int, use_ep: bool) -> bool:
    if size == 1:
        return True
    if use_ep:
        return not model.num_experts or model.num_experts % size == 0
    heads = model.num_attention_heads
    return heads is None or heads % size == 0


def choose_engine(
    model: ModelInfo, gpus_per_node: int, limit: int, gpu_bytes: float, util: float, backend: str
) -> tuple[int, int, bool]:
    """Smallest engine whose per-GPU weights leave at least half of the engine memory for KV cache.

    Returns (tp, ep, fits). MoE models grow EP (TP stays 1); dense models grow TP. XTuner forbids TP>1 and EP>1
    together (weight_update/data.py:114).
    """
    use_ep = model.is_moe
    last = (1, 1)
    for size in _engine_sizes(gpus_per_node, max(limit, 1)):
        if size > max(limit, 1) or not _engine_ok_for_model(model, size, use_ep):
            continue
        tp, ep = (1, size) if use_ep else (size, 1)
        last = (tp, ep)
        if rollout_weights_per_gpu(model, tp, ep) <= ROLLOUT_WEIGHT_SHARE * util * gpu_bytes:
            return tp, ep, True
    return last[0], last[1], False


def size_engine(
    p: PlanRequest, model: ModelInfo, topology: Topology, shape: ClusterShape, gpu_gib: float, util: float
) -> tuple[int, int, bool, str]:
    """(tp, ep, fits, why): forced values win, else the smallest engine that fits."""
    total, per_node = shape.total, shape.per_node
    gpu_bytes = gpu_gib * rr.GIB
    tp_forced, ep_forced = p.tensor_parallel_size, p.expert_parallel_size
    if model.source == "unknown":
        tp, ep = tp_forced or 1, ep_forced or 1
        given = "as given" if tp_forced or ep_forced else "by default"
        return tp, ep, True, f"rollout engine tp={tp}, ep={ep} {given}, not sized: {MODEL_SIZE_HINT} to size it"
    if tp_forced or ep_forced:
        tp, ep = tp_forced or 1, ep_forced or 1
        engine_fits = rollout_weights_per_gpu(model, tp, ep) <= ROLLOUT_WEIGHT_SHARE * util * gpu_bytes
    else:
        limit = total if topology != "disaggregated" else max(1, total - per_node)
        tp, ep, engine_fits = choose_engine(model, per_node, limit, gpu_bytes, util, p.backend)
    w_gib = rollout_weights_per_gpu(model, tp, ep) / rr.GIB
    if tp_forced or ep_forced:
        why = f"rollout engine tp={tp}, ep={ep} as given ({w_gib:.1f} GiB of bf16 weights per accelerator)"
    else:
        why = (
            f"rollout engine tp={tp}, ep={ep}: the smallest engine whose bf16 weights per accelerator "
            f"({w_gib:.1f} GiB) stay under half of gpu_memory_utilization x {gpu_gib:g} GiB, leaving the rest for "
            "KV cache" + ("; a MoE grows expert parallelism, not TP" if model.is_moe else "")
        )
    return tp, ep, engine_fits, why


def plan_rollout(
    p: PlanRequest,
    topology: Topology,
    shape: ClusterShape,
    tp: int,
    ep: int,
    workers: tuple[int, int],
    util: float,
    context_length: int,
) -> tuple[RolloutPlan, list[Finding]]:
    """The RolloutPlan with XTuner's layout rules; workers is (rollout, train) accelerators."""
    rollout_n, train_n = workers
    acc, per_node = shape.accelerator, shape.per_node
    rules = rr.rollout_shape_rules(
        rollout_n, tp, ep, p.backend, rr.NPU_ACCELERATORS_PER_NODE if acc == "NPU" else per_node
    )
    train_world = train_n
    rules.append(rr.sp_size_rule(p.sp_size, train_world))
    findings = _rule_findings(rules, rollout_n, tp, ep, per_node, shape.total)
    findings += _backend_findings(p, acc) + _topology_findings(p, topology, train_n)
    transport = "nccl" if topology == "disaggregated" else "ipc"
    engine = rr.num_gpus_per_engine(tp, ep)
    n_engines = max(1, rollout_n // engine) if engine else 1
    plan = RolloutPlan(
        backend=p.backend,
        device=acc,
        gpus_per_node=rr.NPU_ACCELERATORS_PER_NODE if acc == "NPU" else per_node,
        tensor_parallel_size=tp,
        expert_parallel_size=ep,
        num_gpus_per_engine=engine,
        num_engines=n_engines,
        gpu_memory_utilization=util,
        context_length=context_length,
        rollout_max_batch_size_per_instance=auto_max_batch(context_length),
        weight_transport_type=transport,
        rules=rules,
    )
    return plan, findings


def _rule_fix(rule: rr.RuleResult, rollout_n: int, tp: int, ep: int, per_node: int, total: int) -> str:
    """The fix with the numbers: which worker counts work with this engine, which engine sizes with these workers."""
    if rule.rule == "rollout.workers_divisible_by_engine":
        return rr.engine_layout_fix(
            rollout_n, rr.num_gpus_per_engine(tp, ep), "EP" if ep > 1 else "TP", per_node, total
        )
    if rule.rule == "rollout.workers_divisible_by_ep":
        return rr.engine_layout_fix(rollout_n, ep, "EP", per_node, total)
    if rule.rule == "rollout.tp_or_ep_is_one":
        return f"Set tensor_parallel_size=1 (keep EP {ep}) or expert_parallel_size=1 (keep TP {tp})."
    return "Pick tensor/expert parallel sizes and worker counts that divide evenly (leave them unset to let this tool choose)."


def _rule_findings(
    rules: list[rr.RuleResult], rollout_n: int, tp: int, ep: int, per_node: int, total: int
) -> list[Finding]:
    findings: list[Finding] = []
    for rule in rules:
        if not rule.ok and rule.rule != "rollout.vllm_topology_not_implemented":
            findings.append(
                Finding(
                    id=f"topo.rule.{rule.rule.split('.', 1)[1]}",
                    severity="blocker",
                    category="resource_mismatch_num_workers",
                    title=f"XTuner will reject this layout: {rule.detail}",
                    evidence=rule.xtuner_message,
                    fix=_rule_fix(rule, rollout_n, tp, ep, per_node, total),
                    reference=f"{CB}#divisibility-rules",
                    source=rule.source,
                    owner="config_edit",
                )
            )
    return findings


def _backend_findings(p: PlanRequest, acc: rr.Accelerator) -> list[Finding]:
    findings: list[Finding] = []
    if p.backend == "vllm":
        findings.append(
            Finding(
                id="topo.vllm_cannot_start",
                severity="blocker",
                category="backend_unsupported",
                title="vLLM rollout cannot start at this XTuner commit",
                evidence="vLLMWorker.build_rollout_topology raises NotImplementedError('vLLM rollout topology has not "
                "been verified after topology refactor.')",
                fix="Use backend lmdeploy (XTUNER_USE_LMDEPLOY=1; also runs on Ascend NPU) or sglang.",
                reference=f"{CB}#backend-support",
                source=rr.SRC_VLLM,
                owner="backend_install",
            )
        )
    if acc == "NPU" and p.backend == "lmdeploy":
        findings.append(
            Finding(
                id="topo.npu_lmdeploy",
                severity="info",
                category="backend_unsupported",
                title="On Ascend NPU use LMDeploy's pytorch engine (device type ascend, eager mode)",
                evidence="the upstream NPU example and launcher use vLLM, which cannot start at this commit",
                fix="Set XTUNER_USE_LMDEPLOY=1 on every node before `ray start`; keep lmdeploy_backend='pytorch'.",
                reference=f"{CB}#backend-support",
                source="xtuner/v1/rl/rollout/lmdeploy.py:356-359",
            )
        )
    return findings


def _topology_findings(p: PlanRequest, topology: Topology, train_n: int) -> list[Finding]:
    findings: list[Finding] = []
    if p.rollout_gpus and topology != "disaggregated":
        findings.append(
            Finding(
                id="topo.rollout_gpus_ignored",
                severity="warning",
                category="resource_mismatch_num_workers",
                title="rollout_gpus only applies to the disaggregated topology; ignored",
                evidence=f"topology={topology}: training and rollout share all {train_n} workers",
                fix="Pass topology='disaggregated' to split accelerators between training and rollout.",
                reference=f"{WF}#topologies",
                source=rr.SRC_PG_BUNDLES,
            )
        )
    if topology == "disaggregated":
        findings.append(
            Finding(
                id="topo.disaggregated_nccl_transport",
                severity="info",
                category="backend_runtime_error",
                title="Disaggregated weights move over NCCL (forced by the trainer)",
                evidence="RLDisaggregatedTrainer sets weight_transport_type='nccl'; LMDeploy turbomind and vLLM "
                "do not support NCCL weight transport",
                fix="Keep the LMDeploy pytorch engine (default) or SGLang; make weight_update_port (30000) "
                "reachable between the groups.",
                reference=f"{WF}#disaggregated",
                source=SRC_NCCL,
            )
        )
    return findings
