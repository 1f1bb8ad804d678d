/* The one status table (MHA_STATUS_MAP in include/mha.h) turned into strings. */
#include "mha.h"

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
