"""inspect_run: the health of a running or finished XTuner RL run, read from what it writes.

Given a work dir (newest experiment) or one experiment dir, it reads the rank-log tails (step counter, timings, last
line), the tracker (tracker.jsonl or TensorBoard events, read by a small built-in reader), the trajectory files
(streamed through a typed msgspec block decoder, bounded memory), the run's config copy (statically, never executed)
and the logs through the diagnosis engine -- optionally with the worker logs of every Ray node, collected through the
dashboard's log API. It answers where the run is (stalled against its own step times?), whether it learns (reward,
groups without signal, truncation, entropy, eval against the config's schedule) and why not: zero GSM8K rewards are
re-judged with XTuner's rule so the first finding names the cause (label format, answer format, truncation or the
judge). Findings are tied to the failure-mode catalog; compact per-step series and, on request, a PNG of the curves.
"""

from __future__ import annotations

from pydantic import BaseModel, Field, PrivateAttr

from ..cluster.ray_address import RayAccess
from ..core import RunContext, ToolResult, params_model_config
from ..core.findings import Detail, Finding, cap, count_severities, dedupe_findings, sort_findings
from ..diagnosis.models import Diagnosis
from ..runs import analysis, findings, gather, layout, log_diagnosis, plot, progress, ray_logs, tracker
from ..runs.models import Learning, Outputs, Picture, Progress, RemoteLogs, RunConfig, RunState
from ..runs.run_config import read_run_config

SERIES_POINTS: dict[str, int] = {"summary": 20, "normal": 60, "full": 240}
EVIDENCE_CAP: dict[str, int] = {"summary": 1, "normal": 3, "full": 10}
LOG_FINDINGS: dict[str, int] = {"summary": 3, "normal": 5, "full": 15}
MAX_NOTES = 20


class Params(BaseModel):
    model_config = params_model_config()

    path: str = Field(description="Work dir (newest experiment, or the one its meta file names) or experiment dir")
    experiment: str | None = Field(
        default=None, max_length=64, description="Experiment directory under path, e.g. 20260821100000"
    )
    config: str | None = Field(
        default=None, description="Run's .py config, read statically (default <work_dir>/config.py)"
    )
    first_step_grace_s: float = Field(
        default=analysis.FIRST_STEP_GRACE_S, ge=60, le=604_800, description="No stall verdict before a first step time"
    )
    ray_address: str | None = Field(
        default=None,
        max_length=512,
        description="All nodes' worker logs too, via Ray's log API (host:port or http://host:8265)",
    )
    ray_timeout_s: float = Field(default=20.0, ge=1, le=120)
    picture: bool = Field(default=False, description="Also a PNG of the curves (needs the 'plot' extra)")
    max_trajectory_files: int = Field(
        default=200, ge=1, le=10_000, description="Train files read: newest 20 + evenly spread"
    )
    max_trajectory_mb: int = Field(default=4096, ge=1, le=65_536, description="MiB of trajectories read")
    detail: Detail = Field(
        default="normal",
        description="Series points/evidence/log findings: summary 20/1/3, normal 60/3/5, full 240/10/15",
    )


class LogScan(BaseModel):
    verdict: str = Field(description="diagnose_symptom's verdict over the scanned logs")
    sources: list[str]
    sources_omitted: int
    lines: int
    bytes: int
    notes: list[str] = Field(default_factory=list, description="Log files refused (links out of the roots, FIFOs)")


class Result(ToolResult):
    state: RunState
    progress: Progress
    learning: Learning
    config: RunConfig
    findings: list[Finding] = Field(description="Run-health findings and log errors, blockers first")
    findings_omitted: int
    log_diagnoses: list[Diagnosis] = Field(description="What the logs say, ranked (as diagnose_symptom reports it)")
    log_diagnoses_omitted: int
    logs: LogScan
    remote_logs: RemoteLogs | None = Field(default=None, description="When ray_address was given")
    series: dict[str, list[float | None]] = Field(
        description="Columnar per-step series: 'step' plus reward_mean/std, no_signal_groups_pct, truncated_pct, "
        "response_len_mean, entropy_rollout, step_time_s, async_* (if any); downsampled"
    )
    series_steps: int = Field(description="Steps with data before downsampling")
    eval_series: dict[str, list[float | None]] = Field(description="'step' plus each eval metric")
    outputs: Outputs
    picture: Picture | None = Field(default=None, description="The PNG sent as image content, when asked")
    _png: bytes | None = PrivateAttr(default=None)

    def media(self) -> list[tuple[str, bytes]]:
        """Binary content to send next to the JSON (the server turns it into MCP image content)."""
        return [("image/png", self._png)] if self._png else []


def _read(
    params: Params, ctx: RunContext
) -> tuple[analysis.Inputs, log_diagnosis.LogDiagnosis, ray_logs.Collected | None]:
    paths, limits = ctx.paths, ctx.limits
    lay = layout.find_experiment(params.path, paths, params.experiment)
    config = read_run_config(params.config, lay, paths)
    trk = tracker.load(lay.tracker_jsonl, lay.tracker_events, paths, limits)
    logs = progress.read_logs(lay.rank_logs, paths, limits)
    picked, omitted = gather.select_files(
        lay.train_files, params.max_trajectory_files, params.max_trajectory_mb << 20, paths
    )
    train, train_notes = gather.scan_files(picked, ctx.progress, "reading train trajectories", paths, limits)
    eval_picked = sorted(lay.eval_files.items())[-gather.MAX_EVAL_FILES :]
    evals, eval_notes = gather.scan_files(eval_picked, ctx.progress, "reading eval trajectories", paths, limits)
    remote = None
    if params.ray_address:
        access = RayAccess.from_context(ctx)
        remote = ray_logs.collect(params.ray_address, access=access, timeout_s=params.ray_timeout_s)
    diag = log_diagnosis.diagnose(lay.logs_dir, remote.logs if remote else [], ctx, EVIDENCE_CAP[params.detail])
    failed = None
    if diag.verdict == "failure_found":
        top = next(d for d in diag.diagnoses if d.severity == "blocker")
        failed = f"{top.failure_mode_id}: {top.title}"
    inp = analysis.Inputs(
        lay,
        trk,
        logs,
        train,
        evals,
        omitted,
        analysis.now(),
        failed,
        activity=analysis.read_activity(lay, paths),
        notes=logs.notes + train_notes + eval_notes,
        config=config,
        first_step_grace_s=params.first_step_grace_s,
    )
    return inp, diag, remote


def _log_findings(diag: log_diagnosis.LogDiagnosis) -> list[Finding]:
    out = []
    for d in diag.diagnoses:
        ev = d.evidence[0] if d.evidence else None
        out.append(
            Finding(
                id=f"logs.{d.failure_mode_id}",
                severity=d.severity,
                category=d.category,
                title=d.title,
                evidence=f"{ev.text} ({d.occurrences} line(s))" if ev else "",
                location=f"{ev.source}:{ev.line}" if ev else None,
                fix=d.fix[0] if d.fix else "",
                reference=d.reference,
                source=d.source[0] if d.source else None,
            )
        )
    return out


def _outputs(inp: analysis.Inputs) -> Outputs:
    lay = inp.layout
    return Outputs(
        exp_dir=str(lay.exp_dir),
        work_dir=str(lay.work_dir),
        experiments=lay.experiments[-20:],
        rank_logs=len(lay.rank_logs),
        env_json=lay.env_json is not None,
        tracker=lay.tracker_format,
        tracker_path=str(lay.tracker_jsonl or (lay.tracker_events[-1] if lay.tracker_events else "")) or None,
        tracker_records=inp.tracker.records,
        train_trajectory_files=len(lay.train_files),
        eval_trajectory_files=len(lay.eval_files),
        trace_enabled=lay.env.get("XTUNER_OTEL_ENABLED") == "1",
        otel_trace_files=[str(p) for p in lay.otel_traces[:10]],
        otel_trace_bytes=lay.otel_trace_bytes,
        sandbox_trace_files=lay.sandbox_trace,
        notes=(lay.notes + inp.notes + inp.tracker.notes)[:MAX_NOTES],
    )


def _picture(result: Result, title: str) -> None:
    try:
        png, curves, (w, h) = plot.render(result.series, result.eval_series, title)
    except plot.PlotUnavailable:
        result.picture = Picture(
            bytes=0,
            width_px=0,
            height_px=0,
            curves=[],
            note="matplotlib is not installed: pip install 'xtuner-rl-mcp[plot]'",
        )
        return
    result._png = png
    result.picture = Picture(bytes=len(png), width_px=w, height_px=h, curves=curves)


def _remote_model(remote: ray_logs.Collected | None) -> RemoteLogs | None:
    if remote is None:
        return None
    files, omitted = cap([f"{r.node_ip}:{r.filename}" for r in remote.logs], 30)
    return RemoteLogs(
        address=remote.address,
        dashboard_url=remote.dashboard_url,
        nodes=remote.nodes,
        files=files,
        files_omitted=omitted + remote.omitted,
        bytes=remote.bytes,
        errors=remote.errors[:10],
        elapsed_s=remote.elapsed_s,
    )


def run(params: Params, ctx: RunContext) -> Result:
    inp, diag, remote = _read(params, ctx)
    prog = analysis.progress(inp)
    learn = analysis.learning(inp)
    health = findings.run_findings(inp, prog, learn)
    covered = {f.reference for f in health}  # a log line of the same catalog entry adds nothing to the finding
    logged = [f for f in _log_findings(diag) if f.reference not in covered]
    all_findings = sort_findings(dedupe_findings(health + logged))
    shown, omitted = cap(all_findings, 12 if params.detail != "full" else 50)
    diags, diags_omitted = cap(diag.diagnoses, LOG_FINDINGS[params.detail])
    series, n_steps = analysis.series(inp, SERIES_POINTS[params.detail])
    srcs, srcs_om = cap(diag.sources, 20)
    result = Result(
        summary=_summary(prog, learn, all_findings, remote),
        state=prog.state,
        progress=prog,
        learning=learn,
        config=inp.config,
        findings=shown,
        findings_omitted=omitted,
        log_diagnoses=diags,
        log_diagnoses_omitted=diags_omitted,
        logs=LogScan(
            verdict=diag.verdict,
            sources=srcs,
            sources_omitted=srcs_om + diag.sources_omitted,
            lines=diag.lines,
            bytes=diag.bytes,
            notes=diag.notes[:MAX_NOTES],
        ),
        remote_logs=_remote_model(remote),
        series=series,
        series_steps=n_steps,
        eval_series=analysis.eval_series(inp, SERIES_POINTS[params.detail]),
        outputs=_outputs(inp),
    )
    if params.picture:
        _picture(result, f"{inp.layout.exp_dir.name}: step {prog.last_step}/{prog.total_steps} ({prog.state})")
    return result


def _summary(prog: Progress, learn: Learning, found: list[Finding], remote: ray_logs.Collected | None) -> str:
    total = prog.total_steps if prog.total_steps is not None else "?"
    parts = [f"step {prog.last_step if prog.last_step is not None else 0}/{total} {prog.state}"]
    if prog.step_time_s is not None:
        parts[0] += f" ({prog.step_time_s:g} s/step, {prog.step_time_trend})"
    if prog.state == "stalled" and prog.idle_s is not None:
        parts[0] += f", idle {prog.idle_s:.0f}s"
    if learn.reward_mean_last is not None:
        parts.append(f"reward mean {learn.reward_mean_last:.3g} {learn.reward_trend}")
    if learn.no_signal_groups_pct_last is not None:
        parts.append(f"{learn.no_signal_groups_pct_last:.0f}% of groups carry no signal")
    if learn.truncated_pct_last is not None:
        parts.append(f"{learn.truncated_pct_last:.0f}% truncated")
    if learn.entropy_last is not None:
        parts.append(f"entropy {learn.entropy_last:.3g}")
    if learn.eval_latest:
        name, val = next(iter(learn.eval_latest.items()))
        parts.append(f"eval {name} {val:.3g} (step {learn.eval_steps[-1]})")
    if remote is not None:
        parts.append(f"{len(remote.logs)} worker log(s) from {remote.nodes} node(s)")
    counts = count_severities(found)
    issues = [f.id for f in found if f.severity != "info"][:3]
    parts.append(
        f"{counts['blocker']} blocker(s), {counts['warning']} warning(s)" + (f": {', '.join(issues)}" if issues else "")
    )
    return "; ".join(parts) + "."
