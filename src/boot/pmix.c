/* Bootstrap through PMIx (pmix.h). Every collective is one fence with data
 * collection: each rank puts its contribution under a key numbered by the
 * collective, the fence spreads the puts to every rank's PMIx server, and
 * each rank then reads the others' from its server.
 *
 * The fences are non-blocking calls waited for here, so that a collective
 * can run the idle hook (a process without a progress thread must serve
 * its peers meanwhile) and keep a deadline. A dead rank shows three ways,
 * each failing the collective: the fence fails (Open MPI: "partial
 * success"), the fence completes without the rank's contribution (see
 * gather), or PMIx raises an event about it (on_event). A lost server fails
 * the fence with "unreachable". */
#ifdef NETVM_HAVE_PMIX
#include "boot/pmix.h"
#include "util/log.h"
#include "util/random.h"
#include "util/time.h"

#include <errno.h>
#include <pmix.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define SECRET_KEY "netvm.secret"

struct nv_boot_pmix {
    pmix_proc_t     me;
    int             size;
    uint32_t        seq;            /* collectives entered so far: names their keys */
    netvm_status_t  gone;           /* a collective failed so: every later one fails so too */
    int             gone_rank;      /* with this dead rank (or -1) */
    size_t          handler;        /* the event handler's id, if have_handler */
    int             have_handler;
    pthread_mutex_t lock;           /* what PMIx's thread writes, below */
    pthread_cond_t  cond;
    pmix_info_t     fence_info;     /* the running fence's: PMIx may read it until it calls back */
    int             running;        /* a fence (or the handler's registration) has not called back */
    pmix_status_t   fence_status;
    int             failed;         /* PMIx reported a dead process or a lost server */
    int             failed_rank;    /* the process, when PMIx named one of ours; else -1 */
    pmix_status_t   failed_event;
};

const char *nv_boot_pmix_library(void)
{
    /* "OpenPMIx 4.2.2rc2 (...)" and the like: the version word */
    static char v[32];
    if (!v[0]) {
        const char *s = PMIx_Get_version();
        const char *d = s ? strpbrk(s, "0123456789") : NULL;
        snprintf(v, sizeof v, "%.*s", d ? (int)strcspn(d, " ,") : 1, d ? d : "?");
    }
    return v;
}

/* --- what PMIx's thread tells us -------------------------------------- */

static void fence_done(pmix_status_t status, void *arg)
{
    struct nv_boot_pmix *p = arg;
    pthread_mutex_lock(&p->lock);
    p->fence_status = status;
    p->running = 0;
    pthread_cond_broadcast(&p->cond);
    pthread_mutex_unlock(&p->lock);
}

/* Events that mean a collective can no longer complete. */
static int fatal_event(pmix_status_t st)
{
    return st == PMIX_EVENT_PROC_TERMINATED || st == PMIX_ERR_PROC_ABORTED ||
           st == PMIX_ERR_PROC_ABORTING || st == PMIX_ERR_PROC_ABORTED_BY_SIG ||
           st == PMIX_ERR_PROC_KILLED_BY_CMD || st == PMIX_ERR_EXIT_NONZERO_TERM ||
           st == PMIX_ERR_LOST_CONNECTION || st == PMIX_ERR_UNREACH || st == PMIX_EVENT_JOB_END;
}

static void on_event(size_t id, pmix_status_t status, const pmix_proc_t *source, pmix_info_t info[],
                     size_t ninfo, pmix_info_t *results, size_t nresults,
                     pmix_event_notification_cbfunc_fn_t cbfunc, void *cbdata)
{
    struct nv_boot_pmix *p = NULL;
    for (size_t i = 0; i < ninfo; i++)
        if (PMIX_CHECK_KEY(&info[i], PMIX_EVENT_RETURN_OBJECT))
            p = info[i].value.data.ptr;
    if (p && fatal_event(status)) {
        /* the process the event is about: named as affected, else its source */
        const pmix_proc_t *who = source;
        for (size_t i = 0; i < ninfo; i++)
            if (PMIX_CHECK_KEY(&info[i], PMIX_EVENT_AFFECTED_PROC) && info[i].value.type == PMIX_PROC)
                who = info[i].value.data.proc;
        pthread_mutex_lock(&p->lock);
        if (!p->failed) {
            p->failed = 1;
            p->failed_event = status;
            p->failed_rank = who && PMIX_CHECK_NSPACE(who->nspace, p->me.nspace) &&
                             who->rank < (pmix_rank_t)p->size && who->rank != p->me.rank
                                 ? (int)who->rank : -1;
        }
        pthread_cond_broadcast(&p->cond);
        pthread_mutex_unlock(&p->lock);
    }
    /* let the other handlers (Open MPI's own, if MPI is in this process) see it too */
    if (cbfunc)
        cbfunc(PMIX_EVENT_NO_ACTION_TAKEN, NULL, 0, NULL, NULL, cbdata);
}

static void handler_registered(pmix_status_t status, size_t id, void *arg)
{
    struct nv_boot_pmix *p = arg;
    pthread_mutex_lock(&p->lock);
    if (status == PMIX_SUCCESS) {
        p->handler = id;
        p->have_handler = 1;
    }
    p->fence_status = status;
    p->running = 0;
    pthread_cond_broadcast(&p->cond);
    pthread_mutex_unlock(&p->lock);
}

/* --- waiting ------------------------------------------------------------ */

/* A collective failed: this and every later one return st (the fences of
 * the ranks are out of step from here on, and the job is over anyway). */
static netvm_status_t give_up(struct nv_boot_pmix *p, netvm_status_t st, int rank, int *dead_rank)
{
    p->gone = st;
    p->gone_rank = rank;
    *dead_rank = rank;
    return st;
}

/* Wait until the fence's callback ran or an event says it cannot complete
 * or the deadline passes. */
static netvm_status_t wait_fence(struct nv_boot_pmix *p, const struct nv_boot_pmix_wait *w,
                                 const char *what, int *dead_rank)
{
    uint64_t deadline = w->timeout_ms >= 0 ? nv_now_ns() + (uint64_t)w->timeout_ms * 1000000ull : 0;
    int timed_out = 0;
    pthread_mutex_lock(&p->lock);
    while (p->running && !p->failed) {
        if (deadline && nv_now_ns() >= deadline) {
            timed_out = 1;
            break;
        }
        if (w->idle) {
            pthread_mutex_unlock(&p->lock);
            w->idle(w->idle_arg);
            pthread_mutex_lock(&p->lock);
            if (!p->running || p->failed)
                break;
        }
        /* a bounded sleep even without idle hook or deadline: the condvar
         * runs on CLOCK_REALTIME, which may jump */
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += w->idle ? 1000000L : 100000000L;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&p->cond, &p->lock, &ts);
    }
    int running = p->running, rank = p->failed_rank;
    pmix_status_t fst = p->fence_status, event = p->failed_event;
    pthread_mutex_unlock(&p->lock);

    if (!running && fst == PMIX_SUCCESS)
        return NETVM_OK;
    if (timed_out) {
        nv_error("bootstrap: PMIx %s timed out after %d ms", what, w->timeout_ms);
        return give_up(p, NETVM_ERR_TIMEOUT, -1, dead_rank);
    }
    if (running) {      /* an event ended the wait */
        if (rank >= 0) {
            nv_error("bootstrap: PMIx reports that rank %d ended (%s) during %s", rank,
                     PMIx_Error_string(event), what);
            return give_up(p, NETVM_ERR_PEER, rank, dead_rank);
        }
        nv_error("bootstrap: PMIx reports %s during %s: the job cannot go on", PMIx_Error_string(event), what);
        return give_up(p, event == PMIX_ERR_LOST_CONNECTION || event == PMIX_ERR_UNREACH ? NETVM_ERR_BOOT
                                                                                          : NETVM_ERR_PEER,
                       -1, dead_rank);
    }
    /* Open MPI's mpirun ends the fence of a job one of whose processes
     * died with "partial success", naming nobody */
    if (fst == PMIX_ERR_PARTIAL_SUCCESS || fst == PMIX_ERR_PROC_ABORTED) {
        nv_error("bootstrap: a process of the job ended before entering %s (PMIx fence: %s)", what,
                 PMIx_Error_string(fst));
        return give_up(p, NETVM_ERR_PEER, -1, dead_rank);
    }
    if (fst == PMIX_ERR_UNREACH || fst == PMIX_ERR_LOST_CONNECTION)
        nv_error("bootstrap: the PMIx server (mpirun's or srun's) is gone during %s (%s)", what,
                 PMIx_Error_string(fst));
    else
        nv_error("bootstrap: PMIx fence (%s) failed: %s", what, PMIx_Error_string(fst));
    return give_up(p, fst == PMIX_ERR_TIMEOUT ? NETVM_ERR_TIMEOUT
                      : fst == PMIX_ERR_LOST_CONNECTION || fst == PMIX_ERR_UNREACH ? NETVM_ERR_BOOT
                                                                                  : NETVM_ERR_PEER,
                   -1, dead_rank);
}

/* One fence over the whole job; collect: with the data put so far. */
static netvm_status_t fence(struct nv_boot_pmix *p, const struct nv_boot_pmix_wait *w, const char *what,
                            bool collect, int *dead_rank)
{
    *dead_rank = -1;
    if (p->gone != NETVM_OK) {      /* reported when it happened */
        *dead_rank = p->gone_rank;
        return p->gone;
    }
    pthread_mutex_lock(&p->lock);
    p->running = 1;
    p->fence_status = PMIX_SUCCESS;
    pthread_mutex_unlock(&p->lock);
    /* fence_info lives in p: PMIx may read it until the fence calls back */
    PMIX_INFO_LOAD(&p->fence_info, PMIX_COLLECT_DATA, &collect, PMIX_BOOL);
    pmix_status_t rc = PMIx_Fence_nb(NULL, 0, &p->fence_info, 1, fence_done, p);
    if (rc != PMIX_SUCCESS) {
        pthread_mutex_lock(&p->lock);
        p->running = 0;
        pthread_mutex_unlock(&p->lock);
        nv_error("bootstrap: PMIx_Fence_nb (%s): %s", what, PMIx_Error_string(rc));
        return give_up(p, NETVM_ERR_BOOT, -1, dead_rank);
    }
    return wait_fence(p, w, what, dead_rank);
}

/* --- put and get -------------------------------------------------------- */

static netvm_status_t put_bytes(const char *key, const void *data, size_t len)
{
    pmix_value_t v;
    PMIX_VALUE_CONSTRUCT(&v);
    v.type = PMIX_BYTE_OBJECT;
    v.data.bo.bytes = (char *)data;
    v.data.bo.size = len;
    /* PMIx_Put copies the value */
    pmix_status_t rc = PMIx_Put(PMIX_GLOBAL, key, &v);
    if (rc == PMIX_SUCCESS)
        rc = PMIx_Commit();
    if (rc != PMIX_SUCCESS) {
        nv_error("bootstrap: PMIx_Put/Commit of %s: %s", key, PMIx_Error_string(rc));
        return NETVM_ERR_BOOT;
    }
    return NETVM_OK;
}

/* rank's value of key, exactly len bytes, into out. After a fence that
 * collected data everything is here already: look only locally, and a key
 * that is missing (NETVM_ERR_NOTFOUND, not logged) is a rank that never put
 * it. */
static netvm_status_t get_bytes(struct nv_boot_pmix *p, int rank, const char *key, void *out, size_t len)
{
    pmix_proc_t who;
    PMIX_LOAD_PROCID(&who, p->me.nspace, (pmix_rank_t)rank);
    pmix_info_t local;
    bool yes = true;
    PMIX_INFO_LOAD(&local, PMIX_OPTIONAL, &yes, PMIX_BOOL);
    pmix_value_t *v = NULL;
    pmix_status_t rc = PMIx_Get(&who, key, &local, 1, &v);
    PMIX_INFO_DESTRUCT(&local);
    netvm_status_t st = NETVM_OK;
    if (rc == PMIX_ERR_NOT_FOUND) {
        st = NETVM_ERR_NOTFOUND;
    } else if (rc != PMIX_SUCCESS || !v) {
        nv_error("bootstrap: PMIx_Get of rank %d's %s: %s", rank, key, PMIx_Error_string(rc));
        st = NETVM_ERR_BOOT;
    } else if (v->type != PMIX_BYTE_OBJECT || v->data.bo.size != len) {
        nv_error("bootstrap: rank %d's %s holds %zu bytes of PMIx type %d, expected %zu bytes", rank, key,
                 v->type == PMIX_BYTE_OBJECT ? v->data.bo.size : 0, (int)v->type, len);
        st = NETVM_ERR_BOOT;
    } else if (len) {
        memcpy(out, v->data.bo.bytes, len);
    }
    if (v) {
        if (v->type == PMIX_BYTE_OBJECT && v->data.bo.bytes)
            explicit_bzero(v->data.bo.bytes, v->data.bo.size);   /* it may be the secret */
        PMIX_VALUE_RELEASE(v);
    }
    return st;
}

/* The job size: PMIX_JOB_SIZE of our namespace. */
static netvm_status_t job_size(struct nv_boot_pmix *p)
{
    pmix_proc_t job;
    PMIX_LOAD_PROCID(&job, p->me.nspace, PMIX_RANK_WILDCARD);
    pmix_value_t *v = NULL;
    pmix_status_t rc = PMIx_Get(&job, PMIX_JOB_SIZE, NULL, 0, &v);
    if (rc != PMIX_SUCCESS || !v || v->type != PMIX_UINT32) {
        nv_error("bootstrap: PMIx does not give the job size: %s", PMIx_Error_string(rc));
        if (v)
            PMIX_VALUE_RELEASE(v);
        return NETVM_ERR_BOOT;
    }
    uint32_t n = v->data.uint32;
    PMIX_VALUE_RELEASE(v);
    if (n < 1 || n > NV_BOOT_MAX_RANKS || p->me.rank >= n) {
        nv_error("bootstrap: PMIx says rank %u of %u (at most %d ranks)", p->me.rank, n, NV_BOOT_MAX_RANKS);
        return NETVM_ERR_BOOT;
    }
    p->size = (int)n;
    return NETVM_OK;
}

/* --- the interface ------------------------------------------------------ */

netvm_status_t nv_boot_pmix_open(struct nv_boot_pmix **out, const struct nv_boot_pmix_wait *w,
                                 int *rank, int *size, char job_id[NV_BOOT_JOB_ID_MAX + 1],
                                 uint8_t secret[NV_BOOT_SECRET_LEN])
{
    *out = NULL;
    struct nv_boot_pmix *p = calloc(1, sizeof *p);
    if (!p)
        return NETVM_ERR_NOMEM;
    pthread_mutex_init(&p->lock, NULL);
    pthread_cond_init(&p->cond, NULL);
    p->failed_rank = -1;
    pmix_status_t rc = PMIx_Init(&p->me, NULL, 0);
    if (rc != PMIX_SUCCESS) {
        nv_error("bootstrap: PMIx_Init: %s (PMIX_RANK is set, but its PMIx server cannot be reached)",
                 PMIx_Error_string(rc));
        pthread_cond_destroy(&p->cond);
        pthread_mutex_destroy(&p->lock);
        free(p);
        return NETVM_ERR_BOOT;
    }
    netvm_status_t st = job_size(p);
    if (st == NETVM_OK) {
        /* every event but the ones PMIx keeps for itself: on_event picks
         * the fatal ones; p comes back with each */
        pmix_info_t info;
        PMIX_INFO_LOAD(&info, PMIX_EVENT_RETURN_OBJECT, p, PMIX_POINTER);
        pthread_mutex_lock(&p->lock);
        p->running = 1;
        pthread_mutex_unlock(&p->lock);
        rc = PMIx_Register_event_handler(NULL, 0, &info, 1, on_event, handler_registered, p);
        if (rc != PMIX_SUCCESS) {
            pthread_mutex_lock(&p->lock);
            p->running = 0;
            pthread_mutex_unlock(&p->lock);
        } else {
            pthread_mutex_lock(&p->lock);
            while (p->running)
                pthread_cond_wait(&p->cond, &p->lock);
            rc = p->fence_status;
            pthread_mutex_unlock(&p->lock);
        }
        if (rc != PMIX_SUCCESS)     /* collectives still end when the launcher kills the job */
            nv_warn("bootstrap: no PMIx event handler (%s): a dead rank is noticed only when the "
                    "launcher ends the job", PMIx_Error_string(rc));
    }
    /* rank 0 draws the secret; the first fence carries it to everyone */
    uint8_t mine[NV_BOOT_SECRET_LEN];
    if (st == NETVM_OK && p->me.rank == 0) {
        if (nv_random_bytes(mine, sizeof mine) != 0) {
            nv_error("bootstrap: getrandom: %s", strerror(errno));
            st = NETVM_ERR_SYS;
        } else {
            st = put_bytes(SECRET_KEY, mine, sizeof mine);
        }
    }
    int dead = -1;
    if (st == NETVM_OK)
        st = fence(p, w, "the first fence", true, &dead);
    if (st == NETVM_OK && p->me.rank == 0)
        memcpy(secret, mine, sizeof mine);
    else if (st == NETVM_OK && (st = get_bytes(p, 0, SECRET_KEY, secret, NV_BOOT_SECRET_LEN)) == NETVM_ERR_NOTFOUND) {
        nv_error("bootstrap: rank 0 ended before it gave the job its secret");
        st = NETVM_ERR_PEER;
    }
    explicit_bzero(mine, sizeof mine);
    if (st != NETVM_OK) {
        nv_boot_pmix_close(p);
        return st;
    }
    *rank = (int)p->me.rank;
    *size = p->size;
    nv_boot_pmix_job_id(p->me.nspace, job_id);
    *out = p;
    return NETVM_OK;
}

void nv_boot_pmix_close(struct nv_boot_pmix *p)
{
    if (!p)
        return;
    if (p->have_handler)
        PMIx_Deregister_event_handler(p->handler, NULL, NULL);
    /* after this no callback of PMIx's runs, so p may go */
    pmix_status_t rc = PMIx_Finalize(NULL, 0);
    if (rc != PMIX_SUCCESS)
        nv_debug("bootstrap: PMIx_Finalize: %s", PMIx_Error_string(rc));
    pthread_mutex_lock(&p->lock);
    int running = p->running;
    pthread_mutex_unlock(&p->lock);
    if (running)
        return;     /* a fence that never called back may still hold p: leave it */
    pthread_cond_destroy(&p->cond);
    pthread_mutex_destroy(&p->lock);
    free(p);
}

/* Open MPI's PMIx server drops a process that dies from the fences it has
 * not entered yet, and the fence then completes without it: so every
 * collective carries data, and a rank whose contribution is missing
 * afterwards is a dead one (its slot zero-filled, NETVM_ERR_PEER). */
static netvm_status_t gather(struct nv_boot_pmix *p, const struct nv_boot_pmix_wait *w, const char *what,
                             const void *mine, size_t len, void *all, int *dead_rank)
{
    char key[32];
    snprintf(key, sizeof key, "netvm.%u", ++p->seq);
    netvm_status_t st = put_bytes(key, mine, len);
    if (st == NETVM_OK)
        st = fence(p, w, what, true, dead_rank);
    if (st != NETVM_OK)
        return st;
    int missing = 0;
    for (int r = 0; r < p->size; r++) {
        uint8_t *slot = all ? (uint8_t *)all + (size_t)r * len : NULL;
        netvm_status_t gst = NETVM_OK;
        if (r == (int)p->me.rank) {
            if (slot)
                memmove(slot, mine, len);
        } else {
            uint8_t scratch[1];
            gst = get_bytes(p, r, key, slot ? (void *)slot : scratch, len);
        }
        if (gst == NETVM_ERR_NOTFOUND) {
            if (slot)
                memset(slot, 0, len);
            if (!missing++) {
                *dead_rank = r;
                nv_error("bootstrap: rank %d did not enter %s: it ended (PMIx)", r, what);
            }
            st = NETVM_ERR_PEER;
        } else if (gst != NETVM_OK && st == NETVM_OK) {
            st = gst;
        }
    }
    return st;
}

netvm_status_t nv_boot_pmix_allgather(struct nv_boot_pmix *p, const struct nv_boot_pmix_wait *w,
                                      const void *mine, size_t len, void *all, int *dead_rank)
{
    if (len == 0) {     /* PMIx holds no empty values: a barrier has the same effect */
        return nv_boot_pmix_barrier(p, w, dead_rank);
    }
    return gather(p, w, "allgather", mine, len, all, dead_rank);
}

netvm_status_t nv_boot_pmix_barrier(struct nv_boot_pmix *p, const struct nv_boot_pmix_wait *w,
                                    int *dead_rank)
{
    uint8_t here = 1;    /* a token: its absence is what names a dead rank */
    return gather(p, w, "barrier", &here, 1, NULL, dead_rank);
}
#else
typedef int nv_boot_pmix_is_absent;   /* ISO C wants something in a file */
#endif
