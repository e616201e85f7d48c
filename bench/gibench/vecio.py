"""Readers and writers of the usual vector file formats: .fvecs, .ivecs, .bvecs, .npy."""
from pathlib import Path

import numpy as np


def _read_vecs(path, dtype, count=None):
    raw = np.fromfile(path, dtype=np.uint8)
    if raw.size == 0:
        return np.zeros((0, 0), dtype=dtype)
    d = int(raw[:4].view(np.int32)[0])
    width = np.dtype(dtype).itemsize
    row = 4 + d * width
    if raw.size % row:
        raise ValueError(f"{path}: size {raw.size} is not a multiple of the row size {row}")
    rows = raw.reshape(-1, row)
    if count is not None:
        rows = rows[:count]
    return np.ascontiguousarray(rows[:, 4:]).view(dtype).reshape(len(rows), d)


def read_fvecs(path, count=None):
    return _read_vecs(path, np.float32, count)


def read_ivecs(path, count=None):
    return _read_vecs(path, np.int32, count)


def read_bvecs(path, count=None):
    return _read_vecs(path, np.uint8, count).astype(np.float32)


def write_fvecs(path, x):
    x = np.asarray(x, dtype=np.float32)
    d = np.full((len(x), 1), x.shape[1], dtype=np.int32).view(np.float32)
    np.hstack([d, x]).tofile(path)


def read_any(path, count=None):
    """A matrix from .fvecs/.ivecs/.bvecs/.npy, by file extension."""
    p = Path(path)
    ext = p.suffix.lower()
    if ext == ".fvecs":
        return read_fvecs(p, count)
    if ext == ".ivecs":
        return read_ivecs(p, count)
    if ext == ".bvecs":
        return read_bvecs(p, count)
    if ext == ".npy":
        x = np.load(p, mmap_mode="r")
        return np.asarray(x[:count] if count else x)
    raise ValueError(f"{path}: unknown vector file type (want .fvecs .ivecs .bvecs .npy)")
