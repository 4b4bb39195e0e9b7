"""Credentials in ``storage_options`` kept out of everything Dagster shows about a resource.

Dagster turns the values a Pythonic resource is constructed with into the defaults of its config
schema. Those defaults are what the UI shows: the Resources tab ("configured values"), the
Launchpad's default run config, and the job snapshots stored with each run. A credential given as
a plain string (``storage_options={"aws_secret_access_key": os.environ["KEY"]}``) would be shown
and stored in all of them; ``dg.EnvVar("KEY")`` is shown as a reference to the variable instead.

:class:`MaskedCredentials` rewrites those defaults with :func:`~lance_format.storage.redact.redact_option`
(``***`` for every option that is not known to be harmless, URLs without passwords, ``root_uri``
without a ``user:password@`` part) and restores the real values when the resource is built for a
run: a config value equal to the masked form of the value the resource was constructed with means
"the default", so the resource gets the real value; anything else (a value typed in the
Launchpad, an environment variable Dagster resolved) is used as given.

Dagster's own ``json_schema_extra={"dagster__is_secret": True}`` is not enough here: it masks a
whole field (every storage option, the region too) and only where the UI renders it, while the
job snapshots stored with each run keep the real default.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeGuard

from dagster import EnvVar

# Private Dagster API (1.13): a Pythonic resource keeps its resolved config and the config schema
# curried with it in ``_state__internal__``; ``_curry_config_schema`` builds that schema. Both are
# exercised end to end by tests/dagster/test_secrets_in_ui.py, which fails if Dagster changes them.
from dagster._config.pythonic_config.conversion_utils import _curry_config_schema

from lance_format.errors import InvalidInputError
from lance_format.storage.redact import redact_option, redact_url

#: Config fields whose values are masked in the config schema defaults.
STORAGE_OPTIONS_FIELD = "storage_options"
ROOT_URI_FIELD = "root_uri"
_STATE = "_state__internal__"


def _is_literal(value: Any) -> TypeGuard[str]:
    # An EnvVar is a str subclass naming a variable; in resolved config it is {"env": NAME}.
    return isinstance(value, str) and not isinstance(value, EnvVar)


def masked_config(config: Mapping[str, Any]) -> dict[str, Any]:
    """``config`` (a resource's resolved config dict) with credentials masked.

    ``storage_options`` values go through :func:`redact_option`; ``root_uri`` loses any password.
    Environment variable references (``{"env": NAME}``) are kept: they are not secrets.
    """
    out = dict(config)
    options = out.get(STORAGE_OPTIONS_FIELD)
    if isinstance(options, Mapping):
        out[STORAGE_OPTIONS_FIELD] = {k: redact_option(k, v) if _is_literal(v) else v for k, v in options.items()}
    root = out.get(ROOT_URI_FIELD)
    if _is_literal(root):
        out[ROOT_URI_FIELD] = redact_url(root)
    return out


def unmasked_values(values: Mapping[str, Any], storage_options: Mapping[str, Any],
                    root_uri: Any) -> dict[str, Any]:
    """``values`` (run config of the resource) with masked defaults replaced by the real values.

    Args:
        values: config values about to be applied to the resource.
        storage_options: the storage options the resource was constructed with.
        root_uri: the root URI the resource was constructed with.
    """
    out = dict(values)
    given = out.get(STORAGE_OPTIONS_FIELD)
    if isinstance(given, Mapping):
        restored = dict(given)
        for key, value in given.items():
            real = storage_options.get(key)
            if _is_literal(real) and value != real and value == redact_option(key, real):
                restored[key] = real
        out[STORAGE_OPTIONS_FIELD] = restored
    given_root = out.get(ROOT_URI_FIELD)
    if _is_literal(root_uri) and given_root != root_uri and given_root == redact_url(root_uri):
        out[ROOT_URI_FIELD] = root_uri
    return out


def env_resolved(value: Any, *, where: str) -> Any:
    """``value`` with a ``dg.EnvVar`` replaced by the variable's value.

    Inside a run Dagster has already resolved every ``EnvVar`` of the resource's config; code that
    uses the resource object itself (a sensor evaluating the ``lance`` resource bound to a
    maintenance job) still holds the ``EnvVar``, a ``str`` whose text is the variable's *name*.

    Raises:
        InvalidInputError: the variable is not set (named, its value never shown).
    """
    if not isinstance(value, EnvVar):
        return value
    resolved = value.get_value()
    if resolved is None:
        raise InvalidInputError(f"{where}: environment variable {value.env_var_name!r} is not set")
    return resolved


def env_resolved_options(options: Mapping[str, Any] | None, *, where: str) -> dict[str, str]:
    """Storage options with every ``dg.EnvVar`` value read from the environment (see :func:`env_resolved`)."""
    return {k: env_resolved(v, where=f"{where} storage_options[{k!r}]") for k, v in (options or {}).items()}


class MaskedCredentials:
    """Mixin for ``ConfigurableResource`` / ``ConfigurableIOManagerFactory`` classes with
    ``storage_options`` and ``root_uri`` fields: their config schema defaults (what the UI shows)
    carry masked credentials, the running resource the real ones.

    Put it first among the bases so its methods wrap Dagster's.
    """

    def __init__(self, **data: Any) -> None:
        super().__init__(**data)
        state: Any = getattr(self, _STATE)
        shown = masked_config(state.resolved_config_dict)
        if shown != state.resolved_config_dict:
            setattr(self, _STATE, state._replace(resolved_config_dict=shown,
                                                 config_schema=_curry_config_schema(state.schema, shown)))

    def _with_updated_values(self, values: Mapping[str, Any] | None) -> Any:
        # Dagster builds the running resource from the config of the run, whose defaults are masked.
        real = unmasked_values(values or {}, getattr(self, STORAGE_OPTIONS_FIELD, None) or {},
                               getattr(self, ROOT_URI_FIELD, None))
        return super()._with_updated_values(real)  # type: ignore[misc]
