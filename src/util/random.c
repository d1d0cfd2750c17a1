#include "util/random.h"

#include <errno.h>
#include <sys/random.h>

int nv_random_bytes(void *buf, size_t len)
{
    unsigned char *p = buf;
    while (len) {
        ssize_t n = getrandom(p, len, 0);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

uint64_t nv_random_key(void)
{
    uint64_t k = 0;
    while (k == 0)
        if (nv_random_bytes(&k, sizeof k) != 0)
            return 0;
    return k;
}
