/* NVTX v3 is header-only: with no tool attached its calls return at once.
 * The name is only formatted when a tool is there.  Without the nvtx3
 * headers (CMake finds none) the feature compiles out. */
#include "nvtx.h"
#include "../base/options.h"

#ifdef PINFAST_HAVE_NVTX
#include <nvtx3/nvToolsExt.h>

#include <pthread.h>
#include <stdio.h>

static nvtxDomainHandle_t domain;
static int attached;
static pthread_once_t once = PTHREAD_ONCE_INIT;

/* Creating the domain starts NVTX, which loads the tool (if any) and
 * leaves the push function unset when there is none. */
static void init(void) {
    domain = nvtxDomainCreateA("pinfast");
    attached = NVTX_VERSIONED_IDENTIFIER(nvtxGlobals).nvtxDomainRangePushEx_impl_fnptr != NULL;
}

int pf_nvtx_push(const char *what, enum pf_dir dir, size_t bytes) {
    if (!pf_options()->nvtx)
        return 0;
    pthread_once(&once, init);
    if (!attached)
        return 0;
    char name[80];
    snprintf(name, sizeof name, "pinfast %s %s %.1f MiB", what, dir == PF_DIR_H2D ? "H2D" : "D2H",
             (double)bytes / 1048576.0);
    nvtxEventAttributes_t a = {0};
    a.version = NVTX_VERSION;
    a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
    a.colorType = NVTX_COLOR_ARGB;
    a.color = dir == PF_DIR_H2D ? 0xff2e86de : 0xffe67e22;
    a.payloadType = NVTX_PAYLOAD_TYPE_UNSIGNED_INT64;
    a.payload.ullValue = bytes;
    a.messageType = NVTX_MESSAGE_TYPE_ASCII;
    a.message.ascii = name;
    nvtxDomainRangePushEx(domain, &a);
    return 1;
}

void pf_nvtx_pop_pushed(void) { nvtxDomainRangePop(domain); }

#else

int pf_nvtx_push(const char *what, enum pf_dir dir, size_t bytes) {
    (void)what, (void)dir, (void)bytes;
    return 0;
}

void pf_nvtx_pop_pushed(void) {}

#endif
