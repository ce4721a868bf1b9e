"""What a Ray snapshot means for an XTuner launch: no or unreachable cluster, auth, version skew, stuck or leftover
placement groups, and the env and exit-handler notes that matter once a cluster is up."""

from __future__ import annotations

from ..core import Finding
from ..xtuner_rules import resources as rr
from .env import SRC_BACKEND_FLAGS, EnvReport
from .findings import probe_finding
from .ray import SRC_PG_REUSE, SRC_RAY_INIT, PlacementGroupInfo, RaySnapshot

SRC_CLEANUP = "xtuner/v1/rl/utils/ray_utils.py:117-156"
#: After a run ends or dies, no cluster is what XTuner itself leaves: the RL CLI registers a cleanup (rl.py:70) that
#: runs `ray stop --force` at exit and on SIGINT/SIGTERM (ray_utils.py:128-129, 146-156).
EXIT_HANDLER_NOTE = (
    " (if a run just ended or died on this node, this is XTuner's own cleanup: its exit handler runs "
    "`ray stop --force`, xtuner/v1/rl/utils/ray_utils.py:128-129, registered at xtuner/v1/train/cli/rl.py:70 - "
    "not the cause of the failure)"
)


def ray_findings(snap: RaySnapshot, req: rr.RayRequirements | None) -> list[Finding]:
    out: list[Finding] = []
    res = snap.resolution
    if snap.auth_required:
        out.append(
            probe_finding(
                "ray_auth_required",
                "blocker",
                "ray_not_running",
                f"Ray at {snap.gcs_address or snap.dashboard_url} is running but requires token authentication",
                "ray-preparation",
                source=SRC_RAY_INIT,
                evidence="; ".join(snap.errors)[:600],
                fix=snap.auth_hint,
                owner="cluster_setup",
            )
        )
        return out
    if not snap.reachable and snap.timed_out:
        out.append(
            probe_finding(
                "ray_probe_timed_out",
                "warning",
                "ray_not_running",
                f"Ray at {res.address} ({res.source}): unknown, the probe got no answer within its time "
                f"({snap.elapsed_s:g} s used) — retry with a longer timeout_s",
                "ray-preparation",
                source=SRC_RAY_INIT,
                evidence="; ".join(snap.errors + snap.notes)[:600],
                fix="Probe again with a larger timeout_s (a loaded head or a busy machine answers slowly); if it "
                "still gives no answer, check that the address is the GCS (<head>:6379) or the dashboard "
                "(http://<head>:8265) and that no firewall drops the packets.",
                owner="cluster_setup",
            )
        )
        return out
    if not snap.reachable:
        no_address = res.kind == "none"
        out.append(
            probe_finding(
                "ray_not_running" if no_address else "ray_unreachable",
                "blocker",
                "ray_not_running",
                "No running Ray cluster found"
                if no_address
                else f"Ray at {res.address} ({res.source}) cannot be reached",
                "ray-preparation",
                source=SRC_RAY_INIT,
                evidence="; ".join(snap.errors + snap.notes)[:600] + EXIT_HANDLER_NOTE,
                fix="Start the cluster first (`ray start --head --num-gpus=<n>` on the head, `ray start --address="
                "<head>:6379` on the others), from the environment with XTUNER_USE_* exported; XTuner connects "
                "with ray.init(address='auto') and never starts one.",
                owner="cluster_setup",
            )
        )
        return out
    if snap.method == "none":
        return out
    if snap.version_mismatch:
        out.append(
            probe_finding(
                "ray_version_mismatch",
                "warning",
                "ray_not_running",
                "Ray/Python versions differ between this environment and the cluster: "
                + "; ".join(snap.version_mismatch),
                "ray-preparation",
                source=SRC_RAY_INIT,
                evidence="ray.init refuses a cluster started with another Ray version (and, by default, another "
                "Python patch version)",
                fix="Launch XTuner from an environment with the cluster's Ray and Python versions (or restart the "
                "cluster from the training environment).",
                owner="cluster_setup",
            )
        )
    if res.kind == "dashboard":
        out.append(
            probe_finding(
                "ray_read_via_dashboard",
                "info",
                "other",
                "Cluster read through the dashboard HTTP API (an http address is not a GCS address)",
                "ray-preparation",
                source=SRC_RAY_INIT,
                evidence=res.note,
                fix="Give XTuner's driver the GCS address (<head>:6379) or run it on a cluster node.",
                owner="launch_command",
            )
        )
    for pg in snap.placement_groups:
        out.extend(_pg_findings(pg, req))
    return out


def cluster_context_findings(snap: RaySnapshot, env: EnvReport | None) -> list[Finding]:
    """Notes that only matter once a cluster is up: env propagation and XTuner's exit handler."""
    if not snap.reachable or snap.auth_required or snap.method == "none":
        return []
    out: list[Finding] = []
    if env is not None and env.effective_backend:
        out.append(
            probe_finding(
                "env_must_precede_ray_start",
                "info",
                "missing_env_var_or_path",
                "The cluster is already up: XTuner reads the backend flag inside Ray actors, which see the "
                "environment of `ray start`, not of the launching shell",
                "env-vars-reach-ray-workers",
                source=SRC_BACKEND_FLAGS,
                evidence=f"effective backend here: {env.effective_backend} ({env.evaluated} environment)",
                fix="Make sure the same XTUNER_USE_* (and WORK_DIR, MODEL_PATH, ...) were exported before `ray start` "
                "on every node, or pass them in the job's runtime_env; restart Ray after changing them.",
                owner="cluster_setup",
            )
        )
    local = snap.resolution.source == "address_file" or (snap.gcs_address or "").startswith(("127.", "localhost"))
    if local:
        out.append(
            probe_finding(
                "exit_handler_stops_ray",
                "info",
                "ray_not_running",
                "Launching XTuner on this node stops its Ray processes when the run exits (ray stop --force)",
                "exit-handler-stops-ray",
                source=SRC_CLEANUP,
                evidence=f"local cluster at {snap.gcs_address}",
                fix="Expect to `ray start` again after each run on this node (the head included).",
                owner="cluster_setup",
            )
        )
    return out


def _pg_findings(pg: PlacementGroupInfo, req: rr.RayRequirements | None) -> list[Finding]:
    out: list[Finding] = []
    shape = f"{len(pg.bundles)} bundles {pg.bundles[:1]}, strategy {pg.strategy}, state {pg.state}"
    if pg.state != "CREATED":
        infeasible = pg.scheduling_state == "INFEASIBLE"
        out.append(
            probe_finding(
                f"pg_{'infeasible' if infeasible else 'pending'}.{pg.name or pg.pg_id[:12]}",
                "warning",
                "ray_resources_insufficient",
                f"Placement group '{pg.name or pg.pg_id}' is {pg.state}"
                + (" and INFEASIBLE: no node shape can ever hold it" if infeasible else f" ({pg.scheduling_state})"),
                "resource-checks",
                source="xtuner/v1/rl/utils/ray_accelerator_worker.py:306-307",
                evidence=shape,
                fix="Remove the stuck group (end its driver or ray.util.remove_placement_group) or add resources; "
                "XTuner waits 30 s for its own group to be ready and then fails with GetTimeoutError.",
                location=pg.pg_id,
                owner="cluster_setup",
            )
        )
    if pg.xtuner_name:
        mismatch = ""
        train = req.placement_groups[0] if req is not None and pg.name == "train" else None
        if train is not None:
            want = {"CPU": train.num_cpus_per_worker, "memory": float(train.cpu_memory_per_worker_bytes)}
            want[train.accelerator] = train.num_accelerators_per_worker
            if len(pg.bundles) != train.num_workers or any(b != want for b in pg.bundles):
                mismatch = f"; expected {train.num_workers} bundles of {want}"
        out.append(
            probe_finding(
                f"pg_reused.{pg.name}",
                "blocker" if mismatch else "warning",
                "resource_mismatch_num_workers",
                f"A placement group named '{pg.name}' already exists: XTuner will reuse it without checking its shape",
                "placement-group-reuse",
                source=SRC_PG_REUSE,
                evidence=shape + mismatch,
                fix="Remove the leftover group (stop the job that holds it, or ray.util.remove_placement_group) or "
                "restart the cluster before launching; its bundles, not your config, decide the worker layout.",
                location=pg.pg_id,
                owner="cluster_setup",
            )
        )
    return out
