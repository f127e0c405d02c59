/* A linear scan of .symtab per lookup: lookups happen only when the report
 * is written, a few per call site.  The file stays mapped between lookups,
 * since consecutive ones are mostly in the same module. */
#include "elfsym.h"
#include "../base/libc.h"

#include <elf.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

static struct {
    char path[4096];
    const unsigned char *map;
    size_t size;
} cur;

void pf_elfsym_release(void) {
    if (cur.map)
        pf_libc_munmap((void *)cur.map, cur.size);
    cur.map = NULL;
    cur.path[0] = 0;
}

static int map_file(const char *path) {
    if (cur.map && !strcmp(cur.path, path))
        return 0;
    pf_elfsym_release();
    if (strlen(path) >= sizeof cur.path)
        return -1;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    struct stat st;
    void *m = MAP_FAILED;
    if (!fstat(fd, &st) && st.st_size >= (off_t)sizeof(Elf64_Ehdr))
        m = pf_libc_mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (m == MAP_FAILED)
        return -1;
    cur.map = m;
    cur.size = (size_t)st.st_size;
    strcpy(cur.path, path);
    return 0;
}

/* A table of n entries of `each` bytes at off lies inside the file. */
static int inside(uint64_t off, uint64_t n, uint64_t each) {
    return off <= cur.size && n <= (cur.size - off) / (each ? each : 1);
}

int pf_elfsym(const char *path, uintptr_t bias, uintptr_t addr, char *name, size_t size, uintptr_t *start) {
    if (map_file(path))
        return -1;
    const Elf64_Ehdr *eh = (const Elf64_Ehdr *)cur.map;
    if (memcmp(eh->e_ident, ELFMAG, SELFMAG) || eh->e_ident[EI_CLASS] != ELFCLASS64 ||
        eh->e_shentsize != sizeof(Elf64_Shdr) || !inside(eh->e_shoff, eh->e_shnum, sizeof(Elf64_Shdr)))
        return -1;
    const Elf64_Shdr *sh = (const Elf64_Shdr *)(cur.map + eh->e_shoff);
    uintptr_t want = addr - bias;
    const Elf64_Sym *best = NULL;
    const char *names = NULL;
    for (unsigned i = 0; i < eh->e_shnum && !best; i++) {
        if (sh[i].sh_type != SHT_SYMTAB || sh[i].sh_link >= eh->e_shnum ||
            !inside(sh[i].sh_offset, sh[i].sh_size / sizeof(Elf64_Sym), sizeof(Elf64_Sym)) ||
            !inside(sh[sh[i].sh_link].sh_offset, sh[sh[i].sh_link].sh_size, 1))
            continue;
        const Elf64_Sym *sym = (const Elf64_Sym *)(cur.map + sh[i].sh_offset);
        size_t n = sh[i].sh_size / sizeof(Elf64_Sym);
        names = (const char *)cur.map + sh[sh[i].sh_link].sh_offset;
        size_t names_size = sh[sh[i].sh_link].sh_size;
        for (size_t k = 0; k < n; k++)
            if (ELF64_ST_TYPE(sym[k].st_info) == STT_FUNC && sym[k].st_shndx != SHN_UNDEF && sym[k].st_value <= want &&
                want - sym[k].st_value < sym[k].st_size && sym[k].st_name < names_size &&
                memchr(names + sym[k].st_name, 0, names_size - sym[k].st_name)) {
                best = &sym[k];
                break;
            }
    }
    if (!best)
        return -1;
    snprintf(name, size, "%s", names + best->st_name);
    *start = (uintptr_t)best->st_value + bias;
    return 0;
}
