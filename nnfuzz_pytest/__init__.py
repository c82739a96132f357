"""nnfuzz for pytest: a driver-conformance suite any NNAPI driver team can run in CI.

    pytest --nn-driver mypkg.nnapi:make_device

runs the shipped properties (``nnfuzz_pytest.conformance``) against the driver; see
``docs/ci.md``. The pieces are importable for your own tests:

- :mod:`nnfuzz_pytest.strategies` — Hypothesis strategies: valid models (``Case``),
  requests, VTS-style model and request mutations;
- :mod:`nnfuzz_pytest.harness` — time-limited driver calls with HANG/CRASH verdicts,
  every execution path (request pools of any kind, executeFenced waiting on real sync
  fences), output read-back;
- :mod:`nnfuzz_pytest.checks` — the shared assertions: success with its timing and
  output shapes, clean failures, output comparison under the criteria, device queries;
- :mod:`nnfuzz_pytest.budget` — budgets and the ``nnfuzz-ci/dev/nightly`` profiles;
- fixtures (from the plugin): ``nn_driver``, ``nn_device``, ``nn_version``,
  ``nn_reference``, ``nn_prepare``, ``nn_strategies``, ``nn_budget``, ``nn_session``.
"""
