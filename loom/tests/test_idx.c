/*
 * test_idx.c - Fashion-MNIST from Debian's dataset-fashion-mnist package:
 * 60000 training and 10000 test samples of 28x28, 6000 per class in train
 * and 1000 per class in test.  Exits 77 (skipped) only when the package's
 * files are absent.
 */
#include "harness.h"
#include "loom.h"

#include <unistd.h>

int main(void)
{
    char path[512];
    snprintf(path, sizeof path, "%s/train-images-idx3-ubyte.gz", LOOM_FASHION_MNIST_DIR);
    if (access(path, R_OK) != 0) {
        printf("SKIP: %s absent (install dataset-fashion-mnist)\n", path);
        return 77;
    }
    loom_dataset_t tr, te;
    int st = loom_fashion_mnist_load(&tr, NULL, 1);
    CHECK(st == 0, "train load: %s", loom_last_error());
    st = loom_fashion_mnist_load(&te, NULL, 0);
    CHECK(st == 0, "test load: %s", loom_last_error());
    if (t_fail)
        return t_done();
    CHECK(tr.count == 60000, "train count %d", tr.count);
    CHECK(te.count == 10000, "test count %d", te.count);
    CHECK(tr.rows == 28 && tr.cols == 28 && tr.channels == 1, "train shape %dx%dx%d", tr.channels,
          tr.rows, tr.cols);
    int ctr[10] = {0}, cte[10] = {0};
    for (int i = 0; i < tr.count; i++)
        ctr[tr.labels[i]]++;
    for (int i = 0; i < te.count; i++)
        cte[te.labels[i]]++;
    for (int c = 0; c < 10; c++) {
        CHECK(ctr[c] == 6000, "train class %d has %d samples", c, ctr[c]);
        CHECK(cte[c] == 1000, "test class %d has %d samples", c, cte[c]);
    }
    /* pixels are bytes and not all zero */
    long sum = 0;
    for (int i = 0; i < 784; i++)
        sum += tr.images[i];
    CHECK(sum > 0, "first training image is blank");
    loom_dataset_free(&tr);
    loom_dataset_free(&te);
    return t_done();
}
