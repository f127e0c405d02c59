#define _GNU_SOURCE
#include "spawn.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

const char *sp_preload(void)
{
    const char *p = getenv("PFT_PRELOAD");
    if (!p || !*p)
        p = getenv("PFT_SHIM");
    return p ? p : "";
}

static int same_name(const char *a, const char *b)
{
    size_t n = strcspn(a, "=");
    return strncmp(a, b, n) == 0 && b[n] == '=';
}

int sp_run(char *const argv[], int pinfast, const char *const *set, const char *out,
           const char *err, int timeout_s, pid_t *pid_out)
{
    size_t n = 0, nset = 0;
    while (environ[n])
        n++;
    while (set && set[nset])
        nset++;
    char **env = calloc(n + nset + 2, sizeof *env);
    char *preload = NULL;
    if (!env)
        return -2;
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        int drop = strncmp(environ[i], "LD_PRELOAD=", 11) == 0;
        for (size_t j = 0; j < nset && !drop; j++)
            drop = same_name(set[j], environ[i]);
        if (!drop)
            env[k++] = environ[i];
    }
    for (size_t j = 0; j < nset; j++)
        env[k++] = (char *)set[j];
    if (pinfast && asprintf(&preload, "LD_PRELOAD=%s", sp_preload()) > 0)
        env[k++] = preload;
    env[k] = NULL;
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        free(env);
        free(preload);
        return -2;
    }
    if (pid == 0) {
        if (out) {
            int fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0644);
            if (fd < 0 || dup2(fd, 1) < 0)
                _exit(126);
            close(fd);
        }
        if (err) {
            int fd = open(err, O_WRONLY | O_CREAT | O_TRUNC, 0644);
            if (fd < 0 || dup2(fd, 2) < 0)
                _exit(126);
            close(fd);
        }
        execve("/proc/self/exe", argv, env);
        _exit(127);
    }
    free(env);
    free(preload);
    if (pid_out)
        *pid_out = pid;
    struct timespec t0, now, nap = { 0, 2 * 1000 * 1000 };
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        int st;
        pid_t w = waitpid(pid, &st, WNOHANG);
        if (w == pid)
            return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        if (w < 0 && errno != EINTR)
            return -2;
        clock_gettime(CLOCK_MONOTONIC, &now);
        if (now.tv_sec - t0.tv_sec >= timeout_s) {
            kill(pid, SIGKILL);
            waitpid(pid, &st, 0);
            return -1;
        }
        nanosleep(&nap, NULL);
    }
}

const char *sp_tmpdir(const char *tag)
{
    static char dir[256];
    snprintf(dir, sizeof dir, "/tmp/pft-%s-XXXXXX", tag);
    return mkdtemp(dir);
}

void sp_rmdir(const char *dir)
{
    char cmd[300];
    if (dir && snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir) < (int)sizeof cmd && system(cmd))
        fprintf(stderr, "could not remove %s\n", dir);
}

const char *sp_dir;

int sp_dir_setup(void **state)
{
    (void)state;
    sp_dir = sp_tmpdir(program_invocation_short_name);
    return sp_dir ? 0 : -1;
}

int sp_dir_teardown(void **state)
{
    (void)state;
    sp_rmdir(sp_dir);
    return 0;
}

char *sp_slurp(const char *file, size_t *len)
{
    FILE *f = fopen(file, "rb");
    if (!f)
        return NULL;
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    size_t got;
    while (buf && (got = fread(buf + n, 1, cap - n - 1, f)) > 0) {
        n += got;
        if (cap - n - 1 == 0) {
            char *b = realloc(buf, cap * 2);
            if (!b) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = b;
            cap *= 2;
        }
    }
    fclose(f);
    if (buf)
        buf[n] = 0;
    if (len)
        *len = n;
    return buf;
}
