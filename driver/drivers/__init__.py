"""Drivers built on the reference: feature levels and partial drivers.

* :mod:`driver.drivers.feature_level` — ``reference-1.0`` … ``reference-1.2``: the reference
  behind the interface of an older HAL (what that version can express, nothing more).
* :mod:`driver.drivers.partial` — ``partial-float``, ``partial-quant``, ``partial-minimal``:
  drivers that support a subset of the operations, in the spirit of Android's sample
  drivers, for partitioned execution (:mod:`driver.partition`).

Every driver here is registered as a ``--driver`` name in :mod:`driver.registry`; see
``docs/drivers.md``.
"""
