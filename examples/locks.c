/* Remote locks (include/netvm/sync.h): a counter in rank 0's memory that
 * every rank increments with a plain get and put, made safe by a queue
 * lock; a semaphore that lets at most two ranks into a section at once;
 * and a barrier over the odd ranks only.
 *
 * Objects live at a home peer: the home creates them by name, the others
 * open them by (home, name) once the home has (netvm_barrier between).
 *
 *   netvm run -n 4 ./locks [increments per rank]
 */
#include <netvm/sync.h>

#include <stdio.h>
#include <stdlib.h>

#define OK(x) do { netvm_status_t s_ = (x); if (s_ != NETVM_OK) { \
    fprintf(stderr, "locks: %s: %s\n", #x, netvm_strerror(s_)); exit(1); } } while (0)

int main(int argc, char **argv)
{
    int iters = argc > 1 ? atoi(argv[1]) : 1000;
    netvm_ctx_t *ctx;
    OK(netvm_init(&ctx, NULL));
    int me = netvm_rank(ctx), n = netvm_size(ctx);

    /* rank 0 holds the data and is home of the lock and the semaphore */
    netvm_lock_t *lock;
    netvm_sem_t *sem;
    netvm_gbarrier_t *odd = NULL;
    if (me == 0) {
        void *mem;
        netvm_seg_t *seg;
        OK(netvm_alloc_shared(ctx, 64, NETVM_RWA, "counter", &mem, &seg));
        OK(netvm_lock_create(ctx, "counter-lock", &lock));
        OK(netvm_sem_create(ctx, "two-at-a-time", 2, &sem));
        int peers[64], k = 0;
        for (int r = 1; r < n && k < 64; r += 2)
            peers[k++] = r;
        if (k)
            OK(netvm_gbarrier_create(ctx, "odd-ranks", peers, (unsigned)k, &odd));
    }
    OK(netvm_barrier(ctx));
    if (me != 0) {
        OK(netvm_lock_open(ctx, 0, "counter-lock", &lock));
        OK(netvm_sem_open(ctx, 0, "two-at-a-time", &sem));
        if (me % 2)
            OK(netvm_gbarrier_open(ctx, 0, "odd-ranks", &odd));
    }
    netvm_rseg_t *counter;
    OK(netvm_import(ctx, 0, "counter", &counter));

    for (int i = 0; i < iters; i++) {
        uint64_t v;
        OK(netvm_lock_acquire(lock));
        OK(netvm_get(ctx, &v, counter, 0, 8, 0));   /* read, modify, write: */
        v++;
        OK(netvm_put(ctx, counter, 0, &v, 8, 0));   /* safe only under the lock */
        OK(netvm_lock_release(lock));
    }

    OK(netvm_sem_wait(sem));
    /* at most two ranks are here at once */
    OK(netvm_sem_post(sem));

    if (me % 2)
        for (int i = 0; i < 100; i++)
            OK(netvm_gbarrier_wait(odd));   /* the even ranks are not held up */

    OK(netvm_barrier(ctx));
    if (me == 0) {
        uint64_t v;
        OK(netvm_get(ctx, &v, counter, 0, 8, 0));
        printf("locks: counter %llu (expected %llu)\n", (unsigned long long)v,
               (unsigned long long)iters * (unsigned long long)n);
    }
    OK(netvm_release(counter));
    OK(netvm_barrier(ctx));
    if (odd)
        OK(netvm_gbarrier_close(odd));
    OK(netvm_sem_close(sem));
    OK(netvm_lock_close(lock));
    OK(netvm_finalize(ctx));
    return 0;
}
