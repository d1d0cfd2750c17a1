/* netvm info: what this build is, which links it has and when each is
 * chosen, and every NETVM_* variable with the value in force. */
#include "commands.h"
#include "boot/pmix.h"
#include "link/shm/shm.h"
#include "link/tcp/tcp.h"
#include "link/ofi/ofi.h"
#include "util/config.h"

#include <netvm/netvm.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static const char *yes(unsigned flags, unsigned bit) { return (flags & bit) ? "yes" : "no"; }

/* What each link does natively; core emulates the rest (docs/links.md). */
static void print_caps(void)
{
    const struct nv_link_ops *links[] = { nv_shm_link_ops(), nv_tcp_link_ops() };
    printf("what each link does natively (the rest core emulates; docs/links.md):\n");
    printf("        ordered  one-sided  sync  atomics  notify  import  register  mapped  max transfer\n");
    for (size_t i = 0; i < sizeof links / sizeof links[0]; i++) {
        unsigned f = links[i]->caps.flags;
        char xfer[32];
        if (links[i]->caps.max_xfer == UINT64_MAX)
            snprintf(xfer, sizeof xfer, "any");
        else
            snprintf(xfer, sizeof xfer, "%llu MiB", (unsigned long long)(links[i]->caps.max_xfer >> 20));
        printf("  %-5s %-8s %-10s %-5s %-8s %-7s %-7s %-9s %-7s %s\n", links[i]->name,
               yes(f, NV_LCAP_ORDERED), yes(f, NV_LCAP_ONESIDED), yes(f, NV_LCAP_SYNC),
               (f & NV_LCAP_ATOMIC) ? "mapped" : "no", yes(f, NV_LCAP_NOTIFY), yes(f, NV_LCAP_IMPORT),
               yes(f, NV_LCAP_REGISTER), yes(f, NV_LCAP_MAPPED), xfer);
    }
    printf("  active-message payloads travel with their header up to NETVM_SHM_EAGER = %ld bytes on\n"
           "  shm (larger: one process_vm_readv by the receiver) and %llu bytes on tcp (larger:\n"
           "  received straight into the buffer the handler names).\n\n",
           nv_config_long("NETVM_SHM_EAGER", 0, 1 << 20),
           (unsigned long long)nv_tcp_link_ops()->caps.am_eager);
}

/* What other processes can make this one hold. */
static void print_limits(void)
{
    printf("what peers can make this process hold:\n"
           "  a listener admits at most NETVM_LISTEN_MAX_PEERS = %ld peers at once (or its own\n"
           "  max_peers); at most NETVM_HANDSHAKE_MAX = %ld connections authenticate on it at once,\n"
           "  each for at most NETVM_HANDSHAKE_MS = %ld ms, holding a socket and about 20 KiB,\n"
           "  never a peer slot; a connection beyond that is closed at once.\n"
           "  each peer: NETVM_AM_CREDITS = %ld one-way active messages not yet handled (a sender\n"
           "  beyond that waits); a tcp peer also about 150 KiB (64 KiB read ahead, 64 KiB of small\n"
           "  frames waiting to leave, the send queue); large payloads land only where a handler or a\n"
           "  reply buffer says.\n\n",
           nv_config_long("NETVM_LISTEN_MAX_PEERS", 1, 1 << 20), nv_config_long("NETVM_HANDSHAKE_MAX", 1, 65536),
           nv_config_long("NETVM_HANDSHAKE_MS", 10, 3600000), nv_config_long("NETVM_AM_CREDITS", 2, 65535));
}

int nv_cmd_info(int argc, char **argv)
{
    if (argc > 1 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
        printf("usage: netvm info\n\nPrints the version, the links and every NETVM_* variable.\n");
        return 0;
    }
    printf("netvm %s (API %d.%d)\n\n", NETVM_VERSION, NETVM_VERSION_MAJOR, NETVM_VERSION_MINOR);
    const char *mode = nv_config_str("NETVM_LINKS");
    printf("links (NETVM_LINKS=%s):\n", mode);
    printf("  shm   peers on this machine (same kernel boot id, host name, network and pid\n"
           "        namespaces): ranks of the job, and connected peers once their tcp\n"
           "        handshake has proved them; and every process's access to itself.\n"
           "        memfd-backed segments are mapped (loads, stores, CPU atomics); other\n"
           "        exported ranges use process_vm_writev/readv; atomics on those run in\n"
           "        the target's progress engine.%s\n",
           !strcasecmp(mode, "tcp") ? " With NETVM_LINKS=tcp: only a process's access to itself." : "");
    printf("  tcp   peers on other machines%s, and every listener and connection:\n"
           "        one stream per pair of peers, authenticated with HMAC-SHA-256 over the\n"
           "        job secret (ranks) or the listener's credential; listens on\n"
           "        NETVM_TCP_ADDR.%s\n\n",
           !strcasecmp(mode, "tcp") ? " and, with NETVM_LINKS=tcp, every other peer" : "",
           !strcasecmp(mode, "shm") ? " Disabled by NETVM_LINKS=shm." : "");
    if (nv_ofi_built())
        printf("  ofi   with NETVM_LINKS=ofi, every other rank of the job (peers beyond the job stay\n"
               "        on tcp): libfabric's reliable datagram endpoint on NETVM_OFI_PROVIDER (%s);\n"
               "        puts and gets are RDMA writes and reads into registered segments, tripwires\n"
               "        and notifications follow as remote CQ data or link messages; atomics are core's\n"
               "        active messages, or the provider's with NETVM_OFI_ATOMICS=native (now %s;\n"
               "        FCAA and notification puts always core's); eager payloads up to %d bytes.\n"
               "        `fi_info -t FI_EP_RDM` lists the providers of this machine.\n\n",
               nv_config_str("NETVM_OFI_PROVIDER") ? nv_config_str("NETVM_OFI_PROVIDER") : "unset: fi_getinfo chooses",
               nv_config_str("NETVM_OFI_ATOMICS") ? nv_config_str("NETVM_OFI_ATOMICS") : "emulated", 16384);
    else
        printf("  ofi   absent: built without libfabric (libfabric-dev; pkg-config libfabric)\n\n");
    printf("  With NETVM_LOG=info every process logs the link it chose for each rank, and why.\n\n");
    const char *pmix = nv_boot_pmix_library();
    printf("bootstrap: `netvm run` (NETVM_BOOT), a job of one without it, and\n");
    if (pmix)
        printf("  PMIx (libpmix %s): processes started by mpirun or srun --mpi=pmix (docs/launcher.md)\n\n", pmix);
    else
        printf("  PMIx: absent (built without libpmix-dev); mpirun and srun cannot start netvm programs\n\n");
    print_caps();
    print_limits();
    printf("configuration (environment):\n");
    for (size_t i = 0; i < nv_config_nvars; i++) {
        const struct nv_config_var *v = &nv_config_vars[i];
        const char *env = getenv(v->name);
        const char *val = env && *env ? env : v->def;
        if (!strcmp(v->name, "NETVM_SECRET") && val)
            val = "(set, not shown)";
        printf("  %-22s = %-10s %s%s\n", v->name, val ? val : "(unset)",
               env && *env ? "" : "[default] ", v->meaning);
    }
    return 0;
}
