/* handle.c - generation-checked handle tables (see handle.h). */
#include "handle.h"

#include <stdlib.h>

#include "weft.h"

static weft__hslot_t *slot_at(weft__htab_t *t, uint32_t idx)
{
    /* acquire: the chunk's initialised slots (published with release) */
    weft__hslot_t *chunk = atomic_load_explicit(&t->chunks[idx / WEFT__HANDLE_CHUNK], memory_order_acquire);
    return &chunk[idx % WEFT__HANDLE_CHUNK];
}

int weft__htab_add(weft__htab_t *t, void *obj, uint64_t *out)
{
    int st = WEFT_SUCCESS;
    pthread_mutex_lock(&t->lock);
    if (t->free_head == 0) {
        const uint32_t n = atomic_load_explicit(&t->nslots, memory_order_relaxed);
        const uint32_t k = n / WEFT__HANDLE_CHUNK;
        weft__hslot_t *chunk = k < WEFT__HANDLE_CHUNKS ? calloc(WEFT__HANDLE_CHUNK, sizeof *chunk) : NULL;
        if (chunk == NULL) {
            st = WEFT_ERR_NO_MEMORY;
            goto out;
        }
        for (uint32_t i = 0; i < WEFT__HANDLE_CHUNK; i++) {
            atomic_init(&chunk[i].gen, 0);
            chunk[i].next_free = i + 1 < WEFT__HANDLE_CHUNK ? n + i + 2 : 0;
        }
        /* release: the slots' contents before the chunk pointer and the count */
        atomic_store_explicit(&t->chunks[k], chunk, memory_order_release);
        atomic_store_explicit(&t->nslots, n + WEFT__HANDLE_CHUNK, memory_order_release);
        t->free_head = n + 1;
    }
    const uint32_t idx = t->free_head - 1;
    weft__hslot_t *s = slot_at(t, idx);
    t->free_head = s->next_free;
    s->obj = obj;
    const uint32_t gen = atomic_load_explicit(&s->gen, memory_order_relaxed) + 1; /* odd */
    /* release: obj (and the object behind it) to lock-free lookups */
    atomic_store_explicit(&s->gen, gen, memory_order_release);
    *out = ((uint64_t)gen << 32) | (uint64_t)(idx + 1);
out:
    pthread_mutex_unlock(&t->lock);
    return st;
}

/* The slot of a live handle, NULL otherwise. */
static weft__hslot_t *live(weft__htab_t *t, uint64_t h, memory_order mo)
{
    const uint32_t idx = (uint32_t)h, gen = (uint32_t)(h >> 32);
    /* acquire: pairs with the release of a new chunk in weft__htab_add */
    if (idx == 0 || (gen & 1u) == 0 || idx - 1 >= atomic_load_explicit(&t->nslots, memory_order_acquire))
        return NULL;
    weft__hslot_t *s = slot_at(t, idx - 1);
    return atomic_load_explicit(&s->gen, mo) == gen ? s : NULL;
}

/* Retire live slot s of handle index idx. Lock held. */
static void retire_locked(weft__htab_t *t, weft__hslot_t *s, uint32_t idx)
{
    const uint32_t gen = atomic_load_explicit(&s->gen, memory_order_relaxed);
    /* release: lookups that see the new generation see the slot dead */
    atomic_store_explicit(&s->gen, gen + 1, memory_order_release);
    s->obj = NULL;
    s->next_free = t->free_head;
    t->free_head = idx + 1;
}

bool weft__htab_retire(weft__htab_t *t, uint64_t h)
{
    pthread_mutex_lock(&t->lock);
    weft__hslot_t *s = live(t, h, memory_order_relaxed);
    if (s != NULL) retire_locked(t, s, (uint32_t)h - 1);
    pthread_mutex_unlock(&t->lock);
    return s != NULL;
}

void weft__htab_retire_all(weft__htab_t *t, void (*fn)(void *obj, void *arg), void *arg)
{
    /* In passes of up to 64 objects: fn (which frees them, and may take
     * other locks) runs outside the table's lock. */
    for (;;) {
        void *objs[64];
        int n = 0;
        pthread_mutex_lock(&t->lock);
        const uint32_t total = atomic_load_explicit(&t->nslots, memory_order_relaxed);
        for (uint32_t i = 0; i < total && n < 64; i++) {
            weft__hslot_t *s = slot_at(t, i);
            if ((atomic_load_explicit(&s->gen, memory_order_relaxed) & 1u) == 0) continue;
            objs[n++] = s->obj;
            retire_locked(t, s, i);
        }
        pthread_mutex_unlock(&t->lock);
        for (int i = 0; i < n; i++) fn(objs[i], arg);
        if (n < 64) return;
    }
}
