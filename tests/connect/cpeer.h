/* What the service (cserver.c) and its clients (cclient.c) agree on: the
 * segments the service exports, the active-message handler ids, the
 * notification values that are commands, and where each client may write. */
#ifndef NV_TESTS_CONNECT_CPEER_H
#define NV_TESTS_CONNECT_CPEER_H

#include <stdint.h>

/* the service's segments */
#define SEG_DATA     "data"      /* netvm_alloc_shared: mapped on shm */
#define SEG_PRIV     "priv"      /* netvm_export of its heap: CMA on shm */
#define SEG_LEN      (3u << 20)
#define ANON_LEN     (MAX_CLIENTS * ANON_AREA)   /* exported without a name: imported by handle */
#define CLIENT_AREA  4096u       /* client i writes [i*CLIENT_AREA, +CLIENT_AREA) of data and priv */
#define MAX_CLIENTS  128u
#define ANON_AREA    2048u       /* and [i*ANON_AREA, +ANON_AREA) of the unnamed one */
#define TRIP_OFF     (MAX_CLIENTS * CLIENT_AREA)   /* in priv: a tripwire watches it */
#define TRIP_LEN     4096u
#define BIG_OFF      (1u << 20)  /* large transfers: client i uses BIG_OFF + (i % 16) * BIG_AREA */
#define BIG_AREA     (128u << 10)
/* in a client's area of priv: words the service reads when the client leaves */
#define W_LAST       0           /* the last of a series of ordered puts */
#define W_COUNT      8           /* a counter of atomic adds */

/* the client's segment, which the service imports by name */
#define SEG_CLIENT   "cseg"
#define CSEG_LEN     65536u

/* active messages to the service */
enum {
    H_HELLO = 1,      /* one-way: args[0] = the client's index */
    H_ECHO = 2,       /* request: reply args[i] + 1, the payload back */
    H_PING = 3,       /* one-way: the service sends H_PONG back from its handler */
    H_HANDLE = 4,     /* request: reply the handle of the unnamed segment (rank, slot, key) */
    H_SLOW = 5,       /* request: deferred args[0] times, then answered */
    H_SINK = 6,       /* one-way, large payload pattern(args[0]): landed, checked, H_SUNK back */
    H_BIG = 7,        /* request: reply args[0] bytes of pattern(args[1]) */
};
/* active messages to a client */
enum {
    H_WELCOME = 10,   /* the service saw NETVM_EV_PEER_UP: args[0] = the peer id it gave us */
    H_PONG = 11,      /* the answer to H_PING, same args */
    H_SEEN = 12,      /* the service saw an event of ours: args[0] = its type, args[1] = value */
    H_POKED = 13,     /* the service did CMD_POKE: args[0] = status, args[1] = the value it wrote */
    H_CECHO = 14,     /* request (from the service): reply args[i] + 1 */
    H_SUNK = 15,      /* H_SINK's payload landed: args[0] = 1 if it was right, args[1] = its length */
};
/* notification values (netvm_notify) the service acts on */
enum {
    CMD_POKE = 0x500,  /* import the client's SEG_CLIENT, put, atomics, get, and a request to it */
    CMD_NOTE = 0x501,  /* nothing but H_SEEN */
};

#define POKE_MAGIC 0x5eed000000000000ull   /* | the peer id the service gave the client */

/* --- helpers both sides use ------------------------------------------------------ */
#ifndef CPEER_NO_HELPERS
#include <dirent.h>
#include <malloc.h>
#include <string.h>
#include <netvm/netvm.h>

/* A status by its short name, as the test drivers expect it. */
static inline const char *st_name(netvm_status_t st)
{
    static const char *n[] = { "OK", "INVAL", "KEY", "BOUNDS", "RIGHTS", "REVOKED", "PEER", "TIMEOUT",
                               "NOMEM", "RANK", "NOTFOUND", "EXISTS", "FAULT", "BOOT", "SYS",
                               "UNSUPPORTED", "STATE", "AGAIN", "AUTH" };
    return (unsigned)st < sizeof n / sizeof n[0] ? n[st] : "?";
}

static inline int st_by_name(const char *s)
{
    for (int i = 0; i < NETVM_STATUS_COUNT; i++)
        if (!strcmp(st_name((netvm_status_t)i), s))
            return i;
    return -1;
}

/* The bytes large transfers carry. */
static inline void pattern(uint8_t *b, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++)
        b[i] = (uint8_t)(seed * 131 + i * 7 + (i >> 8));
}

static inline int pattern_ok(const uint8_t *b, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++)
        if (b[i] != (uint8_t)(seed * 131 + i * 7 + (i >> 8)))
            return 0;
    return 1;
}

/* Open file descriptors of this process. */
static inline int count_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    if (!d)
        return -1;
    int n = 0;
    for (struct dirent *e; (e = readdir(d));)
        if (e->d_name[0] != '.')
            n++;
    closedir(d);
    return n - 1;   /* not the directory's own */
}

/* Bytes of heap in use: the sanitizers' allocators do not answer mallinfo2. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
size_t __sanitizer_get_current_allocated_bytes(void);   /* the sanitizers' runtime */
static inline size_t heap_in_use(void) { return __sanitizer_get_current_allocated_bytes(); }
#else
static inline size_t heap_in_use(void) { return mallinfo2().uordblks; }
#endif
#endif

#endif
