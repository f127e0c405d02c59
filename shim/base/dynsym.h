/* Definitions of a symbol in the objects the dynamic linker has loaded,
 * found by reading their symbol tables in place: no lock taken, nothing
 * allocated, so that malloc's wrappers can find the real functions while an
 * allocator is still starting or the dynamic linker itself frees (dlsym
 * there hung Python 3.12 on glibc 2.39, docs/design.md). */
#ifndef PINFAST_DYNSYM_H
#define PINFAST_DYNSYM_H

/* The first definition of `name`, in load order, outside pinfast: the
 * program's own (a sanitizer's, a malloc preloaded before pinfast) or
 * else the next after pinfast's; NULL when none. */
void *pf_dynsym_other(const char *name);

/* 1 when pinfast's own definition of `name` comes first in load order:
 * the one the program calls.  (dlsym cannot tell: a non-PIE executable
 * that takes a function's address answers with its own PLT stub.) */
int pf_dynsym_own_first(const char *name);

/* The first definition of `name` after pinfast's in load order: what a
 * wrapper calls when a sanitizer's interceptor before it calls pinfast's as
 * its own next one (calling the interceptor back would recurse). */
void *pf_dynsym_next(const char *name);

#endif
