/*
 * fuzz_idx.c - Loom's IDX reader (loom/src/data_idx.c loom_idx_load: an
 * images file and a labels file, plain or gzip) on arbitrary bytes.
 *
 * Input: u8 classes - 1, u32 (little-endian) length of the images file,
 * then the images file's bytes, then the labels file's (the rest). Each is
 * written to an in-memory file and opened by its /proc/self/fd path.
 *
 * Checked beside the sanitizers: a refused pair leaves the dataset empty;
 * an accepted one has as many labels as images, every label below classes,
 * and the image bytes of the file (plain files: compared with the input).
 */
#include <string.h>

#include "fuzz_common.h"
#include "loom.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    fuzz_quiet_stderr();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static int fd_img = -1, fd_lab = -1;
    char img_path[64], lab_path[64];
    if (size < 5) return 0;
    int classes = 1 + data[0];
    size_t img_len = (size_t)data[1] | (size_t)data[2] << 8 | (size_t)data[3] << 16 |
                     (size_t)data[4] << 24;
    data += 5;
    size -= 5;
    if (img_len > size) img_len = size;
    fuzz_memfile(&fd_img, data, img_len, img_path);
    fuzz_memfile(&fd_lab, data + img_len, size - img_len, lab_path);

    loom_dataset_t ds;
    memset(&ds, 0x5a, sizeof ds);
    int st = loom_idx_load(&ds, img_path, lab_path, classes);
    if (st != LOOM_OK) {
        FUZZ_ASSERT(ds.images == NULL && ds.labels == NULL && ds.count == 0,
                    "a refused file left a dataset behind");
        return 0;
    }
    FUZZ_ASSERT(ds.count > 0 && ds.rows > 0 && ds.cols > 0 && ds.channels == 1,
                "dataset %d x %d x %d", ds.count, ds.rows, ds.cols);
    FUZZ_ASSERT(ds.classes == classes, "classes %d, asked %d", ds.classes, classes);
    for (int i = 0; i < ds.count; i++)
        FUZZ_ASSERT(ds.labels[i] >= 0 && ds.labels[i] < classes, "label %d = %d", i,
                    (int)ds.labels[i]);
    size_t n = (size_t)ds.count * (size_t)ds.rows * (size_t)ds.cols;
    if (img_len >= 16 && data[0] == 0 && data[1] == 0) /* plain (not gzip): the bytes as given */
        FUZZ_ASSERT(img_len >= 16 + n && memcmp(ds.images, data + 16, n) == 0,
                    "image bytes differ from the file's");
    loom_dataset_free(&ds);
    return 0;
}
