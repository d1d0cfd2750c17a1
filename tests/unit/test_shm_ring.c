/* The shm link's message ring: order, capacity, wrap-around, and several
 * producer threads against one consumer losing nothing. */
#include "check.h"
#include "link/shm/shm_block.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define RING 64
#define PER_THREAD 200000
#define THREADS 3

static struct nv_shm_hdr *make_ring(void)
{
    size_t off = 4096;
    struct nv_shm_hdr *h = aligned_alloc(4096, off + RING * sizeof(struct nv_shm_ring_slot));
    memset(h, 0, off);
    h->ring_size = RING;
    h->ring_off = off;
    for (uint64_t i = 0; i < RING; i++)
        atomic_store(&nv_shm_ring(h)[i].seq, i);
    return h;
}

static void *producer(void *arg)
{
    struct nv_shm_hdr *h = ((void **)arg)[0];
    uint32_t id = (uint32_t)(uintptr_t)((void **)arg)[1];
    uint8_t msg[NV_AM_SIZE] = { 0 };
    for (uint32_t i = 0; i < PER_THREAD; i++) {
        memcpy(msg, &id, 4);
        memcpy(msg + 4, &i, 4);
        while (nv_shm_ring_push(h, msg) != 0)
            ;
    }
    return NULL;
}

int main(void)
{
    struct nv_shm_hdr *h = make_ring();
    uint8_t msg[NV_AM_SIZE], out[NV_AM_SIZE];
    CHECK(!nv_shm_ring_nonempty(h));
    CHECK(nv_shm_ring_pop(h, out) == 0);
    for (int i = 0; i < RING; i++) {
        memset(msg, i, sizeof msg);
        CHECK(nv_shm_ring_push(h, msg) == 0);
    }
    CHECK(nv_shm_ring_push(h, msg) == -1);   /* full */
    for (int i = 0; i < RING; i++) {
        CHECK(nv_shm_ring_pop(h, out) == 1);
        CHECK(out[0] == i && out[NV_AM_SIZE - 1] == i);
    }
    CHECK(nv_shm_ring_pop(h, out) == 0);

    pthread_t t[THREADS];
    void *args[THREADS][2];
    for (int i = 0; i < THREADS; i++) {
        args[i][0] = h;
        args[i][1] = (void *)(uintptr_t)i;
        pthread_create(&t[i], NULL, producer, args[i]);
    }
    uint32_t next[THREADS] = { 0 };
    for (long got = 0; got < (long)THREADS * PER_THREAD;) {
        if (!nv_shm_ring_pop(h, out))
            continue;
        uint32_t id, seq;
        memcpy(&id, out, 4);
        memcpy(&seq, out + 4, 4);
        CHECK(id < THREADS && seq == next[id]);   /* per-producer order, nothing lost */
        next[id]++;
        got++;
    }
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    free(h);
    return 0;
}
