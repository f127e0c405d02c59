/* The CPU quota, from /proc/self/cgroup and the cgroup files: cgroup v2's
 * cpu.max ("max 100000", or "400000 100000": 4 CPUs) under /sys/fs/cgroup
 * (or /sys/fs/cgroup/unified beside v1 controllers), v1's cpu.cfs_quota_us
 * (-1: none) over cpu.cfs_period_us under the mount of the cpu controller.
 * A quota set on any cgroup above the process's binds it too, so each is
 * read up to the root.  Inside a container the mount is the container's
 * own cgroup, whose path /proc/self/cgroup may still give as the host
 * sees it: the files missing there are skipped, and the root's are the
 * container's. */
#include "cpu_quota.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CGROUP_ROOT "/sys/fs/cgroup"
#define PATH_MAX_ 1024 /* a cgroup path (Kubernetes': ~200 bytes); longer ones are not read */
#define LINES_MAX 4096

/* The start of a file, NUL-ended; 0 when it cannot be read. */
static int slurp(const char *path, char *b, size_t size) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    ssize_t n = read(fd, b, size - 1);
    close(fd);
    if (n <= 0)
        return 0;
    b[n] = 0;
    return 1;
}

/* One cgroup directory's quota in CPUs; 0: none there. */
static double quota_at(const char *dir, int v2) {
    char path[PATH_MAX_ + 32], b[64];
    char *end;
    if (v2) {
        if ((size_t)snprintf(path, sizeof path, "%s/cpu.max", dir) >= sizeof path || !slurp(path, b, sizeof b) ||
            !strncmp(b, "max", 3))
            return 0;
        double q = strtod(b, &end), p = strtod(end, NULL);
        return q > 0 && p > 0 ? q / p : 0;
    }
    if ((size_t)snprintf(path, sizeof path, "%s/cpu.cfs_quota_us", dir) >= sizeof path || !slurp(path, b, sizeof b))
        return 0;
    double q = strtod(b, NULL);
    if (q <= 0 || (size_t)snprintf(path, sizeof path, "%s/cpu.cfs_period_us", dir) >= sizeof path ||
        !slurp(path, b, sizeof b))
        return 0;
    double p = strtod(b, NULL);
    return p > 0 ? q / p : 0;
}

/* The least quota of cgroup `path` under `mount` and of those above it
 * (path is cut in place); 0: none. */
static double least_up(const char *mount, char *path, int v2) {
    double least = 0;
    if (path[0] != '/')
        return 0;
    for (;;) {
        char dir[PATH_MAX_ + 16];
        if ((size_t)snprintf(dir, sizeof dir, "%s%s", mount, path) < sizeof dir) {
            double q = quota_at(dir, v2);
            if (q > 0 && (!least || q < least))
                least = q;
        }
        if (!strcmp(path, "/"))
            return least;
        char *slash = strrchr(path, '/');
        slash[slash == path] = 0; /* "/a" -> "/", "/a/b" -> "/a" */
    }
}

/* 1 when the comma-separated list holds `name` */
static int lists(const char *list, size_t len, const char *name) {
    size_t n = strlen(name);
    for (const char *s = list, *end = list + len; s < end;) {
        const char *comma = memchr(s, ',', (size_t)(end - s));
        size_t item = (size_t)((comma ? comma : end) - s);
        if (item == n && !memcmp(s, name, n))
            return 1;
        s += item + 1;
    }
    return 0;
}

int pf_cpu_quota(void) {
    char lines[LINES_MAX];
    if (!slurp("/proc/self/cgroup", lines, sizeof lines))
        return 0;
    double least = 0;
    /* each line: hierarchy-id:controllers:path */
    for (char *line = lines, *next; line && *line; line = next) {
        next = strchr(line, '\n');
        if (next)
            *next++ = 0;
        char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        if (!c2)
            continue;
        const char *controllers = c1 + 1;
        size_t clen = (size_t)(c2 - controllers);
        int v2 = !strncmp(line, "0:", 2) && !clen;
        if (!v2 && !lists(controllers, clen, "cpu"))
            continue;
        char mounts[2][PATH_MAX_];
        if (v2) {
            snprintf(mounts[0], sizeof mounts[0], "%s", CGROUP_ROOT);
            snprintf(mounts[1], sizeof mounts[1], "%s", CGROUP_ROOT "/unified");
        } else {
            snprintf(mounts[0], sizeof mounts[0], CGROUP_ROOT "/%.*s", (int)clen, controllers);
            snprintf(mounts[1], sizeof mounts[1], "%s", CGROUP_ROOT "/cpu");
        }
        for (int m = 0; m < 2 && (!m || strcmp(mounts[0], mounts[1])); m++) {
            char path[PATH_MAX_];
            snprintf(path, sizeof path, "%s", c2 + 1);
            double q = least_up(mounts[m], path, v2);
            if (q > 0 && (!least || q < least))
                least = q;
        }
    }
    if (!least)
        return 0;
    /* rounded up: 2.5 CPUs count 3 */
    return least >= 1e6 ? 1000000 : least <= 1 ? 1 : (int)(least + 1 - 1e-9);
}
