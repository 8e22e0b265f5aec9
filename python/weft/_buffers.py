"""Turning Python arrays into (address, element count, Weft datatype).

Accepted: torch tensors (CPU; CUDA ones only where the caller allows device
memory), anything with __array_interface__ (numpy arrays and their kin), and
anything with the buffer protocol (bytearray, array.array, memoryview, ...).
The memory must be C-contiguous, and writable where Weft writes into it.
"""

import ctypes
import sys
import weakref

from . import _dtypes
from ._errors import WeftError, ERR_INVALID_ARG, ERR_DATATYPE

_torch_tensor = None  # torch.Tensor once torch has been imported by someone
try:
    from numpy import ndarray as _ndarray
except ImportError:  # numpy is optional: buffer-protocol objects still work
    _ndarray = None


def _torch_type():
    global _torch_tensor
    if _torch_tensor is None:
        t = sys.modules.get("torch")
        if t is not None and hasattr(t, "Tensor"):
            _torch_tensor = t.Tensor
    return _torch_tensor


class Buf:
    """A resolved buffer: ptr (int), count (elements), dtype (weft datatype),
    nbytes, device ("cpu" or "cuda"), obj (kept alive while Weft uses it)."""
    __slots__ = ("ptr", "count", "dtype", "nbytes", "device", "obj")

    def __init__(self, ptr, count, dtype, nbytes, device, obj):
        self.ptr = ptr
        self.count = count
        self.dtype = dtype
        self.nbytes = nbytes
        self.device = device
        self.obj = obj


def _from_tensor(t, what, writable, dtype, allow_device):
    if t.is_cpu:
        dev = "cpu"
    else:
        dev = t.device.type
        if not (dev == "cuda" and allow_device):
            raise WeftError(ERR_INVALID_ARG, "%s is a %s tensor; this communicator takes host "
                            "memory (CUDA tensors need a stream-bound communicator)" % (what, dev))
    if not t.is_contiguous():
        raise WeftError(ERR_INVALID_ARG, "%s is not contiguous (call .contiguous() first)" % what)
    n = t.numel()
    if dtype is None:
        dtype = _dtypes.from_torch(t.dtype, what)
        esize = _dtypes.SIZES[dtype]
    else:
        esize = t.element_size()
        if _dtypes.SIZES[dtype] != esize:
            raise WeftError(ERR_DATATYPE, "%s: elements of %d bytes cannot be %s" %
                            (what, esize, _dtypes.name(dtype)))
    return Buf(t.data_ptr(), n, dtype, n * esize, dev, t)


# numpy arrays: __array_interface__ costs microseconds (a new dict per call),
# so what it says is remembered per live array (keyed by id, dropped when the
# array dies) and reused while the array keeps its size, dtype and flags.
_np_cache = {}


def _from_ndarray(a, what, writable, dtype):
    key = id(a)
    hit = _np_cache.get(key)
    if hit is not None and hit[0]() is a and hit[1] == a.size and hit[2] is a.dtype:
        ptr, wdtype = hit[3], hit[4]
        if writable and not a.flags.writeable:
            raise WeftError(ERR_INVALID_ARG, "%s is read-only" % what)
        if dtype is None or dtype == wdtype:
            return Buf(ptr, hit[1], wdtype, hit[1] * _dtypes.SIZES[wdtype], "cpu", a)
    b = _from_array_interface(a, a.__array_interface__, what, writable, dtype)
    if dtype is None and a.flags.c_contiguous:
        ref = weakref.ref(a, lambda r, k=key: _np_cache.pop(k, None))
        _np_cache[key] = (ref, a.size, a.dtype, b.ptr, b.dtype)
    return b


def _from_array_interface(obj, ai, what, writable, dtype):
    shape = ai["shape"]
    strides = ai.get("strides")
    typestr = ai["typestr"]
    esize = int(typestr[2:]) if typestr[2:].isdigit() else 0
    n = 1
    for s in shape:
        n *= s
    if strides is not None and n > 1:
        expect = esize
        for dim, st in zip(reversed(shape), reversed(strides)):
            if dim != 1 and st != expect:
                raise WeftError(ERR_INVALID_ARG, "%s is not C-contiguous" % what)
            expect *= dim
    ptr, readonly = ai["data"]
    if writable and readonly:
        raise WeftError(ERR_INVALID_ARG, "%s is read-only" % what)
    if dtype is None:
        dtype = _dtypes.from_typestr(typestr, getattr(obj, "dtype", None), what)
    if _dtypes.SIZES[dtype] != esize:
        raise WeftError(ERR_DATATYPE, "%s: elements of %d bytes cannot be %s" %
                        (what, esize, _dtypes.name(dtype)))
    return Buf(ptr or 0, n, dtype, n * esize, "cpu", obj)


def _from_buffer_protocol(obj, what, writable, dtype):
    try:
        mv = memoryview(obj)
    except TypeError:
        raise WeftError(ERR_INVALID_ARG, "%s (%s) is not an array: give a numpy array, a torch "
                        "tensor or an object with the buffer protocol" %
                        (what, type(obj).__name__)) from None
    if not mv.c_contiguous:
        raise WeftError(ERR_INVALID_ARG, "%s is not C-contiguous" % what)
    if writable and mv.readonly:
        raise WeftError(ERR_INVALID_ARG, "%s is read-only" % what)
    if dtype is None:
        dtype = _dtypes.from_format(mv.format, mv.itemsize, what)
    if _dtypes.SIZES[dtype] != mv.itemsize:
        raise WeftError(ERR_DATATYPE, "%s: elements of %d bytes cannot be %s" %
                        (what, mv.itemsize, _dtypes.name(dtype)))
    nbytes = mv.nbytes
    if nbytes == 0:
        return Buf(0, 0, dtype, 0, "cpu", mv)
    if mv.readonly:
        # ctypes cannot take the address of read-only memory; the bytes are
        # only read by Weft, so a private copy serves (bytes objects, mostly).
        keep = (ctypes.c_char * nbytes).from_buffer_copy(mv)
    else:
        keep = (ctypes.c_char * nbytes).from_buffer(mv.cast("B"))
    return Buf(ctypes.addressof(keep), nbytes // mv.itemsize, dtype, nbytes, "cpu", (mv, keep))


def resolve(obj, what, writable, dtype=None, allow_device=False):
    """The Buf of obj; raises WeftError for what Weft cannot use."""
    if dtype is not None:
        dtype = _dtypes.check(dtype)
    tt = _torch_tensor or _torch_type()
    if tt is not None and isinstance(obj, tt):
        return _from_tensor(obj, what, writable, dtype, allow_device)
    if type(obj) is _ndarray:
        return _from_ndarray(obj, what, writable, dtype)
    ai = getattr(obj, "__array_interface__", None)
    if ai is not None:
        return _from_array_interface(obj, ai, what, writable, dtype)
    if obj is None:
        raise WeftError(ERR_INVALID_ARG, "%s is None" % what)
    return _from_buffer_protocol(obj, what, writable, dtype)
