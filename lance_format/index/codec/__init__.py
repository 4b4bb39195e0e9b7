"""Index codecs: the protobuf messages vector indices keep in manifests and index files.

:mod:`.vector` holds ``lance.index.pb.VectorIndexDetails`` (the manifest details of every
vector segment) and ``lance.index.pb.IVF`` / ``Tensor`` (the IVF model stored in a global
buffer of ``index.idx`` and ``auxiliary.idx``), decoded and encoded byte for byte as
pylance 14.0.2 writes them (``docs/formats/vector-indices.md`` sections 2 and 4).
"""

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
