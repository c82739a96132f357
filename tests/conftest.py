"""Test configuration: Hypothesis profiles (``ci`` loads automatically when CI is set), and
Ctrl-C as Python's default."""

import os
import signal

from hypothesis import HealthCheck, settings

settings.register_profile(
    "ci",
    max_examples=60,
    deadline=None,
    derandomize=True,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.register_profile("dev", max_examples=100, deadline=None)
settings.register_profile(
    "nightly", max_examples=5000, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci" if os.environ.get("CI") else "dev"))

# A run started in the background of a non-interactive shell (`nohup bash .ci/run &`)
# inherits SIGINT ignored, and Python then installs no KeyboardInterrupt handler: the
# tests of a real Ctrl-C would wait for it forever, and every process they start would
# ignore it too.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)
