/* libFuzzer target: the tcp handshake's payload decoders (wire/
 * handshake.h), HELLO, AUTH and WELCOME, each fed every input. A payload
 * that decodes obeys the rules of its kind and re-encodes to exactly the
 * bytes it was decoded from. */
#include "wire/handshake.h"

#include <stdlib.h>
#include <string.h>

static void hello(const uint8_t *data, size_t size)
{
    struct nv_hs_hello h, h2;
    memset(&h, 0, sizeof h);
    memset(&h2, 0, sizeof h2);
    if (nv_hs_hello_decode(data, size, &h) != 0)
        return;
    if (size != NV_HS_HELLO_LEN || h.proto != NV_HS_PROTO || h.flags)
        abort();
    if (h.purpose == NV_HS_JOB) {
        if (h.rank < 0)
            abort();
    } else if (h.purpose == NV_HS_SERVICE) {
        if (h.rank != -1)
            abort();
    } else {
        abort();
    }
    uint8_t again[NV_HS_HELLO_LEN];
    nv_hs_hello_encode(&h, again);
    if (memcmp(again, data, NV_HS_HELLO_LEN) != 0)
        abort();
    if (nv_hs_hello_decode(again, sizeof again, &h2) != 0 || memcmp(&h, &h2, sizeof h) != 0)
        abort();
}

static void auth(const uint8_t *data, size_t size)
{
    struct nv_hs_auth a, a2;
    memset(&a, 0, sizeof a);
    memset(&a2, 0, sizeof a2);
    if (nv_hs_auth_decode(data, size, &a) != 0)
        return;
    if (a.card_len > NV_HS_CARD_MAX || size != 40 + (size_t)a.card_len)
        abort();
    uint8_t again[40 + NV_HS_CARD_MAX];
    if (nv_hs_auth_encode(&a, again) != size || memcmp(again, data, size) != 0)
        abort();
    if (nv_hs_auth_decode(again, size, &a2) != 0 || memcmp(&a, &a2, sizeof a) != 0)
        abort();
}

static void welcome(const uint8_t *data, size_t size)
{
    struct nv_hs_welcome w, w2;
    memset(&w, 0, sizeof w);
    memset(&w2, 0, sizeof w2);
    if (nv_hs_welcome_decode(data, size, &w) != 0)
        return;
    if (w.card_len > NV_HS_CARD_MAX || size != 16 + (size_t)w.card_len)
        abort();
    if (w.link != NV_HS_LINK_TCP && w.link != NV_HS_LINK_UPGRADE)
        abort();
    if (w.link == NV_HS_LINK_UPGRADE && w.card_len == 0)
        abort();   /* moving to another link needs a card */
    uint8_t again[16 + NV_HS_CARD_MAX];
    if (nv_hs_welcome_encode(&w, again) != size || memcmp(again, data, size) != 0)
        abort();
    if (nv_hs_welcome_decode(again, size, &w2) != 0 || memcmp(&w, &w2, sizeof w) != 0)
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    hello(data, size);
    auth(data, size);
    welcome(data, size);
    return 0;
}
