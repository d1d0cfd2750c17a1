/* Active messages: round trip of every field; malformed input rejected. */
#include "check.h"
#include "wire/am.h"

#include <string.h>

int main(void)
{
    struct nv_am m = { .kind = NV_AM_ATOMIC, .op = 3, .status = 7, .src_rank = 1023, .req_id = 0xdeadbeef,
                       .slot = 77, .key = 0x0123456789abcdefull, .off = 1ull << 40,
                       .operand = UINT64_MAX, .compare = 5, .flags = NV_AM_F_NOTIFY, .tag = 0xfeedull }, d;
    uint8_t buf[NV_AM_SIZE];
    nv_am_encode(&m, buf);
    CHECK(nv_am_decode(buf, sizeof buf, &d) == 0);
    CHECK(d.kind == m.kind && d.op == m.op && d.status == m.status && d.src_rank == m.src_rank);
    CHECK(d.req_id == m.req_id && d.slot == m.slot && d.key == m.key && d.off == m.off);
    CHECK(d.operand == m.operand && d.compare == m.compare && d.flags == m.flags && d.tag == m.tag);
    /* little-endian on the wire whatever the host */
    CHECK(buf[24] == 0xef && buf[31] == 0x01);
    CHECK(nv_am_decode(buf, NV_AM_SIZE - 1, &d) == -1);     /* truncated */
    uint8_t bad[NV_AM_SIZE];
    memcpy(bad, buf, sizeof bad);
    bad[0] = 99;                                            /* version */
    CHECK(nv_am_decode(bad, sizeof bad, &d) == -1);
    memcpy(bad, buf, sizeof bad);
    bad[1] = 0;                                             /* kind */
    CHECK(nv_am_decode(bad, sizeof bad, &d) == -1);
    bad[1] = NV_AM_KIND_MAX;
    CHECK(nv_am_decode(bad, sizeof bad, &d) == -1);
    memcpy(bad, buf, sizeof bad);
    bad[11] = 0x80;                                         /* negative rank */
    CHECK(nv_am_decode(bad, sizeof bad, &d) == -1);
    memcpy(bad, buf, sizeof bad);
    bad[3] = 0x80;                                          /* unknown flag */
    CHECK(nv_am_decode(bad, sizeof bad, &d) == -1);
    /* random bytes never crash the decoder */
    srand(1);
    for (int i = 0; i < 100000; i++) {
        for (int k = 0; k < NV_AM_SIZE; k++)
            bad[k] = (uint8_t)rand();
        bad[0] = NV_AM_VERSION;
        (void)nv_am_decode(bad, (size_t)(rand() % (NV_AM_SIZE + 1)), &d);
    }
    return 0;
}
