"""Manifest naming schemes V1 and V2."""

from __future__ import annotations

import pytest

from lance_format.errors import CorruptFileError
from lance_format.table.naming import (
    NamingScheme,
    detect_scheme,
    manifest_key,
    new_data_file_name,
    parse_manifest_name,
)


def test_naming_v1_v2() -> None:
    assert manifest_key(1, NamingScheme.V2) == "_versions/18446744073709551614.manifest"
    assert manifest_key(12, NamingScheme.V1) == "_versions/12.manifest"
    assert parse_manifest_name("18446744073709551614.manifest") == (1, NamingScheme.V2)
    assert parse_manifest_name("3.manifest") == (3, NamingScheme.V1)
    for junk in ("latest_version_hint.json", "d123.manifest", ".tmp_x.manifest", "3.manifest#1"):
        assert parse_manifest_name(junk) is None
    assert detect_scheme(["1.manifest", "2.manifest"]) is NamingScheme.V1
    with pytest.raises(CorruptFileError):
        detect_scheme(["1.manifest", "18446744073709551614.manifest"])
    name = new_data_file_name()
    assert len(name) == 50 + len(".lance") and set(name[:24]) <= {"0", "1"}
    int(name[24:50], 16)
