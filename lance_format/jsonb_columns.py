"""Column-at-a-time JSONB reads for documents that share their top-level layout.

A JSON column's documents are mostly objects with the same keys holding the same kinds of value
(``{"id": 1, "name": "a", "tags": [...]}``). Every such JSONB value has the same header, key
entry words and key bytes at the same offsets (entry words are 4 bytes each, so the key bytes
always start at ``4 + 8 * n``), and its value entry words hold the same kinds. For the rows that
match a row's layout, each value slot is turned into text for all of them at once: integers and
floats assembled from their big-endian bytes with numpy and printed by ``str`` (a float's repr is
the ``ryu`` layout pylance prints in the range let through, see :mod:`lance_format.jsonb_fast`),
strings cut from the buffer and escaped by the C JSON escaper, nested containers by the same
grouping one level down; Arrow's element-wise join then lays out each row's text. Up to
``_MAX_GROUPS`` layouts are handled this way; the remaining rows, and groups holding a value this
path does not print exactly, go through the per-value path (the caller's, at the top level).
"""

from __future__ import annotations

import json
import json.encoder
import struct
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lance_format.jsonb_fast import Slow, decode_container, print_value

__all__ = ["decode_shared_layout"]

_OBJECT, _ARRAY = 0x40000000, 0x80000000
_NULL, _STRING, _NUMBER, _FALSE, _TRUE, _CONTAINER = range(6)
_CONSTANTS = {_NULL: "null", _TRUE: "true", _FALSE: "false"}
# the C string escaper behind json.dumps(ensure_ascii=False): escapes as serde_json does
_quote: Any = json.encoder.encode_basestring
_MAX_KEYS = 64  # wider containers are left to the per-value path (the byte matrix grows with them)
_MAX_GROUPS = 16  # distinct layouts decoded a group at a time; the rest one value at a time
_F64_MAX = 1.7976931348623157e308


def _windows(data: np.ndarray, at: np.ndarray, width: int) -> np.ndarray:
    """The ``width`` bytes at each offset ``at``, one row each (a strided view: no index matrix)."""
    if not len(at):
        return np.zeros((0, width), np.uint8)
    view = np.lib.stride_tricks.as_strided(data, (len(data) - width + 1, width), (1, 1), writeable=False)
    out: np.ndarray = view[at]
    return out


def _be_uint(data: np.ndarray, at: np.ndarray, width: int) -> np.ndarray:
    out = np.zeros(len(at), np.uint64)
    for i in range(width):
        out = (out << np.uint64(8)) | data[at + i].astype(np.uint64)
    return out


def _int_text(values: np.ndarray) -> np.ndarray:
    # Arrow prints integers in decimal, as str() does, without a Python object per value
    text: np.ndarray = pa.array(values).cast(pa.utf8()).to_numpy(zero_copy_only=False)
    return text


def _numbers(data: np.ndarray, pos: np.ndarray, size: np.ndarray) -> pa.Array | None:
    """The JSON text of the numbers at ``pos``, or None if one needs the per-value path."""
    tag = data[pos]
    out = np.empty(len(pos), object)
    done = tag == 0
    out[done] = "0"
    floats = (tag == 0x60) & (size == 9)
    if floats.any():
        at = pos[floats] + 1
        x = _be_uint(data, at, 8).view(np.float64)
        a = np.abs(x)
        if (~((a >= 1e-3) & (a <= _F64_MAX)) & (a != 0.0)).any():
            return None  # the C encoder prints these differently (see jsonb_fast)
        out[floats] = list(map(repr, x.tolist()))  # repr is the ryu layout in this range
        done |= floats
    for tag_value, signed in ((0x50, False), (0x40, True)):
        for width in (1, 2, 4, 8):
            rows = (tag == tag_value) & (size == width + 1)
            if not rows.any():
                continue
            raw = _be_uint(data, pos[rows] + 1, width)
            if signed:
                bits = 8 * width
                values = raw.astype(np.int64) if width == 8 else raw.astype(np.int64) - (
                    (raw >> np.uint64(bits - 1)).astype(np.int64) << bits)
                out[rows] = _int_text(values)
            else:
                out[rows] = _int_text(raw)
            done |= rows
    if not done.all():
        return None
    return pa.array(out, pa.utf8())


def _strings(buf: bytes, data: np.ndarray, pos: np.ndarray, size: np.ndarray) -> pa.Array:
    """The strings at ``pos`` as quoted JSON text."""
    ends = np.cumsum(size)
    # the bytes of every string, end to end: one gather
    raw = data[np.repeat(pos - (ends - size), size) + np.arange(int(ends[-1]) if len(ends) else 0)]
    if len(raw) < 1 << 31 and not ((raw < 0x20) | (raw == 0x22) | (raw == 0x5C)).any():
        # nothing to escape (non-ASCII stays as is, as serde_json leaves it): quotes around the bytes
        offsets = np.concatenate([[0], ends]).astype(np.int32)
        text = pa.StringArray.from_buffers(len(pos), pa.py_buffer(offsets), pa.py_buffer(raw))
        text.validate(full=True)  # UTF-8 checked as decoding would
        return pc.binary_join_element_wise('"', text, '"', "")
    return pa.array(list(map(_quote, [buf[a:a + b].decode("utf-8") for a, b in zip(
        pos.tolist(), size.tolist(), strict=True)])), pa.utf8())


def _group(buf: bytes, data: np.ndarray, starts: np.ndarray, ends: np.ndarray, first: int,
           todo: np.ndarray) -> tuple[np.ndarray, pa.Array] | None:
    """The rows (of ``todo``) laid out as row ``first`` is, and their JSON text."""
    start0 = int(starts[first])
    if ends[first] - start0 < 4:
        return None
    header = int.from_bytes(buf[start0:start0 + 4], "big")
    kind, count = header & 0xE0000000, header & 0x0FFFFFFF
    if kind not in (_OBJECT, _ARRAY) or count > _MAX_KEYS:
        return None
    n_keys = count if kind == _OBJECT else 0
    head = 4 + 4 * n_keys  # header and key entry words, the same in every matching row
    body = head + 4 * count  # where key bytes (then value bytes) start
    if ends[first] - start0 < body:
        return None
    key_words = np.frombuffer(buf, ">u4", n_keys, start0 + 4).astype(np.int64)
    key_ends = np.cumsum(key_words & 0x0FFFFFFF)
    key_len = int(key_ends[-1]) if n_keys else 0
    length = ends - starts
    rows = np.flatnonzero(todo & (length >= body + key_len))
    s = starts[rows]
    same = (_windows(data, s, head) == np.frombuffer(buf, np.uint8, head, start0)).all(axis=1)
    if key_len:
        key_bytes = np.frombuffer(buf, np.uint8, key_len, start0 + body)
        same &= (_windows(data, s + body, key_len) == key_bytes).all(axis=1)
    rows, s = rows[same], s[same]
    if not count:
        return rows, pa.array(["{}" if kind == _OBJECT else "[]"] * len(rows), pa.utf8())
    value_words = np.ascontiguousarray(_windows(data, s + head, 4 * count)).view(">u4").astype(np.int64)
    kinds = value_words >> 28
    sizes = value_words & 0x0FFFFFFF
    pos = s[:, None] + body + key_len + np.cumsum(sizes, axis=1) - sizes
    kinds0 = kinds[rows == first][0]
    keep = (kinds == kinds0).all(axis=1) & (pos[:, -1] + sizes[:, -1] == ends[rows])  # values fill the row
    rows, sizes, pos = rows[keep], sizes[keep], pos[keep]
    if not (rows == first).any():
        return None  # the first row itself is malformed: the per-value path says how
    columns: list[Any] = []
    for j, item in enumerate(kinds0.tolist()):
        p, z = pos[:, j], sizes[:, j]
        if item == _STRING:
            columns.append(_strings(buf, data, p, z))
        elif item == _NUMBER:
            numbers = _numbers(data, p, z)
            if numbers is None:
                raise Slow
            columns.append(numbers)
        elif item == _CONTAINER:
            columns.append(_column(buf, data, p, p + z, top=False))
        elif item in _CONSTANTS:
            columns.append(_CONSTANTS[item])
        else:
            raise ValueError(f"unknown JSONB entry kind {item}")
    if kind == _ARRAY:
        parts: list[Any] = ["["]
        for j, column in enumerate(columns):
            parts += [column, ","] if j < count - 1 else [column, "]"]
    else:
        keys = [buf[start0 + body + a:start0 + body + b].decode("utf-8") for a, b in zip(
            [0, *key_ends[:-1].tolist()], key_ends.tolist(), strict=True)]
        if len(set(keys)) != count:
            raise Slow  # repeated keys: printed as stored by the reference printer
        parts = []
        for j, (key, column) in enumerate(zip(keys, columns, strict=True)):
            parts += [("{" if j == 0 else ",") + _quote(key) + ":", column]
        parts.append("}")
    if all(isinstance(part, str) for part in parts):  # constants only
        return rows, pa.array(["".join(parts)] * len(rows), pa.utf8())
    return rows, pc.binary_join_element_wise(*parts, "")


def _column(buf: bytes, data: np.ndarray, starts: np.ndarray, ends: np.ndarray, top: bool) -> pa.Array:
    """JSON text of the containers ``buf[starts[i]:ends[i]]``, a group sharing a layout at a time.

    At the top, rows the fast paths cannot decode are left null; below it they raise.
    """
    todo = np.ones(len(starts), bool)
    groups: list[pa.Array] = []
    group_rows: list[np.ndarray] = []
    for _ in range(_MAX_GROUPS):
        if not todo.any():
            break
        first = int(np.argmax(todo))
        try:
            found = _group(buf, data, starts, ends, first, todo)
        except Slow:
            if not top:
                raise
            found = None
        if found is None:
            break
        rows, texts = found
        groups.append(texts)
        group_rows.append(rows)
        todo[rows] = False
    rest = np.flatnonzero(todo)
    if len(rest):
        texts_rest: list[str | None] = []
        for row in rest.tolist():
            try:
                texts_rest.append(print_value(decode_container(buf[int(starts[row]):int(ends[row])], 0)))
            except Slow:
                if not top:
                    raise
                texts_rest.append(None)
        groups.append(pa.array(texts_rest, pa.utf8()))
        group_rows.append(rest)
    text_type = pa.large_utf8() if top else pa.utf8()  # inner columns are joined with utf8 literals
    if len(groups) == 1:
        return groups[0].cast(text_type)
    order = np.argsort(np.concatenate(group_rows), kind="stable")
    return pa.concat_arrays([g.cast(text_type) for g in groups]).take(pa.array(order))


def decode_shared_layout(buf: bytes, starts: np.ndarray, ends: np.ndarray) -> pa.Array | None:
    """JSON text of the containers ``buf[starts[i]:ends[i]]``, decoded a layout group at a time.

    Rows this path does not decode (lone scalars, values it would not print exactly) are null,
    for the caller's per-value path; all of them are (``None``) if some bytes are corrupt.
    """
    if not len(starts):
        return pa.array([], pa.large_utf8())
    data = np.frombuffer(buf, np.uint8)
    try:
        return _column(buf, data, starts, ends, top=True)
    except (ValueError, IndexError, struct.error):  # corrupt somewhere: the per-value path names the row
        return None
