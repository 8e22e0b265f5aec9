/*
 * node.h - the node's shared-memory path (backends/shm): ranks of one node
 * publish their buffers' addresses and their progress in a segment they all
 * map, and read each other's buffers with a single copy (cross-memory attach,
 * process_vm_readv), so that a collective moves every byte once instead of
 * through a transport's send and receive copies. lib/coll's shm algorithms
 * use it (through algo.h); the engine sleeps on its doorbells when a node has
 * more ranks than cores (weft__progress_idle_set).
 *
 * The protocol, per operation: every rank of the node runs the node's
 * operations one at a time, in the same order (the order in which the
 * engine starts them: issue order), numbered 1, 2, ... (weft__node_begin).
 * A rank's progress in operation `seq` is one 64-bit word, (seq << 32) |
 * stage, that only grows: stage 1 says the rank's buffers are published
 * (weft__node_post), algorithms count higher stages as they go (chunks
 * done), and WEFT__NODE_DONE says the rank will read nothing more of its
 * peers in `seq`. A peer's word at or past (seq, stage) is the one thing
 * anybody waits for (weft__node_reached), so a later operation satisfies
 * every wait of an earlier one.
 */
#ifndef WEFT_NODE_H
#define WEFT_NODE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sys.h"

struct weft__ctl;

typedef struct weft__node weft__node_t;

/** The last stage: the rank reads nothing more of its peers in this operation. */
#define WEFT__NODE_DONE 0xffffffffu
/** Bytes of a rank's inline area (two per rank, alternating by sequence
 * number): small operations copy their data there instead of publishing
 * addresses. */
#define WEFT__NODE_INLINE (16u * 1024u)

/** What weft__node_open measured (agreed over the node: the slowest pair). */
typedef struct weft__node_cost {
    double alpha; /* seconds for one publish seen by a waiting peer (half a flag round trip) */
    double beta;  /* seconds per byte read from a peer's buffer (cross-memory attach) */
} weft__node_cost_t;

/**
 * Open the path among the ranks of ctl (all on one node; rank numbers are
 * ctl's): map a segment that no file name holds (a memfd that the peers open
 * through /proc, so nothing is left in /dev/shm even when a rank is killed),
 * check that every rank can read every peer's memory, and measure the
 * path's cost into *cost unless cost->alpha > 0 on entry (the caller's
 * figures stand: a tuning file's, or fixed ones for reproducible
 * selection). *out is NULL (WEFT_SUCCESS, the reason logged at debug
 * level) when the path cannot be used on some rank: the ranks agree. `id`
 * names the communicator in logs. Collective over ctl; caller thread of
 * communicator creation.
 */
weft_status_t weft__node_open(struct weft__ctl *ctl, int id, weft__node_t **out,
                              weft__node_cost_t *cost);
/** Unmap and free (NULL is fine). After every operation on it finished; no
 * collective step (a peer may already have closed). Caller thread. */
void weft__node_close(weft__node_t **node);

/* ---- operations: engine side (progress lock held) ---------------------------- */
/** This rank's number and the ranks' count. Any thread. */
int weft__node_rank(const weft__node_t *n);
int weft__node_size(const weft__node_t *n);
/** Number the next operation (in the engine's start order, which every rank
 * shares). */
uint64_t weft__node_begin(weft__node_t *n);
/** May operation seq run (every earlier one finished on this rank)? */
bool weft__node_turn(const weft__node_t *n, uint64_t seq);
/** Operation seq finished (or failed) on this rank: the next may run. */
void weft__node_end(weft__node_t *n, uint64_t seq);
/**
 * Publish this rank's buffers for seq (their addresses in this process) and
 * stage 1. Only on the rank's turn; for a seq that uses its inline area, only
 * once weft__node_inline_free said so (the area was written before).
 */
void weft__node_post(weft__node_t *n, uint64_t seq, const void *sbuf, void *rbuf);
/** Publish this rank's stage in seq (larger than the last) and ring the
 * doorbells of peers that sleep. */
void weft__node_publish(weft__node_t *n, uint64_t seq, uint32_t stage);
/** Has peer reached (seq, stage) or gone past it? Records that the caller
 * looked (the idle wait sleeps only if nothing was published since). */
bool weft__node_reached(weft__node_t *n, int peer, uint64_t seq, uint32_t stage);
/** weft__node_reached for every peer (not this rank). */
bool weft__node_all_reached(weft__node_t *n, uint64_t seq, uint32_t stage);
/** Peer's published buffers for the seq it posted last (after reached(seq, 1)). */
void weft__node_peer_bufs(const weft__node_t *n, int peer, uint64_t *sbuf, uint64_t *rbuf);
/** Peer's inline area for seq (this rank's own for peer == rank: to fill before posting). */
void *weft__node_inline(weft__node_t *n, int peer, uint64_t seq);
/** Staged operations: a rank's staging area holds WEFT__NODE_STAGE_AREAS
 * rounds' inputs (p blocks each) and as many rounds' results (one block
 * each), blocks of at most weft__node_stage_chunk bytes. Areas are reused
 * every WEFT__NODE_STAGE_AREAS rounds: by then the lines a peer read are
 * mostly out of its cache, so rewriting them costs no coherence traffic
 * (doc/design.md, the shared-memory path's staged mode). */
#define WEFT__NODE_STAGE_AREAS 8u
/** Most bytes of a block: 128 KiB, less where p ranks would need more
 * than WEFT__NODE_STAGE_BUDGET bytes of staging each. */
#define WEFT__NODE_STAGE_CHUNK (128u * 1024u)
#define WEFT__NODE_STAGE_BUDGET (4u * 1024u * 1024u)
/** Bytes of a block in a full round on this node (a multiple of 64). Any thread. */
size_t weft__node_stage_chunk(const weft__node_t *n);
/** The staging areas' rotation for an operation of `rounds` rounds: its
 * round t uses area (returned value + t) % WEFT__NODE_STAGE_AREAS, so that
 * consecutive short operations do not rewrite the same areas. Engine side,
 * called in operation order (the same on every rank). */
size_t weft__node_stage_take(weft__node_t *n, size_t rounds);
/** Peer's staging area for round t (area t % WEFT__NODE_STAGE_AREAS): its
 * input area (p blocks) or, with result, its result area (one block). Any
 * thread. */
void *weft__node_stage(weft__node_t *n, int peer, size_t t, int result);
/** Trials of the two modes of large operations (lib/coll/shm_common.c:
 * allreduce, reduce_scatter, allgather, WEFT__NODE_MODE_KINDS in all): each
 * rank keeps WEFT__NODE_TRIALS timings per kind and size class in its slot,
 * where its peers read them, and the policy's process-local state beside. */
#define WEFT__NODE_MODE_KINDS 3
#define WEFT__NODE_CLASSES 16
#define WEFT__NODE_TRIALS 6
typedef struct weft__node_modes {
    uint32_t calls[WEFT__NODE_MODE_KINDS][WEFT__NODE_CLASSES]; /* started per kind, class */
    int8_t staged[WEFT__NODE_MODE_KINDS][WEFT__NODE_CLASSES];  /* the last trials' choice */
} weft__node_modes_t;
/** This node path's policy state (zeroed at open). Engine side. */
weft__node_modes_t *weft__node_modes(weft__node_t *n);
/** Record this rank's trial k of kind and class cls, seconds. Engine side;
 * the value is the peers' to read once this rank publishes its next stage. */
void weft__node_trial_put(weft__node_t *n, int kind, int cls, int k, double s);
/** Peer's trial k of kind and class cls (after it published the stage that
 * followed it). Any thread. */
double weft__node_trial_get(const weft__node_t *n, int peer, int kind, int cls, int k);
/** May this rank write its inline area for seq (every peer posted seq - 1,
 * so it finished reading the area's previous contents, of seq - 2)? */
bool weft__node_inline_free(weft__node_t *n, uint64_t seq);
/** Copy len bytes at peer's address src into dst (process_vm_readv, partial
 * reads continued). WEFT_ERR_COMM_BROKEN (logged) when the peer's memory
 * cannot be read (it exited). */
weft_status_t weft__node_read(weft__node_t *n, int peer, void *dst, uint64_t src, size_t len);

#endif /* WEFT_NODE_H */
