"""A small, dependency-free reader of TensorBoard event files: scalars only.

XTuner's default tracker is ``torch.utils.tensorboard.SummaryWriter`` (xtuner/v1/_writer/tb_writer.py:3,17,34-35),
which writes one ``Event`` per ``add_scalar``. An event file is a sequence of TFRecord frames::

    uint64 length (little endian) | uint32 masked CRC of length | length bytes of data | uint32 masked CRC of data

and each frame holds one serialized ``tensorflow.Event``. Only the few protobuf fields a scalar needs are decoded:
``Event.wall_time`` (1, double), ``Event.step`` (2, varint), ``Event.summary`` (5) -> ``Summary.value`` (1) ->
``Value.tag`` (1), ``Value.simple_value`` (2, float) or ``Value.tensor`` (8) -> ``TensorProto`` with ``dtype`` (1),
``tensor_content`` (4), ``float_val`` (5) or ``double_val`` (6). Everything else (graphs, histograms, images) is
skipped unparsed. CRCs are not verified (a torn last frame of a file still being written is detected by its length
and dropped); a frame longer than ``MAX_FRAME`` ends the file.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterator
from typing import BinaryIO

from ..core.limits import UNLIMITED, CallLimits

MAX_FRAME = 64 << 20
#: Bytes read between two checks of the call's deadline.
CHECK_BYTES = 1 << 20
_DT_FLOAT, _DT_DOUBLE, _DT_INT32, _DT_INT64 = 1, 2, 3, 9
_U64 = struct.Struct("<Q")
_F32 = struct.Struct("<f")
_F64 = struct.Struct("<d")


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, pos
        shift += 7
        if shift > 63:
            raise ValueError("varint too long")


def fields(buf: bytes) -> Iterator[tuple[int, int, int | bytes]]:
    """(field number, wire type, value) of one protobuf message: a varint (wire type 0) is an int, every other
    value is its raw bytes."""
    pos, end = 0, len(buf)
    while pos < end:
        key, pos = _varint(buf, pos)
        num, wt = key >> 3, key & 7
        if wt == 0:
            val, pos = _varint(buf, pos)
            yield num, wt, val
        elif wt == 1:
            yield num, wt, buf[pos : pos + 8]
            pos += 8
        elif wt == 2:
            n, pos = _varint(buf, pos)
            yield num, wt, buf[pos : pos + n]
            pos += n
        elif wt == 5:
            yield num, wt, buf[pos : pos + 4]
            pos += 4
        else:  # groups (3/4) are not used by these messages
            raise ValueError(f"unsupported wire type {wt}")
    if pos != end:
        raise ValueError("message overruns its buffer")


def _tensor_value(buf: bytes) -> float | None:
    dtype = 0
    content = b""
    for num, wt, val in fields(buf):
        if num == 1 and isinstance(val, int):
            dtype = val
        elif num == 4 and wt == 2 and isinstance(val, bytes):
            content = val
        elif num == 5 and isinstance(val, bytes):  # float_val: packed (wt 2) or single (wt 5)
            raw = val if wt == 5 else val[:4]
            return _F32.unpack(raw)[0] if len(raw) == 4 else None
        elif num == 6 and isinstance(val, bytes):
            raw = val if wt == 1 else val[:8]
            return _F64.unpack(raw)[0] if len(raw) == 8 else None
    if content:
        fmt = {_DT_FLOAT: "<f", _DT_DOUBLE: "<d", _DT_INT32: "<i", _DT_INT64: "<q"}.get(dtype)
        if fmt and len(content) >= struct.calcsize(fmt):
            return float(struct.unpack_from(fmt, content)[0])
    return None


def _summary_values(buf: bytes, want: Callable[[str], bool]) -> Iterator[tuple[str, float]]:
    for num, wt, val in fields(buf):
        if num != 1 or wt != 2 or not isinstance(val, bytes):
            continue
        tag: str | None = None
        value: float | None = None
        for vnum, vwt, vval in fields(val):
            if not isinstance(vval, bytes):
                continue
            if vnum == 1 and vwt == 2:
                tag = vval.decode("utf-8", "replace")
                if not want(tag):
                    break
            elif vnum == 2 and vwt == 5:
                value = _F32.unpack(vval)[0]
            elif vnum == 8 and vwt == 2:
                value = _tensor_value(vval)
        if tag is not None and value is not None and want(tag):
            yield tag, value


def frames(f: BinaryIO, max_bytes: int, limits: CallLimits = UNLIMITED) -> Iterator[bytes]:
    """The data of each complete TFRecord frame of an open event file, up to ``max_bytes`` of it (a torn last frame
    is dropped)."""
    read = 0
    next_check = 0
    while read < max_bytes:
        if read >= next_check:
            limits.check()
            next_check = read + CHECK_BYTES
        head = f.read(12)
        if len(head) < 12:
            return
        (n,) = _U64.unpack_from(head)
        if n > MAX_FRAME:
            return
        data = f.read(n + 4)
        if len(data) < n + 4:
            return
        read += 16 + n
        yield data[:n]


def read_scalars(
    f: BinaryIO, want: Callable[[str], bool], max_bytes: int = 1 << 30, limits: CallLimits = UNLIMITED
) -> Iterator[tuple[int, float, str, float]]:
    """(step, wall_time, tag, value) of every scalar in the open event file ``f`` whose tag ``want`` accepts."""
    for data in frames(f, max_bytes, limits):
        step, wall = 0, 0.0
        summary: bytes | None = None
        try:
            for num, wt, val in fields(data):
                if num == 1 and wt == 1 and isinstance(val, bytes):
                    wall = _F64.unpack(val)[0]
                elif num == 2 and isinstance(val, int):
                    step = val
                    if step >= 1 << 63:
                        step -= 1 << 64
                elif num == 5 and wt == 2 and isinstance(val, bytes):
                    summary = val
            if summary is None:
                continue
            for tag, value in _summary_values(summary, want):
                yield step, wall, tag, value
        except (ValueError, IndexError, struct.error):
            continue  # a damaged frame: skip it, keep reading
