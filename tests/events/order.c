/* Ordering stress: no event, notification or signal is ever observable
 * before the data it reports.
 *
 *   order MODE MSGS     (MODE: trip | completer | signal | notify)
 *
 * Rank 0 reads; every other rank writes MSGS messages of 8..4096 bytes into
 * its own window of slots in rank 0 (half in memory from netvm_alloc_shared,
 * reached by loads and stores when mapped; half in private exported memory,
 * reached with process_vm_writev or the tcp link). Each message is a
 * pattern derived from (writer, seq); its slot, offset within the slot and
 * length are derived from it too, so the reader can regenerate it. Each
 * delivery is reported by
 *   trip:      a persistent WRITE tripwire on the slot (the event's addr/len)
 *   completer: netvm_put_notify(NETVM_F_NOTIFY_COMPLETER), tag = (writer, seq)
 *   signal:    netvm_put_signal[_nb]: even messages add 1 to one counter all
 *              writers share, odd ones set the writer's own word to seq+1;
 *              the reader sleeps in netvm_wait_until on the counter
 *   notify:    netvm_put_nb, then netvm_notify(0, (writer, seq))
 * and whenever the reader sees one it compares the whole payload with the
 * pattern. The reader acknowledges (netvm_put_imm into the writer) so no
 * slot is overwritten before it was checked. */
#include "evt.h"

enum { M_TRIP, M_COMPLETER, M_SIGNAL, M_NOTIFY };
static const char *mode_names[] = { "trip", "completer", "signal", "notify" };

#define W         16            /* slots per writer in each buffer */
#define WIN       (2 * W)       /* a writer's window over both buffers */
#define SLOT      4160          /* not a page multiple: payloads straddle pages */
#define MAXLEN    4096
#define ACK_EVERY 8
#define SIGAREA   4096          /* signal words at the start of the shared buffer */
#define SEQ_MASK  ((1ull << 48) - 1)

typedef struct { uint64_t h; size_t len, inoff; } msg_t;

static msg_t msg_of(int w, uint64_t seq)
{
    uint64_t h = mix64(((uint64_t)w << 48) ^ seq ^ 0x0bde4ull);
    msg_t m;
    m.h = h;
    unsigned r = (unsigned)(h >> 8) & 0xffff;
    m.len = (h & 1) ? 8 + r % 121 : 8 + r % (MAXLEN - 7);
    m.inoff = (size_t)((h >> 32) % (SLOT - MAXLEN + 1));
    return m;
}

static int nwriters;
static uint8_t *shbuf, *pvbuf;   /* reader's buffers */

/* Segment offset of slot s (0..WIN-1) of writer w; shared when s < W. */
static size_t slot_off(int w, int s)
{
    if (s < W)
        return SIGAREA + ((size_t)(w - 1) * W + (size_t)s) * SLOT;
    return ((size_t)(w - 1) * W + (size_t)(s - W)) * SLOT;
}
static uint8_t *slot_addr(int w, int s) { return (s < W ? shbuf : pvbuf) + slot_off(w, s); }

typedef struct {
    uint64_t next_seq[WIN];   /* the message slot s holds next */
    uint8_t  done[WIN];
    uint64_t prefix, acked;   /* verified in order; last acknowledged */
    netvm_rseg_t *ack;
} wstate_t;

static netvm_ctx_t *ctx;
static int mode;
static uint64_t msgs;
static wstate_t *ws;
static uint8_t scratch[2 * (MAXLEN + 8)];
static uint64_t verified;

static void ack_if_due(int w)
{
    wstate_t *s = &ws[w];
    if (s->prefix - s->acked >= ACK_EVERY || (s->prefix == msgs && s->acked != msgs)) {
        CHECK_OK(netvm_put_imm(ctx, s->ack, 0, s->prefix, 0));
        s->acked = s->prefix;
    }
}

/* The message seq of writer w was reported: its payload must be complete. */
static void verify(int w, uint64_t seq, const char *how)
{
    wstate_t *s = &ws[w];
    int slot = (int)(seq % WIN);
    if (seq >= msgs || seq != s->next_seq[slot])
        FAILF("mode %s: %s reports writer %d seq %" PRIu64 " but slot %d holds seq %" PRIu64
              " next (duplicate, or out of the window)", mode_names[mode], how, w, seq, slot, s->next_seq[slot]);
    msg_t m = msg_of(w, seq);
    const uint8_t *p = slot_addr(w, slot) + m.inoff;
    long bad = pattern_mismatch(p, m.len, m.h, scratch);
    if (bad >= 0)
        FAILF("mode %s: writer %d seq %" PRIu64 " (%zu bytes at slot %d, %s memory): byte %ld is not the "
              "payload's when its %s was seen -- the report preceded its data",
              mode_names[mode], w, seq, m.len, slot, slot < W ? "shared" : "private", bad, how);
    s->next_seq[slot] += WIN;
    s->done[slot] = 1;
    while (s->prefix < msgs && s->done[s->prefix % WIN]) {
        s->done[s->prefix % WIN] = 0;
        s->prefix++;
    }
    verified++;
    ack_if_due(w);
}

/* Does the payload of (w, seq) already sit complete in its slot? */
static int looks_complete(int w, uint64_t seq)
{
    msg_t m = msg_of(w, seq);
    return pattern_mismatch(slot_addr(w, (int)(seq % WIN)) + m.inoff, m.len, m.h, scratch) < 0;
}

static void reader_events(void)
{
    evbuf_t *eb = calloc(1, sizeof *eb);
    netvm_tripwire_t **tws = NULL;
    if (mode == M_TRIP) {
        tws = calloc((size_t)nwriters * WIN, sizeof *tws);
        for (int w = 1; w <= nwriters; w++)
            for (int s = 0; s < WIN; s++)
                CHECK_OK(netvm_tripwire_arm(ctx, slot_addr(w, s), SLOT, NETVM_TRIP_WRITE,
                                            ((uint64_t)w << 8) | (uint64_t)s, NULL,
                                            &tws[(w - 1) * WIN + s]));
    }
    CHECK_OK(netvm_barrier(ctx));   /* armed before any write */
    uint64_t total = msgs * (uint64_t)nwriters;
    while (verified < total) {
        netvm_event_t e;
        netvm_status_t st = evbuf_next(ctx, eb, &e, 10000);
        if (st == NETVM_ERR_TIMEOUT)
            FAILF("mode %s: no event for 10 s with %" PRIu64 " of %" PRIu64 " messages verified",
                  mode_names[mode], verified, total);
        CHECK_OK(st);
        int w = e.rank;
        if (w < 1 || w > nwriters) {
            ev_print("unexpected", &e);
            FAILF("event from rank %d", w);
        }
        if (mode == M_TRIP) {
            if (e.type != NETVM_EV_TRIPWIRE || e.access != NETVM_TRIP_WRITE) {
                ev_print("unexpected", &e);
                FAILF("wanted a write tripwire event");
            }
            int vw = (int)(e.value >> 8), s = (int)(e.value & 0xff);
            CHECK(vw == w && s >= 0 && s < WIN);
            CHECK(e.id == netvm_tripwire_id(tws[(w - 1) * WIN + s]));
            uint64_t seq = ws[w].next_seq[s];
            msg_t m = msg_of(w, seq);
            if (e.addr != (uint64_t)(uintptr_t)(slot_addr(w, s) + m.inoff) || e.len != m.len) {
                ev_print("unexpected", &e);
                FAILF("tripwire event for writer %d slot %d: wanted addr %p len %zu (seq %" PRIu64 ")",
                      w, s, (void *)(slot_addr(w, s) + m.inoff), m.len, seq);
            }
            verify(w, seq, "tripwire event");
        } else {
            int want = mode == M_COMPLETER ? NETVM_EV_COMPLETER : NETVM_EV_NOTIFY;
            if (e.type != want || (int)(e.value >> 48) != w) {
                ev_print("unexpected", &e);
                FAILF("wanted a %s event carrying the writer's tag", ev_type_name((unsigned)want));
            }
            uint64_t seq = e.value & SEQ_MASK;
            if (mode == M_COMPLETER) {
                msg_t m = msg_of(w, seq);
                int s = (int)(seq % WIN);
                uint64_t abs = (uint64_t)(uintptr_t)(slot_addr(w, s) + m.inoff);
                uint64_t off = slot_off(w, s) + m.inoff;
                if (e.len != m.len || (e.addr != abs && e.addr != off)) {
                    ev_print("unexpected", &e);
                    FAILF("completer event of seq %" PRIu64 ": wanted len %zu at %p (offset %" PRIu64 ")",
                          seq, m.len, (void *)(uintptr_t)abs, off);
                }
            }
            verify(w, seq, mode == M_COMPLETER ? "completer notification" : "notification");
        }
    }
    /* nothing more may come: no duplicates */
    netvm_event_t e;
    netvm_status_t st = evbuf_next(ctx, eb, &e, 200);
    if (st == NETVM_OK) {
        ev_print("extra", &e);
        FAILF("an event after every message was reported once");
    }
    CHECK_ST(st, NETVM_ERR_TIMEOUT);
    if (tws)
        for (int i = 0; i < nwriters * WIN; i++)
            CHECK_OK(netvm_tripwire_disarm(tws[i]));
    free(tws);
    free(eb);
}

static void reader_signals(void)
{
    uint64_t *counter = (uint64_t *)shbuf;
    CHECK_OK(netvm_barrier(ctx));
    uint64_t total = msgs * (uint64_t)nwriters, lastc = 0, waits = 0, timeouts = 0;
    double idle_since = now_s();
    while (verified < total) {
        uint64_t c = 0;
        netvm_status_t st = netvm_wait_until(ctx, counter, NETVM_CMP_GT, lastc, 0, 2, &c);
        waits++;
        if (st == NETVM_ERR_TIMEOUT) {
            timeouts++;
            c = __atomic_load_n(counter, __ATOMIC_ACQUIRE);
        } else {
            CHECK_OK(st);
            if (c <= lastc)
                FAILF("netvm_wait_until(GT %" PRIu64 ") returned with the word at %" PRIu64, lastc, c);
        }
        lastc = c;
        uint64_t before = verified;
        /* odd messages: the writer's own word says seq+1 of its latest; every
         * message before it is complete (ordered puts, signal after data) */
        for (int w = 1; w <= nwriters; w++) {
            uint64_t v = __atomic_load_n((uint64_t *)(shbuf + 64 * (size_t)w), __ATOMIC_ACQUIRE);
            if (v > msgs)
                FAILF("writer %d's signal word is %" PRIu64, w, v);
            while (ws[w].prefix < v)
                verify(w, ws[w].prefix, "set signal");
        }
        /* even messages: the counter says how many are complete in all; they
         * are complete in order per writer, so count the complete prefixes */
        uint64_t even = 0;
        for (int w = 1; w <= nwriters; w++) {
            while (ws[w].prefix < msgs && looks_complete(w, ws[w].prefix))
                verify(w, ws[w].prefix, "scan");
            even += (ws[w].prefix + 1) / 2;
        }
        if (even < c)
            FAILF("the add-signal counter says %" PRIu64 " even messages arrived, but only %" PRIu64
                  " are complete -- a signal preceded its data", c, even);
        if (verified != before)
            idle_since = now_s();
        else if (now_s() - idle_since > 10)
            FAILF("no progress for 10 s: %" PRIu64 " of %" PRIu64 " verified", verified, total);
    }
    /* Every payload was seen, but a signal follows its data and may still be
     * on its way (on the CMA path the target's progress engine applies it):
     * wait for the last ones, then no more may come. */
    uint64_t want = (msgs / 2) * (uint64_t)nwriters, c = 0;   /* even seqs of 0..msgs-1, msgs even */
    CHECK_OK(netvm_wait_until(ctx, counter, NETVM_CMP_GE, want, 0, 10000, &c));
    for (int w = 1; w <= nwriters; w++)
        CHECK_OK(netvm_wait_until(ctx, (uint64_t *)(shbuf + 64 * (size_t)w), NETVM_CMP_EQ, msgs, 0, 10000, NULL));
    c = __atomic_load_n(counter, __ATOMIC_ACQUIRE);
    if (c != want)
        FAILF("the add-signal counter ended at %" PRIu64 ", %" PRIu64 " adds were made", c, want);
    printf("signal reader: %" PRIu64 " waits, %" PRIu64 " timed out\n", waits, timeouts);
}

static netvm_status_t put_notify_retry(netvm_rseg_t *r, size_t off, const void *src, size_t len,
                                       unsigned flags, uint64_t tag)
{
    double t0 = now_s();
    for (;;) {
        netvm_status_t st = netvm_put_notify(ctx, r, off, src, len, flags, tag);
        if (st != NETVM_ERR_AGAIN)
            return st;
        CHECK_OK(netvm_flush(ctx, 0));
        CHECK(now_s() - t0 < 10);
    }
}

static void writer(int rank)
{
    static uint64_t ackword __attribute__((aligned(64)));
    netvm_seg_t *aseg;
    CHECK_OK(netvm_export(ctx, &ackword, sizeof ackword, NETVM_RW, "ack", &aseg));
    netvm_rseg_t *rsh, *rpv;
    CHECK_OK(netvm_barrier(ctx));   /* exports done */
    CHECK_OK(netvm_import(ctx, 0, "shared", &rsh));
    CHECK_OK(netvm_import(ctx, 0, "private", &rpv));
    CHECK_OK(netvm_barrier(ctx));   /* reader ready */
    uint8_t *src = malloc((size_t)WIN * MAXLEN);
    netvm_req_t *reqs[WIN] = { 0 };
    uint64_t acked = 0;
    for (uint64_t seq = 0; seq < msgs; seq++) {
        int s = (int)(seq % WIN);
        if (seq >= acked + WIN)
            acked = spin_until_ge(ctx, &ackword, seq - WIN + 1, 20, "the reader's acknowledgement");
        if (reqs[s])
            CHECK_OK(netvm_wait(&reqs[s]));
        msg_t m = msg_of(rank, seq);
        uint8_t *p = src + (size_t)s * MAXLEN;
        fill_pattern(p, m.len, m.h);
        netvm_rseg_t *r = s < W ? rsh : rpv;
        size_t off = slot_off(rank, s) + m.inoff;
        uint64_t tag = ((uint64_t)rank << 48) | seq;
        switch (mode) {
        case M_TRIP:
            if (seq % 3 == 0)
                CHECK_OK(netvm_put(ctx, r, off, p, m.len, 0));
            else if (seq % 3 == 1)
                CHECK_OK(netvm_put_nb(ctx, r, off, p, m.len, 0, &reqs[s]));
            else
                CHECK_OK(netvm_put(ctx, r, off, p, m.len, NETVM_F_UNORDERED));
            break;
        case M_COMPLETER:
            CHECK_OK(put_notify_retry(r, off, p, m.len,
                                      NETVM_F_NOTIFY_COMPLETER | (seq % 4 == 3 ? NETVM_F_UNORDERED : 0), tag));
            break;
        case M_SIGNAL: {
            int add = seq % 2 == 0;
            size_t sig_off = add ? 0 : 64 * (size_t)rank;
            uint64_t val = add ? 1 : seq + 1;
            netvm_signal_op_t op = add ? NETVM_SIGNAL_ADD : NETVM_SIGNAL_SET;
            if (seq % 4 < 2)
                CHECK_OK(netvm_put_signal(ctx, r, off, p, m.len, rsh, sig_off, val, op, 0));
            else
                CHECK_OK(netvm_put_signal_nb(ctx, r, off, p, m.len, rsh, sig_off, val, op, 0));
            break;
        }
        case M_NOTIFY:
            CHECK_OK(netvm_put_nb(ctx, r, off, p, m.len, 0, &reqs[s]));
            CHECK_OK(netvm_notify(ctx, 0, tag));
            break;
        }
    }
    for (int s = 0; s < WIN; s++)
        if (reqs[s])
            CHECK_OK(netvm_wait(&reqs[s]));
    CHECK_OK(netvm_flush(ctx, 0));
    spin_until_ge(ctx, &ackword, msgs, 20, "the final acknowledgement");
    free(src);
}

int main(int argc, char **argv)
{
    CHECK(argc >= 3);
    for (mode = 0; mode < 4 && strcmp(argv[1], mode_names[mode]) != 0; mode++)
        ;
    CHECK(mode < 4);
    msgs = strtoull(argv[2], NULL, 0) & ~1ull;
    CHECK_OK(netvm_init(&ctx, NULL));
    int rank = check_rank = netvm_rank(ctx), size = netvm_size(ctx);
    CHECK(size >= 2 && size < 64);
    nwriters = size - 1;
    double t0 = now_s();
    if (rank == 0) {
        size_t shlen = SIGAREA + (size_t)nwriters * W * SLOT, pvlen = (size_t)nwriters * W * SLOT;
        netvm_seg_t *s1, *s2;
        void *p;
        CHECK_OK(netvm_alloc_shared(ctx, shlen, NETVM_RWA, "shared", &p, &s1));
        shbuf = p;
        pvbuf = malloc(pvlen);
        memset(pvbuf, 0, pvlen);
        CHECK_OK(netvm_export(ctx, pvbuf, pvlen, NETVM_RW, "private", &s2));
        ws = calloc((size_t)size, sizeof *ws);
        CHECK_OK(netvm_barrier(ctx));
        for (int w = 1; w <= nwriters; w++) {
            for (int s = 0; s < WIN; s++)
                ws[w].next_seq[s] = (uint64_t)s;
            CHECK_OK(netvm_import(ctx, w, "ack", &ws[w].ack));
        }
        if (mode == M_SIGNAL)
            reader_signals();
        else
            reader_events();
        double dt = now_s() - t0;
        printf("order %s: %" PRIu64 " messages from %d writers verified in %.2f s (%.0f/s)\n",
               mode_names[mode], verified, nwriters, dt, (double)verified / dt);
    } else {
        writer(rank);
    }
    CHECK_OK(netvm_barrier(ctx));
    CHECK_OK(netvm_finalize(ctx));
    free(pvbuf);
    free(ws);
    return 0;
}
