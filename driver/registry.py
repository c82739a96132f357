"""``--driver`` names: registered devices, or ``module:callable`` for any other driver.

    load_device("reference")            # the built-in reference driver (HAL 1.3)
    load_device("reference-1.1")        # the reference at a feature level
    load_device("mypkg.drivers:make")   # any callable returning a Device
    load_device("partial-float")        # a partial driver (driver/drivers/partial.py)
    load_device("partitioned:partial-float,partial-quant")   # partitioned, reference fallback
    load_device("reference@isolated")   # any driver in a child process (driver/isolated.py)
    load_device("mypkg.drivers:make@isolated:timeout=5")

The callable is called with no arguments and must return an object implementing
:class:`driver.hal.device.Device`. Composite forms (see ``docs/drivers.md``):

``partitioned:A,B,...``
    :class:`driver.partition.PartitionedDevice` over the drivers ``A``, ``B``, ... with
    the reference as the fallback for operations none of them supports. Each member is
    itself a ``--driver`` value (it may carry ``@isolated``).
``D@isolated`` or ``D@isolated:timeout=S[:start_timeout=S]``
    :class:`driver.isolated.IsolatedDevice`: ``D`` runs in a child process; a crash or a
    hang becomes a status and the child is restarted. The child resolves ``D`` afresh,
    so use ``module:callable`` for drivers registered at run time.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable

from driver.hal.device import Device
from driver.hal.types import HalVersion


class DriverLoadError(ValueError):
    """A ``--driver`` value that names no driver, or a factory that fails."""


def _reference(version: HalVersion, name: str) -> Callable[[], Device]:
    def make() -> Device:
        from driver.device import DeviceConfig, ReferenceDevice

        return ReferenceDevice(DeviceConfig(name=name, version=version))

    make.__doc__ = f"The reference driver at HAL {version.label}."
    return make


def _feature_level(version: HalVersion) -> Callable[[], Device]:
    def make() -> Device:
        from driver.drivers.feature_level import feature_level_reference

        return feature_level_reference(version)

    make.__doc__ = (
        f"The reference at HAL {version.label}, behind that version's interface "
        "(driver/drivers/feature_level.py)."
    )
    return make


def _reference_ext() -> Device:
    """The reference with every registered vendor extension (driver/extensions/)."""
    from driver.extensions import extension_device

    return extension_device("reference-ext")


def _partial(name: str) -> Callable[[], Device]:
    def make() -> Device:
        from driver.drivers.partial import partial_factory

        return partial_factory(name)()

    make.__doc__ = f"The partial driver {name!r} (driver/drivers/partial.py)."
    return make


DRIVERS: dict[str, Callable[[], Device]] = {
    "reference": _reference(HalVersion.V1_3, "reference"),
    "reference-1.0": _feature_level(HalVersion.V1_0),
    "reference-1.1": _feature_level(HalVersion.V1_1),
    "reference-1.2": _feature_level(HalVersion.V1_2),
    "reference-1.3": _reference(HalVersion.V1_3, "reference-1.3"),
    "reference-ext": _reference_ext,
    "partial-float": _partial("partial-float"),
    "partial-quant": _partial("partial-quant"),
    "partial-minimal": _partial("partial-minimal"),
}


def _planted(bug: str) -> Callable[[], Device]:
    def make() -> Device:
        from driver.planted import make_planted

        return make_planted(bug)

    make.__doc__ = f"The reference with the planted {bug!r} bug (driver/planted.py)."
    return make


for _bug in ("rounding", "activation", "padding", "broadcast", "crash", "hang", "status"):
    DRIVERS[f"planted-{_bug}"] = _planted(_bug)


def register_driver(name: str, factory: Callable[[], Device]) -> None:
    """Make ``name`` usable as a ``--driver`` value."""
    DRIVERS[name] = factory


def driver_names() -> list[str]:
    return sorted(DRIVERS)


PARTITIONED_PREFIX = "partitioned:"
ISOLATED_SUFFIX = "@isolated"


def _composite(spec: str) -> Callable[[], Device] | None:
    """The factory of a ``partitioned:...`` or ``...@isolated`` spec, or None."""
    if spec.startswith(PARTITIONED_PREFIX):
        members = [m.strip() for m in spec[len(PARTITIONED_PREFIX) :].split(",")]
        if not all(members):
            raise DriverLoadError(f"{spec!r}: partitioned: needs a comma-separated driver list")

        def make_partitioned() -> Device:
            from driver.partition import PartitionedDevice

            return PartitionedDevice([load_device(m) for m in members])

        return make_partitioned
    base, at, suffix = spec.rpartition("@")
    if at and (suffix == ISOLATED_SUFFIX[1:] or suffix.startswith(ISOLATED_SUFFIX[1:] + ":")):
        if not base:
            raise DriverLoadError(f"{spec!r}: @isolated needs a driver before it")
        from driver.isolated import check_timeout

        options: dict[str, float] = {}
        for item in suffix.split(":")[1:]:
            key, eq, value = item.partition("=")
            if key not in ("timeout", "start_timeout") or not eq:
                raise DriverLoadError(
                    f"{spec!r}: unknown @isolated option {item!r} "
                    "(use timeout=SECONDS or start_timeout=SECONDS)"
                )
            try:
                seconds = float(value)
            except ValueError:
                raise DriverLoadError(
                    f"{spec!r}: {key} must be a number of seconds, got {value!r}"
                ) from None
            try:  # nan, inf, 0 and negatives parse as floats, but are no timeouts
                options[key] = check_timeout(key, seconds)
            except ValueError as e:
                raise DriverLoadError(f"{spec!r}: {e}") from None

        def make_isolated() -> Device:
            from driver.isolated import IsolatedDevice

            return IsolatedDevice(base, **options)

        return make_isolated
    return None


def load_device(spec: str) -> Device:
    """The device ``spec`` names; :class:`DriverLoadError` with a clear message if none."""
    factory = DRIVERS.get(spec)
    if factory is None:
        factory = _composite(spec)
    if factory is None:
        if ":" not in spec:
            raise DriverLoadError(
                f"unknown driver {spec!r}: use one of {', '.join(driver_names())}, "
                "module:callable, partitioned:D1,D2,... or D@isolated"
            )
        module_name, _, attr = spec.partition(":")
        if not all(part.isidentifier() for part in module_name.split(".")):
            # importlib raises ValueError/TypeError, not ImportError, for '' and relative
            # names ('.x', '..'): a --driver typo must still be a usage error.
            raise DriverLoadError(f"bad driver module name {module_name!r} in {spec!r}")
        try:
            module = importlib.import_module(module_name)
        except ImportError as e:
            raise DriverLoadError(f"cannot import driver module {module_name!r}: {e}") from e
        factory = module
        for part in attr.split("."):
            factory = getattr(factory, part, None)
            if factory is None:
                raise DriverLoadError(f"{module_name!r} has no attribute {attr!r}")
        if not callable(factory):
            raise DriverLoadError(f"{spec!r} is not callable")
    try:
        device = factory()
    except DriverLoadError:
        raise  # a member of a composite spec: its message already says what is wrong
    except Exception as e:
        raise DriverLoadError(f"driver factory {spec!r} failed: {type(e).__name__}: {e}") from e
    if not isinstance(device, Device):
        missing = [
            m
            for m in ("get_capabilities", "get_supported_operations", "prepare_model")
            if not callable(getattr(device, m, None))
        ]
        raise DriverLoadError(
            f"{spec!r} returned {type(device).__name__}, which does not implement the device "
            f"protocol (driver.hal.device.Device); missing: {', '.join(missing) or 'some methods'}"
        )
    return device
