/* The ATU: translation checks key, bounds and rights; revocation and slot
 * reuse; lookups stay right over many segments. */
#include "check.h"
#include "core/atu.h"

int main(void)
{
    struct nv_atu atu;
    CHECK_OK(nv_atu_init(&atu, 20000));
    uint64_t a;
    CHECK_ST(nv_atu_translate(&atu, 5, 1, 0, 8, NETVM_READ, &a), NETVM_ERR_KEY);      /* never used */
    CHECK_ST(nv_atu_translate(&atu, 20000, 1, 0, 8, NETVM_READ, &a), NETVM_ERR_KEY);  /* out of table */
    uint32_t slot;
    CHECK_OK(nv_atu_alloc(&atu, &slot));
    CHECK(slot == 0);
    nv_atu_set(&atu, slot, 0xabc, 0x10000, 100, NETVM_READ | NETVM_ATOMIC, NULL);
    CHECK_OK(nv_atu_translate(&atu, slot, 0xabc, 92, 8, NETVM_READ, &a));
    CHECK(a == 0x10000 + 92);
    CHECK_OK(nv_atu_translate(&atu, slot, 0xabc, 100, 0, NETVM_READ, &a));
    CHECK_ST(nv_atu_translate(&atu, slot, 0xabd, 0, 8, NETVM_READ, &a), NETVM_ERR_REVOKED);
    CHECK_ST(nv_atu_translate(&atu, slot, 0xabc, 93, 8, NETVM_READ, &a), NETVM_ERR_BOUNDS);
    CHECK_ST(nv_atu_translate(&atu, slot, 0xabc, 8, UINT64_MAX, NETVM_READ, &a), NETVM_ERR_BOUNDS);
    CHECK_ST(nv_atu_translate(&atu, slot, 0xabc, UINT64_MAX, 2, NETVM_READ, &a), NETVM_ERR_BOUNDS);
    CHECK_ST(nv_atu_translate(&atu, slot, 0xabc, 0, 8, NETVM_WRITE, &a), NETVM_ERR_RIGHTS);
    nv_atu_revoke(&atu, slot);
    nv_atu_release(&atu, slot);
    CHECK_ST(nv_atu_translate(&atu, slot, 0xabc, 0, 8, NETVM_READ, &a), NETVM_ERR_REVOKED);
    /* the slot comes back; the old key never matches again */
    uint32_t again;
    CHECK_OK(nv_atu_alloc(&atu, &again));
    CHECK(again == slot);
    nv_atu_set(&atu, again, 0xdef, 0x20000, 50, NETVM_RWA, NULL);
    CHECK_ST(nv_atu_translate(&atu, again, 0xabc, 0, 8, NETVM_READ, &a), NETVM_ERR_REVOKED);
    CHECK_OK(nv_atu_translate(&atu, again, 0xdef, 0, 8, NETVM_WRITE, &a));
    /* many segments */
    for (uint32_t i = 1; i < 20000; i++) {
        uint32_t s;
        CHECK_OK(nv_atu_alloc(&atu, &s));
        nv_atu_set(&atu, s, 1000 + s, (uint64_t)s << 20, 4096, NETVM_RWA, NULL);
    }
    CHECK_ST(nv_atu_alloc(&atu, &slot), NETVM_ERR_NOMEM);
    for (uint32_t s = 1; s < 20000; s++) {
        CHECK_OK(nv_atu_translate(&atu, s, 1000 + s, 4000, 96, NETVM_RWA, &a));
        CHECK(a == ((uint64_t)s << 20) + 4000);
    }
    nv_atu_fini(&atu);
    return 0;
}
