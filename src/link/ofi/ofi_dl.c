/* libfabric, opened when the first ofi link opens rather than linked into
 * libnetvm: loading it pulls in its providers' libraries (verbs, EFA,
 * PSM2, infinipath), and some of those install handlers for SIGSEGV and
 * SIGBUS in their constructors. Linked, every program using netvm got
 * them, on any link; opened here, only programs that ask for the ofi
 * link do. Only five of libfabric's calls are functions; the rest are
 * inline calls through the objects these return. */
#include "link/ofi/ofi_priv.h"
#include "util/log.h"

#include <dlfcn.h>
#include <pthread.h>

struct nv_ofi_fi nv_ofi_fi;

static pthread_mutex_t dl_lock = PTHREAD_MUTEX_INITIALIZER;
static int dl_state;   /* 0 not tried, 1 loaded, -1 failed */

netvm_status_t nv_ofi_dl_open(void)
{
    pthread_mutex_lock(&dl_lock);
    if (!dl_state) {
        void *h = dlopen("libfabric.so.1", RTLD_NOW | RTLD_LOCAL);
        struct nv_ofi_fi f = { 0 };
        if (h) {
            f.getinfo = (__typeof__(f.getinfo))dlsym(h, "fi_getinfo");
            f.freeinfo = (__typeof__(f.freeinfo))dlsym(h, "fi_freeinfo");
            f.dupinfo = (__typeof__(f.dupinfo))dlsym(h, "fi_dupinfo");
            f.fabric = (__typeof__(f.fabric))dlsym(h, "fi_fabric");
            f.strerror = (__typeof__(f.strerror))dlsym(h, "fi_strerror");
        }
        if (h && f.getinfo && f.freeinfo && f.dupinfo && f.fabric && f.strerror) {
            nv_ofi_fi = f;
            dl_state = 1;
        } else {
            nv_error("ofi link: cannot load libfabric (libfabric.so.1): %s", h ? "a call is missing" : dlerror());
            if (h)
                dlclose(h);
            dl_state = -1;
        }
    }
    int st = dl_state;
    pthread_mutex_unlock(&dl_lock);
    return st > 0 ? NETVM_OK : NETVM_ERR_UNSUPPORTED;
}
