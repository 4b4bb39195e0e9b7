"""Scans answered by search indices: nearest-neighbour vector search (:mod:`.nearest`)."""
