/* The one status table (MHA_STATUS_MAP in include/mha.h) turned into strings. */
#include "mha.h"
#include "mha_internal.h"

const char *mha_strerror(int status)
{
    switch (status) {
#define MHA_STATUS_MSG_(name, value, msg) \
    case value:                           \
        return msg;
        MHA_STATUS_MAP(MHA_STATUS_MSG_)
#undef MHA_STATUS_MSG_
    default:
        return "unknown status";
    }
}

const char *mha_status_name(int status)
{
    switch (status) {
#define MHA_STATUS_NAME_(name, value, msg) \
    case value:                            \
        return "MHA_" #name;
        MHA_STATUS_MAP(MHA_STATUS_NAME_)
#undef MHA_STATUS_NAME_
    default:
        return "MHA_UNKNOWN";
    }
}

int mha_precision_available(mha_precision p)
{
    return p == MHA_PRECISION_FP32 || (p == MHA_PRECISION_BF16 && mha__bf16_available());
}

const char *mha_precision_name(mha_precision p)
{
    switch (p) {
    case MHA_PRECISION_FP32:
        return "fp32";
    case MHA_PRECISION_BF16:
        return "bf16";
    }
    return NULL;
}

const char *mha_precision_cpu_feature(mha_precision p)
{
    return p == MHA_PRECISION_BF16 ? "avx512_bf16" : NULL;
}
