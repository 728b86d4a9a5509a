/* device: the accelerators `--device NAME` knows, each with its memory and the rates of the
 * roofline cost model (docs/devices.md gives every figure's source). The one home of these
 * figures and of the reserve that the default budget leaves for the runtime. */
#ifndef CK_DEVICE_H
#define CK_DEVICE_H

#include <stdint.h>
#include <stdio.h>

typedef struct {
    const char *name;      /* as --device takes it: "h100-80gb" */
    const char *label;     /* as people know it: "NVIDIA H100 SXM 80 GB" */
    uint64_t memory_bytes; /* the datasheet's capacity, read in GiB */
    double dense16_flops;  /* dense (no sparsity) bf16/fp16 tensor FLOP/s */
    double mem_bandwidth;  /* peak memory bandwidth, bytes/s */
} ck_device;

/* What the runtime takes before the step gets any memory: a fixed part for the CUDA or ROCm
 * context, the math libraries' workspaces and the communication buffers, and a part
 * proportional to the memory for the caching allocator's fragmentation. */
#define CK_DEVICE_RESERVE_FIXED (UINT64_C(1) << 30) /* 1 GiB */
#define CK_DEVICE_RESERVE_PERCENT 5

/* The device called name, or NULL. */
const ck_device *ck_device_find(const char *name);
/* The names, comma separated, for messages and help. */
const char *ck_device_names(void);
/* The reserve of d: CK_DEVICE_RESERVE_FIXED + CK_DEVICE_RESERVE_PERCENT% of its memory. */
uint64_t ck_device_reserve(const ck_device *d);
/* The default budget on d: its memory less its reserve. */
uint64_t ck_device_budget(const ck_device *d);
/* One line per device: name, label, memory, budget, rates (for --help). */
void ck_device_print_table(FILE *out, const char *indent);

#endif
