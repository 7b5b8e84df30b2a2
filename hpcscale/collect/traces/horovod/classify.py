"""What a timeline's names and args mean: the category of a span, the bytes of a tensor.

Kept apart from the folding so the reference checks in the tests, the command-line tables and
both engines share one definition of each category.

The two waits (WAIT_FOR_DATA, WAIT_FOR_OTHER_TENSOR_DATA) overlap: in a fused batch each tensor
waits for its own data, then for the other tensors' (Horovod's HorovodOp::WaitForData), so
while one tensor waits for the others another is still waiting for its data; the overlap split
(hpcscale.analysis.overlap) takes their union. Horovod opens both inside the tensor's
collective (between its B and E), so in a whole timeline the union lies inside communication.
"""

from __future__ import annotations

from hpcscale.collect.traces.summary import CATEGORIES

__all__ = ["CATEGORIES", "category_of", "tensor_bytes"]

COLLECTIVES = frozenset(
    {
        "ALLREDUCE",
        "ALLGATHER",
        "BROADCAST",
        "REDUCESCATTER",
        "ALLTOALL",
        "ADASUM",
        "BARRIER",
        "JOIN",
    }
)
TRANSPORT_PREFIXES = ("MPI_", "NCCL_", "GLOO_", "CCL_")
DTYPE_BYTES = {
    "uint8": 1,
    "int8": 1,
    "bool": 1,
    "uint16": 2,
    "int16": 2,
    "float16": 2,
    "bfloat16": 2,
    "int32": 4,
    "float32": 4,
    "int64": 8,
    "float64": 8,
}


def category_of(name: str) -> str:
    """Category of a B/E span by its name (top-level op or activity)."""
    if name in COLLECTIVES:
        return "comm"
    if name.startswith("NEGOTIATE_"):
        return "negotiate"
    if name == "WAIT_FOR_DATA":
        return "wait_for_data"
    if name == "WAIT_FOR_OTHER_TENSOR_DATA":
        return "wait_for_other_tensor_data"
    if name == "QUEUE":
        return "queue"
    if name.startswith("MEMCPY_"):
        return "memcpy"
    if name.startswith(TRANSPORT_PREFIXES):
        return "transport"
    return "other"


# No tensor comes near 1 TiB; past it a shape is damaged (and sums of it would leave int64).
MAX_TENSOR_BYTES = 1 << 40


def tensor_bytes(dtype: str | None, shape: str | None) -> int | None:
    """Bytes of a tensor from the timeline's `dtype` ("float32") and `shape` ("[3, 3, 64]")."""
    if not dtype or shape is None:
        return None
    size = DTYPE_BYTES.get(dtype.lower().removeprefix("horovod_"))
    if size is None:
        return None
    dims = shape.strip().strip("[]")
    try:
        counts = [int(d) for d in dims.split(",")] if dims.strip() else []
    except ValueError:
        return None
    total = size
    for d in counts:  # a damaged shape ([-4], [99999999999999999999]) is no size
        total *= d
        if d < 0 or total > MAX_TENSOR_BYTES:
            return None
    return total
