"""Shredding Arrow arrays into rep/def levels plus the visible leaf values (writer side)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from lance_format.file.v2_1.repdef import Layer


@dataclass
class Shredded:
    """One leaf column of a batch: levels, layers (innermost first) and the visible values."""

    rep: np.ndarray | None
    defs: np.ndarray | None
    layers: list[Layer]
    values: pa.Array
    num_rows: int


def _valid(arr: pa.Array) -> np.ndarray | None:
    """Validity of ``arr`` as a bool numpy array, or None if it has no nulls."""
    if arr.null_count == 0:
        return None
    if pa.types.is_null(arr.type):
        return np.zeros(len(arr), bool)
    return np.asarray(arr.is_valid().to_numpy(zero_copy_only=False), dtype=bool)


def _list_offsets(arr: pa.Array) -> np.ndarray:
    return np.asarray(arr.offsets.to_numpy(zero_copy_only=False), dtype=np.int64)


def _list_values(arr: pa.Array) -> pa.Array:
    offs = arr.offsets
    start = offs[0].as_py()
    return arr.values.slice(start, offs[-1].as_py() - start)


def shred(path_arrays: list[pa.Array], path_kinds: list[str]) -> Shredded:
    """Compute rep/def levels for one root-to-leaf path.

    Args:
        path_arrays: not used beyond element 0 (the top-level array); children are derived.
        path_kinds: ``"struct" | "list" | "leaf"`` per node from the root to the leaf, with the
            child index for structs encoded as ``"struct:<i>"``.
    """
    arr = path_arrays[0]
    n = len(arr)
    if path_kinds == ["leaf"]:
        # A top-level leaf (the common case): one item layer, def 1 marks a null, no index
        # bookkeeping and no take (the general walk below costs several full-length arrays).
        valid = _valid(arr)
        if valid is None:
            return Shredded(None, None, [Layer.ALL_VALID_ITEM], arr, n)
        return Shredded(None, (~valid).astype(np.uint16), [Layer.NULLABLE_ITEM], arr, n)
    nlayers = len(path_kinds)
    is_list = [k == "list" for k in path_kinds]
    max_rep = sum(is_list)
    idx = np.arange(n, dtype=np.int64)
    rep = np.full(n, max_rep, np.int64)
    dead_layer = np.full(n, -1, np.int64)  # layer index (innermost = 0) that made the entry null/empty
    dead_empty = np.zeros(n, bool)
    has_null = [False] * nlayers
    has_empty = [False] * nlayers
    rank = max_rep
    outer_list = nlayers  # layer of the nearest list above the current node (none yet)
    node = arr
    for depth, kind in enumerate(path_kinds):
        layer = nlayers - 1 - depth
        alive = dead_layer < 0
        if kind == "list" and ((dead_layer > layer) & (dead_layer < outer_list)).any():
            # pylance pushes a null struct's validity into a list below it (and 14.0.2 cannot
            # read an all-valid list between a null struct and null items), so record it nullable.
            has_null[layer] = True
        valid = _valid(node)
        if valid is not None:
            null_here = alive & (idx >= 0)
            null_here[null_here] = ~valid[idx[null_here]]
            if null_here.any():
                has_null[layer] = True
                dead_layer[null_here] = layer
        if kind == "list":
            offs = _list_offsets(node)
            alive = (dead_layer < 0) & (idx >= 0)
            lens = np.zeros(len(idx), np.int64)
            lens[alive] = offs[idx[alive] + 1] - offs[idx[alive]]
            empty = alive & (lens == 0)
            if empty.any():
                has_empty[layer] = True
                dead_layer[empty] = layer
                dead_empty[empty] = True
            counts = np.where(lens > 0, lens, 1)
            starts = np.where(lens > 0, np.where(idx >= 0, offs[np.maximum(idx, 0)], 0) - offs[0], -1)
            total = int(counts.sum())
            first = np.zeros(total, bool)
            entry_start = np.zeros(len(counts), np.int64)
            np.cumsum(counts[:-1], out=entry_start[1:])
            first[entry_start] = True
            src = np.repeat(np.arange(len(counts)), counts)
            within = np.arange(total, dtype=np.int64) - entry_start[src]
            new_idx = np.where(starts[src] >= 0, starts[src] + within, -1)
            new_rep = np.where(first, rep[src], rank - 1)
            rep, idx = new_rep, new_idx
            dead_layer, dead_empty = dead_layer[src], dead_empty[src]
            rank -= 1
            outer_list = layer
            node = _list_values(node)
        elif kind.startswith("struct"):
            child = int(kind.split(":")[1])
            node = node.field(child)
    # layers, innermost first
    layers: list[Layer] = []
    for layer in range(nlayers):
        kind = path_kinds[nlayers - 1 - layer]
        if kind == "list":
            if has_null[layer] and has_empty[layer]:
                layers.append(Layer.NULL_AND_EMPTY_LIST)
            elif has_null[layer]:
                layers.append(Layer.NULLABLE_LIST)
            elif has_empty[layer]:
                layers.append(Layer.EMPTYABLE_LIST)
            else:
                layers.append(Layer.ALL_VALID_LIST)
        else:
            layers.append(Layer.NULLABLE_ITEM if has_null[layer] else Layer.ALL_VALID_ITEM)
    base = np.concatenate([[0], np.cumsum([lay.num_def_levels for lay in layers])]).astype(np.int64)
    defs = None
    if base[-1] > 0:
        dl = np.maximum(dead_layer, 0)
        extra = np.where(
            dead_empty & (np.array([lay == Layer.NULL_AND_EMPTY_LIST for lay in layers])[dl]), 2, 1
        )
        defs = np.where(dead_layer < 0, 0, base[dl] + extra).astype(np.uint16)
    first_list = next((i for i, lay in enumerate(layers) if lay.is_list), None)
    if first_list is None:
        visible = np.ones(len(idx), bool)
    else:
        max_vis = int(base[first_list])
        visible = defs <= max_vis if defs is not None else np.ones(len(idx), bool)
    vis_idx = idx[visible]
    values = (
        node
        if len(vis_idx) == len(node) and (len(vis_idx) == 0 or bool((vis_idx == np.arange(len(node))).all()))
        else node.take(pa.array(vis_idx))
    )
    return Shredded(rep.astype(np.uint16) if max_rep else None, defs, layers, values, n)
