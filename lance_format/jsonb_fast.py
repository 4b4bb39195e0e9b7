"""Fast paths of the JSONB codec (:mod:`lance_format.jsonb` describes the layout).

JSON documents are trees of varying shape, so neither direction maps onto whole-array numpy
work; the cost is the Python work per item. These paths keep it to the minimum:

* writes: the C JSON scanner calls :func:`_object_hook` for every object as it parses, and the
  hook returns the object's finished JSONB bytes, so no dict is built and nested objects arrive
  already encoded (JSON parsing never yields ``bytes``, so a ``bytes`` item *is* an encoded
  container). Each distinct key set is sorted, checked for repeats and packed once and cached
  (documents in a column mostly share their keys); small integers come from a table.
* reads: a container becomes Python lists / dicts (keys from a cache keyed by their bytes) and
  the C JSON encoder prints it compactly, escaping strings in C exactly as ``json.dumps`` with
  ``ensure_ascii=False`` does (the escaping serde_json uses). The C encoder prints floats with
  ``float.__repr__``, which agrees with the ``ryu`` layout pylance prints except for magnitudes
  below 1e-3 (exponent padding, ``0.00001``) and non-finite values: those raise :class:`Slow`
  and the caller prints that value with the reference printer.
"""

from __future__ import annotations

import json
import json.decoder
import json.encoder
import math
import struct
from typing import Any

__all__ = ["Slow", "decode_container", "encode_document", "encode_number"]

_ARRAY, _OBJECT = 0x80000000, 0x40000000
_NULL, _STRING, _NUMBER, _FALSE, _TRUE, _CONTAINER = (k << 28 for k in range(6))
_LEN_MASK = 0x0FFFFFFF
_INT, _UINT, _FLOAT = 0x40, 0x50, 0x60
_INT_SIZES = frozenset((2, 3, 5, 9))  # tag byte and 1/2/4/8 bytes
_CACHE_LIMIT = 4096  # distinct key sets kept; a column with more (keys as data) starts over

_F64 = struct.Struct(">Bd")
_U32 = struct.Struct(">I")
_STRUCTS: dict[int, struct.Struct] = {}


class Slow(Exception):
    """A value the fast path does not print exactly; the caller uses the reference printer."""


def _words(n: int) -> struct.Struct:
    found = _STRUCTS.get(n)
    if found is None:
        found = _STRUCTS[n] = struct.Struct(f">{n}I")
    return found


# -- encoding ---------------------------------------------------------------------------------


def encode_number(value: int | float) -> bytes:
    """The JSONB number bytes (tag and big-endian body) of a JSON number."""
    if type(value) is int:
        if value == 0:
            return b"\x00"
        if 0 < value <= 0xFFFFFFFFFFFFFFFF:
            for size, fmt in ((1, ">B"), (2, ">H"), (4, ">I"), (8, ">Q")):
                if value < 1 << (8 * size):
                    return bytes([_UINT]) + struct.pack(fmt, value)
        if -(1 << 63) <= value < 0:
            for size, fmt in ((1, ">b"), (2, ">h"), (4, ">i"), (8, ">q")):
                if value >= -(1 << (8 * size - 1)):
                    return bytes([_INT]) + struct.pack(fmt, value)
        value = float(value)  # beyond 64 bits: an f64, as upstream's parser keeps it
    if math.isnan(value):
        return b"\x10"
    if math.isinf(value):
        return b"\x20" if value > 0 else b"\x30"
    return _F64.pack(_FLOAT, value)


# entry word and data of the integers documents use most: filled by the first write (5,120
# encodings, ~10 ms, which a process that only reads JSON columns, or none, should not pay)
_SMALL_INTS: dict[int, tuple[int, bytes]] = {}


def _fill_small_ints() -> None:
    _SMALL_INTS.update({i: (_NUMBER | len(d), d) for i in range(-1024, 4096) for d in (encode_number(i),)})


# bit length of an unsigned integer -> its entry word and packer (the fewest of 1/2/4/8 bytes)
_UINT_BY_BITS: list[tuple[int, struct.Struct]] = [
    (_NUMBER | (1 + size), struct.Struct(">B" + "BHIQ"[size.bit_length() - 1]))
    for bits in range(65) for size in (next(s for s in (1, 2, 4, 8) if bits <= 8 * s),)]


def _items(items: Any, words: list[int], datas: list[bytes]) -> None:
    # The hot loop of writes: exact-type tests, commonest kinds first.
    append_word, append_data = words.append, datas.append
    for item in items:
        kind = type(item)
        if kind is str:
            data = item.encode("utf-8")
            append_word(_STRING | len(data))
        elif kind is bytes:  # an object the scanner hook already encoded
            data = item
            append_word(_CONTAINER | len(data))
        elif kind is int:
            hit = _SMALL_INTS.get(item)
            if hit is not None:
                append_word(hit[0])
                data = hit[1]
            elif 0 < item <= 0xFFFFFFFFFFFFFFFF:
                word, packer = _UINT_BY_BITS[item.bit_length()]
                data = packer.pack(_UINT, item)
                append_word(word)
            else:
                data = encode_number(item)
                append_word(_NUMBER | len(data))
        elif kind is float:
            data = _F64.pack(_FLOAT, item) if math.isfinite(item) else encode_number(item)
            append_word(_NUMBER | len(data))
        elif kind is list:
            data = _array(item)
            append_word(_CONTAINER | len(data))
        elif item is None:
            data = b""
            append_word(_NULL)
        elif item is True:
            data = b""
            append_word(_TRUE)
        else:  # False: the scanner yields nothing else
            data = b""
            append_word(_FALSE)
        append_data(data)


def _array(value: list[Any]) -> bytes:
    words: list[int] = [_ARRAY | len(value)]
    datas: list[bytes] = []
    _items(value, words, datas)
    return _words(len(words)).pack(*words) + b"".join(datas)


# key tuple in document order -> (value order or None if already sorted, header and key words,
# key bytes, struct packing the value words)
_KEY_SETS: dict[tuple[str, ...], tuple[list[int] | None, bytes, bytes, struct.Struct]] = {}


def _key_set(keys: tuple[str, ...]) -> tuple[list[int] | None, bytes, bytes, struct.Struct]:
    encoded = [k.encode("utf-8") for k in keys]
    order = sorted(range(len(keys)), key=encoded.__getitem__)  # keys sorted by their UTF-8 bytes
    for a, b in zip(order, order[1:], strict=False):
        if encoded[a] == encoded[b]:
            raise ValueError(f"duplicate object attribute {keys[a]!r}")
    head = _words(len(keys) + 1).pack(_OBJECT | len(keys), *(_STRING | len(encoded[i]) for i in order))
    entry = (None if order == sorted(order) else order, head, b"".join(encoded[i] for i in order),
             _words(len(keys)))
    if len(_KEY_SETS) >= _CACHE_LIMIT:
        _KEY_SETS.clear()
    _KEY_SETS[keys] = entry
    return entry


def _object_hook(pairs: list[tuple[str, Any]]) -> bytes:
    if not pairs:
        return _U32.pack(_OBJECT)
    keys, values = zip(*pairs, strict=True)
    entry = _KEY_SETS.get(keys)
    if entry is None:
        entry = _key_set(keys)
    order, head, key_bytes, packer = entry
    if order is not None:
        values = tuple([values[i] for i in order])
    words: list[int] = []
    datas: list[bytes] = [key_bytes]
    _items(values, words, datas)
    return head + packer.pack(*words) + b"".join(datas)


# one scanner for every value; NaN / Infinity are taken, as pylance takes them
_SCANNER = json.JSONDecoder(object_pairs_hook=_object_hook)
_SCAN: Any = _SCANNER.scan_once  # type: ignore[attr-defined]


def encode_document(text: str) -> bytes | list[Any] | str | int | float | bool | None:
    """Parse one JSON document: objects come back as finished JSONB bytes, arrays as JSONB bytes.

    Scalars at the top level come back as parsed (the caller wraps them in a scalar header).

    Raises:
        ValueError: if ``text`` is not JSON or has a repeated object key.
    """
    if not _SMALL_INTS:
        _fill_small_ints()
    try:  # the scanner straight away: documents seldom start or end with whitespace
        value, end = _SCAN(text, 0)
    except StopIteration:
        end = -1
    if end != len(text):
        if not text.strip(" \t\n\r"):
            return None  # pylance stores an empty (or all-whitespace) document as JSON null
        value = _SCANNER.decode(text)  # whitespace around the value, or the error message
    if type(value) is list:
        return _array(value)
    return value  # type: ignore[no-any-return]


# -- decoding ---------------------------------------------------------------------------------


def _unused(value: Any) -> Any:  # the encoder only meets lists, dicts, str, int, float, None, bool
    raise TypeError(f"unexpected {type(value).__name__} in a decoded JSONB value")


# the C encoder json.dumps uses (one made here, not one per call); None on builds without it
_MAKE: Any = getattr(json.encoder, "c_make_encoder", None)
_PRINT: Any = None if _MAKE is None else _MAKE(
    None, _unused, json.encoder.encode_basestring, None, ":", ",", False, False, True)
# key bytes and entry words -> the decoded keys of an object
_KEYS: dict[bytes, tuple[str, ...]] = {}


def print_value(value: Any) -> str:
    """Compact JSON text of a decoded value (strings escaped by the C encoder)."""
    if _PRINT is None:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return "".join(_PRINT(value, 0))


def decode_container(buf: bytes, at: int) -> list[Any] | dict[str, Any]:
    """The container at ``buf[at:]`` as Python lists and dicts, to print with :func:`print_value`.

    Raises:
        Slow: for a float the C encoder would print differently, or a repeated key.
        ValueError: (and struct.error, IndexError, UnicodeDecodeError) for bytes that are not JSONB.
    """
    (header,) = _U32.unpack_from(buf, at)
    count = header & _LEN_MASK
    is_object = header & 0xE0000000 == _OBJECT
    if not is_object and header & 0xE0000000 != _ARRAY:
        raise Slow  # a nested scalar wrapper: the reference printer handles (or refuses) it
    n = 2 * count if is_object else count
    words = _words(n).unpack_from(buf, at + 4)
    pos = at + 4 + 4 * n
    keys: tuple[str, ...] = ()
    if is_object:
        key_end = pos + sum(words[:count]) - count * _STRING  # keys are strings
        key_blob = buf[pos:key_end]
        cache_key = key_blob + buf[at + 4:at + 4 + 4 * count]
        cached = _KEYS.get(cache_key)
        if cached is None:
            cached = _decode_keys(words[:count], key_blob)
            if len(_KEYS) >= _CACHE_LIMIT:
                _KEYS.clear()
            _KEYS[cache_key] = cached
        keys, words, pos = cached, words[count:], key_end
    values: list[Any] = []
    append = values.append
    # The hot loop of reads: exact kinds, no slices for containers or small integers.
    for word in words:
        size = word & _LEN_MASK
        item = word & 0x70000000
        if item == _STRING:
            append(buf[pos:pos + size].decode("utf-8"))
        elif item == _NUMBER:
            tag = buf[pos]
            if tag == _FLOAT and size == 9:
                (_, x) = _F64.unpack_from(buf, pos)
                a = abs(x)
                if not 1e-3 <= a <= 1.7976931348623157e308 and a != 0.0:
                    raise Slow
                append(x)
            elif tag == _UINT and size == 2:
                append(buf[pos + 1])
            elif tag in (_UINT, _INT) and size in _INT_SIZES:
                append(int.from_bytes(buf[pos + 1:pos + size], "big", signed=tag == _INT))
            elif tag == 0:
                append(0)
            else:
                raise Slow
        elif item == _CONTAINER:
            append(decode_container(buf, pos))
        elif item == _NULL:
            append(None)
        elif item == _TRUE:
            append(True)
        elif item == _FALSE:
            append(False)
        else:
            raise ValueError(f"unknown JSONB entry kind {item >> 28}")
        pos += size
    if is_object:
        return dict(zip(keys, values, strict=True))
    return values


def _decode_keys(words: tuple[int, ...], blob: bytes) -> tuple[str, ...]:
    keys: list[str] = []
    pos = 0
    for word in words:
        if word & 0x70000000 != _STRING:
            raise ValueError("JSONB object key is not a string")
        size = word & _LEN_MASK
        keys.append(blob[pos:pos + size].decode("utf-8"))
        pos += size
    if len(set(keys)) != len(keys):
        raise Slow  # dict() would merge them; the reference printer prints them as stored
    return tuple(keys)
