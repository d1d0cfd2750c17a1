/* The shm link's messages: records in the receiver's ring (a few stores and
 * no system call unless the receiver sleeps), payloads too large for the
 * ring left with the sender and copied by the receiver with
 * process_vm_readv (rendezvous: one copy, no bounce buffer), and records
 * that must not wait parked in a per-peer spill list until the ring has
 * room. */
#define _GNU_SOURCE
#include "link/shm/shm_priv.h"
#include "util/guard.h"
#include "util/log.h"
#include "util/thread.h"
#include "util/random.h"
#include "wire/endian.h"

#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void shm_ring_doorbell(struct shm_peer *pe)
{
    struct nv_shm_hdr *h = pe->hdr;
    /* the push above and these loads are ordered by the fence, pairing with
     * the consumer's store to sleeping and its re-check of the ring */
    atomic_thread_fence(memory_order_seq_cst);
    if (atomic_load_explicit(&h->sleeping, memory_order_relaxed) &&
        !atomic_load_explicit(&h->pollers, memory_order_relaxed) &&
        !atomic_exchange_explicit(&h->rung, 1, memory_order_acq_rel)) {
        uint64_t one = 1;
        ssize_t n = write(pe->doorbell, &one, sizeof one);
        (void)n;   /* EAGAIN: the counter is already nonzero, the sleeper wakes anyway */
    }
}

/* A peer's ring as our producers see it. */
static struct nv_mpsc shm_peer_ring(struct shm_peer *pe)
{
    struct nv_mpsc q = nv_shm_ring_view(pe->hdr);
    q.head_seen = &pe->head_seen;
    return q;
}

/* --- the spill list ------------------------------------------------------------- */

/* guarded: b is the application's memory, which may be gone (unmapped
 * behind its back): read it so that a fault fails the send, never the
 * process. Returns 0, -1 (no memory) or -2 (b faulted). */
static int spill(struct shm_link *s, struct shm_peer *pe, const uint8_t *a, size_t alen, const void *b,
                 size_t blen, int guarded)
{
    struct shm_spill *sp = malloc(sizeof *sp + alen + blen);
    if (!sp)
        return -1;
    sp->next = NULL;
    sp->len = alen + blen;
    memcpy(sp->data, a, alen);
    if (blen) {
        if (guarded ? nv_guarded_copy(sp->data + alen, b, blen) != 0 : (memcpy(sp->data + alen, b, blen), 0)) {
            free(sp);
            return -2;
        }
    }
    pthread_mutex_lock(&pe->spill_lock);
    if (pe->spill_tail)
        pe->spill_tail->next = sp;
    else
        pe->spill_head = sp;
    pe->spill_tail = sp;
    if (atomic_fetch_add(&pe->nspill, 1) == 0)
        atomic_fetch_add(&s->spilling, 1);
    pthread_mutex_unlock(&pe->spill_lock);
    return 0;
}

static int try_push(struct shm_link *s, struct shm_peer *pe, const struct nv_mpsc *q, const uint8_t *a,
                    size_t alen, const void *b, size_t blen, int guarded, netvm_status_t *st);

/* Move what a peer's spill list holds into its ring, in order. */
static void drain_spill(struct shm_link *s, struct shm_peer *pe)
{
    pthread_mutex_lock(&pe->spill_lock);
    struct nv_mpsc q = shm_peer_ring(pe);
    int moved = 0;
    while (pe->spill_head && !atomic_load(&pe->dead)) {
        struct shm_spill *sp = pe->spill_head;
        netvm_status_t st;
        if (try_push(s, pe, &q, sp->data, sp->len, NULL, 0, 0, &st) != 0)
            break;
        pe->spill_head = sp->next;
        if (!pe->spill_head)
            pe->spill_tail = NULL;
        free(sp);
        moved = 1;
        if (atomic_fetch_sub(&pe->nspill, 1) == 1)
            atomic_fetch_sub(&s->spilling, 1);
    }
    pthread_mutex_unlock(&pe->spill_lock);
    if (moved)
        shm_ring_doorbell(pe);
}

void shm_spill_free(struct shm_peer *pe)
{
    pthread_mutex_lock(&pe->spill_lock);
    struct shm_spill *sp = pe->spill_head;
    pe->spill_head = pe->spill_tail = NULL;
    pthread_mutex_unlock(&pe->spill_lock);
    while (sp) {
        struct shm_spill *n = sp->next;
        free(sp);
        sp = n;
    }
}

static void drain_all_spills(struct shm_link *s)
{
    if (!atomic_load_explicit(&s->spilling, memory_order_relaxed))
        return;
    pthread_mutex_lock(&s->peers_lock);
    for (struct shm_peer *pe = s->peers; pe; pe = pe->next)
        if (atomic_load(&pe->nspill))
            drain_spill(s, pe);
    pthread_mutex_unlock(&s->peers_lock);
}

/* Write a record (a, then b) into slots reserved at pos and publish it.
 * guarded: as spill's. A fault leaves the record published but void (the
 * consumer waits for every reserved record in order, so it cannot be
 * taken back). */
static netvm_status_t fill_slots(const struct nv_mpsc *q, uint64_t pos, const uint8_t *a, size_t alen,
                                 const void *b, size_t blen, int guarded)
{
    nv_mpsc_rec_write(q, pos, 0, a, alen);
    netvm_status_t st = NETVM_OK;
    if (blen && !guarded) {
        nv_mpsc_rec_write(q, pos, alen, b, blen);
    } else if (blen) {
        size_t room;
        uint8_t *d = nv_mpsc_rec_at(q, pos, alen, &room);
        size_t first = blen <= room ? blen : room;
        if (nv_guarded_copy(d, b, first) != 0 ||
            (first < blen && nv_guarded_copy(q->slots, (const uint8_t *)b + first, blen - first) != 0)) {
            uint8_t kind = SHM_REC_VOID;
            nv_mpsc_rec_write(q, pos, 0, &kind, 1);
            st = NETVM_ERR_FAULT;
        }
    }
    nv_mpsc_publish(q, pos);
    return st;
}

static size_t prefix(uint8_t *out, unsigned kind, uint32_t src);

/* NETVM_TEST_SHM_DIE_IN_PUSH=N (tests only): the process kills itself
 * after reserving the slots of its Nth message and before publishing
 * them, the window struct nv_shm_pushrec covers (tests/connect). With
 * ":swap" after N its note first loses the mark that says it won the
 * slots: what a kill right after the compare-swap leaves. */
static void test_die_in_push(struct shm_link *s, struct nv_shm_pushrec *pr, uint64_t pos)
{
    if (!s->test_die_in_push || atomic_fetch_sub(&s->test_die_in_push, 1) != 1)
        return;
    if (s->test_die_at_swap)
        atomic_store(&pr->pos, pos + 1);
    raise(SIGKILL);
}

/* One try at putting a record (a, then b) into pe's ring, noted until it
 * is published (struct nv_shm_pushrec): its target and size before the
 * slots are tried, the slot tried before each swap, the win the instant
 * after. Every push into a peer's ring goes through here: a receiver
 * judging a dead sender's note asks every live sender's (live_names).
 * 0 (published; *st: fill_slots' status), -1 full, -2 it never fits. */
static int try_push(struct shm_link *s, struct shm_peer *pe, const struct nv_mpsc *q, const uint8_t *a,
                    size_t alen, const void *b, size_t blen, int guarded, netvm_status_t *st)
{
    int ts = shm_thread_slot(s);
    int shared = ts >= NV_SHM_OP_SLOTS;
    struct nv_shm_pushrec *pr = &s->self->push[shared ? NV_SHM_OP_SLOTS : ts];
    if (shared)
        pthread_mutex_lock(&s->push_shared);
    atomic_store_explicit(&pr->target, (uint32_t)pe->pid, memory_order_relaxed);
    atomic_store_explicit(&pr->k, (uint32_t)nv_mpsc_rec_slots(q, alen + blen), memory_order_relaxed);
    uint64_t pos;
    int rc = nv_mpsc_reserve_noted(q, alen + blen, &pos, &pr->pos);
    if (rc == 0) {
        test_die_in_push(s, pr, pos);
        *st = fill_slots(q, pos, a, alen, b, blen, guarded);
        atomic_store_explicit(&pr->pos, 0, memory_order_release);
    }
    if (shared)
        pthread_mutex_unlock(&s->push_shared);
    return rc;
}

/* Does a live producer's note name slot pos of our ring? (Every peer that
 * can push to us is attached here; a peer list we cannot look at now
 * counts as yes: the claim waits.) */
static int live_names(void *arg, uint64_t pos)
{
    struct shm_link *s = arg;
    if (pthread_mutex_trylock(&s->peers_lock) != 0)
        return 1;
    int named = 0;
    for (struct shm_peer *pe = s->peers; pe && !named; pe = pe->next) {
        if (atomic_load(&pe->dead) || !pe->hdr)
            continue;
        for (int i = 0; i <= NV_SHM_OP_SLOTS && !named; i++) {
            struct nv_shm_pushrec *pr = &pe->hdr->push[i];
            uint64_t note = atomic_load_explicit(&pr->pos, memory_order_acquire);
            named = note && nv_mpsc_note_pos(note) == pos &&
                    atomic_load_explicit(&pr->target, memory_order_relaxed) == (uint32_t)s->self->pid;
        }
    }
    pthread_mutex_unlock(&s->peers_lock);
    return named;
}

/* A record a dead producer took at pos, k slots, as it will never publish
 * it: void, from that peer. */
static void finish_void(struct shm_link *s, uint64_t pos, uint32_t k, int peer)
{
    struct nv_mpsc q = nv_shm_ring_view(s->self);
    uint64_t head = atomic_load_explicit(q.head, memory_order_acquire);
    if (!k || k > (q.mask + 1) / 2 || pos + k - head > q.mask + 1)
        return;   /* no reservation a producer of ours makes */
    uint8_t rec[SHM_REC_PREFIX];
    prefix(rec, SHM_REC_VOID, (uint32_t)peer);
    nv_mpsc_finish(&q, pos, k, rec, sizeof rec);
    nv_info("shm link: peer %d died while it wrote a message to us; the message is dropped", peer);
}

void shm_settle_claims(struct shm_link *s, unsigned spins)
{
    if (pthread_mutex_trylock(&s->claims_lock) != 0)
        return;   /* another thread is at it */
    struct nv_mpsc q = nv_shm_ring_view(s->self);
    for (unsigned round = 0;; round++) {
        int waiting = 0;
        for (uint32_t i = 0; i < s->nclaims;) {
            struct shm_claim c = s->claims[i];
            enum nv_mpsc_claim r = nv_mpsc_claim_check(&q, c.pos, live_names, s);
            if (r == NV_MPSC_CLAIM_LIVE) {
                waiting = 1;
                i++;
                continue;
            }
            if (r == NV_MPSC_CLAIM_DEAD) {
                /* two threads of one dead process may both name pos, one
                 * having lost it to the other: the fewer slots is the safe
                 * guess (too many would void the records after it) */
                uint32_t k = c.k;
                for (uint32_t j = 0; j < s->nclaims; j++)
                    if (s->claims[j].pos == c.pos && s->claims[j].k != k) {
                        nv_warn("shm link: dead producers' notes disagree on the record at %llu",
                                (unsigned long long)c.pos);
                        if (s->claims[j].k < k)
                            k = s->claims[j].k;
                    }
                finish_void(s, c.pos, k, c.peer);
            }
            /* settled: drop every claim on pos */
            uint32_t w = 0;
            for (uint32_t j = 0; j < s->nclaims; j++)
                if (s->claims[j].pos != c.pos)
                    s->claims[w++] = s->claims[j];
            s->nclaims = w;
            i = 0;
        }
        if (!waiting || round >= spins)
            break;
        sched_yield();
    }
    atomic_store_explicit(&s->claims_pending, s->nclaims, memory_order_relaxed);
    pthread_mutex_unlock(&s->claims_lock);
}

static void add_claim(struct shm_link *s, uint64_t pos, uint32_t k, int peer)
{
    pthread_mutex_lock(&s->claims_lock);
    if (s->nclaims == s->capclaims) {
        uint32_t n = s->capclaims ? s->capclaims * 2 : 16;
        struct shm_claim *c = realloc(s->claims, n * sizeof *c);
        if (!c) {
            pthread_mutex_unlock(&s->claims_lock);
            nv_error("shm link: out of memory keeping a dead peer's note: its message may hold up our ring");
            return;
        }
        s->claims = c;
        s->capclaims = n;
    }
    s->claims[s->nclaims++] = (struct shm_claim){ .pos = pos, .k = k, .peer = peer };
    atomic_store_explicit(&s->claims_pending, s->nclaims, memory_order_relaxed);
    pthread_mutex_unlock(&s->claims_lock);
}

void shm_finish_dead_pushes(struct shm_link *s, struct shm_peer *pe)
{
    struct nv_mpsc q = nv_shm_ring_view(s->self);
    uint64_t head = atomic_load_explicit(q.head, memory_order_acquire);
    for (int i = 0; i <= NV_SHM_OP_SLOTS; i++) {
        struct nv_shm_pushrec *pr = &pe->hdr->push[i];
        uint64_t note = atomic_load_explicit(&pr->pos, memory_order_acquire);
        if (!note || atomic_load_explicit(&pr->target, memory_order_relaxed) != (uint32_t)s->self->pid)
            continue;
        uint64_t pos = nv_mpsc_note_pos(note);
        uint32_t k = atomic_load_explicit(&pr->k, memory_order_relaxed);
        if (!(note & NV_MPSC_NOTE_WON)) {
            add_claim(s, pos, k, pe->lp->id);   /* tried; won or lost? */
            continue;
        }
        /* taken in already, or published (taken in as it is) */
        if (pos < head || atomic_load_explicit(nv_mpsc_seq(&q, pos), memory_order_acquire) == pos + 1)
            continue;
        finish_void(s, pos, k, pe->lp->id);
    }
    /* a live producer naming a claimed slot is about to publish it or to
     * note its next try: a moment's wait settles most claims now; the
     * rest are looked at again when the ring is found empty */
    if (atomic_load_explicit(&s->claims_pending, memory_order_relaxed))
        shm_settle_claims(s, 1000);
}

/* Put a record (a, then b) into pe's ring. wait: the caller may wait for
 * room (it keeps our own ring moving meanwhile, so two processes filling
 * each other's rings never wedge); else it spills. guarded: b is the
 * application's memory (see spill). */
static netvm_status_t push(struct shm_link *s, struct shm_peer *pe, const uint8_t *a, size_t alen,
                           const void *b, size_t blen, int wait, int guarded)
{
    struct nv_mpsc q = shm_peer_ring(pe);
    if (!atomic_load_explicit(&pe->nspill, memory_order_acquire)) {
        for (unsigned spins = 0;; spins++) {
            netvm_status_t st;
            int rc = try_push(s, pe, &q, a, alen, b, blen, guarded, &st);
            if (rc == 0) {
                if (st == NETVM_OK)
                    shm_ring_doorbell(pe);
                return st;
            }
            if (rc == -2)
                return NETVM_ERR_INVAL;
            if (atomic_load(&pe->dead) || (spins % 1024 == 1023 && s->base.ops->peer_dead(&s->base, pe->lp)))
                return NETVM_ERR_PEER;
            if (!wait)
                break;
            shm_poll(&s->base, NULL);
            shm_ring_doorbell(pe);
            if (spins > 64)
                sched_yield();
        }
    } else if (wait) {
        /* records spilled before must leave first */
        drain_spill(s, pe);
        if (!atomic_load(&pe->nspill))
            return push(s, pe, a, alen, b, blen, wait, guarded);
    }
    switch (spill(s, pe, a, alen, b, blen, guarded)) {
    case 0:
        return NETVM_OK;
    case -2:
        return NETVM_ERR_FAULT;
    default:
        return NETVM_ERR_NOMEM;
    }
}

static size_t prefix(uint8_t *out, unsigned kind, uint32_t src)
{
    out[0] = (uint8_t)kind;
    out[1] = out[2] = out[3] = 0;
    nv_put32(out + 4, src);
    return SHM_REC_PREFIX;
}

/* --- rendezvous ----------------------------------------------------------------------- */

static int rndv_alloc(struct shm_link *s, struct shm_peer *pe, void *token, uint32_t id, void *copy,
                      uint64_t *cookie)
{
    pthread_mutex_lock(&s->rndv_lock);
    uint32_t i = 0;
    while (i < s->nrndv && s->rndv[i].pe)
        i++;
    if (i == s->nrndv) {
        uint32_t n = s->nrndv ? s->nrndv * 2 : 16;
        struct shm_rndv *v = realloc(s->rndv, n * sizeof *v);
        if (!v) {
            pthread_mutex_unlock(&s->rndv_lock);
            return -1;
        }
        memset(v + s->nrndv, 0, (n - s->nrndv) * sizeof *v);
        s->rndv = v;
        s->nrndv = n;
    }
    struct shm_rndv *r = &s->rndv[i];
    r->pe = pe;
    r->token = token;
    r->id = id;
    r->copy = copy;
    /* a cookie the receiver can only echo: no peer completes another's send */
    r->cookie = ++s->rndv_seq ^ ((uint64_t)(uintptr_t)r << 17) ^ ((uint64_t)getpid() << 40);
    *cookie = r->cookie;
    pthread_mutex_unlock(&s->rndv_lock);
    return (int)i;
}

static void rndv_done(struct shm_link *s, struct shm_peer *pe, uint32_t slot, uint64_t cookie, netvm_status_t st)
{
    pthread_mutex_lock(&s->rndv_lock);
    struct shm_rndv r = { 0 };
    if (slot < s->nrndv && s->rndv[slot].pe == pe && s->rndv[slot].cookie == cookie) {
        r = s->rndv[slot];
        s->rndv[slot].pe = NULL;
    }
    pthread_mutex_unlock(&s->rndv_lock);
    if (!r.pe) {
        nv_warn("shm link: a rendezvous completion from peer %d matches no send: dropped", pe->lp->id);
        return;
    }
    free(r.copy);
    if (r.token)
        s->base.up.complete(s->base.up.arg, r.token, st);
}

/* A peer that is gone will never copy what waits for it. */
void shm_rndv_fail_peer(struct shm_link *s, struct shm_peer *pe)
{
    for (;;) {
        pthread_mutex_lock(&s->rndv_lock);
        struct shm_rndv r = { 0 };
        for (uint32_t i = 0; i < s->nrndv && !r.pe; i++)
            if (s->rndv[i].pe == pe) {
                r = s->rndv[i];
                s->rndv[i].pe = NULL;
            }
        pthread_mutex_unlock(&s->rndv_lock);
        if (!r.pe)
            return;
        free(r.copy);
        if (r.token)
            s->base.up.complete(s->base.up.arg, r.token, NETVM_ERR_PEER);
    }
}

netvm_status_t shm_am_send(struct nv_link *l, struct nv_lpeer *lp, const uint8_t *hdr, size_t hlen,
                           const void *payload, size_t plen, unsigned flags, void *token, uint32_t id)
{
    struct shm_link *s = shm_of(l);
    struct shm_peer *pe = shm_peer_of(lp);
    if (!pe || atomic_load_explicit(&pe->dead, memory_order_relaxed))
        return NETVM_ERR_PEER;
    int wait = !(flags & NV_AMS_REPLY);
    uint8_t rec[SHM_REC_PREFIX + SHM_RNDV_DESC + NV_AM_HDR_MAX];
    if (plen <= s->p.eager) {
        size_t n = prefix(rec, SHM_REC_AM, lp->remote_id);
        memcpy(rec + n, hdr, hlen);
        return push(s, pe, rec, n + hlen, payload, plen, wait, 1);
    }
    /* rendezvous: the receiver copies the payload from here */
    void *copy = NULL;
    const void *from = payload;
    if (flags & NV_AMS_COPY) {
        copy = malloc(plen);
        if (!copy)
            return NETVM_ERR_NOMEM;
        memcpy(copy, payload, plen);
        from = copy;
        token = NULL;
    } else if (!token) {
        return NETVM_ERR_INVAL;
    }
    uint64_t cookie;
    int slot = rndv_alloc(s, pe, token, id, copy, &cookie);
    if (slot < 0) {
        free(copy);
        return NETVM_ERR_NOMEM;
    }
    size_t n = prefix(rec, SHM_REC_AM_RNDV, lp->remote_id);
    nv_put64(rec + n, (uint64_t)(uintptr_t)from);
    nv_put32(rec + n + 8, (uint32_t)slot);
    nv_put32(rec + n + 12, 0);
    nv_put64(rec + n + 16, cookie);
    n += SHM_RNDV_DESC;
    memcpy(rec + n, hdr, hlen);
    netvm_status_t st = push(s, pe, rec, n + hlen, NULL, 0, wait, 0);
    if (st != NETVM_OK) {
        pthread_mutex_lock(&s->rndv_lock);
        s->rndv[slot].pe = NULL;
        pthread_mutex_unlock(&s->rndv_lock);
        free(copy);
        return st;
    }
    return copy ? NETVM_OK : NV_LINK_PENDING;
}

/* --- receiving ------------------------------------------------------------------------- */

static void answer_rndv(struct shm_link *s, struct shm_peer *pe, uint32_t slot, uint64_t cookie, netvm_status_t st)
{
    uint8_t rec[SHM_REC_PREFIX + SHM_RNDV_DONE];
    size_t n = prefix(rec, SHM_REC_RNDV_DONE, pe->lp->remote_id);
    nv_put32(rec + n, slot);
    nv_put16(rec + n + 4, (uint16_t)st);
    nv_put16(rec + n + 6, 0);
    nv_put64(rec + n + 8, cookie);
    if (push(s, pe, rec, sizeof rec, NULL, 0, 0, 0) != NETVM_OK)
        nv_debug("shm link: rendezvous completion to peer %d dropped: it is gone", pe->lp->id);
}

static void take_am(struct shm_link *s, struct nv_lpeer *from, const uint8_t *body, size_t len, int rndv)
{
    struct shm_peer *pe = shm_peer_of(from);
    uint64_t addr = 0, cookie = 0;
    uint32_t slot = 0;
    if (rndv) {
        if (len < SHM_RNDV_DESC)
            goto bad;
        addr = nv_get64(body);
        slot = nv_get32(body + 8);
        cookie = nv_get64(body + 16);
        body += SHM_RNDV_DESC;
        len -= SHM_RNDV_DESC;
    }
    struct nv_am_rx rx;
    nv_am_rx_start(&rx, from);
    size_t hl = nv_am_hdr_decode(body, len, &rx.h);
    if (!hl || (rndv ? hl != len : hl + rx.h.len != len))
        goto bad;
    if (!rndv) {
        rx.payload = body + hl;
        s->base.up.am(s->base.up.arg, &rx);
        return;
    }
    rx.payload = NULL;
    s->base.up.am(s->base.up.arg, &rx);
    netvm_status_t st = NETVM_OK;
    if (rx.dst)
        st = shm_cma_read(&s->base, pe, addr, rx.dst, (size_t)rx.h.len);
    if (rx.cookie)
        s->base.up.am_end(s->base.up.arg, &rx, st);
    answer_rndv(s, pe, slot, cookie, st);
    return;
bad:
    nv_warn("shm link: malformed message from peer %d dropped", from->id);
}

static void take_record(struct shm_link *s, const uint8_t *rec, size_t len)
{
    if (len < SHM_REC_PREFIX) {
        nv_warn("shm link: a malformed record in the ring dropped");
        return;
    }
    struct nv_lpeer *from = s->base.up.peer_ref(s->base.up.arg, nv_get32(rec + 4));
    if (!from || !__atomic_load_n(&from->conn, __ATOMIC_ACQUIRE) ||
        __atomic_load_n(&from->link, __ATOMIC_RELAXED) != &s->base) {
        nv_debug("shm link: a message from an unknown or departed peer dropped");
        if (from)
            s->base.up.peer_unref(s->base.up.arg, from);
        return;
    }
    const uint8_t *body = rec + SHM_REC_PREFIX;
    size_t blen = len - SHM_REC_PREFIX;
    switch (rec[0]) {
    case SHM_REC_AM:
    case SHM_REC_AM_RNDV:
        take_am(s, from, body, blen, rec[0] == SHM_REC_AM_RNDV);
        break;
    case SHM_REC_RNDV_DONE: {
        uint16_t st = blen >= SHM_RNDV_DONE ? nv_get16(body + 4) : NETVM_STATUS_COUNT;
        if (st < NETVM_STATUS_COUNT)
            rndv_done(s, shm_peer_of(from), nv_get32(body), nv_get64(body + 8), (netvm_status_t)st);
        else
            nv_warn("shm link: a malformed rendezvous completion dropped");
        break;
    }
    case SHM_REC_VOID:
        break;   /* its sender's payload faulted; the send failed there */
    default:
        nv_warn("shm link: a record of unknown kind %u dropped", rec[0]);
        break;
    }
    s->base.up.peer_unref(s->base.up.arg, from);
}

static __thread struct shm_link *consuming_here NV_TLS_IE;   /* this thread is inside take_in(s) */

/* Records at least this long are dispatched where they lie in the ring
 * (no copy); shorter ones are copied out and their slots given back
 * before the handler runs, which measured faster for small messages (8 B
 * messages: 6.5 Mmsg/s read in place, 8.6 copied; 11 alternated pairs of
 * msg_bench), while an 8 KiB reply gains the copy it saves. */
#define SHM_IN_PLACE_MIN 2048

/* Take in what the ring holds; the caller holds s->consuming. A large
 * record is read where it lies in the ring (its slots stay taken until it
 * has been dispatched; handlers copy what they keep), unless it runs past
 * the ring's end: then, like a small one, it is copied out whole first. */
static int take_in(struct shm_link *s)
{
    struct nv_mpsc q = nv_shm_ring_view(s->self);
    int n = 0;
    struct nv_mpsc_taken t;
    struct shm_link *was = consuming_here;
    consuming_here = s;
    while (nv_mpsc_peek_bytes(&q, &t)) {
        n++;
        size_t room = 0;
        const uint8_t *rec = t.ok && t.n <= s->rxcap ? nv_mpsc_rec_at(&q, t.pos, 0, &room) : NULL;
        if (!rec) {
            nv_mpsc_release(&q, &t);
            nv_warn("shm link: a malformed record in the ring dropped");
        } else if (room >= t.n && t.n >= SHM_IN_PLACE_MIN) {
            take_record(s, rec, t.n);
            nv_mpsc_release(&q, &t);
        } else {
            nv_mpsc_rec_read(&q, t.pos, 0, s->rxbuf, t.n);
            nv_mpsc_release(&q, &t);
            take_record(s, s->rxbuf, t.n);
        }
    }
    consuming_here = was;
    atomic_flag_clear_explicit(&s->consuming, memory_order_release);
    return n;
}

int shm_poll(struct nv_link *l, struct nv_lpeer *lp)
{
    (void)lp;   /* one ring holds every peer's messages */
    struct shm_link *s = shm_of(l);
    drain_all_spills(s);
    if (!nv_shm_ring_nonempty(s->self)) {
        /* a dead producer's record may be what holds the ring up */
        if (__builtin_expect(atomic_load_explicit(&s->claims_pending, memory_order_relaxed) != 0, 0))
            shm_settle_claims(s, 0);
        return 0;   /* the common case of a poll loop: no locked instruction */
    }
    if (atomic_flag_test_and_set_explicit(&s->consuming, memory_order_acquire))
        return 0;
    return take_in(s);
}

void shm_poll_all(struct nv_link *l)
{
    struct shm_link *s = shm_of(l);
    if (consuming_here == s) {
        shm_poll(l, NULL);   /* called from a record being taken in: the rest follows anyway */
        return;
    }
    /* another thread may be taking the ring in: wait for it, then look */
    while (atomic_flag_test_and_set_explicit(&s->consuming, memory_order_acquire))
        sched_yield();
    drain_all_spills(s);
    take_in(s);
}
