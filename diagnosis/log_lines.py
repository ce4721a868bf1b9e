"""Cleaning one log line: ANSI codes, control characters, timestamps, log levels and Ray worker prefixes."""

from __future__ import annotations

import re

_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]")
_CTRL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
#: Ray prefixes worker output with "(ActorName pid=123, ip=10.0.0.5)", "(raylet)", "(autoscaler +2m3s)" ...
_RAY_PREFIX = re.compile(
    r"^\((?:[\w.:\-\[\] ]|\([\w.:\-]{0,60}\)){0,100}?\s?pid=\w+(?:,\s*ip=[\w.:\-]+)?(?:,\s*repr=[^)]{0,200})?\)\s*"
    r"|^\((?:raylet|gcs_server|autoscaler|monitor|dashboard|log_monitor)[^)]{0,40}\)\s*"
)
#: Ray's log deduplication suffix.
_RAY_REPEATED = re.compile(r"\s*\[repeated \d+x across cluster\]\s*$")
_LEVEL_WORD = r"(?P<level>TRACE|DEBUG|INFO|SUCCESS|NOTICE|WARNING|WARN|ERROR|CRITICAL|FATAL|EXCEPTION)"
_PREFIXES = [
    # [XTuner][RANK 0][2026-08-21 16:02:20][WARNING][module][name:function:line]
    re.compile(r"^\[XTuner\](?:\[RANK \d+\])?\[[^\]]*\]\[" + _LEVEL_WORD + r"\](?:\[[^\]]{0,120}\])*\s*"),
    # loguru default: 2026-08-21 16:02:20.123 | ERROR    | module:function:12 - message
    re.compile(r"^\d{4}-\d\d-\d\d[ T][\d:.,]+\s*\|\s*" + _LEVEL_WORD + r"\s*\|\s*[^|]{0,200}?\s-\s"),
    # logging: 2026-08-21 16:02:20,441 INFO worker.py:1852 -- message  /  2026-08-21 16:02:20 ERROR message
    re.compile(
        r"^\[?\d{4}-\d\d-\d\d[ T][\d:.,]+(?:[+-]\d\d:?\d\d|Z)?\]?\s+" + _LEVEL_WORD + r"\b:?\s*(?:[\w.]+:\d+\s+--\s+)?"
    ),
    # [2026-08-21 16:02:20] [ERROR] / [2026-08-21 16:02:20 TP0] message / [2026-08-21 16:02:20,123]
    re.compile(r"^\[\d{4}-\d\d-\d\d[ T][^\]]{0,40}\]\s*(?:\[?" + _LEVEL_WORD + r"\]?:?\s*)?"),
    # FastChat-style: 2024-08-27 12:54:55 | ERROR | stderr | message
    re.compile(r"^\d{4}-\d\d-\d\d[ T][\d:.,]+\s*\|\s*" + _LEVEL_WORD + r"\s*\|\s*[\w.]{1,40}\s*\|\s?"),
    # torch.distributed rank prefix: [rank0]: message
    re.compile(r"^\[[Rr]ank\s?\d+\]:\s?"),
    # docker compose service prefix: service-1  | message
    re.compile(r"^[\w.-]{1,60}\s+\|\s"),
    # LMDeploy: 2025-04-28 10:00:00,000 - lmdeploy - ERROR - engine.py:781 - message
    re.compile(
        r"^\d{4}-\d\d-\d\d[ T][\d:.,]+\s+-\s+[\w.]{1,40}\s+-\s+" + _LEVEL_WORD + r"\s+-\s+(?:[\w.]+:\d+\s+-\s+)?"
    ),
    # TurboMind: [TM][WARNING] message; vLLM: ERROR 08-21 16:02:25 [engine.py:123] message
    re.compile(r"^\[TM\]\[" + _LEVEL_WORD + r"\]\s*"),
    re.compile(r"^" + _LEVEL_WORD + r" \d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)? \[[^\]]{1,80}\]\s*"),
    # mmengine: 04/02 11:50:24 - mmengine - WARNING - message
    re.compile(r"^\d\d/\d\d \d\d:\d\d:\d\d - [\w.]{1,40} - " + _LEVEL_WORD + r" - "),
    # logging.basicConfig default: ERROR:logger.name:message
    re.compile(r"^" + _LEVEL_WORD + r":[\w.\-]{1,80}:(?=\S)"),
    # glog (Ray C++): E0821 16:02:20.123456 12345 file.cc:123] message
    re.compile(r"^(?P<glog>[IWEF])\d{4} \d\d:\d\d:\d\d\.\d+\s+\d+\s+[\w.]+:\d+\]\s*"),
    # uvicorn / plain: ERROR:    message / WARNING: message / [ERROR] message
    re.compile(r"^\[?" + _LEVEL_WORD + r"\]?:\s+"),
    re.compile(r"^\[" + _LEVEL_WORD + r"\]\s*"),
    # exception groups (Python 3.11+): "  | ValueError: ..." / "+ Exception Group Traceback ..."
    re.compile(r"^(?:[|+]\s+)+"),
    # bare timestamps: 2026-08-21 16:02:20,441 / 08-21 16:02:20 / 16:02:20.123
    re.compile(r"^\[?(?:\d{4}-)?\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:[.,]\d+)?\]?\s*[-|:]?\s*"),
]
_GLOG_LEVEL = {"I": "INFO", "W": "WARNING", "E": "ERROR", "F": "FATAL"}


def clean_line(raw: str) -> tuple[str, str, str]:
    """Strip terminal codes and prefixes. Returns (text, worker key, log level or '')."""
    text = raw
    if "\x1b" in text:
        text = _ANSI.sub("", text)
    if "\r" in text:  # progress bars rewrite the line: keep what the terminal showed last, plus any error text
        parts = [p for p in text.split("\r") if p.strip()]
        text = " ".join(parts[-2:]) if parts else ""
    text = _CTRL.sub(" ", text).strip()
    if text.endswith("across cluster]"):
        text = _RAY_REPEATED.sub("", text)
    worker = ""
    level = ""
    for _ in range(4):  # prefixes nest: "(pid=1) [2026-...] [ERROR] ..."
        changed = False
        m = _RAY_PREFIX.match(text)
        if m:
            worker = worker or m.group(0).strip()
            text = text[m.end() :].lstrip()
            changed = True
        for rx in _PREFIXES:
            m = rx.match(text)
            if m and m.end() > 0:
                gd = m.groupdict()
                lv = gd.get("level") or _GLOG_LEVEL.get(gd.get("glog") or "", "")
                level = level or (lv or "").upper()
                text = text[m.end() :].lstrip()
                changed = True
                break
        if not changed:
            break
    return text, worker, level


# --------------------------------------------------------------------------------------------------------
# Line classification
# --------------------------------------------------------------------------------------------------------
