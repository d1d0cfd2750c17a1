/* Runs a libFuzzer target without libFuzzer (gcc builds, sanitizer builds):
 * every file of the corpus directories given, then random and mutated
 * inputs from a fixed seed. `make test` also runs the real fuzzers where
 * clang is installed. Usage: PROG [-n ITERATIONS] [CORPUS_DIR...] */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static size_t run_file(const char *path, uint8_t *buf, size_t cap)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return 0;
    size_t n = fread(buf, 1, cap, f);
    fclose(f);
    LLVMFuzzerTestOneInput(buf, n);
    return n;
}

int main(int argc, char **argv)
{
    long iters = 200000;
    enum { CAP = 4096 };
    static uint8_t buf[CAP], seeds[64][CAP];
    size_t seed_len[64], nseeds = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-n") && i + 1 < argc) {
            iters = atol(argv[++i]);
            continue;
        }
        DIR *d = opendir(argv[i]);
        if (!d) {
            fprintf(stderr, "no corpus at %s\n", argv[i]);
            return 1;
        }
        struct dirent *e;
        while ((e = readdir(d))) {
            if (e->d_name[0] == '.')
                continue;
            char path[4096];
            snprintf(path, sizeof path, "%s/%s", argv[i], e->d_name);
            size_t n = run_file(path, buf, CAP);
            if (nseeds < 64) {
                memcpy(seeds[nseeds], buf, n);
                seed_len[nseeds++] = n;
            }
        }
        closedir(d);
    }
    srand(12345);
    for (long k = 0; k < iters; k++) {
        size_t n;
        if (nseeds && (k & 1)) {
            /* mutate a corpus input: flip bytes, truncate */
            size_t s = (size_t)rand() % nseeds;
            n = seed_len[s];
            memcpy(buf, seeds[s], n);
            for (int f = rand() % 4; f >= 0 && n; f--)
                buf[(size_t)rand() % n] = (uint8_t)rand();
            if (rand() % 4 == 0 && n)
                n = (size_t)rand() % n;
        } else {
            n = (size_t)rand() % 128;
            for (size_t i = 0; i < n; i++)
                buf[i] = (uint8_t)rand();
            if (n)
                buf[0] = (uint8_t)(1 + rand() % 3);   /* a version byte some decoder takes (1..3) */
        }
        LLVMFuzzerTestOneInput(buf, n);
    }
    printf("%ld inputs, %zu from the corpus: no crash\n", iters, nseeds);
    return 0;
}
