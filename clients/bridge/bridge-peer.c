/* The owner of a loopback peer: an inet_diag lookup of the connection's
 * 4-tuple seen from the peer's side (its address and port as source). */
#include "bridge-peer.h"

#include <errno.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

typedef struct {
    struct nlmsghdr nlh;
    struct inet_diag_req_v2 req;
} DiagRequest;

static gboolean fill_endpoint(GSocketAddress *address, int family, __be16 *port, __be32 addr[4], GError **error)
{
    struct sockaddr_storage ss;
    if (!g_socket_address_to_native(address, &ss, sizeof ss, error))
        return FALSE;
    if (ss.ss_family != family) {
        g_set_error(error, G_IO_ERROR, G_IO_ERROR_NOT_SUPPORTED, "mixed address families");
        return FALSE;
    }
    if (family == AF_INET) {
        struct sockaddr_in *in = (struct sockaddr_in *)&ss;
        *port = in->sin_port;
        memcpy(addr, &in->sin_addr, sizeof in->sin_addr);
    } else {
        struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&ss;
        *port = in6->sin6_port;
        memcpy(addr, &in6->sin6_addr, sizeof in6->sin6_addr);
    }
    return TRUE;
}

gboolean bridge_peer_uid(GSocket *connection, uid_t *uid, GError **error)
{
    g_autoptr(GSocketAddress) local = g_socket_get_local_address(connection, error);
    if (local == NULL)
        return FALSE;
    g_autoptr(GSocketAddress) remote = g_socket_get_remote_address(connection, error);
    if (remote == NULL)
        return FALSE;
    int family = g_socket_address_get_family(local) == G_SOCKET_FAMILY_IPV6 ? AF_INET6 : AF_INET;
    if (g_socket_address_get_family(local) != G_SOCKET_FAMILY_IPV4 &&
        g_socket_address_get_family(local) != G_SOCKET_FAMILY_IPV6) {
        g_set_error(error, G_IO_ERROR, G_IO_ERROR_NOT_SUPPORTED, "not a TCP/IP connection");
        return FALSE;
    }

    DiagRequest r;
    memset(&r, 0, sizeof r);
    r.nlh.nlmsg_len = sizeof r;
    r.nlh.nlmsg_type = SOCK_DIAG_BY_FAMILY;
    r.nlh.nlmsg_flags = NLM_F_REQUEST;
    r.req.sdiag_family = family;
    r.req.sdiag_protocol = IPPROTO_TCP;
    r.req.idiag_states = ~0u;
    r.req.id.idiag_cookie[0] = INET_DIAG_NOCOOKIE;
    r.req.id.idiag_cookie[1] = INET_DIAG_NOCOOKIE;
    /* the peer's socket: its source is our remote end */
    if (!fill_endpoint(remote, family, &r.req.id.idiag_sport, r.req.id.idiag_src, error) ||
        !fill_endpoint(local, family, &r.req.id.idiag_dport, r.req.id.idiag_dst, error))
        return FALSE;

    int fd = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
    if (fd < 0) {
        int e = errno;
        g_set_error(error, G_IO_ERROR, g_io_error_from_errno(e), "netlink sock_diag: %s", g_strerror(e));
        return FALSE;
    }
    struct sockaddr_nl kernel = {.nl_family = AF_NETLINK};
    union {
        struct nlmsghdr nlh;
        char bytes[8192];
    } reply;
    ssize_t n = -1;
    if (sendto(fd, &r, sizeof r, 0, (struct sockaddr *)&kernel, sizeof kernel) == (ssize_t)sizeof r) {
        do
            n = recv(fd, &reply, sizeof reply, 0);
        while (n < 0 && errno == EINTR);
    }
    int e = errno;
    close(fd);
    if (n < 0) {
        g_set_error(error, G_IO_ERROR, g_io_error_from_errno(e), "netlink sock_diag: %s", g_strerror(e));
        return FALSE;
    }
    struct nlmsghdr *h = &reply.nlh;
    if (!NLMSG_OK(h, (size_t)n)) {
        g_set_error(error, G_IO_ERROR, G_IO_ERROR_FAILED, "short sock_diag reply");
        return FALSE;
    }
    if (h->nlmsg_type == NLMSG_ERROR) {
        struct nlmsgerr *err = NLMSG_DATA(h);
        g_set_error(error, G_IO_ERROR, G_IO_ERROR_NOT_FOUND, "the peer's socket is not in the table: %s",
                    g_strerror(-err->error));
        return FALSE;
    }
    if (h->nlmsg_type != SOCK_DIAG_BY_FAMILY || h->nlmsg_len < NLMSG_LENGTH(sizeof(struct inet_diag_msg))) {
        g_set_error(error, G_IO_ERROR, G_IO_ERROR_FAILED, "unexpected sock_diag reply");
        return FALSE;
    }
    struct inet_diag_msg *msg = NLMSG_DATA(h);
    *uid = msg->idiag_uid;
    return TRUE;
}
