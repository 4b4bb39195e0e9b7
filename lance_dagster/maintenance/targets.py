"""Which datasets a maintenance job works on, and which of their versions asset inputs pin.

A target is either an asset stored as a Lance dataset (its URI comes from the ``lance`` resource,
exactly as the IO manager maps asset keys) or a bare dataset URI. Pins are read from the asset
definitions of the code location: ``AssetIn(metadata={"version": 3})`` pins version 3 of the
upstream dataset, and cleanup must keep it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from dagster import AssetKey, AssetsDefinition, AssetSelection

#: Lance tag names the maintenance job keeps on versions pinned by asset inputs (``dagster-pin-v3``).
PIN_TAG_PREFIX = "dagster-pin-v"


@dataclass(frozen=True)
class MaintenanceTarget:
    """One dataset a maintenance job maintains.

    Attributes:
        name: short identifier used in op names and pools (letters, digits, ``_``).
        asset_key: the asset stored in the dataset, ``None`` for a bare URI.
        uri: explicit dataset URI, ``None`` to derive it from the asset key through the ``lance`` resource.
        pinned_versions: versions asset inputs in the code location read explicitly (kept by cleanup).
    """

    name: str
    asset_key: AssetKey | None = None
    uri: str | None = None
    pinned_versions: frozenset[int] = frozenset()

    @property
    def label(self) -> str:
        """Asset key string or URI, for logs and events."""
        return self.asset_key.to_user_string() if self.asset_key is not None else str(self.uri)

    @property
    def pool(self) -> str:
        """Concurrency pool of every maintenance op on this dataset (one op at a time per dataset)."""
        return f"lance_maintenance_{self.name}"


def _safe_name(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_]", "_", text).strip("_") or "dataset"


def pin_tag(version: int) -> str:
    """Name of the Lance tag protecting a pinned version."""
    return f"{PIN_TAG_PREFIX}{int(version)}"


def pinned_versions(assets: Iterable[AssetsDefinition]) -> dict[AssetKey, frozenset[int]]:
    """Versions of each upstream asset that some asset input pins with ``metadata={"version": N}``.

    Inputs pinned by tag (``{"tag": "gold"}``) need nothing here: Lance cleanup keeps tagged versions.
    """
    pins: dict[AssetKey, set[int]] = {}
    for assets_def in assets:
        if not isinstance(assets_def, AssetsDefinition) or not assets_def.is_executable:
            continue
        keys_by_input = assets_def.keys_by_input_name
        for input_def in assets_def.node_def.input_defs:
            version = (input_def.metadata or {}).get("version")
            upstream = keys_by_input.get(input_def.name)
            if upstream is None or version is None or isinstance(version, bool):
                continue
            pins.setdefault(upstream, set()).add(int(version))
    return {key: frozenset(v) for key, v in pins.items()}


def resolve_targets(
    *,
    assets: Sequence[AssetsDefinition] = (),
    selection: AssetSelection | str | Sequence[str] | None = None,
    dataset_uris: Mapping[str, str] | Sequence[str] = (),
    asset_uris: Mapping[AssetKey | str, str] | None = None,
) -> list[MaintenanceTarget]:
    """Targets for the selected assets (resolved against ``assets``) plus bare dataset URIs.

    Args:
        assets: every asset definition of the code location (pins are read from all of them).
        selection: which of ``assets`` to maintain (an ``AssetSelection``, a selection string, or
            asset key strings); ``None`` selects none, so only ``dataset_uris`` are maintained.
        dataset_uris: bare datasets, as ``{name: uri}`` or a list of URIs.
        asset_uris: assets declared elsewhere (e.g. external ``AssetSpec``s) and their dataset URIs.

    Raises:
        ValueError: when nothing is selected or two targets would get the same name.
    """
    pins = pinned_versions(assets)
    targets: list[MaintenanceTarget] = []
    if selection is not None:
        if isinstance(selection, str):
            sel = AssetSelection.from_string(selection)
        elif isinstance(selection, AssetSelection):
            sel = selection
        else:
            sel = AssetSelection.assets(*[AssetKey.from_user_string(s) for s in selection])
        keys = sel.resolve(list(assets))
        for key in sorted(keys, key=lambda k: k.to_user_string()):
            targets.append(MaintenanceTarget(_safe_name("__".join(key.path)), key, None,
                                             pins.get(key, frozenset())))
    for raw_key, uri in (asset_uris or {}).items():
        key = raw_key if isinstance(raw_key, AssetKey) else AssetKey.from_user_string(raw_key)
        targets.append(MaintenanceTarget(_safe_name("__".join(key.path)), key, uri, pins.get(key, frozenset())))
    named = dataset_uris.items() if isinstance(dataset_uris, Mapping) else (
        (uri.rstrip("/").rsplit("/", 1)[-1].removesuffix(".lance"), uri) for uri in dataset_uris)
    for name, uri in named:
        targets.append(MaintenanceTarget(_safe_name(name), None, uri))
    if not targets:
        raise ValueError("a Lance maintenance job needs at least one asset or dataset URI to maintain")
    names = [t.name for t in targets]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise ValueError(f"maintenance targets share names {dupes}; name the dataset URIs explicitly")
    return targets
