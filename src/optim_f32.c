/* float32 instantiation of src/optim_core.inc (mha_optimizer, mha_optim_*), and the
 * untyped parts of include/mha_optim.h: the default configs and the learning-rate
 * schedule. */
#define REAL float
#define X(name) mha_##name
#include "optim_core.inc"

int mha_optim_default_config(mha_optim_kind kind, mha_optim_config *cfg)
{
    if (cfg == NULL)
        return MHA_EINVAL;
    mha_optim_config c = {0};
    c.kind = kind;
    switch (kind) {
    case MHA_OPTIM_SGD:
        break;
    case MHA_OPTIM_ADAM:
    case MHA_OPTIM_ADAMW:
        c.beta1 = 0.9;
        c.beta2 = 0.999;
        c.eps = 1e-8;
        c.weight_decay = kind == MHA_OPTIM_ADAMW ? 0.01 : 0.0;
        break;
    default:
        return MHA_EINVAL;
    }
    *cfg = c;
    return MHA_OK;
}

int mha_lr_at(const mha_lr_schedule *s, uint64_t step, double *lr)
{
    if (s == NULL || lr == NULL)
        return MHA_EINVAL;
    const double base = s->base_lr, lo = s->min_lr;
    const uint64_t W = s->warmup_steps, T = s->total_steps;
    if (!in_range(base, 0.0, INFINITY, 1) || !in_range(lo, 0.0, base, 0) || T == 0 || W >= T)
        return MHA_EINVAL;
    if (step < W) {
        *lr = base * (double)(step + 1) / (double)W; /* linear warm-up, step + 1 <= W */
    } else if (step < T - 1) {
        /* here W <= step < T − 1, so T − 1 − W >= 1 */
        const double pi = 3.14159265358979323846;
        double q = (double)(step - W) / (double)(T - 1 - W);
        *lr = lo + (base - lo) * 0.5 * (1.0 + cos(pi * q));
    } else {
        *lr = lo; /* step >= T − 1 and >= W */
    }
    return MHA_OK;
}
