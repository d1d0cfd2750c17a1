#include "gmem/own_ctx.h"
#include "core/svc.h"
#include "util/log.h"

#include <stdlib.h>
#include <string.h>

struct own {
    netvm_ctx_t   *ctx;
    netvm_status_t st;   /* why it could not be made */
};

static void *own_create(netvm_ctx_t *user)
{
    (void)user;
    struct own *o = calloc(1, sizeof *o);
    if (!o)
        return NULL;
    netvm_config_t cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.boot = "none";
    cfg.thread_level = NETVM_THREAD_MULTIPLE;
    o->st = netvm_init(&o->ctx, &cfg);
    if (o->st != NETVM_OK) {
        nv_error("gmem: cannot make network memory's own context: %s", netvm_strerror(o->st));
        o->ctx = NULL;
    }
    return o;
}

/* The program's context is being finalized: every region of it was
 * unmapped before (netvm_gmem_map's regions hold the private context). */
static void own_destroy(netvm_ctx_t *user, void *state)
{
    (void)user;
    struct own *o = state;
    if (o->ctx)
        netvm_finalize(o->ctx);
    free(o);
}

netvm_ctx_t *nv_gmem_own_ctx(netvm_ctx_t *user, netvm_status_t *st)
{
    *st = NETVM_OK;
    if (netvm_thread_level(user) == NETVM_THREAD_MULTIPLE)
        return user;
    struct own *o = nv_svc_state(user, NV_SVC_STATE_GMEM_OWN, own_create, own_destroy);
    *st = !o ? NETVM_ERR_NOMEM : o->ctx ? NETVM_OK : o->st;
    return o ? o->ctx : NULL;
}

netvm_ctx_t *nv_gmem_own_ctx_if(netvm_ctx_t *user)
{
    if (netvm_thread_level(user) == NETVM_THREAD_MULTIPLE)
        return user;
    struct own *o = nv_svc_state_if(user, NV_SVC_STATE_GMEM_OWN);
    return o ? o->ctx : NULL;
}
