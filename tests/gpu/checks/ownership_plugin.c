/* A library with data of its own, loaded and unloaded by ownership_check. */
#include <stddef.h>
unsigned char pf_plugin_data[4u << 20];
size_t pf_plugin_size = sizeof pf_plugin_data;
