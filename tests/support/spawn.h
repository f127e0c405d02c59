/* spawn.h - run the test binary itself again as a child process, with or
 * without pinfast preloaded, for tests that compare the two or that must
 * survive a crash, a hang or exit() of the program under test. */
#ifndef PFT_SPAWN_H
#define PFT_SPAWN_H
#include <sys/types.h>

/* The LD_PRELOAD value that loads pinfast (with a sanitizer runtime first in
 * sanitizer builds): $PFT_PRELOAD, else $PFT_SHIM. */
const char *sp_preload(void);

/* Runs /proc/self/exe with argv (argv[0] included, NULL-terminated).  The
 * environment is ours without LD_PRELOAD, plus LD_PRELOAD=sp_preload() when
 * pinfast is set, plus the "K=V" entries of set (NULL-terminated, may be
 * NULL; they replace ours).  stdout/stderr go to out/err when not NULL.
 * Returns the exit status, 128 + the signal that killed it, or -1 when it ran
 * past timeout_s seconds (it is then killed with SIGKILL).  *pid_out, when
 * given, receives the child's pid. */
int sp_run(char *const argv[], int pinfast, const char *const *set, const char *out,
           const char *err, int timeout_s, pid_t *pid_out);

/* A fresh directory under /tmp (removed by sp_rmdir); NULL on failure. */
const char *sp_tmpdir(const char *tag);
void sp_rmdir(const char *dir);

/* cmocka group setup and teardown for tests whose children leave files:
 * sp_dir is a fresh directory under /tmp named after the program, removed
 * after the group. */
extern const char *sp_dir;
int sp_dir_setup(void **state);
int sp_dir_teardown(void **state);
/* The whole content of a file, NUL-terminated (malloc'd), or NULL. */
char *sp_slurp(const char *file, size_t *len);
#endif
