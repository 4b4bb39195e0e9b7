"""The token set of an INVERTED partition: an ``fst`` crate (0.4) map from token bytes to token id.

pylance stores ``_token_fst_bytes`` as the bytes of ``fst::Map`` (``rust/lance-index/src/scalar/
inverted/builder.rs``, the ``fst`` token set format). The layout, from the ``fst`` crate's
``src/raw/mod.rs`` and ``src/raw/node.rs``:

* header: format version (u64 LE, 3) and fst type (u64 LE, 0);
* nodes, each addressed by the offset of its *last* byte (its state byte); a transition points to a
  node written earlier, by the delta ``node_start - target`` (``0`` is the empty final node);
* footer: key count (u64), root address (u64) and, from version 3, the masked CRC-32C of every
  byte before it (u32).

A key's value is the sum of the outputs along its path plus the final node's output. The
reader decodes the whole map at once (a partition holds at most a few hundred thousand tokens);
the writer emits a plain trie (no suffix sharing, which the format allows but does not require).
"""

from __future__ import annotations

import struct
from collections.abc import Iterable

import numpy as np

from lance_format.errors import CorruptFileError

#: ``COMMON_INPUTS_INV[:63]`` of the fst crate (``src/raw/common_inputs.rs``): the byte a
#: one-transition state names by a 6-bit index instead of spelling it out.
_COMMON = b"te/oasripcnw.hlm-du012g=:bf3y5&_4v9678k%?xCDASFIBEjPTzRNM+LOqHG"
_VERSION = 3
_TRANS_INDEX_THRESHOLD = 32


def _crc32c_table() -> list[int]:
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


_CRC_TABLE = _crc32c_table()


def masked_crc32c(data: bytes) -> int:
    """The fst crate's checksum: CRC-32C of ``data``, masked as the Snappy frame format does."""
    crc = 0xFFFFFFFF
    table = _CRC_TABLE
    for b in data:
        crc = table[(crc ^ b) & 0xFF] ^ (crc >> 8)
    crc ^= 0xFFFFFFFF
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def _uint(data: bytes, at: int, n: int) -> int:
    return int.from_bytes(data[at:at + n], "little") if n else 0


def _node(data: bytes, version: int, addr: int) -> tuple[bool, int, list[tuple[int, int, int]]]:
    """``(is_final, final_output, [(input, output, target address)])`` of the node at ``addr``."""
    if addr == 0:
        return True, 0, []
    v = data[addr]
    kind = v >> 6
    if kind >= 2:  # one transition, no final state
        idx = v & 0x3F
        inp_len = 0 if idx else 1
        inp = _COMMON[idx - 1] if idx else data[addr - 1]
        if kind == 3:  # OneTransNext: the target is the node written just before
            return False, 0, [(inp, 0, addr - inp_len - 1)]
        sizes = data[addr - inp_len - 1]
        tsize, osize = sizes >> 4, sizes & 0x0F
        at = addr - inp_len - 1 - tsize
        delta = _uint(data, at, tsize)
        end = at - osize
        out = _uint(data, end, osize)
        return False, 0, [(inp, out, end - delta if delta else 0)]
    is_final = bool(v & 0x40)
    ntrans = v & 0x3F
    ntrans_len = 0
    if ntrans == 0:
        ntrans_len = 1
        ntrans = data[addr - 1]
        if ntrans == 1:
            ntrans = 256
    sizes = data[addr - ntrans_len - 1]
    tsize, osize = sizes >> 4, sizes & 0x0F
    index_size = 256 if version >= 2 and ntrans > _TRANS_INDEX_THRESHOLD else 0
    top = addr - ntrans_len - 1 - index_size  # one past the last input byte
    inputs_at = top - ntrans
    addrs_at = inputs_at - ntrans * tsize
    outs_at = addrs_at - ntrans * osize
    final_osize = osize if is_final else 0
    end = outs_at - final_osize
    trans = []
    for i in range(ntrans):
        inp = data[top - i - 1]
        delta = _uint(data, inputs_at - (i + 1) * tsize, tsize)
        out = _uint(data, addrs_at - (i + 1) * osize, osize)
        trans.append((inp, out, end - delta if delta else 0))
    final_out = _uint(data, end, final_osize) if is_final else 0
    return is_final, final_out, trans


def read_map(data: bytes, where: str = "fst") -> dict[str, int]:
    """Every ``token -> id`` of an fst map.

    Raises:
        CorruptFileError: not an fst map this module understands.
    """
    try:
        if len(data) < 32:
            raise ValueError("too short")
        version, = struct.unpack_from("<Q", data, 0)
        if version == 0 or version > _VERSION:
            raise ValueError(f"fst version {version}")
        end = len(data) - 4 if version >= 3 else len(data)
        count, root = struct.unpack_from("<QQ", data, end - 16)
        out: dict[str, int] = {}
        stack: list[tuple[int, bytes, int]] = [(root, b"", 0)]
        while stack:
            addr, prefix, acc = stack.pop()
            is_final, final_out, trans = _node(data, version, addr)
            if is_final:
                out[prefix.decode("utf-8")] = acc + final_out
            for inp, o, target in trans:
                stack.append((target, prefix + bytes((inp,)), acc + o))
        if len(out) != count:
            raise ValueError(f"{len(out)} keys decoded, footer says {count}")
        return out
    except (ValueError, IndexError, struct.error, UnicodeDecodeError) as exc:
        raise CorruptFileError(f"{where}: unreadable token set: {exc}") from exc


def key_count(data: bytes, where: str = "fst") -> int:
    """The number of keys an fst map's footer records.

    Raises:
        CorruptFileError: too short to be an fst map.
    """
    try:
        version, = struct.unpack_from("<Q", data, 0)
        end = len(data) - 4 if version >= 3 else len(data)
        return int(struct.unpack_from("<Q", data, end - 16)[0])
    except struct.error as exc:
        raise CorruptFileError(f"{where}: unreadable token set: {exc}") from exc


def lookup(data: bytes, key: str) -> int | None:
    """The value of ``key`` in an fst map (``None`` when absent), walking only the key's path.

    Raises:
        CorruptFileError: not an fst map this module understands.
    """
    try:
        version, = struct.unpack_from("<Q", data, 0)
        end = len(data) - 4 if version >= 3 else len(data)
        _, addr = struct.unpack_from("<QQ", data, end - 16)
        acc = 0
        for b in key.encode("utf-8"):
            _, _, trans = _node(data, version, addr)
            for inp, out, target in trans:
                if inp == b:
                    acc += out
                    addr = target
                    break
            else:
                return None
        is_final, final_out, _ = _node(data, version, addr)
        return acc + final_out if is_final else None
    except (ValueError, IndexError, struct.error) as exc:
        raise CorruptFileError(f"fst: unreadable token set: {exc}") from exc


class _Trie:
    __slots__ = ("children", "final", "value", "low", "addr")

    def __init__(self) -> None:
        self.children: dict[int, _Trie] = {}
        self.final = False
        self.value = 0
        self.low = 0
        self.addr = 0


def _pack_size(n: int) -> int:
    return max(1, (n.bit_length() + 7) // 8)


def write_map(items: Iterable[tuple[str, int]]) -> bytes:
    """The fst map bytes of ``token -> id`` pairs (any order; tokens must be unique)."""
    root = _Trie()
    count = 0
    for key, value in items:
        node = root
        for b in key.encode("utf-8"):
            nxt = node.children.get(b)
            if nxt is None:
                nxt = node.children[b] = _Trie()
            node = nxt
        node.final = True
        node.value = int(value)
        count += 1
    order: list[_Trie] = []
    stack = [root]
    while stack:
        n = stack.pop()
        order.append(n)
        stack.extend(n.children.values())
    order.reverse()  # children before parents: a transition may only point backwards
    for n in order:
        lows = [c.low for c in n.children.values()]
        if n.final:
            lows.append(n.value)
        n.low = min(lows) if lows else 0
    buf = bytearray(struct.pack("<QQ", _VERSION, 0))
    root_acc = 0
    for n in order:
        # Outputs go as close to the root as they can: a node's incoming edge carries the
        # smallest value below it, as the fst builder places them.
        acc = root_acc if n is root else n.low
        final_out = n.value - acc if n.final else 0
        if n.final and not n.children and final_out == 0:
            n.addr = 0
            continue
        start = len(buf)
        trans = [(b, c.low - acc, c.addr) for b, c in sorted(n.children.items())]
        deltas = [start - a if a else 0 for _, _, a in trans]
        tsize = max((_pack_size(d) for d in deltas), default=1)
        any_outs = final_out != 0 or any(o for _, o, _ in trans)
        osize = max([_pack_size(final_out)] + [_pack_size(o) for _, o, _ in trans]) if any_outs else 0
        if any_outs:
            if n.final:
                buf += final_out.to_bytes(osize, "little")
            for _, o, _ in reversed(trans):
                buf += o.to_bytes(osize, "little")
        for d in reversed(deltas):
            buf += d.to_bytes(tsize, "little")
        for b, _, _ in reversed(trans):
            buf.append(b)
        if len(trans) > _TRANS_INDEX_THRESHOLD:
            index = np.full(256, 255, dtype=np.uint8)
            index[[b for b, _, _ in trans]] = np.arange(len(trans), dtype=np.uint8)
            buf += index.tobytes()
        buf.append((tsize << 4) | osize)
        state = 0x40 if n.final else 0
        if 0 < len(trans) <= 0x3F:
            state |= len(trans)
        else:
            buf.append(1 if len(trans) == 256 else len(trans))
        buf.append(state)
        n.addr = len(buf) - 1
    buf += struct.pack("<QQ", count, root.addr)
    buf += struct.pack("<I", masked_crc32c(bytes(buf)))
    return bytes(buf)
