"""``--driver`` names: registered devices, or ``module:callable`` for any other driver.

    load_device("reference")            # the built-in reference driver (HAL 1.3)
    load_device("reference-1.1")        # the reference at a feature level
    load_device("mypkg.drivers:make")   # any callable returning a Device

The callable is called with no arguments and must return an object implementing
:class:`driver.hal.device.Device`.
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


DRIVERS: dict[str, Callable[[], Device]] = {
    "reference": _reference(HalVersion.V1_3, "reference"),
    "reference-1.0": _reference(HalVersion.V1_0, "reference-1.0"),
    "reference-1.1": _reference(HalVersion.V1_1, "reference-1.1"),
    "reference-1.2": _reference(HalVersion.V1_2, "reference-1.2"),
    "reference-1.3": _reference(HalVersion.V1_3, "reference-1.3"),
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


def load_device(spec: str) -> Device:
    """The device ``spec`` names; :class:`DriverLoadError` with a clear message if none."""
    factory = DRIVERS.get(spec)
    if factory is None:
        if ":" not in spec:
            raise DriverLoadError(
                f"unknown driver {spec!r}: use one of {', '.join(driver_names())} "
                "or module:callable"
            )
        module_name, _, attr = spec.partition(":")
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
