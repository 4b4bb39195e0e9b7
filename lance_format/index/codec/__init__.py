"""Index codecs: the protobuf messages vector indices keep in manifests and index files.

:mod:`.vector` holds ``lance.index.pb.VectorIndexDetails`` (the manifest details of every
vector segment) and ``lance.index.pb.IVF`` / ``Tensor`` (the IVF model stored in a global
buffer of ``index.idx`` and ``auxiliary.idx``), decoded and encoded byte for byte as
pylance 14.0.2 writes them (``docs/formats/vector-indices.md`` sections 2 and 4).
"""

from typing import TYPE_CHECKING, Any

from lance_format.lazy import OnFirstUse

if TYPE_CHECKING:
    from lance_format.index.codec.vector import (
        IVF_DETAILS_TYPE_URL,
        HnswConfig,
        IvfModel,
        Tensor,
        VectorIndexDetails,
        decode_ivf,
        decode_tensor,
        decode_vector_details,
        encode_ivf,
        encode_tensor,
        encode_vector_details,
    )

# The vector codec loads when one of its names is first read: a scalar index's first query
# imports ``codec.scalar`` through this package and had paid ~8 ms for the vector messages.
_vector = OnFirstUse("lance_format.index.codec.vector")


def __getattr__(name: str) -> Any:
    if name in __all__:
        return getattr(_vector, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "IVF_DETAILS_TYPE_URL",
    "HnswConfig",
    "IvfModel",
    "Tensor",
    "VectorIndexDetails",
    "decode_ivf",
    "decode_tensor",
    "decode_vector_details",
    "encode_ivf",
    "encode_tensor",
    "encode_vector_details",
]
