"""``explain_plan()`` of a ``nearest=`` scan, in the words of pylance 14.0.2's plans."""

from __future__ import annotations

from typing import Any

from lance_format.index.vector.distance import Metric
from lance_format.search import multivector
from lance_format.search.nearest_query import DISTANCE, NearestQuery
from lance_format.table.index_metadata import IndexMetadata
from lance_format.table.scan import ScanOptions


def explain(query: NearestQuery, opts: ScanOptions, segs: list[IndexMetadata], metric: Metric,
            covered: frozenset[int], rest: list[Any], uri: str, prefilter: bool) -> str:
    """The plan: ``ANNSubIndex`` / ``ANNIvfPartition`` when the index is used, ``KNNVectorDistance``
    for exact distances (flat search, refine, the fragments ``rest`` no segment covers).

    Args:
        query: The search.
        opts: The scan's projection, filter and limit.
        segs: The segments searched (none: a flat search).
        metric: The distance.
        covered: Live fragments the segments cover.
        rest: Fragments searched flat.
        uri: The dataset's data directory, as pylance prints it.
        prefilter: Whether the filter is applied before the search.
    """
    k = query.k
    filt = None if opts.filter is None else (opts.filter_sql or str(opts.filter))
    topk = "SortExec: TopK(fetch={}), expr=[_distance ASC NULLS LAST, _rowid ASC NULLS LAST]"
    lines: list[tuple[int, str]] = []

    def ann(depth: int, fetch: int) -> None:
        if query.multi:  # one index search per query vector, scored together (search/multivector.py)
            lines.append((depth, topk.format(fetch)))
            lines.append((depth + 1, f"MultivectorScoring: k={k}"))
            for _ in range(len(query.q)):
                ann_one(depth + 2, multivector.per_query_k(k))
        else:
            ann_one(depth, fetch)

    def ann_one(depth: int, fetch: int) -> None:
        name = segs[0].name
        lines.append((depth, topk.format(fetch)))
        lines.append((depth + 1, f"ANNSubIndex: name={name}, k={fetch}, deltas={len(segs)}, metric={metric.upper()}"))
        p = query.probe
        lines.append((depth + 2, f"ANNIvfPartition: uuid={segs[0].uuid}, minimum_nprobes={p.minimum}, "
                                 f"maximum_nprobes={p.maximum}, deltas={len(segs)}"))
        if prefilter and filt is not None:
            lines.append((depth + 2, f"LanceRead: uri={uri}, projection=[], num_fragments={len(covered)}, "
                                     f"row_id=true, full_filter={filt}"))

    def flat(depth: int, frags: int) -> None:
        lines.append((depth, f"KNNVectorDistance: metric={metric}"))
        pre = filt if (prefilter and filt is not None) else "--"
        lines.append((depth + 1, f"LanceRead: uri={uri}, projection=[{query.column}], num_fragments={frags}, "
                                 f"row_id=true, full_filter={pre}"))

    proj = ", ".join([*opts.columns, DISTANCE])
    lines.append((0, f"ProjectionExec: expr=[{proj}]"))
    depth = 1
    if opts.limit is not None or opts.offset:
        lines.append((depth, f"GlobalLimitExec: skip={opts.offset}, fetch={opts.limit}"))
        depth += 1
    if filt is not None and not prefilter:
        lines.append((depth, f"FilterExec: {filt}"))
        depth += 1
    lines.append((depth, f"LanceRead: uri={uri}, projection=[{', '.join(opts.columns)}], source=stream(_rowid)"))
    depth += 1
    if not segs:
        lines.append((depth, topk.format(k)))
        flat(depth + 1, len(rest))
    elif query.refine_factor is None and not rest:
        ann(depth, k)
    else:
        lines.append((depth, topk.format(k)))
        lines.append((depth + 1, f"KNNVectorDistance: metric={metric}"))
        if rest:
            lines.append((depth + 2, "UnionExec"))
            flat(depth + 3, len(rest))
            ann(depth + 3, k * (query.refine_factor or 1))
        else:
            lines.append((depth + 2, f"LanceRead: uri={uri}, projection=[{query.column}], source=stream(_rowid)"))
            ann(depth + 3, k * query.refine_factor)  # type: ignore[operator]
    return "\n".join("  " * d + text for d, text in lines) + "\n"

