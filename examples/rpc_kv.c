/* A key-value store served by RPC (include/netvm/rpc.h): rank 0 holds the
 * table; every other rank stores keys with blocking calls, reads them back
 * with nonblocking calls whose continuations check and count the values,
 * and asks for a key nobody stored.
 *
 *   netvm run -n 3 -- rpc_kv [keys]
 */
#include <netvm/rpc.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { OP_PUT = 1, OP_GET = 2 };
#define SLOTS 4096
#define VLEN  64

struct entry {
    uint64_t key;
    int      used;
    char     value[VLEN];
};

static struct entry table[SLOTS];
static pthread_mutex_t table_lock = PTHREAD_MUTEX_INITIALIZER;   /* procedures run on any thread */
static int stored;

static struct entry *find(uint64_t key, int make)
{
    for (unsigned i = 0; i < SLOTS; i++) {
        struct entry *e = &table[(key + i) % SLOTS];
        if (e->used && e->key == key)
            return e;
        if (!e->used) {
            if (!make)
                return NULL;
            e->used = 1;
            e->key = key;
            stored++;
            return e;
        }
    }
    return NULL;
}

/* args[0]: the key; payload: the value */
static int on_put(netvm_ctx_t *ctx, netvm_rpc_call_t *c, void *arg)
{
    (void)arg;
    netvm_status_t st = NETVM_OK;
    if (c->nargs != 1 || c->len > VLEN) {
        st = NETVM_ERR_INVAL;
    } else {
        pthread_mutex_lock(&table_lock);
        struct entry *e = find(c->args[0], 1);
        if (e) {
            memset(e->value, 0, VLEN);
            memcpy(e->value, c->payload, c->len);
        } else {
            st = NETVM_ERR_NOMEM;
        }
        pthread_mutex_unlock(&table_lock);
    }
    netvm_rpc_reply(ctx, &c->token, st, NULL, 0, NULL, 0);
    return NETVM_RPC_DONE;
}

/* args[0]: the key; the reply's payload is the value (straight into the
 * caller's buffer) */
static int on_get(netvm_ctx_t *ctx, netvm_rpc_call_t *c, void *arg)
{
    (void)arg;
    char v[VLEN];
    pthread_mutex_lock(&table_lock);
    struct entry *e = c->nargs == 1 ? find(c->args[0], 0) : NULL;
    if (e)
        memcpy(v, e->value, VLEN);
    pthread_mutex_unlock(&table_lock);
    if (e)
        netvm_rpc_reply(ctx, &c->token, NETVM_OK, NULL, 0, v, strnlen(v, VLEN));
    else
        netvm_rpc_reply(ctx, &c->token, NETVM_ERR_NOTFOUND, NULL, 0, NULL, 0);
    return NETVM_RPC_DONE;
}

struct get {
    uint64_t key;
    char     buf[VLEN];
};
static atomic_int good;

/* runs in the progress engine when the answer is in: must not block */
static int check_value(netvm_ctx_t *ctx, const netvm_rpc_outcome_t *o, void *arg)
{
    (void)ctx;
    struct get *g = arg;
    char want[VLEN];
    int n = snprintf(want, sizeof want, "value of key %llu", (unsigned long long)g->key);
    if (o->status == NETVM_OK && o->res.len == (size_t)n && memcmp(g->buf, want, (size_t)n) == 0)
        atomic_fetch_add(&good, 1);
    return NETVM_RPC_DONE;
}

int main(int argc, char **argv)
{
    int keys = argc > 1 ? atoi(argv[1]) : 100;
    if (keys < 1 || keys > 1000000) {
        fprintf(stderr, "rpc_kv: keys must be 1 to 1000000\n");
        return 2;
    }
    netvm_ctx_t *ctx;
    netvm_status_t st = netvm_init(&ctx, NULL);
    if (st != NETVM_OK) {
        fprintf(stderr, "netvm_init: %s\n", netvm_strerror(st));
        return 1;
    }
    int me = netvm_rank(ctx);
    if (me == 0) {
        netvm_rpc_register(ctx, OP_PUT, on_put, NULL);
        netvm_rpc_register(ctx, OP_GET, on_get, NULL);
    }
    netvm_barrier(ctx);   /* the server is ready */
    if (me != 0) {
        for (int i = 0; i < keys; i++) {
            uint64_t key = (uint64_t)me * 1000000 + (uint64_t)i;
            char v[VLEN];
            int len = snprintf(v, sizeof v, "value of key %llu", (unsigned long long)key);
            st = netvm_rpc_call(ctx, 0, OP_PUT, &key, 1, v, (size_t)len, NULL, 0, 0, NULL);
            if (st != NETVM_OK) {
                fprintf(stderr, "put: %s\n", netvm_strerror(st));
                return 1;
            }
        }
        /* read back, 16 calls in flight at a time */
        struct get *g = calloc((size_t)keys, sizeof *g);
        netvm_rpc_handle_t *h[16];
        for (int i = 0; i < keys; i += 16) {
            int w = keys - i < 16 ? keys - i : 16;
            for (int k = 0; k < w; k++) {
                g[i + k].key = (uint64_t)me * 1000000 + (uint64_t)(i + k);
                netvm_rpc_begin(ctx, &h[k]);
                netvm_rpc_push(h[k], check_value, &g[i + k]);
                netvm_rpc_issue(h[k], 0, OP_GET, &g[i + k].key, 1, NULL, 0, g[i + k].buf, VLEN, 0);
            }
            for (int k = 0; k < w; k++)
                netvm_rpc_wait(h[k], NULL);
        }
        uint64_t nokey = 42;
        char buf[VLEN];
        st = netvm_rpc_call(ctx, 0, OP_GET, &nokey, 1, NULL, 0, buf, VLEN, 0, NULL);
        printf("rpc_kv: rank %d: %d puts, %d of %d values read back right; a missing key: %s\n", me, keys,
               atomic_load(&good), keys,
               st == NETVM_ERR_NOTFOUND ? "not found" : netvm_strerror(st));
        free(g);
    }
    netvm_barrier(ctx);
    if (me == 0) {
        pthread_mutex_lock(&table_lock);
        printf("rpc_kv: server holds %d keys\n", stored);
        pthread_mutex_unlock(&table_lock);
    }
    netvm_finalize(ctx);
    return 0;
}
