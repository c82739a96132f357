"""NN HAL vocabulary: enums, structures, the device protocol. Imports nothing upward."""

from driver.hal.types import *  # noqa: F403
from driver.hal.types import __all__  # noqa: F401
