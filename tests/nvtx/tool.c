/* A fake NVTX tool, loaded through NVTX_INJECTION64_PATH like Nsight
 * Systems' own: it takes over the domain, push and pop callbacks and writes
 * one line per event to $PFT_NVTX_LOG ("domain NAME", "push TID PAYLOAD
 * NAME", "pop TID"). */
#define _GNU_SOURCE
#define NVTX_NO_IMPL
#include <nvtx3/nvToolsExt.h>

#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static struct nvtxDomainRegistration_st *given = (struct nvtxDomainRegistration_st *)0x1234;

__attribute__((format(printf, 1, 2))) static void event(const char *fmt, ...) {
    const char *path = getenv("PFT_NVTX_LOG");
    int fd = path ? open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644) : -1;
    if (fd < 0)
        return;
    char line[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (n > 0 && write(fd, line, (size_t)n < sizeof line ? (size_t)n : sizeof line - 1) < 0)
        n = 0;
    close(fd);
}

static nvtxDomainHandle_t NVTX_API domain_create(const char *name) {
    event("domain %s\n", name);
    return given;
}

static int NVTX_API push(nvtxDomainHandle_t d, const nvtxEventAttributes_t *a) {
    event("push %d %llu %s%s\n", (int)gettid(),
          a->payloadType == NVTX_PAYLOAD_TYPE_UNSIGNED_INT64 ? a->payload.ullValue : 0ull,
          a->messageType == NVTX_MESSAGE_TYPE_ASCII ? a->message.ascii : "?",
          d == given ? "" : " (not the domain created)");
    return 0;
}

static int NVTX_API pop(nvtxDomainHandle_t d) {
    event("pop %d%s\n", (int)gettid(), d == given ? "" : " (not the domain created)");
    return 0;
}

__attribute__((visibility("default"))) int InitializeInjectionNvtx2(NvtxGetExportTableFunc_t get) {
    const NvtxExportTableCallbacks *cb = (const NvtxExportTableCallbacks *)get(NVTX_ETID_CALLBACKS);
    NvtxFunctionTable table;
    unsigned int size;
    if (!cb || !cb->GetModuleFunctionTable(NVTX_CB_MODULE_CORE2, &table, &size) ||
        size <= NVTX_CBID_CORE2_DomainCreateA)
        return 0;
    *table[NVTX_CBID_CORE2_DomainCreateA] = (NvtxFunctionPointer)domain_create;
    *table[NVTX_CBID_CORE2_DomainRangePushEx] = (NvtxFunctionPointer)push;
    *table[NVTX_CBID_CORE2_DomainRangePop] = (NvtxFunctionPointer)pop;
    event("init\n");
    return 1;
}
