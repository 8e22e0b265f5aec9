/* status.c - status strings, version query. Any thread, any time. */
#include "weft_internal.h"

#define WEFT__STR2(x) #x
#define WEFT__STR(x) WEFT__STR2(x)

unsigned weft_version(void) { return WEFT_VERSION_HEX; }

const char *weft_version_string(void)
{
    return WEFT__STR(WEFT_VERSION_MAJOR) "." WEFT__STR(WEFT_VERSION_MINOR) "." WEFT__STR(
        WEFT_VERSION_PATCH);
}

#define WEFT__STATUS_LIST(X)                                                                 \
    X(WEFT_SUCCESS, "success")                                                               \
    X(WEFT_INPROGRESS, "operation in progress")                                              \
    X(WEFT_ERR_INVALID_ARG, "invalid argument")                                              \
    X(WEFT_ERR_DATATYPE, "unknown datatype, or operation not defined on it")                 \
    X(WEFT_ERR_OP, "unknown reduction operation")                                            \
    X(WEFT_ERR_COUNT_OVERFLOW, "count times element size overflows")                         \
    X(WEFT_ERR_NOT_INITIALIZED, "Weft is not initialised (or already finalised)")            \
    X(WEFT_ERR_INVALID_REQUEST, "invalid, completed or freed request handle")                \
    X(WEFT_ERR_INVALID_COMM, "invalid or destroyed communicator")                            \
    X(WEFT_ERR_NO_MEMORY, "out of memory")                                                   \
    X(WEFT_ERR_THREAD_LEVEL, "MPI does not provide MPI_THREAD_MULTIPLE")                     \
    X(WEFT_ERR_MPI, "an MPI call failed")                                                    \
    X(WEFT_ERR_TIMEOUT, "operation timed out (WEFT_TIMEOUT)")                                \
    X(WEFT_ERR_COMM_BROKEN, "communicator broken by an earlier error")                       \
    X(WEFT_ERR_UNSUPPORTED, "not supported by this build or machine")                        \
    X(WEFT_ERR_ALGORITHM, "unknown algorithm, or not valid for this call")                   \
    X(WEFT_ERR_TUNING_FILE, "tuning file unreadable or malformed")                           \
    X(WEFT_ERR_CUDA, "a CUDA call failed")                                                   \
    X(WEFT_ERR_NCCL, "an NCCL call failed")                                                  \
    X(WEFT_ERR_UCX, "a UCX call failed")                                                     \
    X(WEFT_ERR_STREAM, "a task on a stream failed")                                          \
    X(WEFT_ERR_HALO_PLAN, "halo plan does not fit the process grid or the block")            \
    X(WEFT_ERR_FINALIZING, "operation still in flight when weft_finalize ran")               \
    X(WEFT_ERR_INTERNAL, "internal error")

const char *weft_strerror(weft_status_t status)
{
    switch (status) {
#define X(name, text) case name: return text;
        WEFT__STATUS_LIST(X)
#undef X
    }
    return "unknown status";
}

const char *weft_status_name(weft_status_t status)
{
    switch (status) {
#define X(name, text) case name: return #name;
        WEFT__STATUS_LIST(X)
#undef X
    }
    return "WEFT_UNKNOWN_STATUS";
}
