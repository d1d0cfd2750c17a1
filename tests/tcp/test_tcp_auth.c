/* The tcp link's handshake: peers with the job secret connect; a peer with
 * another secret is refused on both sides, within the timeout, without a
 * hang; a stranger that connects first and sends garbage (or a HELLO with a
 * wrong proof) is dropped and the real peer still gets in. Two link
 * instances in one process play ranks 0 and 1. */
#define _GNU_SOURCE
#include "check.h"
#include "link/tcp/tcp.h"
#include "wire/tcp_frame.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static void am(void *a, int s, const uint8_t *m, size_t l) { (void)a; (void)s; (void)m; (void)l; }
static void down(void *a, int r) { (void)a; (void)r; }
static void complete(void *a, void *t, netvm_status_t st) { (void)a; (void)t; (void)st; }
static int claim(void *a, void *t) { (void)a; (void)t; return 1; }
static netvm_status_t translate(void *a, uint32_t s, uint64_t k, uint64_t o, uint64_t l, unsigned n, uint64_t *x)
{ (void)a; (void)s; (void)k; (void)o; (void)l; (void)n; (void)x; return NETVM_ERR_KEY; }
static netvm_status_t lookup(void *a, const char *nm, uint32_t s, uint64_t k, struct nv_seg_desc *d)
{ (void)a; (void)nm; (void)s; (void)k; (void)d; return NETVM_ERR_NOTFOUND; }

struct side {
    int rank;
    uint8_t secret[32];
    struct nv_link *link;
    struct nv_tcp_card card;
    const struct nv_tcp_card *cards;
    netvm_status_t result;
};

static void open_side(struct side *s)
{
    struct nv_tcp_params p = { .timeout_ms = 3000, .secret = s->secret, .secret_len = 32,
                               .max_segments = 8, .bind_addr = "127.0.0.1" };
    struct nv_link_upcalls up = { .am = am, .peer_down = down, .complete = complete, .claim = claim,
                                  .translate = translate, .lookup = lookup };
    CHECK_OK(nv_tcp_link_open(&s->link, s->rank, 2, &p, &up, &s->card));
}

static void *connect_side(void *arg)
{
    struct side *s = arg;
    static const uint8_t use[2] = { 1, 1 };
    uint8_t mine[2] = { use[0], use[1] };
    mine[s->rank] = 0;
    s->result = nv_tcp_link_connect(s->link, s->cards, mine);
    return NULL;
}

static int dial(const struct nv_tcp_card *c)
{
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = c->port, .sin_addr.s_addr = c->ipv4 };
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    CHECK(fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof a) == 0);
    return fd;
}

/* stranger: 0 none, 1 garbage bytes, 2 a HELLO claiming rank 1 then a bad AUTH */
static void run(int same_secret, int stranger, netvm_status_t want)
{
    struct side s[2] = { { .rank = 0 }, { .rank = 1 } };
    memset(s[0].secret, 7, 32);
    memset(s[1].secret, same_secret ? 7 : 8, 32);
    open_side(&s[0]);
    open_side(&s[1]);
    struct nv_tcp_card cards[2] = { s[0].card, s[1].card };
    s[0].cards = s[1].cards = cards;
    int sfd = -1;
    if (stranger) {
        sfd = dial(&cards[0]);
        if (stranger == 1) {
            char junk[300];
            memset(junk, 0xA5, sizeof junk);
            CHECK(write(sfd, junk, sizeof junk) == (ssize_t)sizeof junk);
        } else {
            uint8_t hb[NV_TCP_HDR_LEN], nonce[NV_TCP_NONCE_LEN] = { 0 };
            struct nv_tcp_hdr h = { .kind = NV_TCP_HELLO, .len = NV_TCP_NONCE_LEN, .operand = 1 };
            nv_tcp_hdr_encode(&h, hb);
            CHECK(write(sfd, hb, sizeof hb) == (ssize_t)sizeof hb);
            CHECK(write(sfd, nonce, sizeof nonce) == (ssize_t)sizeof nonce);
        }
    }
    pthread_t t[2];
    for (int i = 0; i < 2; i++)
        pthread_create(&t[i], NULL, connect_side, &s[i]);
    if (stranger == 2) {
        /* the forged HELLO took rank 1's place: its AUTH can only be wrong */
        uint8_t hb[NV_TCP_HDR_LEN], mac[NV_TCP_MAC_LEN] = { 0 };
        struct nv_tcp_hdr h = { .kind = NV_TCP_AUTH, .len = NV_TCP_MAC_LEN };
        nv_tcp_hdr_encode(&h, hb);
        usleep(100000);
        (void)!write(sfd, hb, sizeof hb);
        (void)!write(sfd, mac, sizeof mac);
    }
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    CHECK_ST(s[0].result, want);
    CHECK_ST(s[1].result, want);
    if (sfd >= 0)
        close(sfd);
    s[0].link->ops->destroy(s[0].link);
    s[1].link->ops->destroy(s[1].link);
}

int main(void)
{
    run(1, 0, NETVM_OK);            /* the job secret: in */
    run(0, 0, NETVM_ERR_PEER);      /* another secret: refused on both sides */
    run(1, 1, NETVM_OK);            /* garbage first: dropped, the real rank 1 gets in */
    /* a stranger that claims rank 1 first can make setup fail (a denial of
     * service, documented), but never gets in: its AUTH is refused */
    run(1, 2, NETVM_ERR_PEER);
    return 0;
}
