"""Duplicate prompts: the salt token prompt hashes are made under, and repeats counted across ranges and files
from their sorted, distinct prompt hashes (bucket by bucket, so the transient set stays small)."""

from __future__ import annotations

from array import array
from bisect import bisect_left
from collections.abc import Iterable
from itertools import chain

from .jsonl_results import DUP_HASH_CAP, FileResult

#: Prompts are told apart by Python's 64-bit ``hash()`` of their text (SipHash, a third of the cost of crc32 plus a
#: copy). It is salted per process unless PYTHONHASHSEED is fixed, so each range records this token: hashes are only
#: compared between ranges scanned under the same salt (the worker processes and Ray tasks get PYTHONHASHSEED=0).
HASH_DOMAIN = hash("xtuner-rl-mcp duplicate prompts")
#: Duplicates are counted bucket by bucket on the hash's top bits, so the transient set is 1/16 of the hashes.
DUP_BUCKET_BITS = 4


def duplicates_across(files: list[FileResult]) -> tuple[int, int]:
    """(duplicate prompts, prompts checked) over several files, on a prefix of whole files within the global cap."""
    arrays: list[array] = []
    within = kept = 0
    domain = main_domain((fr.hash_domain, fr.duplicate_checked) for fr in files)
    for fr in files:
        if fr.hash_domain != domain:
            continue
        if kept + fr.duplicate_checked > DUP_HASH_CAP:
            break
        arrays.extend(fr.hash_arrays)
        within += fr.duplicates_within
        kept += fr.duplicate_checked
    return within + count_duplicates(arrays), kept


def main_domain(sizes: Iterable[tuple[int, int]]) -> int:
    """The hash salt most prompts were hashed with (normally the only one; a range rescanned elsewhere may differ)."""
    total: dict[int, int] = {}
    for domain, n in sizes:
        total[domain] = total.get(domain, 0) + n
    return max(total, key=total.__getitem__) if total else 0


def count_duplicates(sorted_arrays: list[array]) -> int:
    """Items equal to an item of another array, over arrays that are each sorted and free of repeats.

    Distinct values are counted bucket by bucket on the top ``DUP_BUCKET_BITS`` bits (sorted arrays give each
    bucket as one slice), so the transient set holds a sixteenth of the hashes; the work is C-level set building.
    """
    arrays = [a for a in sorted_arrays if len(a)]
    if len(arrays) < 2:
        return 0
    total = sum(map(len, arrays))
    distinct = 0
    los = [0] * len(arrays)
    step = 1 << (64 - DUP_BUCKET_BITS)
    for bucket in range(1, (1 << DUP_BUCKET_BITS) + 1):
        hi = bucket * step - (1 << 63)  # signed 64-bit values
        pieces = []
        for i, arr in enumerate(arrays):
            j = bisect_left(arr, hi, los[i]) if bucket < 1 << DUP_BUCKET_BITS else len(arr)
            if j > los[i]:
                pieces.append(arr[los[i] : j])
                los[i] = j
        if len(pieces) == 1:
            distinct += len(pieces[0])
        elif pieces:
            distinct += len(set(chain.from_iterable(pieces)))
    return total - distinct
