/*
 * ndkstat - what the libndk processes of the current user are doing: their
 * adapters, connections, QPs, CQs, SRQs, registered memory and counters
 * (docs/tools.md, "ndkstat"). Each process answers on its own stat channel
 * (fetch.h); ndkstat prints the answers as text or JSON.
 */
#include <ctype.h>
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "fetch.h"
#include "lib/args.h"
#include "lib/cmdline.h"
#include "lib/log.h"

#define MAX_PIDS 4096
#define MAX_FIELDS 128

struct opts {
    pid_t pid; /* 0: every process of the user */
    bool json;
    unsigned interval_s;
    unsigned timeout_ms;
};

static void usage(FILE *f)
{
    fprintf(f,
            "Usage: ndkstat [-p PID] [-j] [-w SECONDS] [-t MS]\n"
            "Show the libndk processes of the current user: adapters and their engines,\n"
            "connections, QPs, CQs, SRQs, registered memory and counters.\n"
            "\n"
            "Options:\n"
            "  -p, --pid=PID        only this process\n"
            "  -j, --json           print JSON instead of text\n"
            "  -w, --watch=SECONDS  print again every SECONDS until interrupted\n"
            "  -t, --timeout=MS     how long to wait for each process (default 1000): one\n"
            "                       that is stopped or dying is skipped with a note\n"
            "  -h, --help           this text\n"
            "  -V, --version        the version of ndkstat\n"
            "\n"
            "Each process answers on its own channel, which only its user can read and\n"
            "NDK_STAT=0 in its environment turns off. ");
    tc_print_exit_statuses(f, false);
}

static const struct tc_cmdline cmdline = {.usage = usage, .version_letter = true,
                                         .options_first = true, .no_operands = true};

static int parse_options(int argc, char **argv, struct opts *o)
{
    uint32_t pid = 0;
    const struct tc_opt opts[] = {
        {'p', "pid", .number = &pid, .min = 1, .max = 0x7fffffff, .what = "pid"},
        {'j', "json", .set_true = &o->json},
        {'w', "watch", .number = &o->interval_s, .min = 1, .max = 86400, .what = "interval"},
        {'t', "timeout", .number = &o->timeout_ms, .min = 1, .max = 60000, .what = "timeout"},
    };
    int rc = tc_parse_cmdline(&cmdline, TC_OPTS(opts), argc, argv);
    if (rc >= 0)
        return rc;
    if (pid)
        o->pid = (pid_t)pid;
    return -1;
}

/* One snapshot line: "TYPE key=value ..." split in place. */
struct record {
    const char *type;
    const char *key[MAX_FIELDS], *val[MAX_FIELDS];
    int n;
};

static int split_records(char *text, struct record **out)
{
    int cap = 16, n = 0;
    struct record *r = malloc(sizeof *r * (size_t)cap);
    for (char *save = NULL, *line = strtok_r(text, "\n", &save); r && line;
         line = strtok_r(NULL, "\n", &save)) {
        if (n == cap) {
            struct record *bigger = realloc(r, sizeof *r * (size_t)(cap *= 2));
            if (!bigger)
                break;
            r = bigger;
        }
        struct record *rec = &r[n++];
        rec->n = 0;
        char *save2 = NULL;
        rec->type = strtok_r(line, " ", &save2);
        for (char *kv; (kv = strtok_r(NULL, " ", &save2)) && rec->n < MAX_FIELDS;) {
            char *eq = strchr(kv, '=');
            if (!eq)
                continue;
            *eq = '\0';
            rec->key[rec->n] = kv;
            rec->val[rec->n++] = eq + 1;
        }
        if (!rec->type)
            n--;
    }
    *out = r;
    return r ? n : 0;
}

static const char *get(const struct record *r, const char *key)
{
    for (int i = 0; i < r->n; i++)
        if (strcmp(r->key[i], key) == 0)
            return r->val[i];
    return "";
}

static bool is_number(const char *s)
{
    if (*s == '-')
        s++;
    if (!isdigit((unsigned char)*s) || (s[0] == '0' && s[1]))
        return false;
    while (isdigit((unsigned char)*s))
        s++;
    return *s == '\0';
}

static void json_string_to(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"' || *s == '\\')
            fprintf(f, "\\%c", *s);
        else if ((unsigned char)*s < 0x20)
            fprintf(f, "\\u%04x", *s);
        else
            fputc(*s, f);
    }
    fputc('"', f);
}

static void json_string(const char *s)
{
    json_string_to(stdout, s);
}

static void json_fields(const struct record *r, const char *skip)
{
    for (int i = 0; i < r->n; i++) {
        if (skip && strcmp(r->key[i], skip) == 0)
            continue;
        printf("%s", i ? ", " : "");
        json_string(r->key[i]);
        printf(": ");
        if (is_number(r->val[i]))
            printf("%s", r->val[i]);
        else
            json_string(r->val[i]);
    }
}

static void proc_comm(pid_t pid, char *buf, size_t len)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%ld/comm", (long)pid);
    FILE *f = fopen(path, "r");
    buf[0] = '\0';
    if (f) {
        if (fgets(buf, (int)len, f))
            buf[strcspn(buf, "\n")] = '\0';
        fclose(f);
    }
}

static const char *const child_types[] = {"engine", "listener", "conn", "qp", "cq", "srq"};
static const char *const child_arrays[] = {"progress_engines", "listeners", "connections", "qps", "cqs",
                                           "srqs"};

static void print_json_process(pid_t pid, struct record *r, int n, bool first)
{
    char comm[64];
    proc_comm(pid, comm, sizeof comm);
    printf("%s\n    {\"command\": ", first ? "" : ",");
    json_string(comm);
    printf(", ");
    json_fields(&r[0], NULL);
    printf(", \"adapters\": [");
    bool first_ad = true;
    for (int a = 1; a < n; a++) {
        if (strcmp(r[a].type, "adapter") != 0)
            continue;
        printf("%s\n      {", first_ad ? "" : ",");
        first_ad = false;
        json_fields(&r[a], NULL);
        const char *id = get(&r[a], "id");
        for (size_t t = 0; t < sizeof child_types / sizeof child_types[0]; t++) {
            printf(", \"%s\": [", child_arrays[t]);
            bool first_child = true;
            for (int c = 1; c < n; c++) {
                if (strcmp(r[c].type, child_types[t]) != 0 || strcmp(get(&r[c], "adapter"), id) != 0)
                    continue;
                printf("%s{", first_child ? "" : ", ");
                first_child = false;
                json_fields(&r[c], "adapter");
                printf("}");
            }
            printf("]");
        }
        printf("}");
    }
    printf("]}");
}

/* Text: one line per object, zero counters left out. */
static bool is_counter(const char *key)
{
    return !strncmp(key, "fpdus_", 6) || !strncmp(key, "bytes_", 6) || !strncmp(key, "completions_", 12) ||
           !strncmp(key, "connect_", 8) || !strncmp(key, "accept_", 7) || !strncmp(key, "requests", 8) ||
           !strcmp(key, "rejected") || !strncmp(key, "terminates_", 11) || !strncmp(key, "out_", 4);
}

static void print_text_process(pid_t pid, struct record *r, int n)
{
    char comm[64];
    proc_comm(pid, comm, sizeof comm);
    printf("pid %ld (%s) uid %s: %s adapter(s)\n", (long)pid, comm, get(&r[0], "uid"),
           get(&r[0], "adapters"));
    for (int i = 1; i < n; i++) {
        bool adapter = strcmp(r[i].type, "adapter") == 0;
        printf("%s%s#%s", adapter ? "  " : "    ", r[i].type, get(&r[i], "id"));
        for (int k = 0; k < r[i].n; k++) {
            if (!strcmp(r[i].key[k], "id") || !strcmp(r[i].key[k], "adapter") ||
                (is_counter(r[i].key[k]) && !strcmp(r[i].val[k], "0")))
                continue;
            printf(" %s=%s", r[i].key[k], r[i].val[k]);
        }
        putchar('\n');
    }
}

/* One round over the processes. Returns the exit status. */
static int show(const struct opts *o)
{
    static pid_t pids[MAX_PIDS];
    int npids;
    if (o->pid) {
        pids[0] = o->pid;
        npids = 1;
    } else if ((npids = ns_list_pids(pids, MAX_PIDS)) < 0) {
        tc_complain(NULL, "cannot read /proc/net/unix to find libndk processes");
        return TC_EXIT_FAILED;
    }
    int shown = 0, skipped = 0;
    char why[160];
    if (o->json)
        printf("{\"processes\": [");
    char *notes = NULL;
    size_t notes_len = 0;
    FILE *nf = open_memstream(&notes, &notes_len);
    for (int i = 0; i < npids; i++) {
        char *text = ns_fetch(pids[i], o->timeout_ms, why, sizeof why);
        if (!text) {
            skipped++;
            if (!o->json) {
                tc_complain(NULL, "pid %ld skipped: %s", (long)pids[i], why);
            } else if (nf) {
                fprintf(nf, "%s{\"pid\": %ld, \"reason\": ", skipped > 1 ? ", " : "", (long)pids[i]);
                json_string_to(nf, why);
                fputc('}', nf);
            }
            continue;
        }
        struct record *r;
        int n = split_records(text, &r);
        if (n > 0 && !strcmp(r[0].type, "process")) {
            if (o->json)
                print_json_process(pids[i], r, n, shown == 0);
            else
                print_text_process(pids[i], r, n);
            shown++;
        }
        free(r);
        free(text);
    }
    if (nf)
        fclose(nf);
    if (o->json)
        printf("%s], \"skipped\": [%s]}\n", shown ? "\n  " : "", notes ? notes : "");
    else if (!shown && !skipped)
        printf("no libndk processes of uid %ld here\n", (long)geteuid());
    free(notes);
    fflush(stdout);
    /* Asked for one process that could not be read: that is a failure. */
    return o->pid && !shown ? TC_EXIT_FAILED : TC_EXIT_OK;
}

int main(int argc, char **argv)
{
    tc_log_init("ndkstat");
    struct opts o = {.timeout_ms = 1000};
    int rc = parse_options(argc, argv, &o);
    if (rc >= 0)
        return rc;
    for (;;) {
        if (o.interval_s && !o.json) {
            time_t now = time(NULL);
            char ts[32];
            strftime(ts, sizeof ts, "%Y-%m-%d %H:%M:%S", localtime(&now));
            printf("%s\n", ts);
        }
        rc = show(&o);
        if (!o.interval_s)
            return rc;
        if (!o.json)
            putchar('\n');
        fflush(stdout);
        sleep(o.interval_s); /* the refresh period the user asked for */
    }
}
