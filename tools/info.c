/* netvm info: what this build is, which links it has and when each is
 * chosen, and every NETVM_* variable with the value in force. */
#include "commands.h"
#include "util/config.h"

#include <netvm/netvm.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int nv_cmd_info(int argc, char **argv)
{
    if (argc > 1 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
        printf("usage: netvm info\n\nPrints the version, the links and every NETVM_* variable.\n");
        return 0;
    }
    printf("netvm %s (API %d.%d)\n\n", NETVM_VERSION, NETVM_VERSION_MAJOR, NETVM_VERSION_MINOR);
    printf("links:\n");
    printf("  shm   peers on this machine: memfd-backed segments are mapped (loads, stores,\n"
           "        CPU atomics); other exported ranges use process_vm_writev/readv; atomics\n"
           "        on those run in the target's progress engine. Chosen for every peer with\n"
           "        the same kernel boot id and host name (today: all peers).\n\n");
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
