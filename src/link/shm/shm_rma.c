/* The shm link as a NIC: the segment table peers check, imports, and the
 * one-sided put, get and atomics themselves. */
#define _GNU_SOURCE
#include "link/shm/shm_priv.h"
#include "util/pidfd.h"
#include "util/thread.h"
#include "util/hash.h"
#include "util/log.h"
#include "util/membarrier.h"
#include "util/time.h"
#include "util/atomic_op.h"

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <unistd.h>

/* --- exporter side: the table peers read ------------------------------ */

netvm_status_t shm_seg_publish(struct nv_link *l, const struct nv_seg_desc *d)
{
    struct shm_link *s = shm_of(l);
    if (d->slot >= s->self->nseg)
        return NETVM_ERR_NOMEM;
    struct nv_shm_seg *e = &nv_shm_segs(s->self)[d->slot];
    uint64_t gen = ++s->gen;
    atomic_store_explicit(&e->word, gen << 2 | NV_SEG_BUSY, memory_order_relaxed);
    atomic_thread_fence(memory_order_release);
    e->key = d->key;
    e->addr = d->addr;
    e->len = d->len;
    e->rights = d->rights;
    e->memfd = s->p.use_mapping ? d->memfd : -1;
    memset(e->name, 0, sizeof e->name);
    if (d->name)
        strncpy(e->name, d->name, sizeof e->name - 1);
    e->name_hash = d->name ? nv_hash_str(d->name) : 0;
    atomic_store_explicit(&e->word, gen << 2 | NV_SEG_LIVE, memory_order_release);
    uint32_t high = atomic_load(&s->self->seg_high);
    while (d->slot >= high && !atomic_compare_exchange_weak(&s->self->seg_high, &high, d->slot + 1))
        ;
    return NETVM_OK;
}

/* The fence of EXTOLL's ATU deregistration, in two steps: mark the entry
 * revoked, then wait for every initiator that may have seen it live. An
 * initiator marks its thread's word odd (sequentially consistent) before it
 * reads the entry, so either the fence sees it odd, or it sees the
 * revocation. */
void shm_seg_revoke(struct nv_link *l, uint32_t slot)
{
    struct shm_link *s = shm_of(l);
    struct nv_shm_seg *e = &nv_shm_segs(s->self)[slot];
    uint64_t w = atomic_load_explicit(&e->word, memory_order_relaxed);
    atomic_store_explicit(&e->word, (w & ~3ull) | NV_SEG_REVOKED, memory_order_seq_cst);
}

/* Wait while word w holds the value it had (an owned slot, odd: that
 * thread is inside) or until it is zero (the shared slot's count). */
static void fence_word(struct shm_peer *pe, _Atomic uint64_t *w, int shared)
{
    uint64_t seq = atomic_load_explicit(w, memory_order_seq_cst);
    if (shared ? seq == 0 : !(seq & 1))
        return;
    unsigned spins = 0;
    for (;;) {
        uint64_t now = atomic_load_explicit(w, memory_order_acquire);
        if (shared ? now == 0 : now != seq)
            return;
        if (++spins % 1024 == 0 && (atomic_load(&pe->dead) || nv_pidfd_exited(pe->pidfd)))
            return;
        if (spins > 4096)
            sched_yield();
        else
            nv_cpu_relax();
    }
}

void shm_seg_fence(struct nv_link *l, uint32_t slot)
{
    struct shm_link *s = shm_of(l);
    (void)slot;
    /* every CPU that runs an initiator passes a full barrier: its store to
     * its slot is visible now, or it will see the revocation */
    if (nv_membarrier_global() != 0)
        atomic_thread_fence(memory_order_seq_cst);
    pthread_mutex_lock(&s->peers_lock);
    for (struct shm_peer *pe = s->peers; pe; pe = pe->next) {
        if (pe->self || !pe->hdr)
            continue;   /* our own thread is here, not inside an access */
        uint32_t high = atomic_load_explicit(&pe->hdr->op_high, memory_order_seq_cst);
        for (uint32_t i = 0; i < high && i < NV_SHM_OP_SLOTS; i++)
            fence_word(pe, &pe->hdr->op[i].seq, 0);
        fence_word(pe, &pe->hdr->op[NV_SHM_OP_SLOTS].seq, 1);
    }
    pthread_mutex_unlock(&s->peers_lock);
}

/* --- initiator side ---------------------------------------------------- */

/* Read a consistent copy of a live entry; 0 on success. */
static int read_entry(struct nv_shm_seg *e, struct nv_shm_seg *copy, uint64_t *word)
{
    for (int tries = 0; tries < 1000; tries++) {
        uint64_t w1 = atomic_load_explicit(&e->word, memory_order_acquire);
        if (NV_SEG_STATE(w1) != NV_SEG_LIVE)
            return -1;
        copy->key = e->key;
        copy->addr = e->addr;
        copy->len = e->len;
        copy->rights = e->rights;
        copy->memfd = e->memfd;
        copy->name_hash = e->name_hash;
        memcpy(copy->name, e->name, sizeof copy->name);
        atomic_thread_fence(memory_order_acquire);
        if (atomic_load_explicit(&e->word, memory_order_relaxed) == w1) {
            copy->name[sizeof copy->name - 1] = 0;
            *word = w1;
            return 0;
        }
    }
    return -1;
}

static netvm_status_t find_entry(struct shm_peer *pe, const char *name, uint32_t slot, uint64_t key,
                                 uint32_t *found, struct nv_shm_seg *copy, uint64_t *word)
{
    struct nv_shm_hdr *h = pe->hdr;
    struct nv_shm_seg *segs = nv_shm_segs(h);
    if (!name) {
        if (slot >= h->nseg)
            return NETVM_ERR_KEY;
        if (read_entry(&segs[slot], copy, word) != 0) {
            uint64_t w = atomic_load(&segs[slot].word);
            return NV_SEG_STATE(w) == NV_SEG_REVOKED ? NETVM_ERR_REVOKED : NETVM_ERR_KEY;
        }
        if (copy->key != key)
            return NETVM_ERR_KEY;
        *found = slot;
        return NETVM_OK;
    }
    uint64_t hash = nv_hash_str(name);
    uint32_t high = atomic_load_explicit(&h->seg_high, memory_order_acquire);
    if (high > h->nseg)
        high = h->nseg;
    for (uint32_t i = 0; i < high; i++) {
        if (segs[i].name_hash != hash)
            continue;
        if (read_entry(&segs[i], copy, word) == 0 && strcmp(copy->name, name) == 0) {
            *found = i;
            return NETVM_OK;
        }
    }
    return NETVM_ERR_NOTFOUND;
}

netvm_status_t shm_import(struct nv_link *l, struct nv_lpeer *lp, const char *name, uint32_t slot,
                          uint64_t key, struct nv_rdesc *out)
{
    struct shm_peer *pe = shm_peer_of(lp);
    if (l->ops->peer_dead(l, lp))
        return NETVM_ERR_PEER;
    struct nv_shm_seg e;
    uint64_t word;
    uint32_t found;
    netvm_status_t st = find_entry(pe, name, slot, key, &found, &e, &word);
    if (st != NETVM_OK)
        return st;
    struct shm_import *im = calloc(1, sizeof *im);
    if (!im)
        return NETVM_ERR_NOMEM;
    im->peer = pe;
    im->word = &nv_shm_segs(pe->hdr)[found].word;
    im->live_word = word;
    memset(out, 0, sizeof *out);
    out->peer = lp;
    out->slot = found;
    out->key = e.key;
    out->addr = e.addr;
    out->len = e.len;
    out->rights = e.rights;
    out->link_priv = im;
    if (e.memfd >= 0 && e.len > 0) {
        /* map the target's memfd: from now on put/get/atomics are plain
         * loads, stores and CPU atomics on the same physical pages */
        int fd = nv_pidfd_getfd(pe->pidfd, e.memfd);
        size_t maplen = (e.len + 4095) & ~(size_t)4095;
        /* read-only where nothing may be written: a stray store through
         * netvm_ptr faults here instead of changing the exporter's memory */
        int ro = !(e.rights & (NETVM_WRITE | NETVM_ATOMIC));
        void *p = fd >= 0 ? shm_map_fd(fd, maplen, !ro) : NULL;
        if (fd >= 0)
            close(fd);
        /* the entry may have been revoked (and the fd reused) meanwhile */
        if (p && atomic_load(im->word) != word) {
            munmap(p, maplen);
            free(im);
            return NETVM_ERR_REVOKED;
        }
        if (p) {
            im->map_base = p;
            im->map_len = maplen;
            out->mapped = p;
            out->flags = NV_RDESC_MAPPED | NV_RDESC_ATOMIC;
        } else {
            nv_warn("shm link: cannot map peer %d's segment %u (%s); using process_vm_*",
                    lp->id, found, strerror(errno));
        }
    }
    return NETVM_OK;
}

void shm_release(struct nv_link *l, struct nv_rdesc *d)
{
    struct shm_import *im = d->link_priv;
    if (!im)
        return;
    if (im->map_base)
        munmap(im->map_base, im->map_len);
    free(im);
    d->link_priv = NULL;
    d->mapped = NULL;
}

/* The initiator's side of the revocation fence. Each initiating thread
 * owns a slot of the process's words while it lives (the slot numbers are
 * the same in every shm block of the process), so its marks are plain
 * stores; threads beyond NV_SHM_OP_SLOTS share the last one, a count
 * changed atomically. With membarrier the revoker's global barrier orders
 * the store before our read of the entry, so a compiler barrier suffices
 * (the fast path pays nothing). */
_Static_assert(NV_SHM_OP_SLOTS == NV_THREAD_SLOTS, "the fence's slots are the threads' slots");

int shm_thread_slot(struct shm_link *s)
{
    int op_slot = nv_thread_slot();
    /* a fence looks at slots below op_high: raise it before the first mark */
    uint32_t high = atomic_load_explicit(&s->self->op_high, memory_order_relaxed);
    if (op_slot < NV_SHM_OP_SLOTS && (uint32_t)op_slot >= high) {
        while ((uint32_t)op_slot >= high &&
               !atomic_compare_exchange_weak(&s->self->op_high, &high, (uint32_t)op_slot + 1))
            ;
    }
    return op_slot;
}

struct op_mark {
    _Atomic uint64_t *w;
    uint64_t          seq;   /* 0: the shared count */
};

/* The calling thread's slot word in the link it last accessed through, and
 * its value (the thread is its only writer): the common access makes two
 * plain stores and no other load. Keyed by the link's uid, not its address
 * (a link closed and another opened at the same address). */
static __thread struct { uint64_t uid; _Atomic uint64_t *w; uint64_t seq; } op_cache NV_TLS_IE;

static inline struct op_mark access_begin(struct shm_link *s)
{
    struct op_mark m;
    if (__builtin_expect(op_cache.uid != s->uid, 0)) {
        int i = shm_thread_slot(s);
        m.w = &s->self->op[i].seq;
        if (i == NV_SHM_OP_SLOTS) {
            atomic_fetch_add_explicit(m.w, 1, memory_order_seq_cst);
            m.seq = 0;
            return m;
        }
        op_cache.uid = s->uid;
        op_cache.w = m.w;
        op_cache.seq = atomic_load_explicit(m.w, memory_order_relaxed);
    }
    m.w = op_cache.w;
    m.seq = op_cache.seq | 1;
    if (s->asym) {
        atomic_store_explicit(m.w, m.seq, memory_order_relaxed);
        atomic_signal_fence(memory_order_seq_cst);
    } else {
        atomic_store_explicit(m.w, m.seq, memory_order_seq_cst);
    }
    return m;
}

static inline void access_end(struct op_mark m)
{
    if (!m.seq) {
        atomic_fetch_sub_explicit(m.w, 1, memory_order_release);
    } else {
        atomic_store_explicit(m.w, m.seq + 1, memory_order_release);
        op_cache.seq = m.seq + 1;
    }
}

static inline netvm_status_t still_valid(struct nv_link *l, struct shm_import *im)
{
    if (atomic_load_explicit(im->word, memory_order_relaxed) == im->live_word)
        return NETVM_OK;
    return NETVM_ERR_REVOKED;
}

static netvm_status_t cma_status(struct nv_link *l, struct shm_peer *pe, int err)
{
    if (err == ESRCH || l->ops->peer_dead(l, pe->lp))
        return NETVM_ERR_PEER;
    if (err == EFAULT)
        return NETVM_ERR_FAULT;
    nv_error("shm link: process_vm_* to peer %d failed: %s", pe->lp->id, strerror(err));
    return NETVM_ERR_SYS;
}

/* process_vm_writev/readv moves at most about 2 GiB per call and stops early
 * at an unmapped page: loop until done or an error says why. */
static netvm_status_t cma_copy(struct nv_link *l, struct shm_peer *pe, uint64_t raddr,
                               void *lbuf, size_t len, int write)
{
    char *p = lbuf;
    while (len) {
        struct iovec lv = { p, len }, rv = { (void *)(uintptr_t)raddr, len };
        ssize_t n = write ? process_vm_writev(pe->pid, &lv, 1, &rv, 1, 0)
                          : process_vm_readv(pe->pid, &lv, 1, &rv, 1, 0);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return cma_status(l, pe, errno);
        }
        if (n == 0)
            return NETVM_ERR_FAULT;
        p += n;
        raddr += (uint64_t)n;
        len -= (size_t)n;
    }
    return NETVM_OK;
}

/* The NIC's part after an access whose data is visible at the target:
 * the target's tripwires, then the notification asked for. */
static void after_access(struct nv_link *l, struct shm_import *im, uint64_t addr, size_t len,
                         unsigned access, const struct nv_note *note, unsigned note_kind)
{
    struct nv_ep *ep = &im->peer->ep;
    if (!ep->h)
        return;
    int me = (int)im->peer->lp->remote_id;   /* this process, as the target knows it */
    nv_ep_access(ep, me, addr, len, access);
    if (note && (note->flags & note_kind)) {
        struct nv_ep_rec r = { .type = note_kind == NV_NOTE_RESPONDER ? NETVM_EV_RESPONDER : NETVM_EV_COMPLETER,
                               .access = (uint16_t)access, .rank = me, .value = note->tag,
                               .addr = addr, .len = len };
        nv_ep_post(ep, &r);
    }
}

/* Every access completes before it returns: local and remote completion
 * are the same moment on this link. */
static netvm_status_t shm_access(struct nv_link *l, struct nv_rdesc *d, uint64_t off, void *buf,
                                 size_t len, int write, const struct nv_note *note)
{
    struct shm_link *s = shm_of(l);
    struct shm_import *im = d->link_priv;
    if (atomic_load_explicit(&im->peer->dead, memory_order_relaxed))
        return NETVM_ERR_PEER;
    if (im->peer->ep.h)
        nv_ep_prepare(&im->peer->ep);
    struct op_mark seq = access_begin(s);
    netvm_status_t st = still_valid(l, im);
    if (st == NETVM_OK) {
        if (d->mapped && len == 8)
            /* the common word: one load or store, no call */
            write ? memcpy(d->mapped + off, buf, 8) : memcpy(buf, d->mapped + off, 8);
        else if (d->mapped && write)
            memcpy(d->mapped + off, buf, len);
        else if (d->mapped)
            memcpy(buf, d->mapped + off, len);
        else
            st = cma_copy(l, im->peer, d->addr + off, buf, len, write);
    }
    access_end(seq);
    if (st == NETVM_OK)
        after_access(l, im, d->addr + off, len, write ? NETVM_TRIP_WRITE : NETVM_TRIP_READ, note,
                     write ? NV_NOTE_COMPLETER : NV_NOTE_RESPONDER);
    return st;
}

netvm_status_t shm_put(struct nv_link *l, struct nv_rdesc *d, uint64_t off, const void *src, size_t len,
                       int remote, void *token, uint32_t id, const struct nv_note *note)
{
    return shm_access(l, d, off, (void *)src, len, 1, note);
}

netvm_status_t shm_get(struct nv_link *l, struct nv_rdesc *d, uint64_t off, void *dst, size_t len,
                       void *token, uint32_t id, const struct nv_note *note)
{
    return shm_access(l, d, off, dst, len, 0, note);
}

/* The receiver's copy of a rendezvous payload (shm_msg.c). */
netvm_status_t shm_cma_read(struct nv_link *l, struct shm_peer *pe, uint64_t raddr, void *lbuf, size_t len)
{
    return cma_copy(l, pe, raddr, lbuf, len, 0);
}

netvm_status_t shm_atomic(struct nv_link *l, struct nv_rdesc *d, uint64_t off, netvm_atomic_op_t op,
                          uint64_t operand, uint64_t compare, uint64_t *result, const struct nv_note *note)
{
    struct shm_link *s = shm_of(l);
    struct shm_import *im = d->link_priv;
    if (!d->mapped)
        return NETVM_ERR_UNSUPPORTED;
    if (atomic_load_explicit(&im->peer->dead, memory_order_relaxed))
        return NETVM_ERR_PEER;
    struct op_mark seq = access_begin(s);
    netvm_status_t st = still_valid(l, im);
    if (st == NETVM_OK)
        *result = nv_atomic_apply((uint64_t *)(d->mapped + off), op, operand, compare);
    access_end(seq);
    if (st == NETVM_OK)
        after_access(l, im, d->addr + off, 8, NETVM_TRIP_RW, note, NV_NOTE_COMPLETER);
    return st;
}
