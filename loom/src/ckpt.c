/*
 * ckpt.c - checkpoint/restart of a training run (see loom_ckpt.h and
 * doc/loom.md, "Checkpoint and restart").
 *
 * Rank file rank-RRRRR.bin (little-endian):
 *   0   char[8]  "LOOMSTAT"
 *   8   u32      version (LOOM_CKPT_STATE_VERSION)
 *   12  u32      rank
 *   16  u64      step
 *   24  u64      parameter floats
 *   32  u64      buffer floats (batch-norm running statistics)
 *   40  u64      first-moment floats (0 or the parameter count)
 *   48  u64      second-moment floats (0 or the parameter count)
 *   56  float32  parameters, buffers, first moment, second moment
 *   end-4 u32    CRC-32 (zlib) of every byte before it
 *
 * MANIFEST (text, one item per line, rank 0 writes it after its own file):
 *   loom-checkpoint 1
 *   model NAME
 *   layout world P dp D spatial HxW
 *   config-hash HEX16
 *   config key=value key=value ...
 *   step S
 *   epoch E
 *   batch B
 *   optim-steps T
 *   lr X
 *   rank R rng HEX16 HEX16 epoch E batch B file rank-RRRRR.bin bytes N     (one per rank)
 *   crc32 HEX8                                      (of every byte before this line)
 *
 * Saving: the caller's thread copies the state into a snapshot (the file's
 * bytes less the CRC), gathers every rank's position to rank 0 (one
 * weft_gather), and hands the snapshot (and rank 0 the manifest) to the
 * writer thread, which adds the CRC, writes and renames, copies to level 2
 * when due, and prunes old checkpoints.  Before a new snapshot the previous
 * write of this rank is waited for; after the gather of save k every rank's
 * write k-1 is therefore on disk, so with keep >= 2 a complete checkpoint
 * always exists once one has been written.
 */
#define _POSIX_C_SOURCE 200809L
#include "internal.h"
#include "loom_ckpt.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

int loom_weft_error(int weft_status, const char *what); /* layout.c (loom_par.h) */
int loom__model_buffer_info(const loom_model_t *m, int i, const char **name, size_t *offset,
                            size_t *count);

#define STATE_MAGIC "LOOMSTAT"
#define STATE_HEADER 56
#define MANIFEST "MANIFEST"
#define MAX_CANDIDATES 256
#define PATH_BYTES 4096

struct loom_ckpt {
    loom_ckpt_desc_t d;
    char *dir, *flush_dir, *config, *model;
    unsigned char *snap; /* header + floats + 4 bytes for the CRC */
    size_t snap_bytes;
    /* writer */
    pthread_t thread;
    int started;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int pending, quit;  /* a job is waiting or running; the thread must stop */
    int status;         /* sticky error of the writer */
    char err[512];      /* its message */
    long job_step;
    int job_flush;      /* also copy to level 2 */
    char *job_manifest; /* rank 0 */
    /* statistics */
    int saved;
    double caller_s, writer_s;
};


/* zlib's crc32 over any length (its length argument is a uInt). */
static uint32_t crc_of(const unsigned char *p, size_t n)
{
    uLong c = crc32(0L, Z_NULL, 0);
    while (n > 0) {
        uInt k = n > (1u << 30) ? (1u << 30) : (uInt)n;
        c = crc32(c, p, k);
        p += k;
        n -= k;
    }
    return (uint32_t)c;
}

static uint64_t fnv64(const char *s)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
    return h;
}

/* ------------------------------------------------------------ file system */
static int mkdir_p(const char *path)
{
    char tmp[PATH_BYTES];
    size_t n = strlen(path);
    if (n == 0 || n >= sizeof tmp)
        return loom_error(LOOM_ERR_INVALID, "checkpoint: bad directory name '%s'", path);
    memcpy(tmp, path, n + 1);
    for (size_t i = 1; i <= n; i++) {
        if (tmp[i] != '/' && tmp[i] != '\0')
            continue;
        char c = tmp[i];
        tmp[i] = '\0';
        if (mkdir(tmp, 0755) != 0 && errno != EEXIST)
            return loom_error(LOOM_ERR_IO, "checkpoint: cannot create directory %s (%s)", tmp,
                              strerror(errno));
        tmp[i] = c;
    }
    struct stat sb;
    if (stat(path, &sb) != 0 || !S_ISDIR(sb.st_mode))
        return loom_error(LOOM_ERR_IO, "checkpoint: %s is not a directory", path);
    return LOOM_OK;
}

static int fsync_dir(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY);
    if (fd < 0)
        return loom_error(LOOM_ERR_IO, "checkpoint: cannot open directory %s (%s)", dir,
                          strerror(errno));
    int st = LOOM_OK;
    if (fsync(fd) != 0 && errno != EINVAL) /* some file systems cannot sync a directory */
        st = loom_error(LOOM_ERR_IO, "checkpoint: fsync of %s failed (%s)", dir, strerror(errno));
    if (close(fd) != 0 && st == LOOM_OK)
        st = loom_error(LOOM_ERR_IO, "checkpoint: close of %s failed (%s)", dir, strerror(errno));
    return st;
}

/* dir/name gets exactly buf[0..n): written to dir/.name.tmp, fsynced,
 * renamed, the directory fsynced. */
static int write_atomic(const char *dir, const char *name, const void *buf, size_t n)
{
    char tmp[PATH_BYTES], dst[PATH_BYTES];
    if (snprintf(tmp, sizeof tmp, "%s/.%s.tmp", dir, name) >= (int)sizeof tmp ||
        snprintf(dst, sizeof dst, "%s/%s", dir, name) >= (int)sizeof dst)
        return loom_error(LOOM_ERR_INVALID, "checkpoint: path too long in %s", dir);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0)
        return loom_error(LOOM_ERR_IO, "checkpoint: cannot create %s (%s)", tmp, strerror(errno));
    int st = LOOM_OK;
    const unsigned char *p = buf;
    size_t left = n;
    while (left > 0) {
        ssize_t w = write(fd, p, left);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            st = loom_error(LOOM_ERR_IO, "checkpoint: write to %s failed (%s)", tmp,
                            w < 0 ? strerror(errno) : "no progress");
            break;
        }
        p += w;
        left -= (size_t)w;
    }
    if (st == LOOM_OK && fsync(fd) != 0)
        st = loom_error(LOOM_ERR_IO, "checkpoint: fsync of %s failed (%s)", tmp, strerror(errno));
    if (close(fd) != 0 && st == LOOM_OK)
        st = loom_error(LOOM_ERR_IO, "checkpoint: close of %s failed (%s)", tmp, strerror(errno));
    if (st == LOOM_OK && rename(tmp, dst) != 0)
        st = loom_error(LOOM_ERR_IO, "checkpoint: rename %s -> %s failed (%s)", tmp, dst,
                        strerror(errno));
    if (st != LOOM_OK) {
        unlink(tmp);
        return st;
    }
    return fsync_dir(dir);
}

/* Whole file into a malloc'd buffer (plus a NUL).  NULL with a message. */
static unsigned char *read_all(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    unsigned char *buf = NULL;
    long size;
    if (!f) {
        loom_error(LOOM_ERR_IO, "cannot open %s (%s)", path, strerror(errno));
        return NULL;
    }
    if (fseek(f, 0, SEEK_END) != 0 || (size = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) != 0) {
        loom_error(LOOM_ERR_IO, "cannot size %s", path);
        goto out;
    }
    if (!(buf = malloc((size_t)size + 1))) {
        loom_error(LOOM_ERR_NOMEM, "out of memory for %s", path);
        goto out;
    }
    if (fread(buf, 1, (size_t)size, f) != (size_t)size) {
        loom_error(LOOM_ERR_IO, "cannot read %s", path);
        free(buf);
        buf = NULL;
        goto out;
    }
    buf[size] = 0;
    *n = (size_t)size;
out:
    fclose(f);
    return buf;
}

/* Steps of the step-N directories in dir, newest first (at most max). */
static int list_steps(const char *dir, long *steps, int max)
{
    DIR *dh = opendir(dir);
    int n = 0;
    if (!dh)
        return 0;
    struct dirent *e;
    while ((e = readdir(dh)) != NULL) {
        char *end;
        if (strncmp(e->d_name, "step-", 5) != 0)
            continue;
        errno = 0;
        long s = strtol(e->d_name + 5, &end, 10);
        if (errno || *end || end == e->d_name + 5 || s < 0)
            continue;
        if (n < max) {
            steps[n++] = s;
        } else { /* keep the newest max */
            int lo = 0;
            for (int i = 1; i < n; i++)
                if (steps[i] < steps[lo])
                    lo = i;
            if (s > steps[lo])
                steps[lo] = s;
        }
    }
    closedir(dh);
    for (int i = 1; i < n; i++) /* insertion sort, descending */
        for (int j = i; j > 0 && steps[j] > steps[j - 1]; j--) {
            long t = steps[j];
            steps[j] = steps[j - 1];
            steps[j - 1] = t;
        }
    return n;
}

static void step_dir(char *out, size_t n, const char *dir, long step)
{
    snprintf(out, n, "%s/step-%010ld", dir, step);
}

/* Removes this rank's share of the checkpoints of dir older than the keep
 * newest up to step `now` (rank 0 removes the MANIFEST first: the checkpoint
 * is incomplete from then on), then the directory if it is empty.  Steps
 * after `now` (left by a run that was resumed from an earlier checkpoint)
 * are not counted; this run overwrites them when it gets there. */
static void prune(const loom_ckpt_t *ck, const char *dir, long now)
{
    long steps[MAX_CANDIDATES];
    int n = list_steps(dir, steps, MAX_CANDIDATES), kept = 0;
    char sd[PATH_BYTES], path[PATH_BYTES + 32];
    for (int i = 0; i < n; i++) {
        if (steps[i] > now || kept++ < ck->d.keep)
            continue;
        step_dir(sd, sizeof sd, dir, steps[i]);
        if (ck->d.rank == 0) {
            snprintf(path, sizeof path, "%s/" MANIFEST, sd);
            unlink(path);
        }
        snprintf(path, sizeof path, "%s/rank-%05d.bin", sd, ck->d.rank);
        unlink(path);
        /* and what a write interrupted by a crash left behind */
        snprintf(path, sizeof path, "%s/.rank-%05d.bin.tmp", sd, ck->d.rank);
        unlink(path);
        if (ck->d.rank == 0) {
            snprintf(path, sizeof path, "%s/." MANIFEST ".tmp", sd);
            unlink(path);
        }
        rmdir(sd); /* fails while other ranks' files remain: the last one removes it */
    }
}

/* ---------------------------------------------------------------- writer */
static int write_level(loom_ckpt_t *ck, const char *dir, long step, const char *manifest)
{
    char sd[PATH_BYTES], name[32];
    step_dir(sd, sizeof sd, dir, step);
    int st = mkdir_p(sd);
    if (st == LOOM_OK) /* the new step directory's entry, durable too */
        st = fsync_dir(dir);
    snprintf(name, sizeof name, "rank-%05d.bin", ck->d.rank);
    if (st == LOOM_OK)
        st = write_atomic(sd, name, ck->snap, ck->snap_bytes);
    if (st == LOOM_OK && manifest)
        st = write_atomic(sd, MANIFEST, manifest, strlen(manifest));
    if (st == LOOM_OK)
        prune(ck, dir, step);
    return st;
}

static int run_job(loom_ckpt_t *ck, long step, int flush, const char *manifest)
{
    double t0 = loom_now();
    loom__put32(ck->snap + ck->snap_bytes - 4, crc_of(ck->snap, ck->snap_bytes - 4));
    int st = write_level(ck, ck->dir, step, manifest);
    if (st == LOOM_OK && flush)
        st = write_level(ck, ck->flush_dir, step, manifest);
    ck->writer_s += loom_now() - t0;
    return st;
}

static void *writer(void *arg)
{
    loom_ckpt_t *ck = arg;
    pthread_mutex_lock(&ck->mu);
    for (;;) {
        while (!ck->quit && !ck->pending)
            pthread_cond_wait(&ck->cv, &ck->mu);
        if (!ck->pending && ck->quit)
            break;
        long step = ck->job_step;
        int flush = ck->job_flush;
        char *man = ck->job_manifest;
        pthread_mutex_unlock(&ck->mu);
        int st = run_job(ck, step, flush, man);
        pthread_mutex_lock(&ck->mu);
        if (st < 0 && ck->status == LOOM_OK) {
            ck->status = st;
            snprintf(ck->err, sizeof ck->err, "%s", loom_last_error()); /* the writer's own */
        }
        free(ck->job_manifest);
        ck->job_manifest = NULL;
        ck->pending = 0;
        pthread_cond_broadcast(&ck->cv);
    }
    pthread_mutex_unlock(&ck->mu);
    return NULL;
}

int loom_ckpt_wait(loom_ckpt_t *ck)
{
    if (!ck->started)
        return ck->status < 0 ? loom_error(ck->status, "%s", ck->err) : LOOM_OK;
    pthread_mutex_lock(&ck->mu);
    while (ck->pending)
        pthread_cond_wait(&ck->cv, &ck->mu);
    int st = ck->status;
    pthread_mutex_unlock(&ck->mu);
    return st < 0 ? loom_error(st, "%s", ck->err) : LOOM_OK;
}

static int check_desc(const loom_ckpt_desc_t *d, int need_dir)
{
    if (!d || !d->model || !d->config || !d->comm || d->size < 1 || d->rank < 0 ||
        d->rank >= d->size || d->dp < 1 || d->sh < 1 || d->sw < 1)
        return loom_error(LOOM_ERR_INVALID, "checkpoint: incomplete descriptor");
    if (strchr(d->config, '\n') || strchr(d->model, '\n') || strchr(d->model, ' '))
        return loom_error(LOOM_ERR_INVALID, "checkpoint: the configuration must be one line");
    if (need_dir && (!d->dir || d->keep < 2 || (d->flush_dir && d->flush_every < 1)))
        return loom_error(LOOM_ERR_INVALID, "checkpoint: needs a directory, keep >= 2 and a "
                                            "positive flush interval");
    return LOOM_OK;
}

int loom_ckpt_create(loom_ckpt_t **out, const loom_ckpt_desc_t *d)
{
    int st = check_desc(d, 1);
    if (st < 0)
        return st;
    loom_ckpt_t *ck = calloc(1, sizeof *ck);
    if (!ck)
        return loom_error(LOOM_ERR_NOMEM, "checkpoint: out of memory");
    ck->d = *d;
    pthread_mutex_init(&ck->mu, NULL);
    pthread_cond_init(&ck->cv, NULL);
    ck->dir = strdup(d->dir);
    ck->config = strdup(d->config);
    ck->model = strdup(d->model);
    ck->flush_dir = d->flush_dir ? strdup(d->flush_dir) : NULL;
    if (!ck->dir || !ck->config || !ck->model || (d->flush_dir && !ck->flush_dir)) {
        st = loom_error(LOOM_ERR_NOMEM, "checkpoint: out of memory");
        goto fail;
    }
    ck->d.dir = ck->dir;
    ck->d.flush_dir = ck->flush_dir;
    ck->d.config = ck->config;
    ck->d.model = ck->model;
    /* every rank creates the directories (node-local ones need it) */
    st = mkdir_p(ck->dir);
    if (st == LOOM_OK && ck->flush_dir)
        st = mkdir_p(ck->flush_dir);
    int ok = st == LOOM_OK, all = 0;
    int ws = weft_allreduce(&ok, &all, 1, WEFT_INT32, WEFT_MIN, d->comm);
    if (ws != WEFT_SUCCESS) {
        st = loom_weft_error(ws, "checkpoint: weft_allreduce");
        goto fail;
    }
    if (!all) {
        if (st == LOOM_OK)
            st = loom_error(LOOM_ERR_IO, "checkpoint: another rank cannot create the directories");
        goto fail;
    }
    if (d->async) {
        if (pthread_create(&ck->thread, NULL, writer, ck) != 0) {
            st = loom_error(LOOM_ERR_INTERNAL, "checkpoint: cannot start the writer thread");
            goto fail;
        }
        ck->started = 1;
    }
    *out = ck;
    return LOOM_OK;
fail:
    loom_ckpt_destroy(ck);
    return st;
}

void loom_ckpt_destroy(loom_ckpt_t *ck)
{
    if (!ck)
        return;
    if (ck->started) {
        pthread_mutex_lock(&ck->mu);
        ck->quit = 1;
        pthread_cond_broadcast(&ck->cv);
        pthread_mutex_unlock(&ck->mu);
        pthread_join(ck->thread, NULL);
    }
    pthread_mutex_destroy(&ck->mu);
    pthread_cond_destroy(&ck->cv);
    free(ck->job_manifest);
    free(ck->snap);
    free(ck->dir);
    free(ck->flush_dir);
    free(ck->config);
    free(ck->model);
    free(ck);
}

void loom_ckpt_stats(const loom_ckpt_t *ck, int *saved, double *caller_s, double *writer_s)
{
    if (saved)
        *saved = ck->saved;
    if (caller_s)
        *caller_s = ck->caller_s;
    if (writer_s)
        *writer_s = ck->writer_s;
}

/* The sizes of the state of m and o: parameters, buffers, moments. */
static void state_sizes(loom_model_t *m, loom_optim_t *o, uint64_t n[4])
{
    n[0] = loom_model_param_count(m);
    n[1] = loom_model_buffer_count(m);
    n[2] = loom_optim_moment(o, 0) ? loom_optim_size(o) : 0;
    n[3] = loom_optim_moment(o, 1) ? loom_optim_size(o) : 0;
}

static const float *state_part(loom_model_t *m, loom_optim_t *o, int k)
{
    return k == 0 ? loom_model_params(m) : k == 1 ? loom_model_buffers(m) : loom_optim_moment(o, k - 2);
}

/* The manifest of step `pos` from every rank's record (6 u64 each). */
static char *make_manifest(const loom_ckpt_t *ck, const loom_ckpt_pos_t *pos, loom_optim_t *o,
                           const uint64_t *rec)
{
    size_t cap = 1024 + strlen(ck->config) + (size_t)ck->d.size * 160;
    char *s = malloc(cap);
    if (!s)
        return NULL;
    size_t n = 0;
#define ADD(...) n += (size_t)snprintf(s + n, cap - n, __VA_ARGS__)
    ADD("loom-checkpoint %d\n", LOOM_CKPT_STATE_VERSION);
    ADD("model %s\n", ck->model);
    ADD("layout world %d dp %d spatial %dx%d\n", ck->d.size, ck->d.dp, ck->d.sh, ck->d.sw);
    ADD("config-hash %016" PRIx64 "\n", fnv64(ck->config));
    ADD("config %s\n", ck->config);
    ADD("step %ld\nepoch %d\nbatch %d\n", pos->step, pos->epoch, pos->batch);
    ADD("optim-steps %ld\nlr %.9g\n", loom_optim_steps(o), (double)loom_optim_lr(o));
    for (int r = 0; r < ck->d.size; r++) {
        const uint64_t *q = rec + 6 * (size_t)r;
        ADD("rank %d rng %016" PRIx64 " %016" PRIx64 " epoch %" PRIu64 " batch %" PRIu64
            " file rank-%05d.bin bytes %" PRIu64 "\n",
            r, q[0], q[1], q[2], q[3], r, q[4]);
    }
    uint32_t c = crc_of((const unsigned char *)s, n);
    ADD("crc32 %08" PRIx32 "\n", c);
#undef ADD
    if (n >= cap) {
        free(s);
        return NULL;
    }
    return s;
}

int loom_ckpt_save(loom_ckpt_t *ck, loom_model_t *m, loom_optim_t *o, const loom_ckpt_pos_t *pos)
{
    double t0 = loom_now();
    int st = loom_ckpt_wait(ck); /* the previous snapshot is free again */
    int ok = st == LOOM_OK;
    uint64_t n[4];
    state_sizes(m, o, n);
    size_t bytes = STATE_HEADER + 4 * (size_t)(n[0] + n[1] + n[2] + n[3]) + 4;
    if (ok && ck->snap_bytes != bytes) {
        free(ck->snap);
        ck->snap_bytes = 0;
        if (!(ck->snap = malloc(bytes))) {
            st = loom_error(LOOM_ERR_NOMEM, "checkpoint: out of memory for %zu bytes", bytes);
            ok = 0;
        } else {
            ck->snap_bytes = bytes;
        }
    }
    if (ok) {
        unsigned char *p = ck->snap;
        memset(p, 0, STATE_HEADER);
        memcpy(p, STATE_MAGIC, 8);
        loom__put32(p + 8, LOOM_CKPT_STATE_VERSION);
        loom__put32(p + 12, (uint32_t)ck->d.rank);
        loom__put64(p + 16, (uint64_t)pos->step);
        for (int k = 0; k < 4; k++)
            loom__put64(p + 24 + 8 * k, n[k]);
        p += STATE_HEADER;
        for (int k = 0; k < 4; k++) { /* little-endian host assumed, as checkpoint.c */
            if (n[k])
                memcpy(p, state_part(m, o, k), 4 * (size_t)n[k]);
            p += 4 * (size_t)n[k];
        }
    }
    /* every rank's position to rank 0; ok travels too, so that no rank
     * writes a manifest for a checkpoint another rank could not take */
    uint64_t mine[6] = {pos->rng.s[0], pos->rng.s[1], (uint64_t)pos->epoch, (uint64_t)pos->batch,
                        ok ? (uint64_t)bytes : 0, (uint64_t)ok};
    uint64_t *rec = ck->d.rank == 0 ? malloc(sizeof mine * (size_t)ck->d.size) : NULL;
    if (ck->d.rank == 0 && !rec) /* this rank alone: the caller stops the job */
        return loom_error(LOOM_ERR_NOMEM, "checkpoint: out of memory for %d positions", ck->d.size);
    int ws = weft_gather(mine, rec, 6, WEFT_UINT64, 0, ck->d.comm);
    int all = ok && ws == WEFT_SUCCESS, every = 0;
    if (ck->d.rank == 0 && rec)
        for (int r = 0; r < ck->d.size; r++)
            all = all && rec[6 * (size_t)r + 5] == 1;
    int ws2 = weft_bcast(&all, 1, WEFT_INT32, 0, ck->d.comm);
    every = all;
    if (ws != WEFT_SUCCESS || ws2 != WEFT_SUCCESS) {
        free(rec);
        return loom_weft_error(ws != WEFT_SUCCESS ? ws : ws2, "checkpoint: gathering the positions");
    }
    if (!every) {
        free(rec);
        if (st == LOOM_OK)
            st = loom_error(LOOM_ERR_IO, "checkpoint: step %ld not taken: another rank failed to "
                            "prepare it", pos->step);
        return st;
    }
    char *man = NULL;
    if (ck->d.rank == 0) {
        man = make_manifest(ck, pos, o, rec);
        free(rec);
        if (!man)
            return loom_error(LOOM_ERR_NOMEM, "checkpoint: cannot build the manifest");
    }
    ck->saved++;
    int flush = ck->flush_dir && ck->saved % ck->d.flush_every == 0;
    if (ck->started) {
        pthread_mutex_lock(&ck->mu);
        ck->job_step = pos->step;
        ck->job_flush = flush;
        ck->job_manifest = man;
        ck->pending = 1;
        pthread_cond_broadcast(&ck->cv);
        pthread_mutex_unlock(&ck->mu);
    } else {
        st = run_job(ck, pos->step, flush, man);
        free(man);
        if (st < 0 && ck->status == LOOM_OK) {
            ck->status = st;
            snprintf(ck->err, sizeof ck->err, "%s", loom_last_error());
        }
    }
    ck->caller_s += loom_now() - t0;
    return st;
}

/* ---------------------------------------------------------------- loading */
int loom_ckpt_load_rank_buffer(const unsigned char *buf, size_t bytes, long step, int rank,
                               loom_model_t *m, loom_optim_t *o)
{
    uint64_t n[4];
    state_sizes(m, o, n);
    if (bytes < STATE_HEADER + 4)
        return loom_error(LOOM_ERR_FORMAT, "truncated (%zu bytes)", bytes);
    if (memcmp(buf, STATE_MAGIC, 8) != 0)
        return loom_error(LOOM_ERR_FORMAT, "not a Loom state file (bad magic)");
    if (loom__get32(buf + 8) != LOOM_CKPT_STATE_VERSION)
        return loom_error(LOOM_ERR_FORMAT, "state version %u, this Loom reads %d", loom__get32(buf + 8),
                          LOOM_CKPT_STATE_VERSION);
    uint64_t f[4], total = 0;
    for (int k = 0; k < 4; k++) {
        f[k] = loom__get64(buf + 24 + 8 * k);
        if (f[k] > ((uint64_t)1 << 36))
            return loom_error(LOOM_ERR_FORMAT, "implausible size field");
        total += f[k];
    }
    if ((uint64_t)bytes != STATE_HEADER + 4 * total + 4)
        return loom_error(LOOM_ERR_FORMAT, "truncated or inconsistent sizes (%zu bytes for %llu "
                          "floats)", bytes, (unsigned long long)total);
    uint32_t want = loom__get32(buf + bytes - 4), got = crc_of(buf, bytes - 4);
    if (want != got)
        return loom_error(LOOM_ERR_FORMAT, "checksum mismatch (stored %08x, computed %08x)", want,
                          got);
    if ((int)loom__get32(buf + 12) != rank || (int64_t)loom__get64(buf + 16) != (int64_t)step)
        return loom_error(LOOM_ERR_FORMAT, "holds rank %u step %lld, expected rank %d step %ld",
                          loom__get32(buf + 12), (long long)loom__get64(buf + 16), rank, step);
    for (int k = 0; k < 4; k++)
        if (f[k] != n[k])
            return loom_error(LOOM_ERR_MISMATCH, "%s: %llu floats, the run has %llu",
                              k == 0 ? "parameters" : k == 1 ? "batch-norm statistics"
                                                             : "optimiser moments",
                              (unsigned long long)f[k], (unsigned long long)n[k]);
    const unsigned char *p = buf + STATE_HEADER;
    for (int k = 0; k < 4; k++) {
        if (n[k])
            memcpy((float *)state_part(m, o, k), p, 4 * (size_t)n[k]);
        p += 4 * (size_t)n[k];
    }
    return LOOM_OK;
}

/* The value after "key " on the line starting with it, or NULL. */
static const char *field(const char *text, const char *key)
{
    size_t k = strlen(key);
    for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
        if (!strncmp(p, key, k) && p[k] == ' ')
            return p + k + 1;
    return NULL;
}

/* The first differing key=value item of two configuration lines. */
static void config_diff(const char *a, const char *b, char *out, size_t n)
{
    snprintf(out, n, "the configuration differs");
    while (*a || *b) {
        size_t la = strcspn(a, " \n"), lb = strcspn(b, " \n");
        if (la != lb || strncmp(a, b, la) != 0) {
            snprintf(out, n, "checkpoint has %.*s, this run %.*s", (int)la, a, (int)lb, b);
            return;
        }
        a += la;
        b += lb;
        while (*a == ' ')
            a++;
        while (*b == ' ')
            b++;
        if (*a == '\n')
            a += strlen(a);
    }
}

int loom_ckpt_parse_manifest(const char *text, size_t len, const loom_ckpt_desc_t *d, int rank,
                             loom_ckpt_pos_t *pos)
{
    if (len == 0 || memchr(text, '\0', len) || text[len - 1] != '\n')
        return loom_error(LOOM_ERR_FORMAT, "manifest truncated or not text");
    /* the crc line is the last line */
    const char *last = text + len - 1;
    while (last > text && last[-1] != '\n')
        last--;
    unsigned crc = 0;
    char tail;
    if (strncmp(last, "crc32 ", 6) != 0 || sscanf(last + 6, "%8x%c", &crc, &tail) != 2 || tail != '\n')
        return loom_error(LOOM_ERR_FORMAT, "manifest has no crc32 line (truncated?)");
    if (crc_of((const unsigned char *)text, (size_t)(last - text)) != crc)
        return loom_error(LOOM_ERR_FORMAT, "manifest checksum mismatch");
    int ver = 0;
    if (sscanf(text, "loom-checkpoint %d", &ver) != 1 || ver != LOOM_CKPT_STATE_VERSION)
        return loom_error(LOOM_ERR_FORMAT, "manifest version %d, this Loom reads %d", ver,
                          LOOM_CKPT_STATE_VERSION);
    const char *v;
    char model[64] = {0};
    if (!(v = field(text, "model")) || sscanf(v, "%63s", model) != 1)
        return loom_error(LOOM_ERR_FORMAT, "manifest lacks the model");
    if (strcmp(model, d->model) != 0)
        return loom_error(LOOM_ERR_MISMATCH, "the checkpoint is of model '%s', this run trains '%s'",
                          model, d->model);
    int P, D, H, W;
    if (!(v = field(text, "layout")) || sscanf(v, "world %d dp %d spatial %dx%d", &P, &D, &H, &W) != 4)
        return loom_error(LOOM_ERR_FORMAT, "manifest lacks the layout");
    if (P != d->size || D != d->dp || H != d->sh || W != d->sw)
        return loom_error(LOOM_ERR_MISMATCH, "the checkpoint was written by %d ranks (data-parallel "
                          "%d, spatial %dx%d); this run has %d (data-parallel %d, spatial %dx%d)",
                          P, D, H, W, d->size, d->dp, d->sh, d->sw);
    uint64_t hash = 0;
    if (!(v = field(text, "config-hash")) || sscanf(v, "%" SCNx64, &hash) != 1 ||
        !(v = field(text, "config")))
        return loom_error(LOOM_ERR_FORMAT, "manifest lacks the configuration");
    const char *eol = strchr(v, '\n');
    if (hash != fnv64(d->config) || (size_t)(eol - v) != strlen(d->config) ||
        strncmp(v, d->config, (size_t)(eol - v)) != 0) {
        char why[256];
        config_diff(v, d->config, why, sizeof why);
        return loom_error(LOOM_ERR_MISMATCH, "the run's configuration differs from the "
                          "checkpoint's: %s", why);
    }
    long step, ot;
    if (!(v = field(text, "step")) || sscanf(v, "%ld", &step) != 1 || step < 0)
        return loom_error(LOOM_ERR_FORMAT, "manifest lacks the step");
    if (!(v = field(text, "optim-steps")) || sscanf(v, "%ld", &ot) != 1 || ot < 0)
        return loom_error(LOOM_ERR_FORMAT, "manifest lacks the optimiser's step count");
    /* this rank's line */
    for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
        int r, e, b;
        uint64_t s0, s1, bytes;
        if (sscanf(p, "rank %d rng %" SCNx64 " %" SCNx64 " epoch %d batch %d file %*s bytes %" SCNu64,
                   &r, &s0, &s1, &e, &b, &bytes) != 6 || r != rank)
            continue;
        if (e < 0 || b < 0)
            return loom_error(LOOM_ERR_FORMAT, "manifest: bad position of rank %d", rank);
        pos->step = step;
        pos->optim_steps = ot;
        pos->epoch = e;
        pos->batch = b;
        pos->rng.s[0] = s0;
        pos->rng.s[1] = s1;
        return LOOM_OK;
    }
    return loom_error(LOOM_ERR_FORMAT, "manifest has no line for rank %d", rank);
}

int loom_ckpt_resume(const char *dir, const loom_ckpt_desc_t *d, loom_model_t *m, loom_optim_t *o,
                     loom_ckpt_pos_t *pos, FILE *log)
{
    int st = check_desc(d, 0);
    if (st < 0)
        return st;
    long steps[MAX_CANDIDATES];
    int n = d->rank == 0 ? list_steps(dir, steps, MAX_CANDIDATES) : 0;
    int ws = weft_bcast(&n, 1, WEFT_INT32, 0, d->comm);
    if (ws == WEFT_SUCCESS && n > 0)
        ws = weft_bcast(steps, (size_t)n, WEFT_INT64, 0, d->comm);
    if (ws != WEFT_SUCCESS)
        return loom_weft_error(ws, "resume: weft_bcast");
    char sd[PATH_BYTES], path[PATH_BYTES + 32];
    for (int i = 0; i < n; i++) {
        step_dir(sd, sizeof sd, dir, steps[i]);
        /* rank 0 reads the manifest and hands it to everyone */
        unsigned char *man = NULL;
        size_t len = 0;
        int64_t len64 = -1;
        if (d->rank == 0) {
            snprintf(path, sizeof path, "%s/" MANIFEST, sd);
            if ((man = read_all(path, &len)) != NULL)
                len64 = (int64_t)len;
            else if (log)
                fprintf(log, "loom: resume: skipping %s: %s (incomplete checkpoint)\n", sd,
                        loom_last_error());
        }
        if ((ws = weft_bcast(&len64, 1, WEFT_INT64, 0, d->comm)) != WEFT_SUCCESS) {
            free(man);
            return loom_weft_error(ws, "resume: weft_bcast");
        }
        if (len64 < 0)
            continue;
        if (d->rank != 0 && !(man = malloc((size_t)len64 + 1))) /* this rank alone: the caller
                                                                    stops the job */
            return loom_error(LOOM_ERR_NOMEM, "resume: out of memory for the manifest");
        if (len64 > 0 && (ws = weft_bcast(man, (size_t)len64, WEFT_UINT8, 0, d->comm)) != WEFT_SUCCESS) {
            free(man);
            return loom_weft_error(ws, "resume: weft_bcast");
        }
        loom_ckpt_pos_t p = {0};
        st = loom_ckpt_parse_manifest((const char *)man, (size_t)len64, d, d->rank, &p);
        free(man);
        if (st == LOOM_ERR_MISMATCH) { /* the same text on every rank: the same verdict */
            char why[512];
            snprintf(why, sizeof why, "%s", loom_last_error());
            return loom_error(st, "cannot resume from %s: %s", sd, why);
        }
        if (st == LOOM_OK && p.step != steps[i])
            st = loom_error(LOOM_ERR_FORMAT, "manifest says step %ld", p.step);
        /* this rank's state file */
        unsigned char *buf = NULL;
        size_t bytes = 0;
        if (st == LOOM_OK) {
            snprintf(path, sizeof path, "%s/rank-%05d.bin", sd, d->rank);
            if (!(buf = read_all(path, &bytes)))
                st = LOOM_ERR_IO;
        }
        /* load into scratch copies first: the model changes only on success */
        if (st == LOOM_OK) {
            uint64_t sz[4];
            state_sizes(m, o, sz);
            float *save[4] = {0};
            int okc = 1;
            for (int k = 0; k < 4; k++)
                if (sz[k] && !(save[k] = malloc(4 * (size_t)sz[k])))
                    okc = 0;
                else if (sz[k])
                    memcpy(save[k], state_part(m, o, k), 4 * (size_t)sz[k]);
            st = okc ? loom_ckpt_load_rank_buffer(buf, bytes, p.step, d->rank, m, o)
                     : loom_error(LOOM_ERR_NOMEM, "out of memory");
            int ok = st == LOOM_OK, all = 0;
            ws = weft_allreduce(&ok, &all, 1, WEFT_INT32, WEFT_MIN, d->comm);
            if (ws == WEFT_SUCCESS && !all && okc) /* another rank failed: undo */
                for (int k = 0; k < 4; k++)
                    if (sz[k])
                        memcpy((float *)state_part(m, o, k), save[k], 4 * (size_t)sz[k]);
            for (int k = 0; k < 4; k++)
                free(save[k]);
            free(buf);
            if (ws != WEFT_SUCCESS)
                return loom_weft_error(ws, "resume: weft_allreduce");
            if (st < 0 && log)
                fprintf(log, "loom: resume: rank %d: skipping %s: %s: %s\n", d->rank, sd, path,
                        loom_last_error());
            if (all) {
                loom_optim_set_steps(o, p.optim_steps);
                *pos = p;
                return LOOM_OK;
            }
            if (st == LOOM_OK && log && d->rank == 0)
                fprintf(log, "loom: resume: skipping %s: another rank's file is damaged\n", sd);
            continue;
        }
        if (log)
            fprintf(log, "loom: resume: rank %d: skipping %s: %s\n", d->rank, sd, loom_last_error());
        int ok = 0, all = 0;
        if ((ws = weft_allreduce(&ok, &all, 1, WEFT_INT32, WEFT_MIN, d->comm)) != WEFT_SUCCESS)
            return loom_weft_error(ws, "resume: weft_allreduce");
    }
    return loom_error(LOOM_ERR_IO, "no complete checkpoint in %s", dir);
}
