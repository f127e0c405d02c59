/* The one way pinfast speaks: one line, prefixed "pinfast:", to stderr. */
#ifndef PINFAST_MESSAGE_H
#define PINFAST_MESSAGE_H

enum pf_level { PF_ERROR, PF_WARNING, PF_INFO, PF_DEBUG };

/* The most verbose level printed (PINFAST_LOG, set by the options as they
 * are parsed; PF_WARNING before that). */
int pf_log_level(void);
void pf_log_set_level(int level);

/* Never allocates and never calls into CUDA, so it is safe from any wrapper,
 * the dlsym hook, worker threads and destructors. */
void pf_msg(enum pf_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* pf_msg once per process for a given flag (a static int at the call site). */
#define pf_msg_once(flag, level, ...) \
    do { \
        if (!__atomic_exchange_n(&(flag), 1, __ATOMIC_RELAXED)) \
            pf_msg(level, __VA_ARGS__); \
    } while (0)

#endif
