"""The NN HAL 1.0-1.3 vocabulary: enums and structures.

One Python type stands for each HAL structure at its newest (1.3) shape; older HAL
versions are subsets, and :mod:`driver.versions` says which subset (``compliant_with``)
and converts (``convert_to``). Structures are frozen, slotted dataclasses: immutable,
hashable where their fields are, and cheap to copy with :func:`dataclasses.replace`.

This module holds vocabulary only; it imports nothing from the rest of the project.
"""

from __future__ import annotations

import abc
import enum
from dataclasses import dataclass, field
from typing import Any

UINT64_MAX = 2**64 - 1
"""The HAL's "not available" value for timing durations."""

EXTENSION_TYPE_HIGH_BITS_PREFIX = 16
"""An extension operand/operation type is ``(prefix << 16) | type_within_extension``."""
EXTENSION_TYPE_LOW_BITS_TYPE = 16
EXTENSION_TYPE_LOW_MASK = (1 << EXTENSION_TYPE_LOW_BITS_TYPE) - 1


class HalVersion(enum.IntEnum):
    """HAL version (and feature level) of a model, device or structure."""

    V1_0 = 10
    V1_1 = 11
    V1_2 = 12
    V1_3 = 13

    @property
    def label(self) -> str:
        return f"{self.value // 10}.{self.value % 10}"

    @classmethod
    def parse(cls, text: str) -> HalVersion:
        """Accept ``V1_2``, ``1.2`` or ``12``."""
        t = text.strip().upper().lstrip("V").replace("_", ".")
        if t.isdigit() and len(t) == 2:
            t = f"{t[0]}.{t[1]}"
        for v in cls:
            if v.label == t:
                return v
        raise ValueError(f"unknown HAL version {text!r} (expected one of V1_0, V1_1, V1_2, V1_3)")


class OperandType(enum.IntEnum):
    FLOAT32 = 0
    INT32 = 1
    UINT32 = 2
    TENSOR_FLOAT32 = 3
    TENSOR_INT32 = 4
    TENSOR_QUANT8_ASYMM = 5
    BOOL = 6
    TENSOR_QUANT16_SYMM = 7
    TENSOR_FLOAT16 = 8
    TENSOR_BOOL8 = 9
    FLOAT16 = 10
    TENSOR_QUANT8_SYMM_PER_CHANNEL = 11
    TENSOR_QUANT16_ASYMM = 12
    TENSOR_QUANT8_SYMM = 13
    TENSOR_QUANT8_ASYMM_SIGNED = 14
    SUBGRAPH = 15
    OEM = 10000
    TENSOR_OEM_BYTE = 10001


class OperationType(enum.IntEnum):
    ADD = 0
    AVERAGE_POOL_2D = 1
    CONCATENATION = 2
    CONV_2D = 3
    DEPTHWISE_CONV_2D = 4
    DEPTH_TO_SPACE = 5
    DEQUANTIZE = 6
    EMBEDDING_LOOKUP = 7
    FLOOR = 8
    FULLY_CONNECTED = 9
    HASHTABLE_LOOKUP = 10
    L2_NORMALIZATION = 11
    L2_POOL_2D = 12
    LOCAL_RESPONSE_NORMALIZATION = 13
    LOGISTIC = 14
    LSH_PROJECTION = 15
    LSTM = 16
    MAX_POOL_2D = 17
    MUL = 18
    RELU = 19
    RELU1 = 20
    RELU6 = 21
    RESHAPE = 22
    RESIZE_BILINEAR = 23
    RNN = 24
    SOFTMAX = 25
    SPACE_TO_DEPTH = 26
    SVDF = 27
    TANH = 28
    BATCH_TO_SPACE_ND = 29
    DIV = 30
    MEAN = 31
    PAD = 32
    SPACE_TO_BATCH_ND = 33
    SQUEEZE = 34
    STRIDED_SLICE = 35
    SUB = 36
    TRANSPOSE = 37
    ABS = 38
    ARGMAX = 39
    ARGMIN = 40
    AXIS_ALIGNED_BBOX_TRANSFORM = 41
    BIDIRECTIONAL_SEQUENCE_LSTM = 42
    BIDIRECTIONAL_SEQUENCE_RNN = 43
    BOX_WITH_NMS_LIMIT = 44
    CAST = 45
    CHANNEL_SHUFFLE = 46
    DETECTION_POSTPROCESSING = 47
    EQUAL = 48
    EXP = 49
    EXPAND_DIMS = 50
    GATHER = 51
    GENERATE_PROPOSALS = 52
    GREATER = 53
    GREATER_EQUAL = 54
    GROUPED_CONV_2D = 55
    HEATMAP_MAX_KEYPOINT = 56
    INSTANCE_NORMALIZATION = 57
    LESS = 58
    LESS_EQUAL = 59
    LOG = 60
    LOGICAL_AND = 61
    LOGICAL_NOT = 62
    LOGICAL_OR = 63
    LOG_SOFTMAX = 64
    MAXIMUM = 65
    MINIMUM = 66
    NEG = 67
    NOT_EQUAL = 68
    PAD_V2 = 69
    POW = 70
    PRELU = 71
    QUANTIZE = 72
    QUANTIZED_16BIT_LSTM = 73
    RANDOM_MULTINOMIAL = 74
    REDUCE_ALL = 75
    REDUCE_ANY = 76
    REDUCE_MAX = 77
    REDUCE_MIN = 78
    REDUCE_PROD = 79
    REDUCE_SUM = 80
    ROI_ALIGN = 81
    ROI_POOLING = 82
    RSQRT = 83
    SELECT = 84
    SIN = 85
    SLICE = 86
    SPLIT = 87
    SQRT = 88
    TILE = 89
    TOPK_V2 = 90
    TRANSPOSE_CONV_2D = 91
    UNIDIRECTIONAL_SEQUENCE_LSTM = 92
    UNIDIRECTIONAL_SEQUENCE_RNN = 93
    RESIZE_NEAREST_NEIGHBOR = 94
    QUANTIZED_LSTM = 95
    IF = 96
    WHILE = 97
    ELU = 98
    HARD_SWISH = 99
    FILL = 100
    RANK = 101
    OEM_OPERATION = 10000


STANDARD_OPERATIONS: tuple[OperationType, ...] = tuple(
    t for t in OperationType if t != OperationType.OEM_OPERATION
)
"""The 102 standard operations (codes 0-101)."""


class FusedActivation(enum.IntEnum):
    NONE = 0
    RELU = 1
    RELU1 = 2
    RELU6 = 3


class OperandLifeTime(enum.IntEnum):
    TEMPORARY_VARIABLE = 0
    SUBGRAPH_INPUT = 1  # MODEL_INPUT before 1.3
    SUBGRAPH_OUTPUT = 2  # MODEL_OUTPUT before 1.3
    CONSTANT_COPY = 3
    CONSTANT_REFERENCE = 4
    NO_VALUE = 5
    SUBGRAPH = 6  # 1.3


class ErrorStatus(enum.IntEnum):
    NONE = 0
    DEVICE_UNAVAILABLE = 1
    GENERAL_FAILURE = 2
    OUTPUT_INSUFFICIENT_SIZE = 3
    INVALID_ARGUMENT = 4
    MISSED_DEADLINE_TRANSIENT = 5
    MISSED_DEADLINE_PERSISTENT = 6
    RESOURCE_EXHAUSTED_TRANSIENT = 7
    RESOURCE_EXHAUSTED_PERSISTENT = 8


class Priority(enum.IntEnum):
    LOW = 0
    MEDIUM = 1
    HIGH = 2


class ExecutionPreference(enum.IntEnum):
    LOW_POWER = 0
    FAST_SINGLE_ANSWER = 1
    SUSTAINED_SPEED = 2


class MeasureTiming(enum.IntEnum):
    NO = 0
    YES = 1


class DeviceType(enum.IntEnum):
    OTHER = 1
    CPU = 2
    GPU = 3
    ACCELERATOR = 4


class DeviceStatus(enum.IntEnum):
    AVAILABLE = 0
    BUSY = 1
    OFFLINE = 2
    UNKNOWN = 3


class HalError(Exception):
    """A HAL status other than NONE, raised inside the driver and turned into a returned
    status at the public entry points. The message names what was wrong and where.

    ``deferrable`` marks a model rejection that Android 11's own validation does not make.
    Its validation checks operand counts, types, HAL versions and some ranks; parameter
    values, shapes and quantization conditions are checked by each operation's
    ``prepare()`` or kernel, when the model executes. The reference rejects such a model
    up front; another driver may answer INVALID_ARGUMENT too, or accept the model and fail
    when it runs."""

    def __init__(self, status: ErrorStatus, message: str = "", *, deferrable: bool = False):
        super().__init__(f"{status.name}: {message}" if message else status.name)
        self.status = status
        self.message = message
        self.deferrable = deferrable


def invalid_argument(message: str) -> HalError:
    return HalError(ErrorStatus.INVALID_ARGUMENT, message)


def located(where: str, message: str) -> str:
    """``message`` prefixed with ``where`` ("main subgraph, operation 3 (CONV_2D)") unless it
    already starts there: for errors raised by code that does not know its operation."""
    return message if message.startswith(where) else f"{where}: {message}"


# ---------------------------------------------------------------------------------------
# Model structures
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class DataLocation:
    """Where an operand's data lives: a pool (or operandValues for CONSTANT_COPY)."""

    pool_index: int = 0
    offset: int = 0
    length: int = 0


NO_LOCATION = DataLocation()


@dataclass(frozen=True, slots=True)
class SymmPerChannelQuantParams:
    """Per-channel scales for TENSOR_QUANT8_SYMM_PER_CHANNEL (HAL 1.2)."""

    channel_dim: int
    scales: tuple[float, ...]


ExtraParams = SymmPerChannelQuantParams | bytes | None
"""``Operand.extraParams``: none, per-channel quantization, or an extension blob."""


@dataclass(frozen=True, slots=True)
class Operand:
    type: int  # OperandType, or an extension type ((prefix << 16) | type)
    dimensions: tuple[int, ...] = ()
    number_of_consumers: int = 0
    scale: float = 0.0
    zero_point: int = 0
    lifetime: OperandLifeTime = OperandLifeTime.TEMPORARY_VARIABLE
    location: DataLocation = NO_LOCATION
    extra_params: ExtraParams = None


@dataclass(frozen=True, slots=True)
class Operation:
    type: int  # OperationType, or an extension operation type
    inputs: tuple[int, ...] = ()
    outputs: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class Subgraph:
    operands: tuple[Operand, ...] = ()
    operations: tuple[Operation, ...] = ()
    input_indexes: tuple[int, ...] = ()
    output_indexes: tuple[int, ...] = ()


class MemoryHandle(abc.ABC):
    """What a :class:`Memory` carries: a mapping of the pool's bytes, and its file
    descriptor where it has one (so it can be passed to another process).

    Concrete handles live in :mod:`driver.memory`; this base is vocabulary only."""

    fd: int = -1

    @abc.abstractmethod
    def buffer(self) -> memoryview:
        """The pool's bytes (writable)."""


@dataclass(frozen=True, slots=True, eq=False, weakref_slot=True)
class Memory:
    """``hidl_memory``: a named shared-memory pool (``ashmem``, ``mmap_fd``,
    ``hardware_buffer_blob``, ``hardware_buffer``). Compared by identity; weakly
    referenceable, so that caches keyed by a pool (a burst's slots) let it go."""

    name: str
    size: int
    handle: Any = None


@dataclass(frozen=True, slots=True)
class ExtensionNameAndPrefix:
    name: str
    prefix: int


@dataclass(frozen=True, slots=True)
class Model:
    main: Subgraph
    referenced: tuple[Subgraph, ...] = ()
    operand_values: bytes = b""
    pools: tuple[Memory, ...] = ()
    relax_computation_float32_to_float16: bool = False
    extension_name_to_prefix: tuple[ExtensionNameAndPrefix, ...] = ()

    @property
    def relaxed(self) -> bool:
        return self.relax_computation_float32_to_float16

    def subgraph(self, index: int | None) -> Subgraph:
        """``None`` is the main subgraph; an int is a referenced subgraph."""
        return self.main if index is None else self.referenced[index]


# ---------------------------------------------------------------------------------------
# Request structures
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RequestArgument:
    has_no_value: bool = False
    location: DataLocation = NO_LOCATION
    dimensions: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class BufferToken:
    """A request pool that names a driver-managed buffer (memory domains, HAL 1.3)."""

    token: int


RequestPool = Memory | BufferToken


@dataclass(frozen=True, slots=True)
class Request:
    inputs: tuple[RequestArgument, ...] = ()
    outputs: tuple[RequestArgument, ...] = ()
    pools: tuple[RequestPool, ...] = ()


@dataclass(frozen=True, slots=True)
class Timing:
    """Microseconds; ``UINT64_MAX`` means not available."""

    time_on_device: int = UINT64_MAX
    time_in_driver: int = UINT64_MAX


NO_TIMING = Timing()


@dataclass(frozen=True, slots=True)
class OutputShape:
    dimensions: tuple[int, ...] = ()
    is_sufficient: bool = True


# ---------------------------------------------------------------------------------------
# Device structures
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PerformanceInfo:
    """Ratios to the CPU's: lower is better."""

    exec_time: float = 1.0
    power_usage: float = 1.0


@dataclass(frozen=True, slots=True)
class OperandPerformance:
    type: int
    info: PerformanceInfo


@dataclass(frozen=True, slots=True)
class Capabilities:
    relaxed_float32_to_float16_performance_scalar: PerformanceInfo = PerformanceInfo()
    relaxed_float32_to_float16_performance_tensor: PerformanceInfo = PerformanceInfo()
    operand_performance: tuple[OperandPerformance, ...] = ()
    if_performance: PerformanceInfo = PerformanceInfo()
    while_performance: PerformanceInfo = PerformanceInfo()


@dataclass(frozen=True, slots=True)
class ExtensionOperandTypeInformation:
    type: int  # within the extension (low 16 bits)
    is_tensor: bool
    byte_size: int


@dataclass(frozen=True, slots=True)
class Extension:
    name: str
    operand_types: tuple[ExtensionOperandTypeInformation, ...] = ()


@dataclass(frozen=True, slots=True)
class BufferDesc:
    dimensions: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class BufferRole:
    model_index: int  # index into the list of prepared models given to allocate
    io_index: int  # input or output index of that model
    frequency: float = 1.0  # in (0, 1]


@dataclass(frozen=True, slots=True)
class CacheToken:
    """The 32-byte token identifying a compilation for caching."""

    value: bytes = field(default=b"\0" * 32)

    BYTE_SIZE = 32


# ---------------------------------------------------------------------------------------
# Type helpers (Utils.h: isExtensionOperandType, nonExtensionOperandSizeOfData, ...)
# ---------------------------------------------------------------------------------------

_SCALAR_TYPES = frozenset(
    {
        OperandType.FLOAT32,
        OperandType.INT32,
        OperandType.UINT32,
        OperandType.BOOL,
        OperandType.FLOAT16,
        OperandType.SUBGRAPH,
        OperandType.OEM,
    }
)

ELEMENT_SIZE: dict[OperandType, int] = {
    OperandType.FLOAT32: 4,
    OperandType.INT32: 4,
    OperandType.UINT32: 4,
    OperandType.TENSOR_FLOAT32: 4,
    OperandType.TENSOR_INT32: 4,
    OperandType.TENSOR_QUANT8_ASYMM: 1,
    OperandType.BOOL: 1,
    OperandType.TENSOR_QUANT16_SYMM: 2,
    OperandType.TENSOR_FLOAT16: 2,
    OperandType.TENSOR_BOOL8: 1,
    OperandType.FLOAT16: 2,
    OperandType.TENSOR_QUANT8_SYMM_PER_CHANNEL: 1,
    OperandType.TENSOR_QUANT16_ASYMM: 2,
    OperandType.TENSOR_QUANT8_SYMM: 1,
    OperandType.TENSOR_QUANT8_ASYMM_SIGNED: 1,
    OperandType.SUBGRAPH: 0,
    OperandType.OEM: 0,
    OperandType.TENSOR_OEM_BYTE: 1,
}

QUANT8_TYPES = frozenset(
    {
        OperandType.TENSOR_QUANT8_ASYMM,
        OperandType.TENSOR_QUANT8_ASYMM_SIGNED,
        OperandType.TENSOR_QUANT8_SYMM,
        OperandType.TENSOR_QUANT8_SYMM_PER_CHANNEL,
    }
)
QUANTIZED_TYPES = QUANT8_TYPES | {OperandType.TENSOR_QUANT16_SYMM, OperandType.TENSOR_QUANT16_ASYMM}
FLOAT_TYPES = frozenset(
    {
        OperandType.FLOAT32,
        OperandType.FLOAT16,
        OperandType.TENSOR_FLOAT32,
        OperandType.TENSOR_FLOAT16,
    }
)

QUANT_RANGE: dict[OperandType, tuple[int, int]] = {
    OperandType.TENSOR_QUANT8_ASYMM: (0, 255),
    OperandType.TENSOR_QUANT8_ASYMM_SIGNED: (-128, 127),
    OperandType.TENSOR_QUANT8_SYMM: (-128, 127),
    OperandType.TENSOR_QUANT8_SYMM_PER_CHANNEL: (-128, 127),
    OperandType.TENSOR_QUANT16_SYMM: (-32768, 32767),
    OperandType.TENSOR_QUANT16_ASYMM: (0, 65535),
}


def is_extension_type(type_code: int) -> bool:
    """True for an extension operand or operation type (non-zero high 16 bits)."""
    return (type_code >> EXTENSION_TYPE_HIGH_BITS_PREFIX) != 0


is_extension_operand_type = is_extension_type
is_extension_operation_type = is_extension_type


def extension_prefix(type_code: int) -> int:
    return (type_code >> EXTENSION_TYPE_HIGH_BITS_PREFIX) & 0xFFFF


def extension_type_within(type_code: int) -> int:
    return type_code & EXTENSION_TYPE_LOW_MASK


def make_extension_type(prefix: int, type_within: int) -> int:
    return (prefix << EXTENSION_TYPE_HIGH_BITS_PREFIX) | (type_within & EXTENSION_TYPE_LOW_MASK)


def is_scalar_type(type_code: int) -> bool:
    """``nonExtensionOperandTypeIsScalar``: a non-tensor standard or OEM type."""
    return type_code in _SCALAR_TYPES


def is_tensor_type(type_code: int) -> bool:
    return type_code in ELEMENT_SIZE and type_code not in _SCALAR_TYPES


def element_size(type_code: int) -> int:
    """Bytes per element of a standard type (0 for SUBGRAPH and OEM)."""
    return ELEMENT_SIZE[OperandType(type_code)]


def non_extension_size_of_data(type_code: int, dimensions: tuple[int, ...]) -> int:
    """``nonExtensionOperandSizeOfData``: byte size of a standard operand; 0 when a tensor
    has unspecified dimensions. Python ints never overflow; callers bound the result."""
    size = ELEMENT_SIZE[OperandType(type_code)]
    if type_code in _SCALAR_TYPES:
        return size
    if not dimensions:
        return 0
    for d in dimensions:
        size *= d
    return size


def tensor_has_unspecified_dimensions(type_code: int, dimensions: tuple[int, ...]) -> bool:
    """A tensor of unknown rank (no dims) or with any dim 0. Scalars never have."""
    if is_scalar_type(type_code):
        return False
    return len(dimensions) == 0 or any(d == 0 for d in dimensions)


def operand_type_name(type_code: int) -> str:
    try:
        return OperandType(type_code).name
    except ValueError:
        if is_extension_type(type_code):
            return f"EXTENSION(prefix={extension_prefix(type_code)}, type={extension_type_within(type_code)})"
        return f"UNKNOWN_OPERAND_TYPE({type_code})"


def operation_type_name(type_code: int) -> str:
    try:
        return OperationType(type_code).name
    except ValueError:
        if is_extension_type(type_code):
            return f"EXTENSION_OP(prefix={extension_prefix(type_code)}, type={extension_type_within(type_code)})"
        return f"UNKNOWN_OPERATION({type_code})"


__all__ = [
    "ELEMENT_SIZE",
    "EXTENSION_TYPE_HIGH_BITS_PREFIX",
    "EXTENSION_TYPE_LOW_BITS_TYPE",
    "EXTENSION_TYPE_LOW_MASK",
    "FLOAT_TYPES",
    "NO_LOCATION",
    "NO_TIMING",
    "QUANT8_TYPES",
    "QUANTIZED_TYPES",
    "QUANT_RANGE",
    "STANDARD_OPERATIONS",
    "UINT64_MAX",
    "BufferDesc",
    "BufferRole",
    "BufferToken",
    "CacheToken",
    "Capabilities",
    "DataLocation",
    "DeviceStatus",
    "DeviceType",
    "ErrorStatus",
    "ExecutionPreference",
    "Extension",
    "ExtensionNameAndPrefix",
    "ExtensionOperandTypeInformation",
    "ExtraParams",
    "FusedActivation",
    "HalError",
    "HalVersion",
    "MeasureTiming",
    "Memory",
    "MemoryHandle",
    "Model",
    "Operand",
    "OperandLifeTime",
    "OperandPerformance",
    "OperandType",
    "Operation",
    "OperationType",
    "OutputShape",
    "PerformanceInfo",
    "Priority",
    "Request",
    "RequestArgument",
    "RequestPool",
    "Subgraph",
    "SymmPerChannelQuantParams",
    "Timing",
    "element_size",
    "extension_prefix",
    "extension_type_within",
    "invalid_argument",
    "is_extension_operand_type",
    "is_extension_operation_type",
    "is_extension_type",
    "is_scalar_type",
    "is_tensor_type",
    "make_extension_type",
    "non_extension_size_of_data",
    "operand_type_name",
    "operation_type_name",
    "tensor_has_unspecified_dimensions",
]
