/*
 * mha-g2p average: checkpoint averaging. The weights of several checkpoints of one model
 * (same sizes, same vocabularies: typically the last few of a run) averaged element by
 * element into one weights-only model, which pronounce and eval read like any other.
 *
 * Each element is summed in double over the k files in the order given and divided by k
 * before one rounding to float: the mean of k identical files is the file's weights bit for
 * bit, and the mean of two is the exactly rounded (a + b) / 2.
 */
#include "g2p_prog.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cJSON.h>

/* The sizes that make two checkpoints' tensors the same list: "" when a and b agree, else
 * the name of the first option in which they differ. */
static const char *size_mismatch(const g2p_config *a, const g2p_config *b)
{
    if (a->enc_layers != b->enc_layers) return "enc-layers";
    if (a->dec_layers != b->dec_layers) return "dec-layers";
    if (a->heads != b->heads) return "heads";
    if (a->dim != b->dim) return "dim";
    if (a->mlp_dim != b->mlp_dim) return "mlp-dim";
    if (a->src_context != b->src_context) return "src-context";
    if (a->tgt_context != b->tgt_context) return "tgt-context";
    return "";
}

int g2p_average_main(const char *const *paths, size_t n, const char *out, int force)
{
    if (n == 0)
        cli_die_usage("average: name the checkpoints to average (mha-g2p average CKPT... "
                      "--out MODEL)");
    if (!out[0])
        cli_die_usage("average: --out MODEL is required");
    for (size_t i = 0; i < n; i++)
        if (cli_same_file(paths[i], out))
            cli_die_usage("average: --out %s is one of the checkpoints it averages", out);
    struct stat st;
    if (!force && stat(out, &st) == 0)
        cli_die_usage("average: %s exists (--force replaces it)", out);
    if (errno = 0, stat(out, &st) != 0 && errno != ENOENT)
        cli_die(CLI_EXIT_RUNTIME, "average: cannot use --out %s: %s", out, strerror(errno));

    /* what lives until the end, held where a leak checker sees it when a later file is
     * refused and the program exits (cli_die) */
    static g2p_config cfg0;
    static g2p_run r0;
    static double *sum;
    size_t total = 0;
    uint64_t step_max = 0, steps_max = 0;
    double elapsed_max = 0;
    int same_run = 1;
    static cJSON *from;
    from = cJSON_CreateArray();
    if (!from)
        cli_die(CLI_EXIT_RUNTIME, "out of memory");
    for (size_t k = 0; k < n; k++) {
        g2p_config cfg;
        g2p_defaults(&cfg);
        g2p_vocab src = {0}, tgt = {0};
        char what[CLI_PATH_CAP + 32];
        snprintf(what, sizeof what, "cannot average %s", paths[k]);
        mha_st_file *f = g2p_open_checkpoint(paths[k], what, NULL, &cfg, &src, &tgt);
        const char *id = mha_st_meta(f, "run_id");
        snprintf(cfg.run_id, sizeof cfg.run_id, "%s", id && strlen(id) < sizeof cfg.run_id
                                                        ? id : "");
        if (k > 0) { /* the same model as the first, before this one is built */
            const char *d = size_mismatch(&cfg0, &cfg);
            const int vocab =
                !g2p_vocab_equal(&r0.src, &src) || !g2p_vocab_equal(&r0.tgt, &tgt);
            if (*d || vocab) {
                mha_st_free(f);
                g2p_vocab_free(&src);
                g2p_vocab_free(&tgt);
                if (*d)
                    cli_die(CLI_EXIT_USAGE, "%s: its --%s differs from %s's: not the same "
                            "model", what, d, paths[0]);
                cli_die(CLI_EXIT_USAGE, "%s: its vocabularies differ from %s's: not the same "
                        "model", what, paths[0]);
            }
        }
        g2p_run r;
        g2p_load_model(&r, &cfg, f, what, &src, &tgt, 1);
        mha_st_free(f);
        if (k == 0) {
            cfg0 = cfg;
            for (size_t t = 0; t < r.n_pt; t++)
                total += r.pt[t].numel;
            sum = calloc(total + 1, sizeof *sum);
            if (!sum)
                cli_die(CLI_EXIT_RUNTIME, "out of memory");
        } else {
            same_run &= strcmp(cfg.run_id, cfg0.run_id) == 0;
        }
        size_t o = 0;
        for (size_t t = 0; t < r.n_pt; t++)
            for (size_t i = 0; i < r.pt[t].numel; i++)
                sum[o++] += (double)r.pt[t].p[i];
        step_max = r.step > step_max ? r.step : step_max;
        steps_max = cfg.steps > steps_max ? cfg.steps : steps_max;
        elapsed_max = cfg.elapsed > elapsed_max ? cfg.elapsed : elapsed_max;
        cJSON *e = cJSON_CreateObject();
        if (!e || !cJSON_AddStringToObject(e, "file", paths[k]) ||
            !cJSON_AddNumberToObject(e, "step", (double)r.step))
            cli_die(CLI_EXIT_RUNTIME, "out of memory");
        cJSON_AddItemToArray(from, e);
        g2p_vocab_free(&src);
        g2p_vocab_free(&tgt);
        if (k == 0)
            r0 = r; /* kept: its tensors receive the mean */
        else
            g2p_run_destroy(&r);
    }
    size_t o = 0;
    for (size_t t = 0; t < r0.n_pt; t++)
        for (size_t i = 0; i < r0.pt[t].numel; i++, o++) {
            const float v = (float)(sum[o] / (double)n);
            if (!isfinite(v))
                cli_die(CLI_EXIT_USAGE, "average: %s is not finite in the mean",
                        r0.pt[t].name);
            r0.pt[t].p[i] = v;
        }
    free(sum);
    /* a model nobody has evaluated yet: the state says so, as a fresh run's does */
    r0.step = step_max;
    r0.best_step = 0;
    r0.best_wer = INFINITY;
    r0.elapsed = elapsed_max;
    cfg0.steps = steps_max;
    if (!same_run)
        cfg0.run_id[0] = '\0';
    char *fj = cJSON_PrintUnformatted(from);
    cJSON_Delete(from);
    if (!fj)
        cli_die(CLI_EXIT_RUNTIME, "out of memory");
    r0.averaged_from = fj;
    if (g2p_save(&r0, &cfg0, out, 0) != MHA_OK)
        cli_die(CLI_EXIT_RUNTIME, "average: %s was not written", out);
    printf("mha-g2p average: the mean of %zu checkpoint%s (steps up to %llu) in %s\n", n,
           n == 1 ? "" : "s", (unsigned long long)step_max, out);
    r0.averaged_from = NULL;
    free(fj);
    g2p_run_destroy(&r0);
    return 0;
}
