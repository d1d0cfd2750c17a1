/* The process's live statistics file (stats_file.h), written by a thread
 * of netvm's (inside it, so it never touches the region) every 100 ms and
 * once more at exit. Nothing is written without NETVM_GMEM_STATS_DIR
 * (set by `netvm gmem run`, which removes the directory at the end). */
#define _GNU_SOURCE
#include "preload/preload.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

static struct nvp_stats_file *sf;
static const netvm_gmem_t *region;
static pthread_mutex_t write_lock = PTHREAD_MUTEX_INITIALIZER;

static void fill(int exited, int health)
{
    pthread_mutex_lock(&write_lock);
    __atomic_fetch_add(&sf->seq, 1, __ATOMIC_ACQ_REL);   /* odd: being written */
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    netvm_gmem_stats(region, &sf->gm);
    if (health)   /* a walk of the pages stored: once a second */
        netvm_gmem_health(region, &sf->health);
    for (size_t i = 0; i < sizeof sf->n / sizeof(uint64_t); i++)
        ((uint64_t *)&sf->n)[i] = __atomic_load_n(&((uint64_t *)&nvp_n)[i], __ATOMIC_RELAXED);
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    sf->updated_ns = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
    sf->budget = sf->gm.budget_pages * NETVM_GMEM_PAGE;
    if (exited)
        sf->exited = 1;
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    __atomic_fetch_add(&sf->seq, 1, __ATOMIC_ACQ_REL);
    pthread_mutex_unlock(&write_lock);
}

static void *writer(void *arg)
{
    (void)arg;
    for (unsigned i = 0;; i++) {
        fill(0, i % 10 == 0);
        struct timespec t = { 0, 100 * 1000 * 1000 };
        nanosleep(&t, NULL);
    }
    return NULL;
}

/* PID.N.stat, N counting the images this pid ran (exec keeps the pid) */
static int open_file(const char *dir)
{
    char path[4096];
    for (int n = 0; n < 1000; n++) {
        snprintf(path, sizeof path, "%s/%d.%d%s", dir, (int)getpid(), n, NVP_STATS_SUFFIX);
        int fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (fd >= 0 || errno != EEXIST)
            return fd;
    }
    return -1;
}

void nvp_stats_start(void *g)
{
    const char *dir = getenv("NETVM_GMEM_STATS_DIR");
    if (!dir || !*dir)
        return;
    int fd = open_file(dir);
    if (fd < 0)
        return;
    void *p = MAP_FAILED;
    if (ftruncate(fd, sizeof *sf) == 0)
        p = nvp_sys_mmap(NULL, sizeof *sf, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (p == MAP_FAILED)
        return;
    sf = p;
    region = g;
    sf->pid = getpid();
    sf->reserve = nvp.reserve;
    sf->threshold = nvp.threshold;
    sf->glibc_malloc = nvp.glibc_malloc;
    const char *prog = program_invocation_short_name;
    snprintf(sf->prog, sizeof sf->prog, "%s", prog ? prog : "?");
    fill(0, 1);
    __atomic_store_n(&sf->magic, NVP_STATS_MAGIC, __ATOMIC_RELEASE);
    pthread_t t;
    pthread_attr_t a;
    pthread_attr_init(&a);
    pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
    pthread_create(&t, &a, writer, NULL);   /* inside: nvp_region holds the flag */
    pthread_attr_destroy(&a);
}

void nvp_stats_final(void)
{
    if (sf)
        fill(1, 1);
}
