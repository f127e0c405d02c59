/* test_forkfirst: a process forks before it makes any CUDA call, and the
 * child then stages copies (Python multiprocessing, forking servers).  The
 * child must not inherit a pinfast lock it cannot release: a write-locked
 * host map once made its first staged copy wait for ever. */
#define _GNU_SOURCE
#include "t.h"

#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static void child(void)
{
    alarm(60); /* a hang fails the test instead of stalling it */
    if (t_setup(NULL))
        _exit(3);
    for (int i = 0; i < 4; i++) {
        size_t n = t_rand_range(1 << 20, 8 << 20);
        unsigned char *h = malloc(n), *o = malloc(n);
        CUdeviceptr d;
        uint64_t salt = t_rand();
        size_t bad;
        t_fill(h, n, salt);
        t_poison(o, n);
        if (D.MemAlloc(&d, n) || D.MemcpyHtoD(d, h, n) || D.MemcpyDtoH(o, d, n) ||
            !t_check_fill(o, n, salt, &bad))
            _exit(4);
        D.MemFree(d);
        free(h);
        free(o);
    }
    _exit(0);
}

static void test_child_stages(void **s)
{
    (void)s;
    for (int k = 0; k < 3; k++) {
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0)
            child();
        int st;
        assert_int_equal(waitpid(pid, &st, 0), pid);
        if (!WIFEXITED(st) || WEXITSTATUS(st))
            fail_msg("child %d: %s %d", k, WIFEXITED(st) ? "exit status" : "killed by signal",
                     WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = { cmocka_unit_test(test_child_stages) };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
