"""JSONB: the binary JSON encoding Lance stores ``lance.json`` columns in.

pylance writes an Arrow ``arrow.json`` column (JSON text) as a ``large_binary`` column whose
field metadata names the ``lance.json`` extension, each value encoded in the binary layout of the
``jsonb`` crate that upstream's ``rust/lance-arrow/src/json.rs`` uses, and turns the values back
into compact JSON text on reads. The layout (checked value by value against what pylance 14.0.2
writes):

* a container starts with a big-endian u32 header: ``0x80000000 | n`` for an array of ``n``
  items, ``0x40000000 | n`` for an object of ``n`` members, ``0x20000000`` for a lone scalar;
* then one big-endian u32 entry per item (objects: all keys first, then all values), the top
  three bits the kind (0 null, 1 string, 2 number, 3 false, 4 true, 5 nested container) and the
  low 28 bits the byte length of its data;
* then the items' data in the same order. Object keys are sorted by their UTF-8 bytes and may
  not repeat;
* a number is a tag byte and big-endian bytes: ``0x00`` zero, ``0x40`` a signed and ``0x50`` an
  unsigned integer in the fewest of 1/2/4/8 bytes, ``0x60`` an f64 (integers beyond 64 bits
  become f64, as JSON numbers with a fraction or an exponent are; ``NaN``, ``Infinity`` and
  ``-Infinity`` are the tags ``0x10``, ``0x20``, ``0x30`` and print as ``null``).

Text comes back compact (``,`` and ``:`` with no spaces), strings escaped as serde_json does,
floats in their shortest round-trip digits laid out as the ``ryu`` crate prints them
(``1.0``, ``1e+16``, ``0.00001``, ``1.5e-7``).

JSON documents are variable trees, so there is no whole-array numpy form; the fast paths in
:mod:`lance_format.jsonb_fast` lean on the C JSON scanner and encoder and cache per-key-set work,
and reads decode rows sharing a layout a column at a time (:mod:`lance_format.jsonb_columns`).
The printer here is the reference one: lone scalars and the values the fast printer cannot print
exactly (tiny or non-finite floats, corrupt layouts) go through it.
"""

from __future__ import annotations

import json
import math
import struct
from typing import Any

import numpy as np
import pyarrow as pa

from lance_format.errors import CorruptFileError, InvalidInputError
from lance_format.jsonb_columns import decode_shared_layout
from lance_format.jsonb_fast import Slow, decode_container, encode_document, encode_number, print_value

__all__ = ["decode_value", "encode_value", "from_jsonb_array", "to_jsonb_array"]

_ARRAY, _OBJECT, _SCALAR = 0x80000000, 0x40000000, 0x20000000
_NULL, _STRING, _NUMBER, _FALSE, _TRUE, _CONTAINER = (k << 28 for k in range(6))
_LEN_MASK = 0x0FFFFFFF
_INT, _UINT, _FLOAT = 0x40, 0x50, 0x60


# -- encoding ---------------------------------------------------------------------------------

# the C string escaper behind json.dumps(ensure_ascii=False): escapes as serde_json does
_quote: Any = json.encoder.encode_basestring


def _scalar(value: Any) -> bytes:
    """A lone scalar document: the scalar header, its entry word, its data."""
    if value is None:
        word, data = _NULL, b""
    elif value is True:
        word, data = _TRUE, b""
    elif value is False:
        word, data = _FALSE, b""
    elif isinstance(value, str):
        data = value.encode("utf-8")
        word = _STRING | len(data)
    else:
        data = encode_number(value)
        word = _NUMBER | len(data)
    return struct.pack(">II", _SCALAR, word) + data


def encode_value(text: str) -> bytes:
    """The JSONB bytes of one JSON document.

    Raises:
        ValueError: if ``text`` is not JSON (or has a repeated object key, as pylance refuses).
    """
    value = encode_document(text)  # NaN / Infinity are taken, as pylance takes them
    return value if type(value) is bytes else _scalar(value)


# -- decoding ---------------------------------------------------------------------------------


def _format_float(x: float) -> str:
    if x == 0.0:
        return "-0.0" if math.copysign(1.0, x) < 0 else "0.0"
    if not math.isfinite(x):
        return "null"  # JSON has no NaN / infinity literal
    text = repr(x)
    sign = ""
    if text[0] == "-":
        sign, text = "-", text[1:]
    mantissa, _, exp = text.partition("e")
    whole, _, frac = mantissa.partition(".")
    digits = (whole + frac).lstrip("0")
    k = int(exp or 0) - len(frac)  # value = digits * 10**k
    stripped = digits.rstrip("0")
    k += len(digits) - len(stripped)
    digits = stripped
    n = len(digits)
    kk = n + k  # where the decimal point falls
    if k >= 0 and kk <= 16:
        out = digits + "0" * k + ".0"
    elif 0 < kk <= 16:
        out = digits[:kk] + "." + digits[kk:]
    elif -5 < kk <= 0:
        out = "0." + "0" * -kk + digits
    else:
        e = kk - 1
        head = digits if n == 1 else digits[0] + "." + digits[1:]
        out = f"{head}e{'+' if e >= 0 else '-'}{abs(e)}"
    return sign + out


def _number_text(data: bytes) -> str:
    tag = data[0] if data else -1
    body = data[1:]
    if tag == 0x00:
        return "0"
    if tag in (_INT, _UINT) and len(body) in (1, 2, 4, 8):
        return str(int.from_bytes(body, "big", signed=tag == _INT))
    if tag == _FLOAT and len(body) == 8:
        return _format_float(struct.unpack(">d", body)[0])
    if tag in (0x10, 0x20, 0x30):  # NaN, +inf, -inf
        return "null"
    raise ValueError(f"unknown JSONB number tag {tag:#x}")


def _scalar_text(word: int, data: bytes) -> str:
    kind = word & 0x70000000
    if kind == _NULL:
        return "null"
    if kind == _TRUE:
        return "true"
    if kind == _FALSE:
        return "false"
    if kind == _STRING:
        return str(_quote(data.decode("utf-8")))
    if kind == _NUMBER:
        return _number_text(data)
    if kind == _CONTAINER:
        return _container_text(data, 0)
    raise ValueError(f"unknown JSONB entry kind {kind >> 28}")


def _container_text(buf: bytes, at: int) -> str:
    (header,) = struct.unpack_from(">I", buf, at)
    kind, count = header & 0xE0000000, header & _LEN_MASK
    if kind == _SCALAR:
        (word,) = struct.unpack_from(">I", buf, at + 4)
        start = at + 8
        return _scalar_text(word, buf[start : start + (word & _LEN_MASK)])
    n = 2 * count if kind == _OBJECT else count
    words = struct.unpack_from(f">{n}I", buf, at + 4)
    pos = at + 4 + 4 * n
    parts = []
    # The hot loop of reads: strings and nested containers handled here, no slice for a container.
    for word in words:
        size = word & _LEN_MASK
        item = word & 0x70000000
        if item == _STRING:
            parts.append(_quote(buf[pos : pos + size].decode("utf-8")))
        elif item == _CONTAINER:
            parts.append(_container_text(buf, pos))
        elif item == _NUMBER and size == 2 and buf[pos] == _UINT:
            parts.append(str(buf[pos + 1]))
        else:
            parts.append(_scalar_text(word, buf[pos : pos + size]))
        pos += size
    if kind == _OBJECT:
        return "{" + ",".join([f"{k}:{v}" for k, v in zip(parts[:count], parts[count:], strict=True)]) + "}"
    if kind == _ARRAY:
        return "[" + ",".join(parts) + "]"
    raise ValueError(f"unknown JSONB header {header:#x}")


def decode_value(data: bytes) -> str:
    """Compact JSON text of one JSONB value (as pylance returns it).

    Raises:
        ValueError: if ``data`` is not JSONB.
    """
    return _decode_at(data, 0)


def _decode_at(buf: bytes, at: int) -> str:
    try:
        try:
            return print_value(decode_container(buf, at))
        except Slow:
            return _container_text(buf, at)
    except (struct.error, IndexError, UnicodeDecodeError) as exc:
        raise ValueError(f"malformed JSONB value ({exc})") from exc


# -- arrays -----------------------------------------------------------------------------------


def to_jsonb_array(array: pa.Array | pa.ChunkedArray, where: str = "JSON column") -> pa.Array:
    """A JSON text array (``arrow.json`` or strings) as ``large_binary`` JSONB values (nulls kept).

    Raises:
        InvalidInputError: for a value that is not JSON, naming ``where`` and the row.
    """
    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks() if array.num_chunks != 1 else array.chunk(0)
    if isinstance(array, pa.ExtensionArray):
        array = array.storage
    texts = array.to_pylist()
    try:
        out = [None if text is None else encode_value(text) for text in texts]
    except (ValueError, RecursionError):
        for i, text in enumerate(texts):  # again, one at a time, to name the row
            try:
                if text is not None:
                    encode_value(text)
            except (ValueError, RecursionError) as exc:
                raise InvalidInputError(f"{where}: row {i} is not valid JSON: {exc}") from None
        raise
    return pa.array(out, pa.large_binary())


def from_jsonb_array(array: pa.Array, where: str = "JSON column") -> pa.Array:
    """JSONB values (binary) as an ``arrow.json`` array of compact JSON text (nulls kept).

    Raises:
        InvalidInputError: for bytes that are not JSONB, naming ``where`` and the row.
    """
    if isinstance(array, pa.ExtensionArray):
        array = array.storage
    if not pa.types.is_large_binary(array.type):
        array = array.cast(pa.large_binary())
    n = len(array)
    _, offsets_buf, data_buf = array.buffers()
    offsets = np.frombuffer(offsets_buf, np.int64, n + 1, 8 * array.offset) if n else np.zeros(1, np.int64)
    buf = data_buf.to_pybytes() if data_buf is not None else b""
    valid = array.is_valid().to_numpy(zero_copy_only=False) if array.null_count else np.ones(n, bool)
    starts, ends = offsets[:-1][valid], offsets[1:][valid]
    # most rows at once when they share a layout; the rest one value at a time
    decoded = decode_shared_layout(buf, starts, ends)
    if decoded is not None and decoded.null_count == 0:  # all at once: nulls of the input put back
        positions = np.cumsum(valid) - 1
        text = decoded.take(pa.array(positions, mask=~valid)) if len(decoded) != n else decoded
        return pa.ExtensionArray.from_storage(pa.json_(pa.utf8()), text.cast(pa.utf8()))
    texts: list[str | None] = [None] * len(starts) if decoded is None else decoded.to_pylist()
    rows = np.flatnonzero(valid).tolist()
    for k, (row, text) in enumerate(zip(rows, texts, strict=True)):
        if text is None:
            try:
                texts[k] = decode_value(buf[int(starts[k]):int(ends[k])])
            except ValueError as exc:
                raise CorruptFileError(f"{where}: row {row}: {exc}") from None
    out: list[str | None] = [None] * n
    for row, text in zip(rows, texts, strict=True):
        out[row] = text
    return pa.ExtensionArray.from_storage(pa.json_(pa.utf8()), pa.array(out, pa.utf8()))
