/*
 * ndk_open_adapter and the state of the interface (docs/behaviour.md
 * "Adapters"), on the loopback interface of a new network namespace, which
 * starts down and without addresses:
 *   - no address at all: not an adapter, STATUS_NOT_FOUND
 *   - an address but down: NDIS_STATUS_ADAPTER_NOT_READY
 *   - up: it opens.
 * Needs root (or CAP_SYS_ADMIN) for unshare(CLONE_NEWNET); without it the
 * program reports itself skipped (exit 77).
 */
#include <net/if.h>
#include <sys/ioctl.h>

#include "ndktest.h"

static const NDK_VERSION v21 = {2, 1};

/* SIOCGIFFLAGS / SIOCSIFFLAGS / SIOCSIFADDR on lo. */
static bool lo_ioctl(unsigned long req, struct ifreq *ifr)
{
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return false;
    snprintf(ifr->ifr_name, sizeof ifr->ifr_name, "lo");
    bool ok = ioctl(fd, req, ifr) == 0;
    close(fd);
    return ok;
}

static bool lo_flags(short *flags)
{
    struct ifreq ifr;
    memset(&ifr, 0, sizeof ifr);
    bool ok = lo_ioctl(SIOCGIFFLAGS, &ifr);
    *flags = ifr.ifr_flags;
    return ok;
}

NT_CASE(no_address_is_not_an_adapter)
{
    short fl = 0;
    REQUIRE(lo_flags(&fl));
    CHECK(!(fl & IFF_UP)); /* a new namespace's lo starts down, without 127.0.0.1 */
    NDK_ADAPTER *ad = NULL;
    CHECK_STATUS(nt_open("lo", v21, NULL, &ad), STATUS_NOT_FOUND);
    CHECK(ad == NULL);
}

NT_CASE(down_with_address_is_not_ready)
{
    struct ifreq ifr;
    memset(&ifr, 0, sizeof ifr);
    struct sockaddr_in *sin = (struct sockaddr_in *)&ifr.ifr_addr;
    sin->sin_family = AF_INET;
    sin->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(lo_ioctl(SIOCSIFADDR, &ifr));
    short fl = 0;
    REQUIRE(lo_flags(&fl));
    /* Assigning an address may bring an interface up: make sure it is down. */
    if (fl & IFF_UP) {
        memset(&ifr, 0, sizeof ifr);
        ifr.ifr_flags = (short)(fl & ~IFF_UP);
        REQUIRE(lo_ioctl(SIOCSIFFLAGS, &ifr));
    }
    NDK_ADAPTER *ad = NULL;
    CHECK_STATUS(nt_open("lo", v21, NULL, &ad), NDIS_STATUS_ADAPTER_NOT_READY);
    CHECK(ad == NULL);
    CHECK_STATUS(nt_open("127.0.0.1", v21, NULL, &ad), NDIS_STATUS_ADAPTER_NOT_READY);
    CHECK(ad == NULL);
}

NT_CASE(up_opens)
{
    short fl = 0;
    REQUIRE(lo_flags(&fl));
    struct ifreq ifr;
    memset(&ifr, 0, sizeof ifr);
    ifr.ifr_flags = (short)(fl | IFF_UP);
    REQUIRE(lo_ioctl(SIOCSIFFLAGS, &ifr));
    NDK_ADAPTER *ad = NULL;
    CHECK_STATUS(nt_open("lo", v21, NULL, &ad), STATUS_SUCCESS);
    nt_close_adapter(ad);
}

int main(void)
{
    /* Before any thread exists: a namespace applies to the calling thread. */
    if (!tl_unshare_netns())
        return tl_finish();
    /* In this order: each case leaves lo as the next one expects. */
    RUN(no_address_is_not_an_adapter);
    RUN(down_with_address_is_not_ready);
    RUN(up_opens);
    return tl_finish();
}
