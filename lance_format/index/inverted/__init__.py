"""pylance's INVERTED (full-text) index: its files, token set, posting codecs, analyzer and BM25."""
