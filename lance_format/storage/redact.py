"""Masking of secrets in storage options, for reprs, logs, errors and metadata.

Storage options carry credentials (``aws_secret_access_key``, session tokens, SAS tokens...)
next to harmless settings (region, endpoint). Anything shown to a person goes through
:func:`redact_options` or :func:`redact_url` first.
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Mapping

#: Shown instead of a secret value.
MASK = "***"
#: Option names whose values are safe to show (everything else is masked).
PUBLIC_OPTIONS = frozenset({
    "region", "aws_region", "aws_default_region", "endpoint", "aws_endpoint", "endpoint_url",
    "aws_endpoint_url", "dynamodb_endpoint", "allow_http", "aws_allow_http", "virtual_hosted_style_request",
    "aws_virtual_hosted_style_request", "skip_signature", "aws_skip_signature", "auto_mkdir",
    "external_manifest_store",
})


def redact_url(url: str) -> str:
    """``url`` with any ``user:password@`` part masked.

    Also masks the same part of text without a scheme (``user:password@table``, what is left of
    ``dynamodb://user:password@table`` once the scheme is split off): everything up to the last
    ``@`` of the first ``/``-separated segment.
    """
    try:
        parts = urllib.parse.urlsplit(url)
    except ValueError:
        return MASK if "@" in url else url
    if "@" in parts.netloc:
        return urllib.parse.urlunsplit(parts._replace(netloc=f"{MASK}@{parts.netloc.rpartition('@')[2]}"))
    head, slash, rest = url.partition("/")
    if "://" in url or "@" not in head:
        return url
    return f"{MASK}@{head.rpartition('@')[2]}{slash}{rest}"


def redact_option(key: str, value: object) -> str:
    """``value`` of storage option ``key`` as it may be shown: :data:`MASK` unless ``key`` is public.

    The list of public keys is an allow-list, so an option this module does not know (an SAS token,
    a service-account key, a back end's password) is masked rather than shown.
    """
    return redact_url(str(value)) if str(key).lower() in PUBLIC_OPTIONS else MASK


def redact_options(options: Mapping[str, object] | None) -> dict[str, str]:
    """A copy of ``options`` safe to show: values of non-public keys masked, URLs without passwords."""
    return {str(key): redact_option(str(key), value) for key, value in (options or {}).items()}


__all__ = ["MASK", "PUBLIC_OPTIONS", "redact_option", "redact_options", "redact_url"]
