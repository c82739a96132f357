"""What the NNAPI runtime enforces above the drivers: who may use vendor extensions.

Android lets only some clients use vendor extensions (seed 002, "Extension usage
allowlist"): Android apps and native binaries listed in
``/vendor/etc/nnapi_extensions_app_allowlist``, and among native binaries only those on
the ``/product``, ``/vendor``, ``/odm`` and ``/data`` partitions — a binary on
``/system`` may not, listed or not. The runtime library enforces it; it prevents
accidental use, not a client that talks to a driver's HAL interface directly (neither
does this module: a device called directly does not check).

The allowlist file has one entry per line: an absolute path of a native binary
(``/data/foo``) or an app's package name (``com.foo.bar``). Surrounding whitespace is
ignored, and so are blank lines and lines starting with ``#`` (Android's reader takes
every line verbatim; comments make a checked-in test allowlist readable and cannot match
a path or package name anyway). A missing or unreadable file allows nobody, as on a
device without one.

Used by :class:`ClientDevice`, the harness's runtime layer for a named client: it wraps
any device and refuses models that use extensions (an extension operand or operation
type, or an ``extensionNameToPrefix`` entry) with INVALID_ARGUMENT — what a client gets
from Android's runtime (``ANEURALNETWORKS_BAD_DATA`` from
``ANeuralNetworksModel_getExtensionOperandType``) — when the client is not allowed.
Everything else passes through to the wrapped device unchanged.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path

from driver.hal.types import ErrorStatus, HalError, Model, is_extension_type

DEFAULT_ALLOWLIST_PATH = "/vendor/etc/nnapi_extensions_app_allowlist"
"""Where Android keeps the allowlist."""

NATIVE_PARTITIONS = ("/product/", "/vendor/", "/odm/", "/data/")
"""Partitions whose native binaries may use extensions when listed."""


def parse_allowlist(text: str) -> frozenset[str]:
    """The entries of an allowlist file's text."""
    entries = set()
    for line in text.splitlines():
        entry = line.strip()
        if entry and not entry.startswith("#"):
            entries.add(entry)
    return frozenset(entries)


def read_allowlist(path: str | Path = DEFAULT_ALLOWLIST_PATH) -> frozenset[str]:
    """The entries of the allowlist file at ``path``; none if it cannot be read."""
    try:
        return parse_allowlist(Path(path).read_text(encoding="utf-8", errors="replace"))
    except OSError:
        return frozenset()


def client_allowed(client: str, allowlist: Iterable[str]) -> bool:
    """Whether ``client`` (a native binary's absolute path or an app's package name)
    may use vendor extensions under ``allowlist``'s entries."""
    if not client:
        return False
    if client.startswith("/") and not client.startswith(NATIVE_PARTITIONS):
        return False  # e.g. /system/bin/...: never, listed or not
    return client in frozenset(allowlist)


def extension_use_allowed(client: str, allowlist_path: str | Path = DEFAULT_ALLOWLIST_PATH) -> bool:
    """Whether ``client`` may use vendor extensions under the allowlist file at
    ``allowlist_path`` (Android's ``TypeManager::isExtensionsUseAllowed``)."""
    return client_allowed(client, read_allowlist(allowlist_path))


def uses_extensions(model: Model) -> bool:
    """True if the model maps an extension prefix or has an extension operand or
    operation type in any subgraph."""
    if model.extension_name_to_prefix:
        return True
    for sg in (model.main, *model.referenced):
        if any(is_extension_type(o.type) for o in sg.operands):
            return True
        if any(is_extension_type(op.type) for op in sg.operations):
            return True
    return False


def check_extension_use(model: Model, client: str, allowlist: Iterable[str]) -> None:
    """INVALID_ARGUMENT if ``model`` uses extensions and ``client`` may not."""
    if uses_extensions(model) and not client_allowed(client, allowlist):
        raise HalError(
            ErrorStatus.INVALID_ARGUMENT,
            f"client {client!r} is not allowed to use vendor extensions (not in the "
            "extension allowlist, or a binary outside /product, /vendor, /odm and /data)",
        )


class ClientDevice:
    """A device as one named client sees it through the runtime: models using vendor
    extensions are refused (INVALID_ARGUMENT from ``get_supported_operations`` and
    ``prepare_model``) unless the client is allowed; every other call is the wrapped
    device's. The allowlist file is read once, when the wrapper is made."""

    def __init__(
        self,
        device: object,
        client: str,
        allowlist_path: str | Path = DEFAULT_ALLOWLIST_PATH,
    ):
        self.device = device
        self.client = client
        self.allowlist_path = str(allowlist_path)
        self.allowlist = read_allowlist(allowlist_path)
        self.last_error = ""

    def __getattr__(self, name: str):
        return getattr(self.device, name)

    def _refuse(self, model: Model) -> ErrorStatus | None:
        try:
            check_extension_use(model, self.client, self.allowlist)
        except HalError as e:
            self.last_error = str(e)
            return e.status
        return None

    def get_supported_operations(self, model: Model) -> tuple[ErrorStatus, list[bool]]:
        status = self._refuse(model)
        if status is not None:
            return status, []
        return self.device.get_supported_operations(model)

    def prepare_model(
        self,
        model: Model,
        *args,
        **kwargs,
    ) -> tuple[ErrorStatus, object | None]:
        status = self._refuse(model)
        if status is not None:
            return status, None
        return self.device.prepare_model(model, *args, **kwargs)

    def prepare_model_from_cache(
        self, deadline: int | None, model_cache: Sequence[int], data_cache: Sequence[int], token
    ) -> tuple[ErrorStatus, object | None]:
        # Android's client never gets here with an extension model it may not use (it
        # cannot even build one); a cache written for another client must not open
        # that door, so a restored model that uses extensions is checked too.
        status, prepared = self.device.prepare_model_from_cache(
            deadline, model_cache, data_cache, token
        )
        model = getattr(prepared, "model", None)
        if status == ErrorStatus.NONE and isinstance(model, Model):
            refused = self._refuse(model)
            if refused is not None:
                return refused, None
        return status, prepared


__all__ = [
    "DEFAULT_ALLOWLIST_PATH",
    "NATIVE_PARTITIONS",
    "ClientDevice",
    "check_extension_use",
    "client_allowed",
    "extension_use_allowed",
    "parse_allowlist",
    "read_allowlist",
    "uses_extensions",
]
