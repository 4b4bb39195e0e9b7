"""Scans answered by search indices: nearest-neighbour vector search (:mod:`.nearest`) and
BM25 full-text search over INVERTED indices (:mod:`.fulltext`, queries in :mod:`.fts_query`)."""
