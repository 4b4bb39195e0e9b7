"""Reader and writer feature flags: known ones accepted, unknown ones refused."""

from __future__ import annotations

import pyarrow as pa
import pytest

from lance_format.errors import IncompatibleFeatureError
from lance_format.schema import LanceSchema
from lance_format.table.manifest import Manifest, check_feature_flags
from lance_format.table.models import FragmentMetadata

SCHEMA = LanceSchema.from_arrow(pa.schema([("a", pa.int64()), ("b", pa.string())]))


def manifest(version: int = 1, frags: tuple[FragmentMetadata, ...] = (), **kw: object) -> Manifest:
    return Manifest(SCHEMA, frags, version, max_fragment_id=max((f.id for f in frags), default=None), **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize("flag", [64, 512, 1024, 4096, 8192, 16384, 32768])
def test_unknown_reader_flag_refused(flag: int) -> None:
    m = manifest(1, reader_feature_flags=flag, writer_feature_flags=flag)
    with pytest.raises(IncompatibleFeatureError, match=str(flag)):
        check_feature_flags(m, "path/x.manifest")


@pytest.mark.parametrize("flag", [1, 4, 8, 16, 32, 128, 2048])
def test_known_flags_accepted(flag: int) -> None:
    check_feature_flags(manifest(1, reader_feature_flags=flag, writer_feature_flags=flag), "m", for_write=True)


def test_writer_flag_refused_for_write_only() -> None:
    m = manifest(1, writer_feature_flags=64)
    check_feature_flags(m, "m")
    with pytest.raises(IncompatibleFeatureError):
        check_feature_flags(m, "m", for_write=True)
