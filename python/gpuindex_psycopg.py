"""psycopg 3 adapters for gpuindex: vectors and batches of queries without casts.

After ``register(conn)``:

* a numpy array (1-D: a vector, 2-D: one query per row for ``gpuivf_search``) and a
  ``Vector(sequence)`` are sent as ``real[]`` (binary float4 arrays), so
  ``ORDER BY v <-> %s`` and ``gpuivf_search(index, %s, k)`` take them as they are;
* a ``SparseVector`` is sent as ``spvec`` (a list of them as ``spvec[]``, for
  ``gpusparse_search``), and ``spvec`` values come back as ``SparseVector``;
* ``packed(queries)`` gives the bytes ``gpuivf_search_packed`` takes.

Python lists keep psycopg's own adaptation (``double precision[]`` or ``numeric[]``):
wrap them in ``Vector``.  docs/python.md shows the whole thing.
"""

import struct

import numpy as np
from psycopg.adapt import Dumper, Loader
from psycopg.pq import Format
from psycopg.types import TypeInfo

__all__ = ["Vector", "SparseVector", "register", "packed"]

FLOAT4_OID = 700
FLOAT4_ARRAY_OID = 1021


class Vector:
    """A dense vector (or a 2-D batch of them) to be sent as ``real[]``."""

    def __init__(self, values):
        self.values = np.asarray(values, dtype=np.float32)

    def __repr__(self):
        return f"Vector({self.values.tolist()!r})"


class SparseVector:
    """A sparse vector: 0-based ``indices`` (distinct), ``values`` and ``dim``.

    Values are rounded to float4, as ``spvec`` keeps them.  Its text form is
    pgvector's, 1-based: ``{1:0.5,7:2}/10``.
    """

    def __init__(self, indices, values, dim):
        self.indices = [int(i) for i in indices]
        self.values = np.asarray(values, dtype=np.float32).ravel().tolist()
        self.dim = int(dim)
        if len(self.indices) != len(self.values):
            raise ValueError("indices and values must have the same length")
        if len(set(self.indices)) != len(self.indices):
            raise ValueError("indices must be distinct")
        if any(i < 0 or i >= self.dim for i in self.indices):
            raise ValueError(f"indices must be in [0, {self.dim})")
        order = sorted(range(len(self.indices)), key=self.indices.__getitem__)
        self.indices = [self.indices[k] for k in order]
        self.values = [self.values[k] for k in order]

    @classmethod
    def from_dense(cls, values):
        """The non-zeros of a dense sequence."""
        a = np.asarray(values, dtype=np.float32).ravel()
        nz = np.flatnonzero(a)
        return cls(nz.tolist(), a[nz].tolist(), a.size)

    def to_dense(self):
        a = np.zeros(self.dim, dtype=np.float32)
        a[self.indices] = self.values
        return a

    def to_text(self):
        pairs = ",".join(f"{i + 1}:{v!r}" for i, v in zip(self.indices, self.values))
        return f"{{{pairs}}}/{self.dim}"

    @classmethod
    def from_text(cls, text):
        body, _, dim = text.partition("}/")
        body = body.lstrip("{").strip()
        idx, vals = [], []
        if body:
            for pair in body.split(","):
                i, _, v = pair.partition(":")
                idx.append(int(i) - 1)
                vals.append(float(v))
        return cls(idx, vals, int(dim))

    def __eq__(self, other):
        return (isinstance(other, SparseVector) and self.dim == other.dim
                and self.indices == other.indices and self.values == other.values)

    def __repr__(self):
        return f"SparseVector({self.to_text()!r})"


def _float4_array(a):
    """The binary form of a 1-D or 2-D float4 array."""
    a = np.asarray(a, dtype=np.float32)
    if a.ndim not in (1, 2):
        raise ValueError(f"a vector has 1 dimension and a batch 2, not {a.ndim}")
    head = struct.pack("!iiI", a.ndim, 0, FLOAT4_OID)
    head += b"".join(struct.pack("!ii", n, 1) for n in a.shape)
    elems = np.empty(a.size, dtype=[("len", ">i4"), ("v", ">f4")])
    elems["len"] = 4
    elems["v"] = a.ravel()
    return head + elems.tobytes()


def _float4_text(a):
    """The text form of a 1-D or 2-D float4 array (for COPY and text parameters)."""
    a = np.asarray(a, dtype=np.float32)
    if a.ndim == 1:
        return "{" + ",".join(repr(float(x)) for x in a) + "}"
    if a.ndim == 2:
        return "{" + ",".join(_float4_text(r) for r in a) + "}"
    raise ValueError(f"a vector has 1 dimension and a batch 2, not {a.ndim}")


def _values(obj):
    return obj.values if isinstance(obj, Vector) else obj


class _ArrayBinaryDumper(Dumper):
    format = Format.BINARY
    oid = FLOAT4_ARRAY_OID

    def dump(self, obj):
        return _float4_array(_values(obj))


class _ArrayTextDumper(Dumper):
    format = Format.TEXT
    oid = FLOAT4_ARRAY_OID

    def dump(self, obj):
        return _float4_text(_values(obj)).encode()


def packed(queries):
    """The bytes of ``gpuivf_search_packed``: rows of little-endian float4."""
    a = np.asarray(queries, dtype="<f4")
    if a.ndim != 2:
        raise ValueError("queries must be a 2-D array, one query per row")
    return a.tobytes()


def register(context):
    """Register the adapters on a connection or cursor (after CREATE EXTENSION gpuindex)."""
    adapters = context.adapters
    for cls in (np.ndarray, Vector):
        adapters.register_dumper(cls, _ArrayTextDumper)
        adapters.register_dumper(cls, _ArrayBinaryDumper)

    info = TypeInfo.fetch(context if not hasattr(context, "connection") else context.connection,
                          "spvec")
    if info is None:
        raise RuntimeError("type spvec not found: CREATE EXTENSION gpuindex first")
    info.register(context)

    class SparseDumper(Dumper):
        format = Format.TEXT
        oid = info.oid

        def dump(self, obj):
            return obj.to_text().encode()

    class SparseLoader(Loader):
        format = Format.TEXT

        def load(self, data):
            return SparseVector.from_text(bytes(data).decode())

    adapters.register_dumper(SparseVector, SparseDumper)
    adapters.register_loader(info.oid, SparseLoader)
