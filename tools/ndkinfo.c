/*
 * ndkinfo - list NDK adapters and print their NDK_ADAPTER_INFO, like
 * rdma-core's ibv_devinfo (and ibv_devices for -l).
 *
 * Uses only the public headers: ndk_list_adapters / ndk_open_adapter /
 * ndk_close_adapter from ndk.h, and NdkQueryAdapterInfo through the adapter's
 * dispatch table.
 */
#include <getopt.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/adapter.h"
#include "lib/adapters.h"
#include "lib/args.h"
#include "lib/cmdline.h"
#include "lib/log.h"

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/* Every AdapterFlags bit ndkinfo.h defines, in bit order. */
static const struct {
    ULONG bit;
    const char *name;
} adapter_flags[] = {
    {NDK_ADAPTER_FLAG_IN_ORDER_DMA_SUPPORTED, "IN_ORDER_DMA_SUPPORTED"},
    {NDK_ADAPTER_FLAG_RDMA_READ_SINK_NOT_REQUIRED, "RDMA_READ_SINK_NOT_REQUIRED"},
    {NDK_ADAPTER_FLAG_CQ_INTERRUPT_MODERATION_SUPPORTED, "CQ_INTERRUPT_MODERATION_SUPPORTED"},
    {NDK_ADAPTER_FLAG_MULTI_ENGINE_SUPPORTED, "MULTI_ENGINE_SUPPORTED"},
    {NDK_ADAPTER_FLAG_RDMA_READ_LOCAL_INVALIDATE_SUPPORTED, "RDMA_READ_LOCAL_INVALIDATE_SUPPORTED"},
    {NDK_ADAPTER_FLAG_CQ_RESIZE_SUPPORTED, "CQ_RESIZE_SUPPORTED"},
    {NDK_ADAPTER_FLAG_LOOPBACK_CONNECTIONS_SUPPORTED, "LOOPBACK_CONNECTIONS_SUPPORTED"},
};

static void usage(FILE *f)
{
    fprintf(f,
            "Usage: ndkinfo [-d ADAPTER] [-v] [-l]\n"
            "Print the NDK adapters and their NDK_ADAPTER_INFO (like ibv_devinfo).\n"
            "\n"
            "Options:\n"
            "  -d, --adapter=ADAPTER  only this adapter: an interface name (lo, eth0) or one of\n"
            "                         its addresses (127.0.0.1, ::1)\n"
            "  -v, --verbose          also decode AdapterFlags bit by bit, show the interface\n"
            "                         index and the size NdkQueryAdapterInfo asks for\n"
            "  -l, --list             print only the adapter names (like ibv_devices)\n"
            "  -h, --help             this text\n"
            "  -V, --version          the version of ndkinfo and of the NDK it asks for\n"
            "\n"
            "Each adapter is opened at NDK version %u.%u. An adapter that is down or has no\n"
            "address is listed without its NDK_ADAPTER_INFO, and is no failure unless named\n"
            "with -d. ",
            NDK_PROVIDER_MAJOR_VERSION, NDK_PROVIDER_MINOR_VERSION);
    tc_print_exit_statuses(f, false);
}

static const struct tc_cmdline cmdline = {.usage = usage, .version_letter = true,
                                         .options_first = true, .no_operands = true};

/* One aligned "\tfield:<pad>value" line, ibv_devinfo style. */
static void field(const char *name, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void field(const char *name, const char *fmt, ...)
{
    char label[64];
    snprintf(label, sizeof label, "%s:", name);
    printf("\t%-28s", label);
    va_list ap;
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    putchar('\n');
}

/* "128 TiB" for sizes that are exact powers of two of a binary unit, so the
 * large limits read at a glance; "" otherwise. */
static const char *human_size(uint64_t v, char *buf, size_t size)
{
    static const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    unsigned u = 0;
    uint64_t x = v;
    while (x >= 1024 && x % 1024 == 0 && u + 1 < ARRAY_SIZE(units)) {
        x /= 1024;
        u++;
    }
    if (v == 0 || u == 0)
        buf[0] = '\0';
    else
        snprintf(buf, size, " (%" PRIu64 " %s)", x, units[u]);
    return buf;
}

static void print_flags(ULONG flags, bool verbose)
{
    char names[512] = "";
    size_t used = 0;
    ULONG known = 0;
    for (size_t i = 0; i < ARRAY_SIZE(adapter_flags); i++) {
        known |= adapter_flags[i].bit;
        if (!(flags & adapter_flags[i].bit))
            continue;
        int w = snprintf(names + used, sizeof names - used, "%s%s", used ? ", " : "",
                         adapter_flags[i].name);
        if (w > 0 && (size_t)w < sizeof names - used)
            used += (size_t)w;
    }
    if (flags & ~known) {
        int w = snprintf(names + used, sizeof names - used, "%sundefined bits 0x%08" PRIx32,
                         used ? ", " : "", flags & ~known);
        if (w > 0 && (size_t)w < sizeof names - used)
            used += (size_t)w;
    }
    field("AdapterFlags", "0x%08" PRIx32 "%s%s%s", flags, used ? " (" : "", names, used ? ")" : "");
    if (!verbose)
        return;
    /* As ibv_devinfo -v decodes the capability flags: every defined flag,
     * set or not, so an absent capability is visible too. */
    for (size_t i = 0; i < ARRAY_SIZE(adapter_flags); i++) {
        char label[80];
        snprintf(label, sizeof label, "%s (0x%08" PRIx32 "):", adapter_flags[i].name,
                 adapter_flags[i].bit);
        printf("\t\t%-52s%s\n", label, (flags & adapter_flags[i].bit) ? "yes" : "no");
    }
}

static void print_info(const NDK_ADAPTER_INFO *in, ULONG probed_size, bool verbose)
{
    char h[32];
    field("Version", "%u.%u", in->Version.Major, in->Version.Minor);
    field("VendorId", "0x%06" PRIx32, in->VendorId);
    field("DeviceId", "%" PRIu32 " (0x%" PRIx32 ")", in->DeviceId, in->DeviceId);
    field("MaxRegistrationSize", "%zu%s", in->MaxRegistrationSize,
          human_size(in->MaxRegistrationSize, h, sizeof h));
    field("MaxWindowSize", "%zu%s", in->MaxWindowSize, human_size(in->MaxWindowSize, h, sizeof h));
    field("FRMRPageCount", "%" PRIu32, in->FRMRPageCount);
    field("MaxInitiatorRequestSge", "%" PRIu32, in->MaxInitiatorRequestSge);
    field("MaxReceiveRequestSge", "%" PRIu32, in->MaxReceiveRequestSge);
    field("MaxReadRequestSge", "%" PRIu32, in->MaxReadRequestSge);
    field("MaxTransferLength", "%" PRIu32 "%s", in->MaxTransferLength,
          human_size(in->MaxTransferLength, h, sizeof h));
    field("MaxInlineDataSize", "%" PRIu32, in->MaxInlineDataSize);
    field("MaxInboundReadLimit", "%" PRIu32, in->MaxInboundReadLimit);
    field("MaxOutboundReadLimit", "%" PRIu32, in->MaxOutboundReadLimit);
    field("MaxReceiveQueueDepth", "%" PRIu32, in->MaxReceiveQueueDepth);
    field("MaxInitiatorQueueDepth", "%" PRIu32, in->MaxInitiatorQueueDepth);
    field("MaxSrqDepth", "%" PRIu32 "%s", in->MaxSrqDepth, in->MaxSrqDepth ? "" : " (no SRQ)");
    field("MaxCqDepth", "%" PRIu32, in->MaxCqDepth);
    field("LargeRequestThreshold", "%" PRIu32, in->LargeRequestThreshold);
    field("MaxCallerData", "%" PRIu32, in->MaxCallerData);
    field("MaxCalleeData", "%" PRIu32, in->MaxCalleeData);
    print_flags(in->AdapterFlags, verbose);
    field("RdmaTechnology", "%s (%d)", tc_technology_name(in->RdmaTechnology),
          (int)in->RdmaTechnology);
    if (verbose)
        field("info size", "%" PRIu32 " bytes (this build knows %zu)", probed_size,
              sizeof(NDK_ADAPTER_INFO));
}

/*
 * Prints one adapter. spec is what the user gave (-d) or the interface
 * name; d its description when we found it in the list. Returns the open
 * or query status. Not-ready adapters are reported but are not an error
 * when listing them all (ibv_devinfo also lists ports that are down).
 */
static NTSTATUS show_adapter(const char *spec, const NDK_ADAPTER_DESCRIPTION *d, bool verbose,
                             bool explicit)
{
    NDK_ADAPTER *ad = NULL;
    NTSTATUS st = ndk_open_adapter(spec, (NDK_VERSION){NDK_PROVIDER_MAJOR_VERSION, NDK_PROVIDER_MINOR_VERSION},
                                   NULL, &ad);
    if (st != STATUS_SUCCESS && (explicit || st != NDIS_STATUS_ADAPTER_NOT_READY)) {
        tc_complain(NULL, "cannot open adapter '%s': %s", spec, tc_status_name(st));
        tc_print_candidates();
        return st;
    }

    printf("hca_id:\t%s\n", d ? d->Name : spec);
    if (d) {
        char addrs[TC_ADDRS_BUF];
        if (verbose)
            field("if_index", "%" PRIu32, d->IfIndex);
        field("state", "%s", (d->Flags & NDK_ADAPTER_DESC_UP) ? "UP" : "DOWN");
        field("loopback", "%s", (d->Flags & NDK_ADAPTER_DESC_LOOPBACK) ? "yes" : "no");
        field("mtu", "%" PRIu32, d->Mtu);
        field("addresses", "%s", tc_format_desc_addrs(d, addrs, sizeof addrs));
    }
    if (st != STATUS_SUCCESS) {
        field("NDK_ADAPTER_INFO", "not available: %s", tc_status_name(st));
        return STATUS_SUCCESS;
    }

    NDK_ADAPTER_INFO info;
    ULONG probed = 0;
    st = tc_query_info(ad, &info, &probed);
    if (st == STATUS_SUCCESS)
        print_info(&info, probed, verbose);
    else
        tc_ndk_failed(NULL, "NdkQueryAdapterInfo", st, "adapter '%s'", spec);
    const char *shm_detail = NULL;
    BOOLEAN shm = ndk_shm_available(ad, &shm_detail);
    field("same_host_shm", "%s (%s)", shm ? "available" : "unavailable", shm_detail);
    ndk_close_adapter(ad);
    return st;
}

/* Returns -1 to go on, else the exit status. */
static int parse_options(int argc, char **argv, const char **only, bool *verbose, bool *list_only)
{
    const struct tc_opt opts[] = {
        {'d', "adapter", .text = only},
        {'d', "ib-dev", .text = only}, /* ibv_devinfo's spelling */
        {'v', "verbose", .set_true = verbose},
        {'l', "list", .set_true = list_only},
    };
    int rc = tc_parse_cmdline(&cmdline, TC_OPTS(opts), argc, argv);
    if (rc >= 0)
        return rc;
    if (*list_only && *only)
        return tc_usage_error(NULL, "-l lists every adapter; -d shows one");
    return -1;
}

static int show_all(const NDK_ADAPTER_DESCRIPTION *list, ULONG n, bool verbose)
{
    if (n == 0) {
        tc_complain(NULL, "no NDK adapters: no network interface has an IPv4 or IPv6 address");
        return TC_EXIT_FAILED;
    }
    int rc = TC_EXIT_OK;
    for (ULONG i = 0; i < n; i++) {
        if (i)
            putchar('\n');
        if (show_adapter(list[i].Name, &list[i], verbose, false) != STATUS_SUCCESS)
            rc = TC_EXIT_FAILED;
    }
    return rc;
}

int main(int argc, char **argv)
{
    tc_log_init("ndkinfo");
    const char *only = NULL;
    bool verbose = false, list_only = false;
    int rc = parse_options(argc, argv, &only, &verbose, &list_only);
    if (rc >= 0)
        return rc;

    NDK_ADAPTER_DESCRIPTION *list;
    ULONG n;
    NTSTATUS st = tc_list_adapters(&list, &n);
    if (st != STATUS_SUCCESS) {
        tc_ndk_failed(NULL, "ndk_list_adapters", st, NULL);
        return TC_EXIT_FAILED;
    }
    if (list_only) {
        printf("%" PRIu32 " adapter%s found:\n", n, n == 1 ? "" : "s");
        for (ULONG i = 0; i < n; i++)
            printf("\t%s\n", list[i].Name);
        rc = n ? TC_EXIT_OK : TC_EXIT_FAILED;
    } else if (only) {
        int i = tc_find_adapter(list, n, only);
        st = show_adapter(only, i >= 0 ? &list[i] : NULL, verbose, true);
        rc = st == STATUS_SUCCESS ? TC_EXIT_OK : TC_EXIT_FAILED;
    } else {
        rc = show_all(list, n, verbose);
    }
    free(list);
    return rc;
}
