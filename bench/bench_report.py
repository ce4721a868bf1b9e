"""Writing the report: report.md from the collected results (one section per benchmark) and the scaling plot."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench_common import MB, fmt
from bench_data import OURS_DATA


def plot(data: dict[str, Any], path: Path) -> str | None:
    sizes = data.get("sizes") or []
    if not sizes:
        return None
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "matplotlib not installed: no plot"
    fig, (ax_t, ax_m) = plt.subplots(1, 2, figsize=(11, 4.2))
    names = list(sizes[0]["peers"])
    for name in names:
        xs = [row["size_mb"] for row in sizes if name in row["peers"]]
        ax_t.plot(xs, [row["peers"][name]["time_s"] for row in sizes if name in row["peers"]], "o-", label=name)
        ax_m.plot(xs, [row["peers"][name]["peak_rss_mb"] for row in sizes if name in row["peers"]], "o-", label=name)
    for ax, ylabel in ((ax_t, "work time (s, median, log)"), (ax_m, "peak RSS (MB, median, linear from 0)")):
        ax.set_xscale("log")
        ax.set_xlabel("file size (MB)")
        ax.set_ylabel(ylabel)
        ax.grid(True, which="both", alpha=0.3)
    ax_t.set_yscale("log")  # linear growth shows as a straight line of slope 1
    ax_m.set_ylim(bottom=0)  # a linear axis from 0, so that flat memory looks flat and growth is not exaggerated
    ax_t.set_title("check_reward_data: time vs size")
    ax_m.set_title("check_reward_data: peak memory vs size")
    ax_m.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return None


def _scaling_notes(sizes: list[dict[str, Any]]) -> list[str]:
    """How time and peak memory grow from the smallest to the largest file, per peer (computed, not asserted)."""
    if len(sizes) < 2:
        return []
    first, last = sizes[0], sizes[-1]
    notes = [
        f"From {first['size_mb']} MB to {last['size_mb']} MB ({last['size_mb'] / first['size_mb']:.0f}x the data):"
    ]
    for name in first["peers"]:
        a, b = first["peers"][name], last["peers"].get(name)
        if not b or a["time_s"] != a["time_s"] or b["time_s"] != b["time_s"]:
            continue
        per_m_lines = (b["peak_rss_mb"] - a["peak_rss_mb"]) / max(1, (last["lines"] - first["lines"]) / 1e6)
        notes.append(
            f"- {name}: time x{b['time_s'] / a['time_s']:.0f}, peak RSS {a['peak_rss_mb']:.0f} → "
            f"{b['peak_rss_mb']:.0f} MB ({per_m_lines:+.1f} MB per million lines)"
        )
    return [*notes, ""]


#: The issue's targets for check_reward_data: (peer row, minimum peer ÷ ours work-time ratio).
DATA_TARGETS = [
    ("jq (ground-truth check only)", 3.0),
    ("json.loads + jsonschema loop", 15.0),
    ("orjson.loads loop", 1.0),
]
DATA_RSS_TARGET_MB = 100.0


def _data_targets(row: dict[str, Any]) -> list[str]:
    """The targets against the largest file's measured ratios, stated as met or not (computed, not asserted)."""
    parts = []
    for name, target in DATA_TARGETS:
        ratio = row["ratios_vs_ours"].get(name)
        if ratio is None:
            parts.append(f"{name}: not measured")
        else:
            parts.append(f"{name} {ratio:.2f}× (target ≥ {target:g}×: {'met' if ratio >= target else 'NOT met'})")
    rss = row["peers"][OURS_DATA]["peak_rss_mb"]
    parts.append(
        f"peak RSS {rss:.0f} MB (target < {DATA_RSS_TARGET_MB:g} MB: {'met' if rss < DATA_RSS_TARGET_MB else 'NOT met'})"
    )
    return [f"**Targets at {row['size_mb']} MB, {OURS_DATA}:** " + "; ".join(parts) + "."]


def render_markdown(rep: dict[str, Any]) -> str:
    m = rep["machine"]
    out = [
        "# xtuner-rl-mcp benchmark report",
        "",
        f"Reproduce: `{rep['command']}` (from the repository root, in the project venv).",
        "",
        f"Machine: {m['cores']} cores ({m['cpu']}), {m['ram_gb']} GB RAM, {m['os']}, Python {m['python']}; "
        f"load average at start {m['load_avg_at_start']}. Date {m['date_utc']}, commit {m['git_commit']}.",
        "Versions: " + ", ".join(f"{k} {v}" for k, v in m["packages"].items() if v) + f"; {m['jq']}; {m['grep']}.",
        "",
        "All figures are medians of several runs in one invocation; ratios are peer ÷ ours unless stated.",
        "",
    ]
    for key, section in (
        ("cold_start", _cold_start_md),
        ("latency", _latency_md),
        ("data", _data_md),
        ("diagnose", _diagnose_md),
        ("probe", _probe_md),
        ("reliability", _reliability_md),
    ):
        if rep.get(key):
            out += section(rep[key])
    for note in rep.get("notes", []):
        out.append(f"Note: {note}")
    return "\n".join(out).rstrip() + "\n"


def _cold_start_md(cs: dict[str, Any]) -> list[str]:
    """Cold start: ours vs the minimal server, the start-up phases, the extra imports."""
    out: list[str] = [
        "## Cold start (spawn → first response to `initialize` over stdio)",
        "",
        "Median of interleaved runs; wall = spawn to the answer line, CPU = the server's user+system time then.",
        "",
        "| Server | `initialize` wall (ms) | `initialize` CPU (ms) | first `tools/list` wall (ms) "
        "| first `tools/list` CPU (ms) | Runs |",
        "|---|---|---|---|---|---|",
        f"| `xtuner-rl-mcp serve` | {fmt(cs['ours_median_s'] * 1000, 0)} | {fmt(cs['ours_cpu_median_s'] * 1000, 0)} "
        f"| {fmt(cs['ours_list_median_s'] * 1000, 0)} | {fmt(cs['ours_list_cpu_median_s'] * 1000, 0)} "
        f"| {cs['runs']} |",
        f"| minimal one-tool `MCPServer` (`bench/minimal_server.py`) | {fmt(cs['minimal_median_s'] * 1000, 0)} "
        f"| {fmt(cs['minimal_cpu_median_s'] * 1000, 0)} | {fmt(cs['minimal_list_median_s'] * 1000, 0)} "
        f"| {fmt(cs['minimal_list_cpu_median_s'] * 1000, 0)} | {cs['runs']} |",
        "",
        f"**Ratio ours ÷ minimal, spawn → `initialize` answered: {cs['ratio']:.2f} wall, {cs['cpu_ratio']:.2f} CPU** "
        f"(target ≤ {cs['target_ratio']}: {'met' if cs['within_target'] else 'NOT met'}). "
        f"Spawn → first `tools/list` answered: {cs['list_ratio']:.2f} wall, {cs['list_cpu_ratio']:.2f} CPU "
        f"({'within' if cs['list_within_target'] else 'above'} {cs['target_ratio']}): `serve` registers its tools "
        "on the first request that needs them, so that cost moves from start-up to the first `tools/list`.",
        "",
    ]
    b = cs.get("breakdown_ms") or {}
    if b:
        tools_i = b.get("import_tool_modules_ms", {})
        tools_r = b.get("register_tool_ms", {})
        out += [
            "Where the start-up goes (`bench/startup_breakdown.py`, median of 5 fresh processes, ms):",
            "",
            "| Phase | ms |",
            "|---|---|",
            f"| import the MCP SDK (`MCPServer`; the minimal server pays this too) | {fmt(b.get('import_sdk_ms'), 0)} |",
            f"| import our server modules (cli, app, registry, security, common) "
            f"| {fmt(b.get('import_server_modules_ms'), 0)} |",
            f"| import the {len(tools_i)} tool modules (pydantic models built at class definition) "
            f"| {fmt(b.get('import_tool_modules_ms_total'), 0)} |",
            f"| register the tools (the SDK generates input/output JSON Schemas) "
            f"| {fmt(b.get('register_tool_ms_total'), 0)} |",
            f"| register resources and prompts | {fmt(b.get('register_resources_prompts_ms'), 0)} |",
            "",
            "Per tool, import + register (ms): "
            + ", ".join(
                f"`{n}` {fmt(tools_i[n], 0)} + {fmt(tools_r.get(n), 0)}"
                for n in sorted(tools_i, key=lambda n: -(tools_i[n] + tools_r.get(n, 0)))
            )
            + ".",
            "",
        ]
    out += [
        f"`-X importtime` sees {cs['extra_modules']} modules ours imports beyond the minimal server "
        f"({fmt(cs['extra_self_ms'], 0)} ms self); it does not time the tool modules themselves, which the "
        "registry loads with `importlib.import_module`. Heavy packages among them: "
        + (", ".join(f"`{m}`" for m in cs["heavy_imported"]) or "none")
        + ". The largest:",
        "",
        "| Module | Self (ms) | Cumulative (ms) | From |",
        "|---|---|---|---|",
        *[
            f"| `{t['module']}` | {fmt(t['self_ms'], 1)} | {fmt(t['cumulative_ms'], 1)} | `{t['origin']}` |"
            for t in cs["top_extra_imports"][:10]
        ],
        "",
    ]
    return out


def _latency_md(lat: dict[str, Any]) -> list[str]:
    """Round-trip latency per tool, both protocol eras."""
    out: list[str] = [
        "## Tool round trip over stdio (real MCP client, after 10 warm-up calls)",
        "",
        "| Tool | p50 auto (ms) | p99 auto (ms) | p50 legacy (ms) | p99 legacy (ms) | Answer |",
        "|---|---|---|---|---|---|",
    ]
    for name, a in lat.get("auto", {}).items():
        b = lat.get("legacy", {}).get(name, {})
        if "skipped" in a:
            out.append(f"| `{name}` | — | — | — | — | skipped: {a['skipped']} |")
            continue
        out.append(
            f"| `{name}` | {fmt(a['p50_ms'])} | {fmt(a['p99_ms'])} | {fmt(b.get('p50_ms'))} | {fmt(b.get('p99_ms'))} "
            f"| {'tool error' if a['is_error'] else 'result'} |"
        )
    out += [f"\n{next(iter(lat['auto'].values()), {}).get('calls', '?')} timed calls per tool and mode.", ""]
    return out


def _data_md(data: dict[str, Any]) -> list[str]:
    """check_reward_data: time and peak memory per size and peer, targets, scaling."""
    out: list[str] = ["## check_reward_data: throughput and peak memory", ""]
    if "skipped" in data:
        out += [f"Skipped: {data['skipped']}", ""]
    else:
        out += [
            "Files built by repeating the real XTuner GSM8K example lines. Each measurement is a fresh process;",
            "peak RSS is the whole process tree's (worker processes summed, sampled every 50 ms). Work = the time the",
            "workload itself reports (imports included, interpreter start excluded; jq: whole process).",
            "",
            "| Size | Lines | Peer | Work (s) | Process (s) | MB/s | Peak RSS (MB) | Work ÷ ours | Runs |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
        for row in data["sizes"]:
            for name, r in row["peers"].items():
                out.append(
                    f"| {row['size_mb']} MB | {row['lines']} | {name} | {fmt(r['time_s'])} | {fmt(r['wall_s'])} "
                    f"| {fmt(r['mb_per_s'], 0)} "
                    f"| {fmt(r['peak_rss_mb'], 0)} | {fmt(row['ratios_vs_ours'].get(name))} | {r['runs']} |"
                )
            e = row["end_to_end_cli"]
            out.append(
                f"| {row['size_mb']} MB | | `xtuner-rl-mcp call` end to end (1 run) | | {fmt(e['wall_s'])} | | "
                f"{fmt(e['peak_rss_mb'], 0)} | | 1 |"
            )
        out += ["", *_data_targets(data["sizes"][-1]), "", "![time and memory against size](scaling.png)", ""]
        out += _scaling_notes(data["sizes"])
        out += [f"Note: {n}" for n in data.get("notes", [])] + [""]
    return out


def _diagnose_md(diag: dict[str, Any]) -> list[str]:
    """diagnose_symptom vs grep on one large log."""
    out: list[str] = ["## diagnose_symptom on a large log vs grep", ""]
    if "skipped" in diag:
        out += [f"Skipped: {diag['skipped']}", ""]
    else:
        out += [
            f"A {fmt(diag['bytes'] / MB, 0)} MB generated log (healthy trainer, rollout, judger and raylet lines) with "
            f"{diag['errors_injected']} catalog example errors; {diag['patterns']} catalog patterns.",
            "",
            "| Peer | Work (s) | Process (s) | MB/s | Peak RSS (MB) | Work ÷ ours |",
            "|---|---|---|---|---|---|",
            *[
                f"| {n} | {fmt(r['time_s'])} | {fmt(r['wall_s'])} | {fmt(r['mb_per_s'], 0)} | {fmt(r['peak_rss_mb'], 0)} "
                f"| {fmt(diag['ratios_vs_ours'].get(n))} |"
                for n, r in diag["peers"].items()
            ],
            "",
            *[f"Note: {n}" for n in diag.get("notes", [])],
            *[f"Note: {diag[k]}." for k in ("grep_note", "grep_ere_note") if diag.get(k)],
            "",
        ]
    return out


def _probe_md(probe: dict[str, Any]) -> list[str]:
    """probe_environment vs ray status, live and on a dead address."""
    out: list[str] = ["## probe_environment vs `ray status`", ""]
    if "skipped" in probe:
        out += [f"Skipped: {probe['skipped']}", ""]
    else:
        live = probe.get("live")
        if live:
            out += [
                'Against a live local Ray head (1 node, 8 fake GPUs); probe_environment with `checks=["ray"]`.',
                "",
                "| Command | Median (s) |",
                "|---|---|",
                f"| `xtuner-rl-mcp call probe_environment` (process start included) "
                f"| {fmt(live['probe_environment_cli_s'])} |",
                f"| `ray status --address` (process start included) | {fmt(live['ray_status_cli_s'])} |",
                f"| probe_environment `run()` in process (no interpreter start) "
                f"| {fmt(live['probe_environment_run_s'])} |",
                "",
                f"Ratio ours ÷ ray status (CLI vs CLI): {fmt(live['ratio_ours_vs_ray_status'])}. "
                f"Summary: {live['summary']}",
                "",
            ]
        d = probe["dead_address"]
        out += [
            f"Dead address `{d['address']}`: probe_environment answered in {fmt(d['cli_wall_s'])} s "
            f"(CLI, median; {fmt(d['run_s'])} s in process); `ray status` took {fmt(d.get('ray_status_wall_s'))} s "
            f"(rc {d.get('ray_status_rc')}). "
            f"Summary: {d['summary']}",
            "",
            *[f"Note: {n}" for n in probe.get("notes", [])],
            "",
        ]
    return out


def _reliability_md(rel: dict[str, Any]) -> list[str]:
    """The hostile-input suite's outcome and coverage."""
    out: list[str] = [
        "## Reliability: the hostile-input suite",
        "",
        f"`{rel['command']}` → **{rel['summary_line']}** in {fmt(rel['wall_s'], 0)} s (exit {rel['returncode']}).",
        "",
        "| Test file | Passed | Failed | Skipped | Xfailed |",
        "|---|---|---|---|---|",
        *[
            f"| `{name}` | {c.get('passed', 0)} | {c.get('failed', 0)} | {c.get('skipped', 0)} | {c.get('xfailed', 0)} |"
            for name, c in sorted(rel["per_file"].items())
        ],
        "",
        f"Covered: {rel['jsonrpc_frames']} malformed JSON-RPC frames sent to one live `serve` process over stdio "
        f"(each followed by a valid request that must be answered); {rel['corpus_files']} corrupted or adversarial "
        f"files fed to every file-reading tool; {rel['fuzz_examples_per_tool']} property-based argument sets per "
        "registered tool through a real MCP client; every path argument of every tool against traversal, symlink "
        "escapes, /proc and devices; the HTTP transport's Host (421), Origin (403) and bearer-token (401) checks "
        "over a real socket.",
        "",
    ]
    return out
