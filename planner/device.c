#include "planner/device.h"

#include <stdio.h>
#include <string.h>

#include "planner/size.h"

#define GIB (UINT64_C(1) << 30)

/* Sources: docs/devices.md. Sparse figures are halved where a datasheet gives only those. */
static const ck_device devices[] = {
    {"h100-80gb", "NVIDIA H100 SXM 80 GB", 80 * GIB, 989.4e12, 3.35e12},
    {"h200", "NVIDIA H200 SXM 141 GB", 141 * GIB, 989.4e12, 4.8e12},
    {"a100-40gb", "NVIDIA A100 SXM 40 GB", 40 * GIB, 312e12, 1.555e12},
    {"a100-80gb", "NVIDIA A100 SXM 80 GB", 80 * GIB, 312e12, 2.039e12},
    {"l40s", "NVIDIA L40S 48 GB", 48 * GIB, 362.05e12, 864e9},
    {"rtx4090", "NVIDIA GeForce RTX 4090 24 GB", 24 * GIB, 165.2e12, 1008e9},
    {"mi300x", "AMD Instinct MI300X 192 GB", 192 * GIB, 1307.4e12, 5.3e12},
};
#define N_DEVICES (sizeof devices / sizeof devices[0])

const ck_device *ck_device_find(const char *name)
{
    for (size_t i = 0; i < N_DEVICES; i++)
        if (strcmp(devices[i].name, name) == 0)
            return &devices[i];
    return NULL;
}

const char *ck_device_names(void)
{
    static char names[256];
    if (!names[0])
        for (size_t i = 0, used = 0; i < N_DEVICES && used < sizeof names; i++)
            used += (size_t)snprintf(names + used, sizeof names - used, "%s%s", i ? ", " : "",
                                     devices[i].name);
    return names;
}

uint64_t ck_device_reserve(const ck_device *d)
{
    /* rounded up, so that the reserve is never less than it says */
    return CK_DEVICE_RESERVE_FIXED + (d->memory_bytes * CK_DEVICE_RESERVE_PERCENT + 99) / 100;
}

uint64_t ck_device_budget(const ck_device *d)
{
    return d->memory_bytes - ck_device_reserve(d);
}

void ck_device_print_table(FILE *out, const char *indent)
{
    for (size_t i = 0; i < N_DEVICES; i++) {
        char mem[32], budget[32];
        ck_size_format(devices[i].memory_bytes, mem, sizeof mem);
        ck_size_format(ck_device_budget(&devices[i]), budget, sizeof budget);
        fprintf(out, "%s%-10s %-30s %8s (budget %8s) %7.2f TFLOP/s %5.3f TB/s\n", indent,
                devices[i].name, devices[i].label, mem, budget, devices[i].dense16_flops / 1e12,
                devices[i].mem_bandwidth / 1e12);
    }
}
