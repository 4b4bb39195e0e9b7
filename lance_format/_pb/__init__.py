"""Generated protobuf modules for the Lance format (do not edit; see protos/generate.py)."""

from . import (
    encodings_v2_0_pb2,
    encodings_v2_1_pb2,
    file2_pb2,
    file_pb2,
    rowids_pb2,
    table_pb2,
    transaction_pb2,
)

__all__ = [
    "encodings_v2_0_pb2",
    "encodings_v2_1_pb2",
    "file2_pb2",
    "file_pb2",
    "rowids_pb2",
    "table_pb2",
    "transaction_pb2",
]
