/*
 * handle.h - generation-checked handle tables for Weft's public objects
 * (communicators, halo plans).
 *
 * A public handle is (generation << 32 | slot + 1), cast to the public
 * pointer type: it is not the object's address. Every entry point looks its
 * handle up, so a destroyed object, a made-up value or a handle from before a
 * weft_finalize + weft_init is refused instead of read after it was freed. A
 * slot's generation is odd while an object lives in it and moves on when the
 * object is retired; the table's chunks are never freed (they stay reachable
 * across weft_finalize), so a handle never comes back naming another object.
 *
 * Thread contract: lookup is lock-free and may run on any thread; add and
 * retire take the table's mutex. A lookup racing with the retirement of the
 * same handle is the caller's contract violation (an object is not destroyed
 * while another thread still uses it), but it never reads freed table memory.
 */
#ifndef WEFT_HANDLE_H
#define WEFT_HANDLE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#define WEFT__HANDLE_CHUNK 256u
#define WEFT__HANDLE_CHUNKS 4096u /* a million live objects per table at most */

typedef struct weft__hslot {
    _Atomic uint32_t gen; /* odd: live */
    void *obj;            /* written before gen turns odd (release) */
    uint32_t next_free;   /* slot index + 1, under the table's lock */
} weft__hslot_t;

typedef struct weft__htab {
    pthread_mutex_t lock;
    _Atomic(weft__hslot_t *) chunks[WEFT__HANDLE_CHUNKS];
    _Atomic uint32_t nslots;
    uint32_t free_head; /* slot index + 1, 0 = none */
} weft__htab_t;

#define WEFT__HTAB_INITIALIZER { .lock = PTHREAD_MUTEX_INITIALIZER }

/** Give obj a handle (*out). WEFT_ERR_NO_MEMORY (as int) when the table is full. Any thread. */
int weft__htab_add(weft__htab_t *t, void *obj, uint64_t *out);
/** The live object behind h, or NULL. Any thread, lock-free (inline: every
 * entry point of Weft calls it). */
static inline void *weft__htab_get(weft__htab_t *t, uint64_t h)
{
    const uint32_t idx = (uint32_t)h, gen = (uint32_t)(h >> 32);
    /* acquire: pairs with the release of a new chunk in weft__htab_add */
    if (idx == 0 || (gen & 1u) == 0 || idx - 1 >= atomic_load_explicit(&t->nslots, memory_order_acquire))
        return NULL;
    /* acquire: the chunk's initialised slots */
    weft__hslot_t *chunk = atomic_load_explicit(&t->chunks[(idx - 1) / WEFT__HANDLE_CHUNK], memory_order_acquire);
    weft__hslot_t *s = &chunk[(idx - 1) % WEFT__HANDLE_CHUNK];
    /* acquire: pairs with weft__htab_add's release (obj is the one published) */
    return atomic_load_explicit(&s->gen, memory_order_acquire) == gen ? s->obj : NULL;
}
/** Retire h: true if it was live (one of two racing retirements wins). Any thread. */
bool weft__htab_retire(weft__htab_t *t, uint64_t h);
/**
 * Retire every live handle and call fn(obj, arg) for each, after the table's
 * lock is released. weft_finalize.
 */
void weft__htab_retire_all(weft__htab_t *t, void (*fn)(void *obj, void *arg), void *arg);

#endif /* WEFT_HANDLE_H */
