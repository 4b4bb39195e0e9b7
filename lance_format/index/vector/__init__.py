"""Vector indices (IVF_FLAT, IVF_PQ, IVF_SQ, IVF_HNSW_*, IVF_RQ) in pylance 14.0.2's v3 layout.

* :mod:`.layout`: ``index.idx`` / ``auxiliary.idx`` to and from :class:`~.layout.IvfSegment`;
* :mod:`.distance`: the metrics in pylance's ``_distance`` units;
* :mod:`.search`: probing partitions and scoring their storage;
* :mod:`.probes`: how many partitions a query without ``nprobes`` probes (pylance's Auto).
"""
