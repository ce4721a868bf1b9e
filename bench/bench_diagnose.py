"""diagnose_symptom on a large generated training log against ``grep -P`` and ``grep -E`` with the failure-mode
catalog's patterns (translated to POSIX ERE where possible)."""

from __future__ import annotations

import json
import random
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

from bench_common import MB, PEERS, log, repeat_runs

# ------------------------------------------------------------------------------------------------------------
# diagnose_symptom vs grep
# ------------------------------------------------------------------------------------------------------------

HEALTHY_TEMPLATES = [
    "[XTuner][{ts}][INFO] [RLTrainer] step {step}/5000: producing batch (train_batch_size=64, prompt_repeat_k=5)",
    "(RolloutController pid={pid}) [XTuner][{ts}][INFO] rollout {rid}: 320 responses, mean length {n} tokens",
    "[XTuner][{ts}][INFO] [RLTrainer] step {step}: reward/mean={r:.3f} reward/std=0.412 kl=0.0031 entropy=0.84",
    "(TrainingWorker pid={pid}) [XTuner][{ts}][INFO] grad_norm={r:.4f} lr=1e-06 tokens/s={n}",
    "[XTuner][{ts}][INFO] Saving checkpoint to /ckpt/work_dirs/grpo_gsm8k/step_{step}",
    "(JudgerActor pid={pid}) [XTuner][{ts}][INFO] judged {n} samples, accuracy {r:.3f}",
    "(raylet) [{ts}] Resource usage: CPU 48/64, GPU 8/8, memory 412GiB/1TiB",
    "[XTuner][{ts}][DEBUG] weight sync to rollout servers finished in {r:.2f}s",
]


def build_log(path: Path, size_mb: int, error_lines: list[str]) -> dict[str, Any]:
    """Healthy training-log lines up to ``size_mb`` with the given error lines scattered through it."""
    target = size_mb * MB
    if path.exists() and abs(path.stat().st_size - target) < 256 * 1024:
        return {"bytes": path.stat().st_size, "errors_injected": len(error_lines)}
    rnd = random.Random(1234)
    # a fixed pool of rendered lines keeps generation fast; the scan still sees every byte
    pool = [
        t.format(
            ts=f"2026-11-28 {rnd.randrange(24):02d}:{rnd.randrange(60):02d}:{rnd.randrange(60):02d}",
            step=rnd.randrange(5000),
            pid=rnd.randrange(10_000, 99_999),
            rid=rnd.randrange(1_000_000),
            n=rnd.randrange(100, 4000),
            r=rnd.random(),
        )
        + "\n"
        for t in HEALTHY_TEMPLATES
        for _ in range(500)
    ]
    rnd.shuffle(pool)
    chunk = "".join(pool).encode()
    n_chunks = max(1, target // len(chunk))
    at = {rnd.randrange(n_chunks): line for line in error_lines}
    with path.open("wb") as fh:
        for i in range(n_chunks):
            fh.write(chunk)
            if i in at:
                fh.write(at[i].encode() + b"\n")
    return {"bytes": path.stat().st_size, "errors_injected": len(at)}


_ERE_SUBST = [
    (r"(?:", "("),
    (r"\d", "[0-9]"),
    (r"\D", "[^0-9]"),
    (r"\s", "[[:space:]]"),
    (r"\S", "[^[:space:]]"),
    (r"\w", "[[:alnum:]_]"),
    (r"\x27", "'"),
    (r"\x22", '"'),
    ("*?", "*"),
    ("+?", "+"),
    ("??", "?"),
]


def to_ere(pattern: str) -> str | None:
    """A Python regex as POSIX ERE for GNU grep -E, or None where ERE has no equivalent (lookaround, backrefs...)."""
    if re.search(r"\(\?[=!<P]|\\[1-9]|\(\?[aiLmsux]", pattern):
        return None
    out = pattern
    for a, b in _ERE_SUBST:
        out = out.replace(a, b)
    # a character class with \d or \s inside ([\d.]) becomes a nested bracket; rewrite it as a POSIX class inside
    out = out.replace("[[0-9]", "[0-9").replace("[[[:space:]]", "[[:space:]")
    return None if "\\d" in out or "\\s" in out or "\\w" in out else out


def _catalog() -> list[Any]:
    from xtuner_rl_mcp.knowledge.catalog import load_catalog

    return list(load_catalog().entries)


def bench_diagnose(size_mb: int, runs: int, work: Path, tools: list[str]) -> dict[str, Any]:
    if "diagnose_symptom" not in tools:
        return {"skipped": "diagnose_symptom is not registered"}
    try:
        entries = _catalog()
    except Exception as exc:  # the catalog is another engineer's file; report, do not crash the bench
        return {"skipped": f"failure-mode catalog did not load: {type(exc).__name__}: {exc}"}
    patterns = [p for e in entries for p in e.patterns]
    errors = [e.examples[0] for e in entries[:: max(1, len(entries) // 6)]][:6]
    path = work / f"train_{size_mb}mb.log"
    log(f"diagnose: building {size_mb} MB log")
    meta = build_log(path, size_mb, errors)
    res: dict[str, Any] = {"size_mb": size_mb, **meta, "patterns": len(patterns), "peers": {}, "notes": []}
    from xtuner_rl_mcp.operations.diagnose_symptom import Params

    fields = Params.model_fields
    arg = next((a for a in ("log_path", "path", "log_file") if a in fields), None)
    if arg is None:
        return {"skipped": f"diagnose_symptom has no log path argument (fields: {sorted(fields)})"}
    args = json.dumps({arg: str(path)})
    res["peers"]["ours: diagnose_symptom run()"] = repeat_runs(
        [*PEERS, "tool", "diagnose_symptom", str(work), args], runs
    )
    grep = shutil.which("grep")
    if grep and subprocess.run([grep, "-P", "x"], input=b"x", capture_output=True).returncode == 0:
        combined = "|".join(f"(?:{p})" for p in patterns)
        res["peers"]["grep -P (same patterns)"] = repeat_runs([grep, "-c", "-P", combined, str(path)], runs)
        res["grep_note"] = "one grep -P process with the catalog's regexes joined by |; counts matching lines"
    elif grep:
        res["notes"].append("grep without -P (PCRE): grep -P comparison skipped")
    if grep:
        ere = [e for e in (to_ere(p) for p in patterns) if e is not None]
        check = [e for e in ere if subprocess.run([grep, "-E", "-e", e], input=b"", capture_output=True).returncode < 2]
        pat_file = work / "patterns.ere"
        pat_file.write_text("\n".join(check) + "\n")
        res["peers"]["grep -E (ERE translation)"] = repeat_runs(
            [grep, "-c", "-E", "-f", str(pat_file), str(path)], runs
        )
        res["grep_ere_note"] = (
            f"{len(check)} of {len(patterns)} catalog regexes translated to POSIX ERE (\\d -> [0-9], \\s -> "
            "[[:space:]], (?: -> (, lazy quantifiers made greedy); the rest (lookaround, backreferences) dropped"
        )
    else:
        res["notes"].append("grep not installed: comparison skipped")
    ours = res["peers"]["ours: diagnose_symptom run()"]["time_s"]
    for r in res["peers"].values():
        r["mb_per_s"] = meta["bytes"] / MB / r["time_s"] if r["time_s"] == r["time_s"] else None
    res["ratios_vs_ours"] = {n: r["time_s"] / ours for n, r in res["peers"].items() if ours}
    return res
