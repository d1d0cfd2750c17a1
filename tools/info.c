/* netvm info: what this build is, which links it has and when each is
 * chosen, and every NETVM_* variable with the value in force. */
#include "commands.h"
#include "util/config.h"

#include <netvm/netvm.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

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
           "        namespaces), and every process's access to itself: memfd-backed segments\n"
           "        are mapped (loads, stores, CPU atomics); other exported ranges use\n"
           "        process_vm_writev/readv; atomics on those run in the target's progress\n"
           "        engine.%s\n",
           !strcasecmp(mode, "tcp") ? " With NETVM_LINKS=tcp: only a process's access to itself." : "");
    printf("  tcp   peers on other machines%s: one stream per pair of ranks, authenticated\n"
           "        with HMAC-SHA-256 over the job secret; listens on NETVM_TCP_ADDR.%s\n\n",
           !strcasecmp(mode, "tcp") ? " and, with NETVM_LINKS=tcp, every other peer" : "",
           !strcasecmp(mode, "shm") ? " Disabled by NETVM_LINKS=shm." : "");
    printf("  With NETVM_LOG=info every process logs the link it chose for each rank, and why.\n\n");
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
