"""One module per index kind; :mod:`lance_format.index.kinds.catalog` describes them and
:mod:`lance_format.index.registry` imports each on first use.

Each module defines one :class:`~lance_format.index.kind.IndexKind` subclass. Format code a
kind shares with others (BTREE's pages, BITMAP's row sets) stays in the ``lance_format.index``
modules the kind module calls.
"""
