#include "message.h"

#include <stdarg.h>
#include <stdio.h>
#include <unistd.h>

static int log_level = PF_WARNING;

int pf_log_level(void) { return __atomic_load_n(&log_level, __ATOMIC_RELAXED); }
void pf_log_set_level(int level) { __atomic_store_n(&log_level, level, __ATOMIC_RELAXED); }

static const char *const level_names[] = {"error: ", "warning: ", "", "debug: "};

void pf_msg(enum pf_level level, const char *fmt, ...) {
    if ((int)level > pf_log_level())
        return;
    char line[512];
    int n = snprintf(line, sizeof line, "pinfast: %s", level_names[level]);
    va_list ap;
    va_start(ap, fmt);
    int m = vsnprintf(line + n, sizeof line - (size_t)n - 1, fmt, ap);
    va_end(ap);
    size_t len = (size_t)n + (m < 0 ? 0 : (size_t)m);
    if (len > sizeof line - 2)
        len = sizeof line - 2;
    line[len++] = '\n';
    /* one write, so lines from several threads do not interleave */
    ssize_t w = write(STDERR_FILENO, line, len);
    (void)w;
}
