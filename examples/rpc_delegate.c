/* Delegated (3-way) RPC, as GMS fetches a page: rank 0 is the directory,
 * it knows which rank holds each page; a rank asks the directory for a
 * page, the directory delegates the call to the holder, and the holder
 * answers the asking rank directly, the page landing straight in the
 * asker's buffer (its payload token). The answer names the holder.
 *
 *   netvm run -n 4 -- rpc_delegate [pages]
 */
#include <netvm/rpc.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { OP_FETCH = 1, OP_SERVE = 2 };
#define PAGE 4096

static int holder_of(uint64_t page, int n) { return 1 + (int)(page % (uint64_t)(n - 1)); }

/* the directory: pass the call on to the page's holder */
static int on_fetch(netvm_ctx_t *ctx, netvm_rpc_call_t *c, void *arg)
{
    (void)arg;
    int holder = holder_of(c->args[0], netvm_size(ctx));
    netvm_status_t st = netvm_rpc_delegate(ctx, c, holder, OP_SERVE, c->args, 1, NULL, 0);
    if (st != NETVM_OK)   /* the holder is gone: say so */
        netvm_rpc_reply(ctx, &c->token, st, NULL, 0, NULL, 0);
    return NETVM_RPC_DONE;
}

/* a holder: answer the asker with the page */
static int on_serve(netvm_ctx_t *ctx, netvm_rpc_call_t *c, void *arg)
{
    (void)arg;
    uint8_t page[PAGE];
    memset(page, (int)(c->args[0] & 0xff), PAGE);
    netvm_rpc_reply(ctx, &c->token, NETVM_OK, c->args, 1, page, PAGE);
    return NETVM_RPC_DONE;
}

int main(int argc, char **argv)
{
    int pages = argc > 1 ? atoi(argv[1]) : 64;
    netvm_ctx_t *ctx;
    netvm_status_t st = netvm_init(&ctx, NULL);
    if (st != NETVM_OK) {
        fprintf(stderr, "netvm_init: %s\n", netvm_strerror(st));
        return 1;
    }
    int me = netvm_rank(ctx), n = netvm_size(ctx);
    if (n < 3) {
        fprintf(stderr, "rpc_delegate: run it with 3 ranks or more\n");
        return 1;
    }
    netvm_rpc_register(ctx, OP_FETCH, on_fetch, NULL);
    netvm_rpc_register(ctx, OP_SERVE, on_serve, NULL);
    netvm_barrier(ctx);
    if (me != 0) {
        static uint8_t buf[PAGE];
        int right = 0;
        for (int i = 0; i < pages; i++) {
            uint64_t page = (uint64_t)(me * 7 + i);
            netvm_rpc_result_t res;
            st = netvm_rpc_call(ctx, 0, OP_FETCH, &page, 1, NULL, 0, buf, PAGE, 0, &res);
            if (st == NETVM_OK && res.peer == holder_of(page, n) && res.len == PAGE &&
                buf[0] == (uint8_t)page && buf[PAGE - 1] == (uint8_t)page)
                right++;
        }
        printf("rpc_delegate: rank %d fetched %d of %d pages through the directory, each from its holder\n", me,
               right, pages);
    }
    netvm_barrier(ctx);
    netvm_finalize(ctx);
    return 0;
}
