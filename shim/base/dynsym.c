#include "dynsym.h"

#include <elf.h>
#include <link.h>
#include <stdint.h>
#include <string.h>

/* A dynamic entry's address: relocated by glibc in place, except where the
 * section is read-only (the vDSO) */
static uintptr_t dynamic_address(const struct link_map *m, ElfW(Addr) p) { return p < m->l_addr ? m->l_addr + p : p; }

static int defines(const ElfW(Sym) * s, const char *strtab, const char *name) {
    int type = ELF64_ST_TYPE(s->st_info);
    return s->st_shndx != SHN_UNDEF && s->st_value && (type == STT_FUNC || type == STT_NOTYPE) &&
           !strcmp(strtab + s->st_name, name);
}

/* name's definition in m, or NULL. */
static void *find(const struct link_map *m, const char *name) {
    const ElfW(Sym) *symtab = NULL;
    const char *strtab = NULL;
    const uint32_t *gnu = NULL, *sysv = NULL;
    for (const ElfW(Dyn) *d = m->l_ld; d && d->d_tag != DT_NULL; d++) {
        if (d->d_tag == DT_SYMTAB)
            symtab = (const void *)dynamic_address(m, d->d_un.d_ptr);
        else if (d->d_tag == DT_STRTAB)
            strtab = (const void *)dynamic_address(m, d->d_un.d_ptr);
        else if (d->d_tag == DT_GNU_HASH)
            gnu = (const void *)dynamic_address(m, d->d_un.d_ptr);
        else if (d->d_tag == DT_HASH)
            sysv = (const void *)dynamic_address(m, d->d_un.d_ptr);
    }
    if (!symtab || !strtab)
        return NULL;
    if (gnu) { /* nbuckets, symoffset, bloom words, shift, bloom, buckets, chains */
        uint32_t h = 5381;
        for (const unsigned char *c = (const void *)name; *c; c++)
            h = h * 33 + *c;
        uint32_t nb = gnu[0], off = gnu[1], words = gnu[2];
        const uint32_t *buckets = (const uint32_t *)((const ElfW(Addr) *)(gnu + 4) + words);
        const uint32_t *chain = buckets + nb;
        uint32_t i = nb ? buckets[h % nb] : 0;
        for (; i >= off && i; i++) {
            uint32_t ch = chain[i - off];
            if ((ch | 1) == (h | 1) && defines(&symtab[i], strtab, name))
                return (void *)(m->l_addr + symtab[i].st_value);
            if (ch & 1)
                break;
        }
        return NULL;
    }
    if (sysv) { /* nbucket, nchain, buckets, chains */
        uint32_t h = 0;
        for (const unsigned char *c = (const void *)name; *c; c++) {
            h = (h << 4) + *c;
            uint32_t g = h & 0xf0000000u;
            h ^= g >> 24;
            h &= ~g;
        }
        for (uint32_t i = sysv[0] ? sysv[2 + h % sysv[0]] : 0; i && i < sysv[1]; i = sysv[2 + sysv[0] + i])
            if (defines(&symtab[i], strtab, name))
                return (void *)(m->l_addr + symtab[i].st_value);
    }
    return NULL;
}

extern ElfW(Dyn) _DYNAMIC[]; /* pinfast's own */

void *pf_dynsym_other(const char *name) {
    void *f = NULL;
    for (const struct link_map *m = _r_debug.r_map; m && !f; m = m->l_next)
        if (m->l_ld != _DYNAMIC)
            f = find(m, name);
    return f;
}

int pf_dynsym_own_first(const char *name) {
    for (const struct link_map *m = _r_debug.r_map; m; m = m->l_next)
        if (find(m, name))
            return m->l_ld == _DYNAMIC;
    return 0;
}

void *pf_dynsym_next(const char *name) {
    const struct link_map *m = _r_debug.r_map;
    while (m && m->l_ld != _DYNAMIC)
        m = m->l_next;
    void *f = NULL;
    for (m = m ? m->l_next : NULL; m && !f; m = m->l_next)
        f = find(m, name);
    return f;
}
