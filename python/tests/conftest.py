"""Shared fixtures. Every rank runs the same tests in the same order (pytest
collects them deterministically), so each test's collectives match across
ranks; a test computes its result first and asserts after, so one rank's
failure does not leave the others waiting in a later collective.
"""

import numpy as np
import pytest

import weft


@pytest.fixture(scope="session")
def comm():
    weft.init()
    return weft.Comm.world()


#: every Weft datatype, with the numpy type that holds its values (bfloat16 as
#: raw uint16, passed with dtype=weft.BFLOAT16)
DTYPES = [
    (weft.INT8, np.int8), (weft.UINT8, np.uint8), (weft.INT32, np.int32),
    (weft.UINT32, np.uint32), (weft.INT64, np.int64), (weft.UINT64, np.uint64),
    (weft.FLOAT16, np.float16), (weft.BFLOAT16, np.uint16), (weft.FLOAT32, np.float32),
    (weft.FLOAT64, np.float64), (weft.INT16, np.int16), (weft.UINT16, np.uint16),
]


def to_storage(values, wdtype, nptype):
    """values (float64, exactly representable) in the array Weft gets."""
    if wdtype == weft.BFLOAT16:  # float32 rounded to nearest even, top half kept
        bits = values.astype(np.float32).view(np.uint32).astype(np.uint64)
        bits = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
        return bits.astype(np.uint16)
    return values.astype(nptype)


def to_values(arr, wdtype):
    """The float64 values of an array of storage type."""
    if wdtype == weft.BFLOAT16:
        return (arr.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    return arr.astype(np.float64)


def pass_dtype(wdtype):
    return wdtype if wdtype == weft.BFLOAT16 else None
