"""The legacy (v1) Lance file format: footer version 0.1 / 0.2, one page per field and batch.

Read through :class:`lance_format.file.LanceFileReader` (which detects the footer) and written by
:class:`lance_format.file.legacy.writer.LegacyFileWriter` for ``data_storage_version="legacy"``.
"""
