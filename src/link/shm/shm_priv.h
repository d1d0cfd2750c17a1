/* Private state of the shm link, shared by its files. */
#ifndef NV_LINK_SHM_PRIV_H
#define NV_LINK_SHM_PRIV_H

#include "link/shm/shm.h"
#include "link/shm/shm_block.h"

#include <stdatomic.h>
#include <sys/types.h>

struct shm_peer {
    struct nv_link_ev ev;          /* epoll token: the peer's pidfd */
    int               rank;
    pid_t             pid;
    int               pidfd;       /* readable once the peer has exited */
    int               doorbell;    /* our dup of the peer's eventfd */
    struct nv_shm_hdr *hdr;        /* the peer's block, mapped */
    struct nv_ep      ep;          /* the peer's endpoint block, mapped (ours for ourselves) */
    _Atomic int       dead;
};

struct shm_link {
    struct nv_link     base;
    struct nv_shm_params p;
    struct nv_shm_hdr *self;       /* our block */
    int                block_fd;
    int                doorbell;   /* our eventfd */
    struct shm_peer   *peers;      /* size entries; peers[rank] is ourselves */
    atomic_flag        consuming;  /* one consumer of our ring at a time */
    uint64_t           gen;        /* publish generations */
    int                asym;       /* membarrier registered: accesses fence with a compiler barrier */
    struct nv_link_ev  doorbell_ev;   /* epoll token: our doorbell */
};

/* Per-import state behind nv_rdesc.link_priv. */
struct shm_import {
    struct shm_peer *peer;
    _Atomic uint64_t *word;        /* the target's entry word */
    uint64_t          live_word;   /* its value while our import is valid */
    void             *map_base;
    size_t            map_len;
};

static inline struct shm_link *shm_of(struct nv_link *l) { return (struct shm_link *)l; }

/* shm_rma.c */
netvm_status_t shm_seg_publish(struct nv_link *l, const struct nv_seg_desc *d);
void           shm_seg_revoke(struct nv_link *l, uint32_t slot);
void           shm_seg_fence(struct nv_link *l, uint32_t slot);
netvm_status_t shm_import(struct nv_link *l, int rank, const char *name, uint32_t slot,
                          uint64_t key, struct nv_rdesc *out, void *token, uint32_t id);
void           shm_release(struct nv_link *l, struct nv_rdesc *d);
netvm_status_t shm_put(struct nv_link *l, struct nv_rdesc *d, uint64_t off, const void *src, size_t len,
                       int remote, void *token, uint32_t id, const struct nv_note *note);
netvm_status_t shm_get(struct nv_link *l, struct nv_rdesc *d, uint64_t off, void *dst, size_t len,
                       void *token, uint32_t id, const struct nv_note *note);
netvm_status_t shm_atomic(struct nv_link *l, struct nv_rdesc *d, uint64_t off, netvm_atomic_op_t op,
                          uint64_t operand, uint64_t compare, uint64_t *result, const struct nv_note *note);

/* shm_os.c: the system calls, isolated */
int   shm_pidfd_open(pid_t pid);
int   shm_pidfd_getfd(int pidfd, int fd);
int   shm_pidfd_exited(int pidfd);
void *shm_map_fd(int fd, size_t len);
uint64_t shm_host_id(void);

#endif
