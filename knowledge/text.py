"""Text normalisation shared by description matching and reference search: English and Chinese alike.

Latin text is lower-cased, split on anything that is not a letter or digit (so ``CUDA_VISIBLE_DEVICES``,
``--tp`` and ``expert-parallel`` become words) and lightly stemmed; Chinese (CJK) runs are kept whole for substring
matching and cut into character bigrams for bag-of-words scoring. No dictionary, no model: cheap enough to run on
every pasted report.

``retrieval_terms`` is the tokenizer of ranked retrieval (diagnose_symptom's BM25): Snowball stemming (PyStemmer)
for Latin words and jieba's dictionary segmentation (rjieba) for Chinese. Both libraries load on the first call, so
importing this module stays cheap.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import lru_cache
from typing import NamedTuple

#: CJK Unified Ideographs (+ extension A and compatibility ideographs).
_CJK = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
_TOKEN = re.compile(rf"[{_CJK}]+|[a-z0-9]+")
_CJK_RUN = re.compile(rf"^[{_CJK}]+$")
#: A run of Chinese characters anywhere in a text.
CJK_RUNS = re.compile(rf"[{_CJK}]+")
_DOUBLE_END = re.compile(r"([b-df-hj-np-tv-z])\1$")


@lru_cache(maxsize=65536)
def stem(word: str) -> str:
    """Fold common English inflections so that hangs/hanging/hang, devices/device, configured/configure agree.

    Deliberately crude (no dictionary): it only has to map a word and its inflections to the same key, and the same
    function runs on the report and on the phrases.
    """
    if len(word) <= 4 or word.isdigit():
        return word
    w = word
    if w.endswith("ies") and len(w) > 5:
        w = w[:-3] + "y"
    elif w.endswith(("ses", "xes", "zes", "ches", "shes")):
        w = w[:-2]
    elif w.endswith("s") and not w.endswith(("ss", "us", "is")):
        w = w[:-1]
    elif w.endswith("ing") and len(w) >= 6:
        w = w[:-3]
    elif w.endswith("ed") and len(w) >= 5:
        w = w[:-2]
    if _DOUBLE_END.search(w) and not w.endswith(("ll", "ss", "ff", "zz")):
        w = w[:-1]  # running -> run, stopped -> stop
    if w.endswith("e") and len(w) > 4:
        w = w[:-1]  # configure/configured, device/devices
    return w


def is_cjk(token: str) -> bool:
    return bool(_CJK_RUN.match(token))


def tokens(text: str) -> list[str]:
    """Stemmed Latin words and whole CJK runs, in order."""
    return [t if is_cjk(t) else stem(t) for t in _TOKEN.findall(text.lower())]


def normalise(text: str) -> str:
    """One space-separated string with a space at both ends, so ``" a b "`` in it means the words a b in a row."""
    return " " + " ".join(tokens(text)) + " "


def terms(text: str) -> list[str]:
    """Bag-of-words terms: Latin words, and character bigrams (or the single character) of each CJK run."""
    out: list[str] = []
    for tok in tokens(text):
        if is_cjk(tok):
            out.extend(tok[i : i + 2] for i in range(max(1, len(tok) - 1)))
        else:
            out.append(tok)
    return out


def contains_phrase(normalised_text: str, normalised_phrase: str) -> bool:
    """Whether a phrase (already normalised) occurs in a text (already normalised).

    Latin words must match on word boundaries (both strings carry surrounding spaces); a purely Chinese phrase
    matches anywhere inside a CJK run, since Chinese has no spaces between words.
    """
    core = normalised_phrase.strip()
    if core and is_cjk(core):
        return core in normalised_text
    parts = core.split()
    if any(is_cjk(p) for p in parts):  # mixed: each Chinese run anywhere, the Latin words in a row
        latin = " ".join(p for p in parts if not is_cjk(p))
        return all(p in normalised_text for p in parts if is_cjk(p)) and f" {latin} " in normalised_text
    return normalised_phrase in normalised_text


#: Chinese words that carry no meaning of their own (particles, pronouns, filler verbs of a question).
_ZH_FUNCTION_WORDS = frozenset(
    "的 了 是 在 我 也 就 都 和 与 或 但 一个 这个 那个 什么 怎么 为什么 如何 吗 呢 啊 吧 请问 谢谢 大佬 各位 求助 有 没 不 会 能 要 "
    "用 使用 时候 之后 然后 出现 一直 还是 已经 可以 可能 应该 这样 一下 如下 以下 下面 上面 发现 进行 显示 自己 我们 你们 他们 里面 "
    "情况 现象 这里 那里 这么 那么 怎样 是否 还有 就是 但是 因为 所以 如果 或者 以及 并且 怎么办 怎么回事 为啥 有没有 一样 "
    "您好 你好 麻烦 感谢 谢谢您".split()
)


def is_function_word(word: str) -> bool:
    """A Chinese word that carries no meaning of its own (a particle, a pronoun, the filler of a question)."""
    return word in _ZH_FUNCTION_WORDS


class _Segmenters(NamedTuple):
    stem: Callable[[str], str]  # an English word's Snowball stem
    search_words: Callable[[str], list[str]]  # jieba's search mode: 健康检查 -> 健康, 检查, 健康检查
    precise_words: Callable[[str], list[str]]  # jieba's precise mode: each character in exactly one word


@lru_cache(maxsize=1)
def _segmenters() -> _Segmenters:
    """English stemmer and Chinese word segmenter, loaded once (PyStemmer ~3 ms, rjieba's dictionary ~130 ms)."""
    import rjieba
    import Stemmer

    return _Segmenters(Stemmer.Stemmer("english").stemWord, rjieba.cut_for_search, rjieba.cut)


def chinese_word_spans(run: str) -> list[tuple[int, int, str]]:
    """Each word of a Chinese run (jieba's precise mode) in order, with where it starts and ends in the run."""
    out: list[tuple[int, int, str]] = []
    start = 0
    for word in _segmenters().precise_words(run):
        out.append((start, start + len(word), word))
        start += len(word)
    return out


def retrieval_terms(text: str) -> list[str]:
    """Index terms for ranked retrieval, in order: Snowball stems of Latin words (no bare numbers or single letters)
    and the dictionary words of each Chinese run (search mode: 健康检查 also yields 健康, 检查), function words
    dropped."""
    segmenters = _segmenters()
    stem_word, segment = segmenters.stem, segmenters.search_words
    out: list[str] = []
    for tok in _TOKEN.findall(text.lower()):
        if is_cjk(tok):
            out.extend(w for w in segment(tok) if len(w) > 1 and w not in _ZH_FUNCTION_WORDS)
        elif len(tok) > 1 and not tok.isdigit():
            out.append(stem_word(tok))
    return out
