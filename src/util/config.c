#include "util/config.h"
#include "util/log.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

const struct nv_config_var nv_config_vars[] = {
    { "NETVM_LOG",            "warn",  "log level: error, warn, info or debug" },
    { "NETVM_TIMEOUT",        "10000", "ms an operation waits for an unresponsive peer before NETVM_ERR_TIMEOUT" },
    { "NETVM_SPIN_US",        "20",    "us a waiting thread spins before it sleeps" },
    { "NETVM_SPIN_YIELD",     "64",    "passes a spin makes before it yields the CPU between passes (0: never)" },
    { "NETVM_SPIN_MAX_US",    "200",   "us netvm_wait_until's spin may grow to while words arrive just after it slept" },
    { "NETVM_PROGRESS_LINGER_US", "0", "us the progress thread keeps polling after serving a request before it sleeps again" },
    { "NETVM_MAX_SEGMENTS",   "16384", "segments one process can export at once" },
    { "NETVM_SHM_MAPPED",     "1",     "1: access peers' shared segments by direct loads/stores; 0: always use process_vm_readv/writev" },
    { "NETVM_PROGRESS_THREAD","1",     "1: a progress thread serves peers while the application computes; 0: only inside netvm calls" },
    { "NETVM_EVQ_SIZE",       "16384", "events the event queue holds (a power of two); beyond it events are lost and reported as NETVM_EV_OVERFLOW" },
    { "NETVM_MAX_TRIPWIRES",  "16384", "tripwires one process can have armed at once (local and remote)" },
    { "NETVM_COUNTERS",       "1024",  "counting-notification counters per process (use the same value on every rank)" },
    { "NETVM_LINKS",          "auto",  "auto: shm within a machine, tcp between machines; tcp: tcp to every other rank; shm: shm only; ofi: libfabric to every other rank" },
    { "NETVM_OFI_PROVIDER",   NULL,    "NETVM_LINKS=ofi: the libfabric provider (e.g. \"tcp;ofi_rxm\", shm, verbs;ofi_rxm, efa, cxi); unset: fi_getinfo chooses" },
    { "NETVM_OFI_ATOMICS",    "emulated", "NETVM_LINKS=ofi: who runs atomics on a peer's segment: emulated (the target's netvm) or native (the provider: see docs/links.md for when a NIC's are atomic with the CPU's)" },
    { "NETVM_OFI_ODP",        "1",     "NETVM_LINKS=ofi: 1 asks providers that can for on-demand paging registrations (verbs: FI_VERBS_USE_ODP=1, unless already set), so registering pins nothing" },
    { "NETVM_OFI_MR_LOCAL",   "0",     "NETVM_LINKS=ofi: 1 gives local buffers registered descriptors (from the registration cache) even where the provider does not ask (FI_MR_LOCAL)" },
    { "NETVM_TCP_ADDR",       "127.0.0.1", "IPv4 address the tcp link listens on and advertises (the launcher sets it on multi-host jobs)" },
    { "NETVM_THREADS",        "0",     "thread level when netvm_config_t does not say: 0 serialized (one application thread at a time), 1 multiple" },
    { "NETVM_MAX_REQUESTS",   "4096",  "operations of this process that can await an answer at once (all peers)" },
    { "NETVM_MAX_INFLIGHT",   "64",    "operations awaiting an answer per peer; a further one waits for one to complete" },
    { "NETVM_AM_CREDITS",     "128",   "one-way active messages a peer may have unhandled at a receiver (use the same value everywhere)" },
    { "NETVM_MSG_MAX",        "4096",  "largest mailbox message in bytes (netvm_msg_send; use the same value everywhere)" },
    { "NETVM_MSG_SLOTS",      "256",   "messages a mailbox holds; further ones wait at their senders" },
    { "NETVM_MSG_EVENTS",     "0",     "1: every message that lands in the mailbox posts NETVM_EV_MESSAGE" },
    { "NETVM_SHM_EAGER",      "16384", "active-message payloads up to this many bytes travel through the shm ring; larger ones are copied once by the receiver" },
    { "NETVM_REG",            "none",  "registration strategy: none (nothing pinned), pin-all (segments pinned at export), rendezvous (a pin round trip per operation, unpinned after), rendezvous-keep (never unpinned), firehose (docs/registration.md)" },
    { "NETVM_TCP_PINNED",     "auto",  "1: this process's tcp target refuses accesses to memory not pinned for them (NETVM_ERR_UNPINNED); 0: never; auto: 1 unless NETVM_REG=none" },
    { "NETVM_FH_M",           "4M",    "bytes a target pins at most for its peers' holds (Firehose's M; also the bound of rendezvous pins); each peer's initiator uses M / (bucket * NETVM_FH_PEERS)" },
    { "NETVM_FH_MAXVICTIM",   "2M",    "bytes of unused pinned buckets a target keeps pinned for reuse (Firehose's MAXVICTIM); pinned total <= M + MAXVICTIM" },
    { "NETVM_FH_BUCKET",      "4096",  "bytes of a bucket, the unit of remote pinning (a power of two, a multiple of the page; the same everywhere); on the ofi link one registration each, and accesses split at buckets" },
    { "NETVM_FH_PEERS",       "0",     "peers M is shared among (0: the job's size - 1, at least 1); connected peers beyond it share what is left, refused with NETVM_ERR_NOMEM when M is taken" },
    { "NETVM_POLL_LOOP_US",   "50",    "us between two calls of an application thread under which they count as a polling loop (it keeps the sockets)" },
    { "NETVM_POLL_LEASE_US",  "2000",  "us after its last call an application thread that polls keeps the sockets before the progress thread takes them back" },
    { "NETVM_ACK_DELAY_US",   "2000",  "us an acknowledgement, or a message isent from a polling loop, may wait for a polling application thread's next frame once that thread stops calling (tcp)" },
    { "NETVM_LISTEN_MAX_PEERS", "1024", "peers a listener admits at once when netvm_listen does not say" },
    { "NETVM_HANDSHAKE_MS",   "10000", "ms a connection may take to authenticate before it is closed" },
    { "NETVM_HANDSHAKE_MAX",  "64",    "connections authenticating at once on one listener; more are closed at once" },
    { "NETVM_SYNC_CHECK_MS",  "20",    "ms between a sleeping lock/semaphore/queue waiter's looks at the peers it depends on" },
    { "NETVM_CHAN_POLL_MS",   "50",    "ms between a waiting channel or queue end's looks at its peer's liveness (a dead peer never wakes it)" },
    { "NETVM_GMEM_SERVERS",   NULL,    "memory servers network-memory regions use: tcp:HOST:PORT,... (unset: local ones are started, see NETVM_GMEM_EMBEDDED)" },
    { "NETVM_GMEM_CREDENTIAL_FILE", NULL, "file holding the memory servers' credential (16-64 bytes); needed with NETVM_GMEM_SERVERS" },
    { "NETVM_GMEM_BUDGET",    "64M",   "bytes of a network-memory region resident at most (suffix K, M, G)" },
    { "NETVM_GMEM_READAHEAD", "64",    "pages fetched ahead when faults run sequentially; 0: none" },
    { "NETVM_GMEM_REPLICAS",  "0",     "servers holding each page (0: 2 when two or more servers exist, else 1)" },
    { "NETVM_GMEM_WRITE",     "back",  "write policy: back (dirty pages written when evicted or synced) or early (also cleaned ahead of eviction)" },
    { "NETVM_GMEM_THREADS",   NULL,    "threads serving a region's page faults (unset: 1 on a process allowed two CPUs or fewer, else 2)" },
    { "NETVM_GMEM_READ_WP",   "auto",  "read faults placed write-protected: auto (not while most are written soon) or always" },
    { "NETVM_GMEM_SPIN_US",   "50",    "us a fault thread keeps polling after a fault before it sleeps" },
    { "NETVM_GMEM_REUSE",     "1",     "read-ahead fills evicted pages and moves them in (1) or copies into new ones (0)" },
    { "NETVM_GMEM_DIRECT",    "1",     "1: read the pages of memory servers on this machine straight from their pools (no request to the server); 0: always ask the server" },
    { "NETVM_GMEM_TIMEOUT",   "2000",  "ms a memory server may take to answer before its replica is used and it is suspected" },
    { "NETVM_GMEM_EMBEDDED",  "2",     "local memory servers started for a process that names none (0: none, netvm_gmem_map fails)" },
    { "NETVM_GMEM_EMBEDDED_SIZE", "1G", "pool of each embedded memory server (suffix K, M, G)" },
    { "NETVM_GMEM_STORE",     "remote", "remote: pages on memory servers; local: in this process's own memory (the benchmarks' baseline)" },
    { "NETVM_GMEM_THRESHOLD", "1M",    "netvm gmem run: allocations of at least this many bytes go to network memory (suffix K, M, G)" },
    { "NETVM_GMEM_RESERVE",   NULL,    "netvm gmem run: address space of a program's region (unset: 4 x physical memory; suffix K, M, G, T)" },
    { "NETVM_STATS_DIR",      NULL,    "directory where each context keeps a live statistics file (PID.N.netvm, every 100 ms) for netvm stat pid:PID; unset: none" },
    { "NETVM_GMEM_STATS_DIR", NULL,    "set by netvm gmem run: where a program's interposer writes its statistics file" },
    { "NETVM_GMEM_PRELOAD",   NULL,    "path of libnetvm-gmem-preload.so for netvm gmem run (unset: the one beside the netvm binary)" },
    { "NETVM_MEMD",           NULL,    "path of the netvm tool that runs embedded memory servers (unset: the installed one, else the build tree's)" },
    { "NETVM_RANK",           NULL,    "set by the launcher: this process's rank" },
    { "NETVM_SIZE",           NULL,    "set by the launcher: number of processes in the job" },
    { "NETVM_JOB_ID",         NULL,    "set by the launcher: identifies the job" },
    { "NETVM_BOOT",           NULL,    "set by the launcher: bootstrap address (unix:PATH); unset: a job of one" },
    { "NETVM_SECRET",         NULL,    "set by the launcher: per-job secret authenticating peers (never printed)" },
    { "NETVM_NODE",           NULL,    "set by the launcher: this host's node rank in a multi-host job" },
    { "NETVM_NNODES",         NULL,    "set by the launcher: number of hosts in the job" },
    { "NETVM_LOCAL_RANK",     NULL,    "set by the launcher: this process's index among its host's ranks" },
    { "NETVM_LOCAL_SIZE",     NULL,    "set by the launcher: number of ranks on this host" },
};
const size_t nv_config_nvars = sizeof nv_config_vars / sizeof nv_config_vars[0];

const char *nv_config_str(const char *name)
{
    const char *v = getenv(name);
    if (v && *v)
        return v;
    for (size_t i = 0; i < nv_config_nvars; i++)
        if (strcmp(nv_config_vars[i].name, name) == 0)
            return nv_config_vars[i].def;
    return NULL;
}

long nv_config_long(const char *name, long lo, long hi)
{
    const char *v = nv_config_str(name);
    const char *def = NULL;
    for (size_t i = 0; i < nv_config_nvars; i++)
        if (strcmp(nv_config_vars[i].name, name) == 0)
            def = nv_config_vars[i].def;
    char *end;
    errno = 0;
    long x = v ? strtol(v, &end, 10) : 0;
    if (!v || errno || *end) {
        if (v)
            nv_warn("%s=%s is not an integer; using %s", name, v, def ? def : "0");
        x = def ? strtol(def, NULL, 10) : 0;
    }
    if (x < lo || x > hi) {
        long c = x < lo ? lo : hi;
        nv_warn("%s=%ld is outside [%ld, %ld]; using %ld", name, x, lo, hi, c);
        x = c;
    }
    return x;
}

long long nv_config_size(const char *name, long long lo, long long hi)
{
    const char *v = nv_config_str(name);
    long long x;
    if (nv_parse_size(v, &x) != 0) {
        const char *def = NULL;
        for (size_t i = 0; i < nv_config_nvars; i++)
            if (strcmp(nv_config_vars[i].name, name) == 0)
                def = nv_config_vars[i].def;
        if (v)
            nv_warn("%s=%s is not a size; using %s", name, v, def ? def : "0");
        if (nv_parse_size(def, &x) != 0)
            x = 0;
    }
    if (x < lo || x > hi) {
        long long c = x < lo ? lo : hi;
        nv_warn("%s=%lld is outside [%lld, %lld]; using %lld", name, x, lo, hi, c);
        x = c;
    }
    return x;
}

int nv_parse_size(const char *v, long long *out)
{
    if (!v || !*v)
        return -1;
    char *end;
    errno = 0;
    long long x = strtoll(v, &end, 10);
    if (errno || end == v || x < 0)
        return -1;
    int shift = 0;
    switch (*end) {
    case 'k': case 'K': shift = 10; end++; break;
    case 'm': case 'M': shift = 20; end++; break;
    case 'g': case 'G': shift = 30; end++; break;
    case 't': case 'T': shift = 40; end++; break;
    default: break;
    }
    if ((*end == 'b' || *end == 'B') && shift)
        end++;
    if (*end || x > (LLONG_MAX >> shift))
        return -1;
    *out = x << shift;
    return 0;
}
