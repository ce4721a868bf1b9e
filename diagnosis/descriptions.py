"""Ranking catalog entries by how a failure is described: prose, partial logs, Chinese, other stacks' wording.

Two signals, added per entry:

- phrases: every catalog entry lists ``phrases``; a phrase matches when its words occur in a row (Chinese: as a
  substring). A phrase weighs more when few entries share it and when it is longer; an entry adds its matched
  phrases with diminishing returns, so one specific phrase beats many generic ones.
- retrieval: BM25 (``bm25s``) over each entry's title, phrases, messages and cause, with Snowball stems and jieba
  words (``knowledge.text.retrieval_terms``); Chinese runs of the report also bring their English (the glossary's,
  and CC-CEDICT's for the words it lacks: ``knowledge.search.cjk_english``). Rare, telling words (a package, a
  backend, an error class) weigh most; words of every report (XTuner, GRPO, training, error ...) weigh nothing.

An entry then gains a share of its category's other scores: several entries of one area that all fit say more
than one. The constants below were chosen by nested 5-fold cross-validation on the development part of the
real-report corpus (``python bench/real_reports.py --cv``). Only lines a person wrote or an error/warning line take
part: INFO and DEBUG log lines describe a healthy run as much as a broken one. ``report_terms`` is also what the
learned area model reads (``report_model``), and ``area_leads`` names an entry for an area it points to.
"""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Literal

from ..knowledge.search import cjk_english
from ..knowledge.text import CJK_RUNS, contains_phrase, is_cjk, normalise, retrieval_terms
from .log_lines import clean_line

#: Characters of pasted text matched by description (head and tail kept: the failure is usually at the end).
MAX_DESCRIBED_CHARS = 256 * 1024
#: Each further matched phrase of one entry counts this much less than the previous one.
DECAY = 0.6
#: BM25 term-frequency saturation and length normalisation (Lucene's defaults won the cross-validation).
BM25_K1 = 1.2
BM25_B = 0.75
#: What a shared word is worth in each part of an entry.
FIELD_WEIGHTS: dict[str, float] = {"title": 1.0, "phrases": 1.0, "examples": 1.0, "cause": 0.5}
#: The retrieval score's weight next to the phrase score.
RETRIEVAL_WEIGHT = 0.25
#: Share of the other scores of its category that an entry gains.
CATEGORY_SHARE = 0.1
#: Telling words a report must share with an entry before retrieval alone makes it a lead.
MIN_SHARED_WORDS = 2
#: Leads kept, and the least share of the best score a lead needs.
MAX_LEADS = 8
RELATIVE_FLOOR = 0.3
_QUIET_LEVELS = frozenset({"INFO", "DEBUG", "TRACE", "SUCCESS", "NOTICE"})
#: Programs a report's command lines start with. A command says how the run was launched, not what went wrong: its
#: words (lmdeploy serve api_server, docker run, --tp) match the entries of serving and launching whatever failed.
#: On the development part (nested 5-fold cross-validation, 487 reports) leaving command lines out of description
#: matching raised top-1 from 72.3% to 73.3% (Chinese 60.4% to 64.1%), top-3 unchanged.
_LAUNCHERS = (
    "python[0-9.]*|torchrun|deepspeed|accelerate|bash|sh|lmdeploy|vllm|sglang|swift|llamafactory-cli|xtuner|ray|"
    "docker|pip[0-9.]*|conda|srun|sbatch|mpirun|kubectl|nohup"
)
_COMMAND = re.compile(
    rf"^\s*(?P<prompt>\$\s*)?(?P<env>(?:[A-Za-z_][A-Za-z0-9_]*=\S*\s+)*)(?:sudo\s+|time\s+|exec\s+)*"
    rf"(?:{_LAUNCHERS})(?:\s|$)"
)
#: What tells a command from a sentence that starts with a program's name ("vllm crashes when ..."): a shell prompt,
#: variables set before it, an option, a script or module argument, or a continuation backslash.
_COMMAND_SIGN = re.compile(r"\s--?[A-Za-z]|\S\.(?:py|sh|ya?ml|json)\b|\\\s*$")


def _command(line: str) -> re.Match[str] | None:
    """The command a line runs (None for prose, and for a line with Chinese in it: that is someone's sentence)."""
    m = _COMMAND.match(line)
    if m is None or CJK_RUNS.search(line):
        return None
    return m if m["prompt"] or m["env"] or _COMMAND_SIGN.search(line) else None


@dataclass(frozen=True)
class Phrase:
    text: str  # as written in the catalog
    norm: str  # normalised, with surrounding spaces
    words: frozenset[str]  # Latin words that must all be present (cheap prefilter); empty for Chinese
    weight: float


@dataclass
class DescriptionMatch:
    """One entry the description points to: the phrases of it that occur, or the line that shares its words."""

    failure_mode_id: str
    score: float
    phrases: list[Phrase] = field(default_factory=list)
    lines: list[tuple[int, str, str]] = field(default_factory=list)  # (line number, line text, phrase or shared words)


@dataclass(frozen=True)
class PhraseIndex:
    by_entry: dict[str, tuple[Phrase, ...]]


#: One index per catalog object; the object is kept with it, so a recycled id() can never return a stale index.
_INDEX: dict[int, tuple[Any, PhraseIndex]] = {}


def phrase_index(catalog: Any) -> PhraseIndex:
    """Phrases of every entry, normalised and weighted once per catalog object."""
    cached = _INDEX.get(id(catalog))
    if cached is not None and cached[0] is catalog:
        return cached[1]
    normalised = {fm.id: {normalise(p): p for p in fm.phrases if _telling(normalise(p))} for fm in catalog.entries}
    df: dict[str, int] = {}
    for forms in normalised.values():
        for norm in forms:
            df[norm] = df.get(norm, 0) + 1
    n = max(1, len(normalised))
    by_entry: dict[str, tuple[Phrase, ...]] = {}
    for fm_id, forms in normalised.items():
        phrases = []
        for norm, raw in forms.items():
            core = norm.strip()
            if is_cjk(core.replace(" ", "")) and " " not in core:
                length = 1.0 + 0.15 * max(0, len(core) - 2)
                words: frozenset[str] = frozenset()
            else:
                parts = core.split()
                length = 1.0 + 0.35 * (len(parts) - 1)
                words = frozenset(p for p in parts if not is_cjk(p))
            weight = math.log(1.0 + n / df[norm]) * length
            phrases.append(Phrase(raw, norm, words, weight))
        by_entry[fm_id] = tuple(sorted(phrases, key=lambda p: -p.weight))
    idx = PhraseIndex(by_entry)
    _INDEX[id(catalog)] = (catalog, idx)
    return idx


#: Words that say something is wrong without saying what: a log without any takes no part in retrieval.
_TROUBLE_TEXT = (
    "error exception traceback fail failed failure crash crashed hang hung stuck freeze frozen killed oom "
    "timeout timed abort aborted cannot can't unable refused denied invalid missing broken wrong nan inf "
    "segfault segmentation died dead slow never zero always"
)
_TROUBLE = frozenset(normalise(_TROUBLE_TEXT).split())
_TROUBLE_ZH = (
    "报错",
    "错误",
    "失败",
    "异常",
    "卡住",
    "卡死",
    "崩溃",
    "超时",
    "无法",
    "不能",
    "不行",
    "没有",
    "挂了",
    "退出",
    "问题",
)

#: Words that say nothing about which failure it is.
_STOP_TEXT = (
    "the a an and or of to in on at for with by from is are was were be been it this that these those not no "
    "when while after before can cannot can't could would should will do does did have has had my our your i we "
    "you they he she its as if then than so but also only just all any some more most very into out up down "
    "error errors fail failed failure run runs running training train model use using used get got issue bug "
    "problem help please thanks hi hello question how why what which work works working line file "
    "报错 问题 错误 失败 训练 模型 请问 谢谢 运行 使用"
)
_STOP = frozenset(normalise(_STOP_TEXT).split())


def _telling(norm: str) -> bool:
    """A phrase that names something: not made only of words every report uses (a phrase like that is no lead)."""
    words = norm.split()
    return bool(words) and not all(w in _STOP for w in words)


#: Words of every report (besides _STOP): they name the stack, not the failure.
_GENERIC_WORDS = (
    "xtuner grpo rl ppo dapo verl rlhf trainer train training model models run running job script code issue bug "
    "question help please thanks hi hello describe reproduce reproduction environment expected behavior behaviour "
    "version versions python env using latest following here there below above following step steps output log logs "
    "报错 问题 错误 失败 训练 模型 请问 谢谢 运行 使用 出现 如下 日志 代码 版本 环境 复现 描述"
)


@dataclass(frozen=True)
class RetrievalIndex:
    """BM25 over the fields of every entry, one model per field, plus what evidence lines need."""

    ids: tuple[str, ...]
    #: (field weight, bm25s model, term -> term id) per field
    fields: tuple[tuple[float, Any, dict[str, int]], ...]
    #: terms that say something is wrong without saying what (they count in BM25, not towards MIN_SHARED_WORDS)
    trouble: frozenset[str]
    #: entry id -> its terms with their rarity across entries, to show which words a line shares with an entry
    entry_terms: dict[str, dict[str, float]]


_RETRIEVAL: dict[int, tuple[Any, RetrievalIndex]] = {}


def _entry_field_text(fm: Any) -> dict[str, str]:
    return {
        "title": fm.title,
        "phrases": "\n".join(fm.phrases),
        "examples": "\n".join(fm.examples),
        "cause": fm.cause,
    }


def retrieval_index(catalog: Any) -> RetrievalIndex:
    """The BM25 models of a catalog, built once per catalog object (bm25s, with numpy, loads here)."""
    cached = _RETRIEVAL.get(id(catalog))
    if cached is not None and cached[0] is catalog:
        return cached[1]
    import bm25s

    # bm25s pins its logger at DEBUG on import; the operator's --log-level (the root logger's) decides instead
    logging.getLogger("bm25s").setLevel(logging.NOTSET)
    generic = generic_terms()
    entries = catalog.entries
    texts = [_entry_field_text(fm) for fm in entries]
    fields = []
    per_entry: list[set[str]] = [set() for _ in entries]
    for name, weight in FIELD_WEIGHTS.items():
        vocab: dict[str, int] = {}
        docs = []
        for i, t in enumerate(texts):
            words = [w for w in retrieval_terms(t[name]) if w not in generic]
            per_entry[i].update(words)
            docs.append([vocab.setdefault(w, len(vocab)) for w in words])
        model = bm25s.BM25(k1=BM25_K1, b=BM25_B)
        model.index(bm25s.tokenization.Tokenized(ids=docs, vocab=vocab), show_progress=False)
        fields.append((weight, model, vocab))
    df: dict[str, int] = {}
    for ts in per_entry:
        for w in ts:
            df[w] = df.get(w, 0) + 1
    n = len(entries)
    entry_terms = {fm.id: {w: math.log(1.0 + n / df[w]) for w in ts} for fm, ts in zip(entries, per_entry, strict=True)}
    trouble = frozenset(retrieval_terms(_TROUBLE_TEXT))
    idx = RetrievalIndex(tuple(fm.id for fm in entries), tuple(fields), trouble, entry_terms)
    _RETRIEVAL[id(catalog)] = (catalog, idx)
    return idx


@lru_cache(maxsize=1)
def generic_terms() -> frozenset[str]:
    """Index terms that never take part: stopwords and the words of every report."""
    return frozenset(retrieval_terms(f"{_STOP_TEXT} {_GENERIC_WORDS}"))


def report_terms(lines: Iterable[tuple[int, str]], dictionary: bool = True) -> list[str]:
    """Distinct telling terms of the lines, in order; Chinese runs add their English (the glossary's, and CC-CEDICT's
    for other words unless ``dictionary`` is off: the entries are in English, and English reports then lend their
    statistics to Chinese ones). Without the dictionary's words, the count says how much a report tells."""
    text = "\n".join(t for _, t in lines)
    english = " ".join(w for run in CJK_RUNS.findall(text) for w in cjk_english(run, dictionary))
    generic = generic_terms()
    return [t for t in dict.fromkeys(retrieval_terms(f"{text}\n{english}")) if t not in generic]


def retrieval_scores(
    catalog: Any, lines: Iterable[tuple[int, str]], min_shared: int = MIN_SHARED_WORDS
) -> dict[str, float]:
    """BM25 score of every entry that shares ``min_shared`` telling words with the lines (fields weighted, added)."""
    idx = retrieval_index(catalog)
    query = report_terms(lines)
    total: Any = None
    for weight, model, vocab in idx.fields:
        ids = [vocab[t] for t in query if t in vocab]
        if ids:
            part = weight * model.get_scores(ids)
            total = part if total is None else total + part
    if total is None:
        return {}
    # One shared word is no lead (division/divisible share a stem; a report may name one rare thing in passing):
    # an entry needs two telling words of the report, besides words that only say something is wrong.
    telling = set(query) - idx.trouble
    return {
        fm_id: float(v)
        for fm_id, v in zip(idx.ids, total.tolist(), strict=True)
        if v > 0 and len(telling.intersection(idx.entry_terms[fm_id])) >= min_shared
    }


def shared_words_line(catalog: Any, lines: Iterable[tuple[int, str]], fm_id: str) -> tuple[int, str, str] | None:
    """The line that shares the rarest words with an entry, and those words (evidence for a retrieval lead)."""
    idx = retrieval_index(catalog)
    weights = idx.entry_terms.get(fm_id, {})
    best: tuple[float, int, str, list[str]] | None = None
    for n, text in lines:
        shared = sorted({t for t in retrieval_terms(text) if t in weights}, key=lambda t: -weights[t])
        score = sum(weights[t] for t in shared)
        if shared and (best is None or score > best[0]):
            best = (score, n, text, shared)
    if best is None:
        return None
    return best[1], best[2], "shared words: " + ", ".join(best[3][:6])


def rank_descriptions(catalog: Any, lines: Iterable[tuple[int, str]], from_log: bool = False) -> list[DescriptionMatch]:
    """Entries by phrase matches plus retrieval score plus a share of their category, best first.

    A person describing a run is describing a problem; a log only takes part in retrieval when a line says
    something went wrong, so a healthy log raises no suspicion.
    """
    lines = list(lines)
    phrased = {m.failure_mode_id: m for m in match_description(catalog, lines)}
    scores = {fm_id: m.score for fm_id, m in phrased.items()}
    if lines and (not from_log or reports_trouble(lines)):
        for fm_id, s in retrieval_scores(catalog, lines).items():
            scores[fm_id] = scores.get(fm_id, 0.0) + RETRIEVAL_WEIGHT * s
    by_category: dict[str, float] = {}
    for fm_id, s in scores.items():
        cat = catalog.by_id[fm_id].category
        by_category[cat] = by_category.get(cat, 0.0) + s
    combined = {
        fm_id: s + CATEGORY_SHARE * (by_category[catalog.by_id[fm_id].category] - s) for fm_id, s in scores.items()
    }
    ranked = sorted(combined.items(), key=lambda kv: (-kv[1], kv[0]))[:MAX_LEADS]
    best = ranked[0][1] if ranked else 0.0
    ranked = [(k, v) for k, v in ranked if v >= RELATIVE_FLOOR * best]
    out = []
    for fm_id, score in ranked:
        m = phrased.get(fm_id)
        if m is not None:
            out.append(DescriptionMatch(fm_id, round(score, 3), m.phrases, m.lines))
            continue
        line = shared_words_line(catalog, lines, fm_id)
        out.append(DescriptionMatch(fm_id, round(score, 3), [], [line] if line else []))
    return out


def area_leads(catalog: Any, lines: list[tuple[int, str]], categories: Iterable[str]) -> list[DescriptionMatch]:
    """For each category, the entry of it that shares the most telling words with the report (one is enough here:
    the category itself is the lead; none when no entry of it shares a word). A lead of this kind has no score."""
    wanted = set(categories)
    if not wanted:
        return []
    best: dict[str, tuple[float, str]] = {}
    for fm_id, score in retrieval_scores(catalog, lines, min_shared=1).items():
        cat = catalog.by_id[fm_id].category
        if cat in wanted and (cat not in best or (score, fm_id) > best[cat]):
            best[cat] = (score, fm_id)
    out = []
    for _score, fm_id in sorted(best.values(), reverse=True):
        line = shared_words_line(catalog, lines, fm_id)
        out.append(DescriptionMatch(fm_id, 0.0, [], [line] if line else []))
    return out


def is_log(text: str) -> bool:
    """Mostly log records (a level or timestamp prefix on most lines), rather than a person's description."""
    lines = [ln for ln in text.splitlines()[:400] if ln.strip()]
    leveled = sum(1 for ln in lines if clean_line(ln)[2])
    return len(lines) >= 3 and leveled * 2 >= len(lines)


def described_lines(text: str) -> list[tuple[int, str]]:
    """The lines of a report that take part: prose and error/warning lines, not INFO/DEBUG log chatter."""
    if len(text) > MAX_DESCRIBED_CHARS:
        half = MAX_DESCRIBED_CHARS // 2
        text = text[:half] + "\n" + text[-half:]
    out = []
    after_frame = in_command = False
    for i, raw in enumerate(text.splitlines(), 1):
        if not raw.strip():
            continue
        cleaned, _worker, level = clean_line(raw)
        code_line, after_frame = after_frame, cleaned.startswith('File "')
        # INFO chatter, traceback frames and the source lines they quote say where, not what went wrong.
        if level in _QUIET_LEVELS or after_frame or code_line or cleaned.startswith("Traceback (most recent"):
            continue
        # A command and its continuation lines say how the run was launched; the variables set before it stay.
        option = cleaned.lstrip().startswith("--")
        command = None if in_command or option else _command(cleaned)
        skipped = in_command or option or command is not None
        in_command = skipped and cleaned.rstrip().endswith("\\")
        if command is not None and command["env"].strip():
            out.append((i, command["env"].strip()))
        if not skipped:
            out.append((i, cleaned))
    return out


#: A report is Chinese when the lines that take part hold at least this many Chinese characters (of the 1,155 labelled
#: reports, 7 disagree with the language their collector gave them).
CHINESE_CHARS = 5


def report_language(lines: Iterable[tuple[int, str]]) -> Literal["en", "zh"]:
    """The language a report is written in, as far as ranking is concerned: Chinese when a few Chinese characters
    are among its lines (a Chinese title over an English traceback is a Chinese report), else English."""
    count = 0
    for _, text in lines:
        count += sum(len(run) for run in CJK_RUNS.findall(text))
        if count >= CHINESE_CHARS:
            return "zh"
    return "en"


def reports_trouble(lines: Iterable[tuple[int, str]]) -> bool:
    """Whether the lines say that something is wrong at all (a healthy log's lines do not)."""
    for _, text in lines:
        norm = normalise(text)
        if _TROUBLE.intersection(norm.split()) or any(w in text for w in _TROUBLE_ZH):
            return True
    return False


def match_description(catalog: Any, lines: Iterable[tuple[int, str]]) -> list[DescriptionMatch]:
    """Entries whose phrases occur in the given lines, best first."""
    numbered = [(n, t, normalise(t)) for n, t in lines]
    if not numbered:
        return []
    whole = " " + " ".join(norm.strip() for _, _, norm in numbered) + " "
    present = set(whole.split())
    matches = []
    for fm_id, phrases in phrase_index(catalog).by_entry.items():
        hit = [p for p in phrases if p.words <= present and contains_phrase(whole, p.norm)]
        if not hit:
            continue
        score = sum(p.weight * DECAY**i for i, p in enumerate(hit))
        m = DescriptionMatch(fm_id, round(score, 3), hit)
        for p in hit[:3]:
            line = next(((n, t) for n, t, norm in numbered if contains_phrase(norm, p.norm)), None)
            if line is not None:  # a phrase spanning two lines has no single line to show
                m.lines.append((line[0], line[1], p.text))
        matches.append(m)
    matches.sort(key=lambda m: (-m.score, m.failure_mode_id))
    return matches


def confidence(score: float, best: float) -> float:
    """A description match is a lead, not a proof: 0.15-0.6, higher for a strong score close to the best one."""
    strength = 1.0 - math.exp(-score / 4.0)
    relative = score / best if best > 0 else 0.0
    return round(0.15 + 0.3 * strength + 0.15 * relative, 2)
