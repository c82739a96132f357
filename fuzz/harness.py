"""What every fuzz target shares: the oracle, harness-owned pools, the device, the entry.

A fuzz target (``fuzz/targets/<name>.py``) is a function ``test_one_input(data: bytes)``
that drives the driver with ``data`` and returns normally whenever every call ended in a
defined HAL status. Anything else propagates and is a finding:

- an exception escaping the driver (the HAL boundary promises statuses only);
- a :class:`ContractViolation` raised by the harness: a status outside the allowed set for
  that call, validation and device disagreeing, an execution result that breaks the HAL's
  rules (shapes reported on a failure, timing on an error, a round trip that changes
  bytes, ...).

The only exceptions a target swallows are the documented rejections: a
:class:`~driver.wire.WireDecodeError` from decoding, and a :class:`HalError` whose status
is one the called function documents (INVALID_ARGUMENT from validation). A
GENERAL_FAILURE from validation means an operation hook raised (``validation.py``
converts the exception); the harness re-raises the original so the crash points at it.

Pools: fuzzed messages name pools by handle index. :class:`HarnessPools` resolves the
first few indexes to small pools the harness owns (fixed capacity, refilled before every
input so runs are deterministic); a pool that declares more than the capacity is left for
validation to reject. Nothing is ever allocated for a declared size.
"""

from __future__ import annotations

import gc
import importlib
import os
import pkgutil
import sys
import traceback
import types
from collections.abc import Callable, Iterable, Sequence

from driver.hal.types import (
    NO_TIMING,
    ErrorStatus,
    HalError,
    HalVersion,
    Memory,
    MemoryHandle,
)
from driver.wire import DecodeFailure, WireDecodeError

INSTRUMENTED_PACKAGES = ("driver", "randomgraph")
"""Only the project's packages get coverage instrumentation: numpy and the standard
library would add noise (and cost) without telling the fuzzer anything about the driver."""

LAUNCHER_ENV = "NNFUZZ_LAUNCHER"
"""An executable that starts the same target: libFuzzer re-runs ``argv[0]`` for fork mode,
``-jobs`` and crash minimization, and a ``.py`` file is not necessarily executable with
the right interpreter, so campaigns write a launcher and name it here."""

INSTRUMENT_ENV = "NNFUZZ_INSTRUMENT"
"""Comma-separated packages or modules to instrument instead of :data:`INSTRUMENTED_PACKAGES`
(atheris rewrites bytecode in Python, a few seconds for the whole project: short smoke
runs and focused campaigns instrument less, e.g. ``driver.wire,driver.validation``)."""

DRIVER_ENV = "NNFUZZ_DRIVER"
"""Names the device a target drives (a ``--driver`` value); the built-in reference when
unset. An environment variable, so libFuzzer's fork/jobs children inherit it."""

ALL_STATUSES = frozenset(ErrorStatus)


class ContractViolation(AssertionError):
    """The driver returned something the HAL does not allow (a finding, not a rejection)."""


# ---------------------------------------------------------------------------------------
# The oracle
# ---------------------------------------------------------------------------------------


def check_status(
    status: object,
    allowed: Iterable[ErrorStatus],
    what: str,
    dev: object = None,
    reference_error: HalError | None = None,
) -> ErrorStatus:
    """``status`` as an :class:`ErrorStatus`, or :class:`ContractViolation` if it is not
    one of ``allowed`` (naming the device's message for it, when it keeps one, and the
    reference's reason, ``reference_error``, when it rejected the input: the rule the
    driver missed)."""
    if not isinstance(status, ErrorStatus):
        raise ContractViolation(f"{what} returned {status!r}, not an ErrorStatus")
    if status not in allowed:
        names = ", ".join(sorted(s.name for s in allowed))
        said = getattr(dev, "last_error", "") if dev is not None else ""
        raise ContractViolation(
            f"{what} returned {status.name}; allowed here: {names}"
            + (f" (the driver said: {said})" if said else "")
            + (f" (the reference rejects it: {reference_error.message})" if reference_error else "")
        )
    return status


def rejected(e: HalError, allowed: Iterable[ErrorStatus] = (ErrorStatus.INVALID_ARGUMENT,)) -> None:
    """Accept a raised :class:`HalError` as a documented rejection, or re-raise what it
    hides. Validation turns an exception inside an operation hook into GENERAL_FAILURE
    with the exception as ``__cause__``: that is a bug, re-raised as itself."""
    if e.status in allowed:
        return
    cause = e.__cause__
    if cause is not None and not isinstance(cause, HalError):
        raise cause
    raise ContractViolation(f"unexpected {e}") from e


def check_execution(
    result: object, n_outputs: int, what: str, version: HalVersion = HalVersion.V1_3
) -> ErrorStatus:
    """The HAL's rules for an execution result ``(status, output shapes, timing)`` of a
    driver of HAL ``version`` (output shapes and timing exist from 1.2; before, a status
    only)."""
    if not (isinstance(result, tuple) and len(result) == 3):
        raise ContractViolation(f"{what} returned {result!r}, not (status, shapes, timing)")
    status, shapes, timing = result
    check_status(status, ALL_STATUSES, what)
    if version < HalVersion.V1_2:
        if shapes:
            raise ContractViolation(
                f"{what}: a HAL {version.label} driver reports output shapes {shapes!r} "
                "(they exist from 1.2)"
            )
        if timing != NO_TIMING:
            raise ContractViolation(
                f"{what}: a HAL {version.label} driver reports timing {timing!r} (measured "
                "from 1.2)"
            )
    elif status == ErrorStatus.NONE:
        if len(shapes) != n_outputs:
            raise ContractViolation(
                f"{what}: NONE with {len(shapes)} output shapes for {n_outputs} outputs"
            )
        if not all(s.is_sufficient for s in shapes):
            raise ContractViolation(f"{what}: NONE but an output is marked insufficient")
    elif status == ErrorStatus.OUTPUT_INSUFFICIENT_SIZE:
        if len(shapes) != n_outputs or all(s.is_sufficient for s in shapes):
            raise ContractViolation(
                f"{what}: OUTPUT_INSUFFICIENT_SIZE must report every output's shape and "
                f"mark one insufficient (got {shapes!r})"
            )
    elif shapes:
        raise ContractViolation(f"{what}: {status.name} with output shapes {shapes!r}")
    if status != ErrorStatus.NONE and timing != NO_TIMING:
        raise ContractViolation(f"{what}: {status.name} with timing {timing!r}")
    return status


# ---------------------------------------------------------------------------------------
# Harness-owned pools
# ---------------------------------------------------------------------------------------


class PoolHandle(MemoryHandle):
    """A pool the harness owns: a fixed-capacity buffer (never sized by the input)."""

    __slots__ = ("data",)

    def __init__(self, capacity: int):
        self.data = bytearray(capacity)
        self.fd = -1

    def buffer(self) -> memoryview:
        return memoryview(self.data)


class HarnessPools:
    """Handle indexes ``0..count-1`` resolve to the harness's pools; any other index is a
    ``BAD_HANDLE`` decode error, as for a descriptor that was not passed. A pool declaring
    more bytes than :attr:`capacity` resolves too; validation rejects it (its handle maps
    less than it declares)."""

    def __init__(self, count: int = 4, capacity: int = 1 << 16):
        self.capacity = capacity
        self.handles = [PoolHandle(capacity) for _ in range(count)]

    def resolve(self, handle_index: int, name: str, size: int) -> Memory:
        if handle_index >= len(self.handles):
            raise WireDecodeError(
                0,
                f"handle index {handle_index}: the harness passes {len(self.handles)} pools",
                DecodeFailure.BAD_HANDLE,
            )
        return Memory(name, size, self.handles[handle_index])

    def fill(self, pattern: bytes) -> None:
        """Reset every pool to ``pattern`` repeated (pool ``k`` rotated by ``k`` bytes, so
        the pools differ), or to zeros for an empty pattern."""
        cap = self.capacity
        if not pattern:
            for h in self.handles:
                h.data[:] = bytes(cap)
            return
        reps = -(-(cap + len(self.handles)) // len(pattern))
        tiled = (pattern * reps)[: cap + len(self.handles)]
        for k, h in enumerate(self.handles):
            h.data[:] = tiled[k : k + cap]


# ---------------------------------------------------------------------------------------
# The device under test
# ---------------------------------------------------------------------------------------

_DEVICE_CACHE: dict[str, object] = {}


def driver_name() -> str:
    return os.environ.get(DRIVER_ENV) or "reference"


def device() -> object:
    """The device the targets drive (``NNFUZZ_DRIVER``, default the reference), created
    once per process."""
    name = driver_name()
    dev = _DEVICE_CACHE.get(name)
    if dev is None:
        from driver.registry import load_device

        dev = _DEVICE_CACHE[name] = load_device(name)
    return dev


def is_reference(dev: object) -> bool:
    from driver.device import ReferenceDevice

    return type(dev) is ReferenceDevice


# ---------------------------------------------------------------------------------------
# Running a target under libFuzzer
# ---------------------------------------------------------------------------------------


def import_packages(packages: Sequence[str] = INSTRUMENTED_PACKAGES) -> None:
    """Import every module of ``packages`` (lazily imported ones too), so that
    instrumentation sees all of their code."""
    for name in packages:
        try:
            pkg = importlib.import_module(name)
        except ImportError:
            continue
        if not hasattr(pkg, "__path__"):  # a module, not a package
            continue
        for info in pkgutil.walk_packages(pkg.__path__, prefix=f"{name}."):
            try:
                importlib.import_module(info.name)
            except Exception:  # an optional module may need extras
                continue


def instrument_packages(packages: Sequence[str] = INSTRUMENTED_PACKAGES) -> int:
    """Add atheris coverage instrumentation to every function of ``packages``.

    The equivalent of ``atheris.instrument_imports(include=packages)``, but it also
    works when the modules are already imported (a target script imports the driver
    before its ``main`` runs). Returns the number of functions instrumented."""
    import atheris

    import_packages(packages)
    prefixes = tuple(p + "." for p in packages)

    def ours(module: object) -> bool:
        return isinstance(module, str) and (module in packages or module.startswith(prefixes))

    count = 0
    for obj in gc.get_objects():
        if isinstance(obj, types.FunctionType) and ours(getattr(obj, "__module__", None)):
            try:
                atheris.instrument_func(obj)
            except Exception:  # e.g. a code object atheris cannot patch
                continue
            count += 1
    return count


def plug_comparison_leak() -> None:
    """Compare numpy arrays without atheris's comparison hook.

    The hook instrumented code calls for every ``==``/``<``/... (``atheris._trace_cmp``,
    looked up on the module at each call) keeps a reference to a result that is not a
    bool: every array comparison in a kernel leaked its result (the execute target grew
    ~3.7 KB a run, 1 GB in 15 minutes, and would end long campaigns at the RSS limit). An
    array is no hint libFuzzer can use anyway (it learns from int, str and bytes
    operands), so those comparisons run directly; every other one still goes through the
    hook. atheris installs its libFuzzer-backed hooks when ``atheris.Fuzz()`` starts, so
    this runs from the first fuzzed input on (:func:`_plugging_comparison_leak`).
    Idempotent."""
    import operator

    import atheris
    import numpy as np
    from atheris.version_dependent import CMP_OP_SHIFT_AMOUNT

    native = atheris._trace_cmp
    if getattr(native, "plugs_array_leak", False):
        return
    compare = (operator.lt, operator.le, operator.eq, operator.ne, operator.gt, operator.ge)
    array = np.ndarray

    def trace_cmp(left, right, op, counter, is_const):
        if isinstance(left, array) or isinstance(right, array):
            # ``op`` already orders (left, right): atheris swaps a constant to the left
            # and reverses the operator with it.
            return compare[op >> CMP_OP_SHIFT_AMOUNT](left, right)
        return native(left, right, op, counter, is_const)

    trace_cmp.plugs_array_leak = True  # type: ignore[attr-defined]
    atheris._trace_cmp = trace_cmp


def _plugging_comparison_leak(test_one_input: Callable[[bytes], None]) -> Callable[[bytes], None]:
    """``test_one_input`` that first applies :func:`plug_comparison_leak`."""
    plugged = False

    def run(data: bytes) -> None:
        nonlocal plugged
        if not plugged:
            plug_comparison_leak()
            plugged = True
        test_one_input(data)

    return run


def fuzz_main(
    test_one_input: Callable[[bytes], None],
    argv: Sequence[str] | None = None,
    *,
    custom_mutator: Callable[[bytes, int, int], bytes] | None = None,
    arrays_past_the_hook: bool = True,
) -> None:
    """Instrument the project's packages and hand control to libFuzzer (never returns).
    ``argv`` are libFuzzer's arguments (flags and corpus directories).
    ``arrays_past_the_hook`` applies :func:`plug_comparison_leak`: a target whose inputs
    run no kernels (validation only) may skip it, saving ~12% of its speed."""
    import warnings

    import atheris

    args = list(sys.argv if argv is None else [sys.argv[0], *argv])
    args[0] = os.environ.get(LAUNCHER_ENV) or args[0]
    # Kernels may overflow or divide by zero on fuzzed values, as Android's do; numpy's
    # warnings about it are noise (and slow), not findings.
    warnings.simplefilter("ignore")
    chosen = os.environ.get(INSTRUMENT_ENV)
    instrument_packages(
        tuple(p.strip() for p in chosen.split(",") if p.strip())
        if chosen
        else INSTRUMENTED_PACKAGES
    )
    prefix = _flag(args, "artifact_prefix")
    if prefix is not None and _flag(args, "exact_artifact_path") is None:
        test_one_input = _keeping_crashes(test_one_input, prefix)
    kwargs = {}
    if custom_mutator is not None:
        from fuzz.mutators import use_libfuzzer_mutate

        use_libfuzzer_mutate()
        kwargs["custom_mutator"] = custom_mutator
    if arrays_past_the_hook:
        test_one_input = _plugging_comparison_leak(test_one_input)
    try:
        atheris.Setup(args, test_one_input, **kwargs)
        atheris.Fuzz()
    except BaseException:
        # libFuzzer ends the process itself; what escapes here is a setup failure (a
        # flag libFuzzer cannot parse, say). A normal exit then hangs in interpreter
        # shutdown (libFuzzer's state is half built), so report it and leave at once.
        traceback.print_exc()
        sys.stderr.flush()
        os._exit(1)


def _flag(args: Sequence[str], name: str) -> str | None:
    for a in args:
        if a.startswith(f"-{name}="):
            return a.split("=", 1)[1]
    return None


def _keeping_crashes(
    test_one_input: Callable[[bytes], None], prefix: str
) -> Callable[[bytes], None]:
    """``test_one_input`` that first saves a crashing input as ``<prefix>crash-<sha1>``
    (libFuzzer's own name for it) and then re-raises. libFuzzer writes the same file
    from its exit handler, but a process that dies on the way out (a signal during
    interpreter shutdown under load was seen) would otherwise lose the input."""
    import hashlib

    def run(data: bytes) -> None:
        try:
            test_one_input(data)
        except BaseException:
            path = f"{prefix}crash-{hashlib.sha1(data).hexdigest()}"
            try:
                with open(path, "wb") as f:
                    f.write(data)
            except OSError:
                pass
            raise

    return run


def main(argv: Sequence[str] | None = None) -> None:
    """``python -m fuzz.harness TARGET [libFuzzer arguments]``: fuzz a registered target
    or a target module of your own (see :func:`fuzz.targets.load`)."""
    from fuzz.targets import load

    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0].startswith("-"):
        sys.exit("usage: python -m fuzz.harness TARGET [libFuzzer arguments]")
    module = load(args[0])
    fuzz_main(
        module.test_one_input,
        args[1:],
        custom_mutator=getattr(module, "custom_mutator", None),
    )


if __name__ == "__main__":
    main()
