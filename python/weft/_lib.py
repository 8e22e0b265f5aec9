"""Loading libweft and declaring the C ABI (include/weft.h) to ctypes.

Every function is called through ctypes.CDLL, which releases the GIL for the
duration of the call: a thread blocked in weft_wait lets the others (and the
completion callbacks, which need the GIL) run. Never load libweft with
ctypes.PyDLL: a waiting call would then hold the GIL while Weft's engine
thread needs it to run a Python callback, and the process would deadlock.

Where the library comes from, first match wins:
  1. $WEFT_LIBRARY (a path to libweft.so.N);
  2. _paths.py, written by Meson (configure_file): the build tree's library
     when this package is the build tree's copy, the installed one otherwise
     (a wheel's, pip install ., lies inside the package);
  3. the dynamic linker's search path (ctypes.util.find_library("weft")).
"""

import ctypes
import ctypes.util
import importlib.util
import os
import sys

c_status = ctypes.c_int
c_comm = ctypes.c_void_p
c_stream = ctypes.c_void_p
c_request = ctypes.c_uint64
c_dtype = ctypes.c_int
c_op = ctypes.c_int
P = ctypes.c_void_p
N = ctypes.c_size_t
I = ctypes.c_int

#: weft_request_callback_t: void (*)(void *arg, weft_status_t status)
CALLBACK = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int)


class CommParams(ctypes.Structure):
    """weft_comm_params_t."""
    _fields_ = [("size", ctypes.c_size_t), ("transport", ctypes.c_int)]


def _candidates():
    env = os.environ.get("WEFT_LIBRARY")
    if env:
        return [env], "WEFT_LIBRARY=" + env
    found = []
    try:
        from . import _paths
    except ImportError:
        _paths = None
    if _paths is not None:
        here = os.path.realpath(os.path.dirname(os.path.abspath(__file__)))
        if here == os.path.realpath(_paths.BUILD_PACKAGE_DIR):
            found.append(_paths.BUILD_LIBRARY)
        else:  # relative: a wheel's library, inside the package
            found.append(os.path.join(here, _paths.INSTALL_LIBRARY))
    name = ctypes.util.find_library("weft")
    if name:
        found.append(name)
    return found, "searched " + ", ".join(found or ["nothing"])


def _links_cuda(path):
    # DT_NEEDED names live in .dynstr: a libweft built with CUDA/NCCL names them.
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError:
        return False
    return b"libnccl.so" in data or b"libcudart.so" in data


def _torch_first(path):
    # A libweft linked with CUDA and NCCL loads them by soname
    # (libnccl.so.2, libcudart.so.N); a torch imported later would then get
    # those copies instead of its own and fail to load (missing NCCL
    # symbols). So where torch is installed, it is imported first and Weft
    # shares torch's copies (same sonames, backward compatible).
    # WEFT_PY_TORCH_FIRST=0 turns this off.
    if "torch" in sys.modules or os.environ.get("WEFT_PY_TORCH_FIRST", "1") == "0":
        return
    if importlib.util.find_spec("torch") is None or not _links_cuda(path):
        return
    import torch  # noqa: F401


def _load():
    paths, how = _candidates()
    errors = []
    for p in paths:
        if os.path.exists(p):
            _torch_first(p)
        try:
            # RTLD_LOCAL (the default): libweft's own dependencies (NCCL,
            # CUDA, UCX where built in) must not take the place of the
            # versions torch loads later in the same process.
            return ctypes.CDLL(p)
        except OSError as e:
            errors.append(str(e))
    raise ImportError("weft: cannot load libweft (%s): %s; set WEFT_LIBRARY to the path of "
                      "libweft.so" % (how, "; ".join(errors) or "not found"))


lib = _load()

# name: (restype, argtypes)
_PROTOTYPES = {
    "weft_version": (ctypes.c_uint, []),
    "weft_version_string": (ctypes.c_char_p, []),
    "weft_strerror": (ctypes.c_char_p, [c_status]),
    "weft_status_name": (ctypes.c_char_p, [c_status]),
    "weft_datatype_size": (ctypes.c_size_t, [c_dtype]),
    "weft_datatype_name": (ctypes.c_char_p, [c_dtype]),
    "weft_op_name": (ctypes.c_char_p, [c_op]),
    "weft_init": (c_status, [P]),
    "weft_finalize": (c_status, []),
    "weft_initialized": (ctypes.c_int, []),
    "weft_comm_world": (c_status, [c_stream, ctypes.POINTER(CommParams), ctypes.POINTER(c_comm)]),
    "weft_comm_create_f": (c_status, [I, c_stream, ctypes.POINTER(CommParams),
                                      ctypes.POINTER(c_comm)]),
    "weft_comm_split": (c_status, [c_comm, I, I, c_stream, ctypes.POINTER(c_comm)]),
    "weft_comm_create_group": (c_status, [c_comm, ctypes.POINTER(I), I, c_stream,
                                          ctypes.POINTER(c_comm)]),
    "weft_comm_destroy": (c_status, [c_comm]),
    "weft_comm_rank": (c_status, [c_comm, ctypes.POINTER(I)]),
    "weft_comm_size": (c_status, [c_comm, ctypes.POINTER(I)]),
    "weft_comm_get_error": (c_status, [c_comm]),
    "weft_query_algo": (c_status, [c_comm, I, N, c_dtype, ctypes.POINTER(I)]),
    "weft_algo_name": (ctypes.c_char_p, [I]),
    "weft_comm_get_transport": (c_status, [c_comm, ctypes.POINTER(I)]),
    "weft_transport_name": (ctypes.c_char_p, [I]),
    "weft_wait": (c_status, [ctypes.POINTER(c_request)]),
    "weft_test": (c_status, [ctypes.POINTER(c_request), ctypes.POINTER(I)]),
    "weft_waitall": (c_status, [N, ctypes.POINTER(c_request)]),
    "weft_request_on_complete": (c_status, [c_request, CALLBACK, P]),
    "weft_request_notify_fd": (c_status, [c_request, ctypes.c_int, ctypes.c_uint64]),
    "weft_allreduce": (c_status, [P, P, N, c_dtype, c_op, c_comm]),
    "weft_iallreduce": (c_status, [P, P, N, c_dtype, c_op, c_comm, ctypes.POINTER(c_request)]),
    "weft_reduce_scatter": (c_status, [P, P, N, c_dtype, c_op, c_comm]),
    "weft_ireduce_scatter": (c_status, [P, P, N, c_dtype, c_op, c_comm,
                                        ctypes.POINTER(c_request)]),
    "weft_allgather": (c_status, [P, P, N, c_dtype, c_comm]),
    "weft_iallgather": (c_status, [P, P, N, c_dtype, c_comm, ctypes.POINTER(c_request)]),
    "weft_bcast": (c_status, [P, N, c_dtype, I, c_comm]),
    "weft_ibcast": (c_status, [P, N, c_dtype, I, c_comm, ctypes.POINTER(c_request)]),
    "weft_reduce": (c_status, [P, P, N, c_dtype, c_op, I, c_comm]),
    "weft_ireduce": (c_status, [P, P, N, c_dtype, c_op, I, c_comm, ctypes.POINTER(c_request)]),
    "weft_alltoall": (c_status, [P, P, N, c_dtype, c_comm]),
    "weft_ialltoall": (c_status, [P, P, N, c_dtype, c_comm, ctypes.POINTER(c_request)]),
    "weft_gather": (c_status, [P, P, N, c_dtype, I, c_comm]),
    "weft_igather": (c_status, [P, P, N, c_dtype, I, c_comm, ctypes.POINTER(c_request)]),
    "weft_scatter": (c_status, [P, P, N, c_dtype, I, c_comm]),
    "weft_iscatter": (c_status, [P, P, N, c_dtype, I, c_comm, ctypes.POINTER(c_request)]),
    # vector forms: counts and displacements as arrays of size_t (read during the call only)
    "weft_allgatherv": (c_status, [P, N, P, ctypes.POINTER(N), ctypes.POINTER(N), c_dtype,
                                   c_comm]),
    "weft_iallgatherv": (c_status, [P, N, P, ctypes.POINTER(N), ctypes.POINTER(N), c_dtype,
                                    c_comm, ctypes.POINTER(c_request)]),
    "weft_alltoallv": (c_status, [P, ctypes.POINTER(N), ctypes.POINTER(N), P, ctypes.POINTER(N),
                                  ctypes.POINTER(N), c_dtype, c_comm]),
    "weft_ialltoallv": (c_status, [P, ctypes.POINTER(N), ctypes.POINTER(N), P,
                                   ctypes.POINTER(N), ctypes.POINTER(N), c_dtype, c_comm,
                                   ctypes.POINTER(c_request)]),
    "weft_gatherv": (c_status, [P, N, P, ctypes.POINTER(N), ctypes.POINTER(N), c_dtype, I,
                                c_comm]),
    "weft_igatherv": (c_status, [P, N, P, ctypes.POINTER(N), ctypes.POINTER(N), c_dtype, I,
                                 c_comm, ctypes.POINTER(c_request)]),
    "weft_scatterv": (c_status, [P, ctypes.POINTER(N), ctypes.POINTER(N), P, N, c_dtype, I,
                                 c_comm]),
    "weft_iscatterv": (c_status, [P, ctypes.POINTER(N), ctypes.POINTER(N), P, N, c_dtype, I,
                                  c_comm, ctypes.POINTER(c_request)]),
    "weft_reduce_scatterv": (c_status, [P, P, ctypes.POINTER(N), c_dtype, c_op, c_comm]),
    "weft_ireduce_scatterv": (c_status, [P, P, ctypes.POINTER(N), c_dtype, c_op, c_comm,
                                         ctypes.POINTER(c_request)]),
    "weft_barrier": (c_status, [c_comm]),
    "weft_ibarrier": (c_status, [c_comm, ctypes.POINTER(c_request)]),
    "weft_send": (c_status, [P, N, c_dtype, I, I, c_comm]),
    "weft_isend": (c_status, [P, N, c_dtype, I, I, c_comm, ctypes.POINTER(c_request)]),
    "weft_recv": (c_status, [P, N, c_dtype, I, I, c_comm]),
    "weft_irecv": (c_status, [P, N, c_dtype, I, I, c_comm, ctypes.POINTER(c_request)]),
    "weft_sendrecv": (c_status, [P, N, I, I, P, N, I, I, c_dtype, c_comm]),
    # CUDA interop (weft_cuda.h); present in every build, WEFT_ERR_UNSUPPORTED without CUDA.
    "weft_cuda_available": (ctypes.c_int, []),
    "weft_stream_wrap_cuda": (c_status, [P, ctypes.POINTER(c_stream)]),
    "weft_stream_synchronize": (c_status, [c_stream]),
    "weft_stream_destroy": (c_status, [c_stream]),
}

for _name, (_res, _args) in _PROTOTYPES.items():
    _f = getattr(lib, _name, None)
    if _f is None:
        continue
    _f.restype = _res
    _f.argtypes = _args
    globals()[_name] = _f


def has(name):
    """Whether the loaded libweft exports `name`."""
    return getattr(lib, name, None) is not None


#: The value of WEFT_IN_PLACE, (const void *)(intptr_t)-1.
IN_PLACE_PTR = ctypes.c_void_p(-1).value
