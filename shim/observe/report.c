/* The exit report: where it goes (stderr, or PINFAST_STATS_FILE) and in
 * which form, text (report_text.c) or JSON (report_json.c). */
#include "report.h"
#include "../base/clock.h"
#include "../base/message.h"
#include "../base/options.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

static int is_json_name(const char *path) {
    size_t n = strlen(path);
    return n >= 5 && !strcasecmp(path + n - 5, ".json");
}

void pf_stats_report(const struct pf_engine_stats *staging, const struct pf_pool_stats *pool) {
    const struct pf_options *opt = pf_options();
    if (!__atomic_load_n(&pf_stats_used, __ATOMIC_RELAXED) || opt->disable || opt->stats == PF_STATS_OFF)
        return;
    static struct pf_out o; /* 8 KiB: not on the stack of an exiting thread */
    o.fd = STDERR_FILENO;
    o.failed = 0;
    o.len = 0;
    char path[4096];
    int json = opt->stats == PF_STATS_JSON;
    if (opt->stats_file) {
        if (pf_options_file(opt->stats_file, path, sizeof path)) {
            pf_msg(PF_WARNING, "PINFAST_STATS_FILE is too long; report goes to stderr");
        } else {
            int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
            if (fd < 0) {
                pf_msg(PF_WARNING, "cannot write the report to %s (%s); report goes to stderr", path, strerror(errno));
            } else {
                o.fd = fd;
                /* a file named *.json holds JSON unless PINFAST_STATS chose:
                 * `pinfast report` and `diff` read only that */
                json |= !pf_options_given("PINFAST_STATS") && is_json_name(path);
            }
        }
    }
    double wall = (double)(pf_now_ns() - pf_counters_start_ns()) * 1e-9;
    pf_summary_gather();
    if (json)
        pf_report_json(&o, wall, staging, pool);
    else
        pf_report_text(&o, wall, staging, pool);
    pf_out_flush(&o);
    if (o.failed)
        pf_msg(PF_WARNING, "writing the report failed (%s)", strerror(o.failed));
    if (o.fd != STDERR_FILENO)
        close(o.fd);
}
