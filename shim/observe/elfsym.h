/* Function names from a module's full symbol table (.symtab), for code that
 * dladdr cannot name: nvcc links cudart statically into programs that export
 * no symbols. */
#ifndef PINFAST_ELFSYM_H
#define PINFAST_ELFSYM_H

#include <stddef.h>
#include <stdint.h>

/* The function of the ELF file `path`, loaded with bias `bias`, that holds
 * address addr: its name into name and its start into *start; 0 on success,
 * -1 when the file has no .symtab or no function holds addr. */
int pf_elfsym(const char *path, uintptr_t bias, uintptr_t addr, char *name, size_t size, uintptr_t *start);

/* Unmaps the file kept mapped between lookups. */
void pf_elfsym_release(void);

#endif
