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

/* What the average keeps across its files, held where a leak checker sees it when a later
 * file is refused and the program exits (cli_die). */
typedef struct avg_state {
    g2p_config cfg0;      /* the first file's configuration                           */
    g2p_run r0;           /* and its model: its tensors receive the mean              */
    double *sum;          /* [total] every weight summed over the files, in double     */
    size_t total;
    uint64_t step_max, steps_max;
    double elapsed_max;
    int same_run;         /* every file has the first's run id                        */
    cJSON *from;          /* [{file, step}] the files averaged                        */
} avg_state;
static avg_state g_avg;

/* --out: given, not one of the checkpoints, new unless force. */
static void check_out(const char *const *paths, size_t n, const char *out, int force)
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
}

/* Checkpoint k (path; the first was `first`) as a model in *r with its configuration in
 * *cfg; refused (exit 2) unless it is the first's model: the same sizes and vocabularies. */
static void load_one(const avg_state *a, const char *path, const char *first, size_t k,
                     g2p_config *cfg, g2p_run *r)
{
    g2p_defaults(cfg);
    g2p_vocab src = {0}, tgt = {0};
    char what[CLI_PATH_CAP + 32];
    snprintf(what, sizeof what, "cannot average %s", path);
    mha_st_file *f = g2p_open_checkpoint(path, what, NULL, cfg, &src, &tgt);
    const char *id = mha_st_meta(f, "run_id");
    snprintf(cfg->run_id, sizeof cfg->run_id, "%s", id && strlen(id) < sizeof cfg->run_id
                                                      ? id : "");
    if (k > 0) { /* the same model as the first, before this one is built */
        const char *d = size_mismatch(&a->cfg0, cfg);
        const int vocab =
            !g2p_vocab_equal(&a->r0.src, &src) || !g2p_vocab_equal(&a->r0.tgt, &tgt);
        if (*d || vocab) {
            mha_st_free(f);
            g2p_vocab_free(&src);
            g2p_vocab_free(&tgt);
            if (*d)
                cli_die(CLI_EXIT_USAGE, "%s: its --%s differs from %s's: not the same "
                        "model", what, d, first);
            cli_die(CLI_EXIT_USAGE, "%s: its vocabularies differ from %s's: not the same "
                    "model", what, first);
        }
    }
    g2p_load_model(r, cfg, f, what, &src, &tgt, 1);
    mha_st_free(f);
    g2p_vocab_free(&src);
    g2p_vocab_free(&tgt);
}

/* Checkpoint k's weights into the sums, its step, --steps and time into the maxima, its file
 * into the list. */
static void accumulate(avg_state *a, const char *path, size_t k, const g2p_config *cfg,
                       const g2p_run *r)
{
    if (k == 0) {
        a->cfg0 = *cfg;
        for (size_t t = 0; t < r->n_pt; t++)
            a->total += r->pt[t].numel;
        a->sum = calloc(a->total + 1, sizeof *a->sum);
        if (!a->sum)
            cli_die(CLI_EXIT_RUNTIME, "out of memory");
    } else {
        a->same_run &= strcmp(cfg->run_id, a->cfg0.run_id) == 0;
    }
    size_t o = 0;
    for (size_t t = 0; t < r->n_pt; t++)
        for (size_t i = 0; i < r->pt[t].numel; i++)
            a->sum[o++] += (double)r->pt[t].p[i];
    a->step_max = r->step > a->step_max ? r->step : a->step_max;
    a->steps_max = cfg->steps > a->steps_max ? cfg->steps : a->steps_max;
    a->elapsed_max = cfg->elapsed > a->elapsed_max ? cfg->elapsed : a->elapsed_max;
    cJSON *e = cJSON_CreateObject();
    if (!e || !cJSON_AddStringToObject(e, "file", path) ||
        !cJSON_AddNumberToObject(e, "step", (double)r->step))
        cli_die(CLI_EXIT_RUNTIME, "out of memory");
    cJSON_AddItemToArray(a->from, e);
}

/* The mean of the n files into the first model's tensors (exit 2 if an element is not
 * finite), its state that of a model nobody has evaluated yet, written to out. */
static void write_mean(avg_state *a, size_t n, const char *out)
{
    g2p_run *r0 = &a->r0;
    size_t o = 0;
    for (size_t t = 0; t < r0->n_pt; t++)
        for (size_t i = 0; i < r0->pt[t].numel; i++, o++) {
            const float v = (float)(a->sum[o] / (double)n);
            if (!isfinite(v))
                cli_die(CLI_EXIT_USAGE, "average: %s is not finite in the mean",
                        r0->pt[t].name);
            r0->pt[t].p[i] = v;
        }
    free(a->sum);
    a->sum = NULL;
    r0->step = a->step_max;
    r0->best_step = 0;
    r0->best_wer = INFINITY;
    r0->elapsed = a->elapsed_max;
    a->cfg0.steps = a->steps_max;
    if (!a->same_run)
        a->cfg0.run_id[0] = '\0';
    char *fj = cJSON_PrintUnformatted(a->from);
    cJSON_Delete(a->from);
    a->from = NULL;
    if (!fj)
        cli_die(CLI_EXIT_RUNTIME, "out of memory");
    r0->averaged_from = fj;
    if (g2p_save(r0, &a->cfg0, out, 0) != MHA_OK)
        cli_die(CLI_EXIT_RUNTIME, "average: %s was not written", out);
    printf("mha-g2p average: the mean of %zu checkpoint%s (steps up to %llu) in %s\n", n,
           n == 1 ? "" : "s", (unsigned long long)a->step_max, out);
    r0->averaged_from = NULL;
    free(fj);
    g2p_run_destroy(r0);
}

int g2p_average_main(const char *const *paths, size_t n, const char *out, int force)
{
    check_out(paths, n, out, force);
    avg_state *a = &g_avg;
    a->same_run = 1;
    a->from = cJSON_CreateArray();
    if (!a->from)
        cli_die(CLI_EXIT_RUNTIME, "out of memory");
    for (size_t k = 0; k < n; k++) {
        g2p_config cfg;
        g2p_run r;
        load_one(a, paths[k], paths[0], k, &cfg, &r);
        accumulate(a, paths[k], k, &cfg, &r);
        if (k == 0)
            a->r0 = r; /* kept: its tensors receive the mean */
        else
            g2p_run_destroy(&r);
    }
    write_mean(a, n, out);
    return 0;
}
