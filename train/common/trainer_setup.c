/*
 * The trainer's setup half (trainer.h): what the three programs do before their loop, once —
 * the options read with which were given, the schedule's checks, a checkpoint opened and
 * verified with its options taken, its run state read and checked before a model is built,
 * the shapes a configuration needs, and whether a resumed run is finished already.
 * Refusals exit 2 naming the option or the checkpoint's entry (cli.h).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trainer.h"

void train_parse(const cli_opt *opts, size_t n, int argc, char **argv, int first, void *cfg,
                 int *given)
{
    const char **vals = calloc(n, sizeof *vals);
    if (!vals)
        cli_die(CLI_EXIT_RUNTIME, "out of memory");
    cli_collect(opts, n, argc, argv, first, vals);
    cli_apply(opts, n, vals, cfg);
    for (size_t k = 0; k < n; k++)
        given[k] = vals[k] != NULL;
    free(vals);
}

void train_check_schedule(double lr, double min_lr, uint64_t *warmup, uint64_t steps,
                          int warmup_given, int say)
{
    if (!warmup_given && *warmup >= steps) { /* a short run: a tenth of its steps */
        const uint64_t w = steps / 10;
        if (say)
            fprintf(stderr, "%s: note: the default --warmup %llu is not below --steps %llu: "
                    "using --warmup %llu (a tenth of the steps)\n", cli_program(),
                    (unsigned long long)*warmup, (unsigned long long)steps,
                    (unsigned long long)w);
        *warmup = w;
    }
    if (*warmup >= steps)
        cli_die_usage("invalid value '%llu' for --warmup: must be less than --steps (%llu)",
                      (unsigned long long)*warmup, (unsigned long long)steps);
    if (min_lr > lr)
        cli_die_usage("invalid value '%g' for --min-lr: must not exceed --lr (%g)", min_lr, lr);
}

int train_resume_finished(const char *resume, uint64_t ck_step, uint64_t steps)
{
    if (ck_step == steps) { /* finished, and no larger --steps: nothing to do */
        printf("%s: %s is a finished run (step %llu of --steps %llu); nothing to do. To train "
               "it further, resume with a larger --steps (e.g. --steps %llu).\n", cli_program(),
               resume, (unsigned long long)ck_step, (unsigned long long)steps,
               (unsigned long long)(2 * steps));
        return 1;
    }
    if (ck_step > steps)
        cli_die_usage("invalid value '%llu' for --steps: the checkpoint %s is at step %llu "
                      "already; give more steps than that", (unsigned long long)steps, resume,
                      (unsigned long long)ck_step);
    return 0;
}

/* ---- a checkpoint ---------------------------------------------------------------------- */

mha_st_file *train_open_checkpoint(const char *path, const char *what, const char *format,
                                   const char *kind, const cli_opt *opts, size_t n,
                                   const int *given, void *cfg, size_t cfg_size)
{
    mha_st_file *f = NULL;
    char err[2 * CLI_PATH_CAP] = "";
    /* the checksums first: nothing is read from a corrupt file */
    if (mha_st_load(path, &f, err, sizeof err) != MHA_OK ||
        ckpt_verify(f, err, sizeof err) != MHA_OK)
        cli_die(CLI_EXIT_USAGE, "%s: %s", what, err);
    if (!ckpt_has_checksums(f))
        fprintf(stderr, "%s: note: %s has no checksums (written before they existed): a "
                "damaged byte in it cannot be caught\n", cli_program(), path);
    const char *fmt = mha_st_meta(f, "format");
    if (kind && (!fmt || strcmp(fmt, format) != 0))
        cli_die(CLI_EXIT_USAGE, "%s: %s is not %s (its format is %s)", what, path, kind,
                fmt ? fmt : "not given");
    int *none = given ? NULL : calloc(n, sizeof *none);
    if (!given && !none)
        cli_die(CLI_EXIT_RUNTIME, "out of memory");
    if (ckpt_config_from_meta(f, path, what, format, opts, n, given ? given : none, cfg,
                              cfg_size, err, sizeof err) != MHA_OK)
        cli_die(CLI_EXIT_USAGE, "%s", err);
    free(none);
    return f;
}

void train_require_tensors(const mha_st_file *f, const char *what, const train_shape *need,
                           size_t n)
{
    char err[2 * CLI_PATH_CAP] = "";
    for (size_t i = 0; i < n; i++)
        if (mha_st_get(f, need[i].name, MHA_ST_F32, need[i].ndim, need[i].shape, NULL, err,
                       sizeof err) != MHA_OK)
            cli_die(CLI_EXIT_USAGE, "%s: %s", what, err);
}

/* State entry `name` of f (a U64 or F64 scalar, or U64 [len] when len > 0) into out:
 * 1, or 0 when f has no such entry and it is optional; exit 2 otherwise. */
static int read_entry(const mha_st_file *f, const char *what, const char *name,
                      mha_st_dtype dtype, size_t len, void *out, int required)
{
    char err[512];
    const void *d;
    const int st = mha_st_get(f, name, dtype, len ? 1 : 0, len ? &len : NULL, &d, err,
                              sizeof err);
    if (st == MHA_ENOTFOUND && !required)
        return 0;
    if (st != MHA_OK)
        cli_die(CLI_EXIT_USAGE, "%s: %s", what, err);
    memcpy(out, d, (len ? len : 1) * 8); /* U64 and F64: 8 bytes each */
    return 1;
}

/* The --steps a checkpoint was made with (its metadata "steps", read as the option) and its
 * elapsed seconds (0 when absent and optional). */
static void read_meta(const mha_st_file *f, const char *what, const cli_opt *opts, size_t n,
                      size_t cfg_size, int need_elapsed, train_state_read *s)
{
    void *tmp = calloc(1, cfg_size);
    if (!tmp)
        cli_die(CLI_EXIT_RUNTIME, "out of memory");
    const cli_opt *o = &opts[cli_index(opts, n, "steps")];
    const char *ms = mha_st_meta(f, "steps"), *me = mha_st_meta(f, "elapsed_seconds");
    if (!ms || cli_parse(o, ms, tmp) != NULL)
        cli_die(CLI_EXIT_USAGE, "%s: metadata steps is %s%s%s", what, ms ? "\"" : "missing",
                ms ? ms : "", ms ? "\", not a step count" : "");
    memcpy(&s->made, (const char *)tmp + o->off, sizeof s->made);
    free(tmp);
    s->elapsed = 0;
    if (!me && need_elapsed)
        cli_die(CLI_EXIT_USAGE, "%s: metadata elapsed_seconds is missing", what);
    if (me) {
        char *end;
        s->elapsed = strtod(me, &end);
        if (end == me || *end != '\0' || !(s->elapsed >= 0 && s->elapsed < 1e12))
            cli_die(CLI_EXIT_USAGE, "%s: metadata elapsed_seconds = \"%.64s\" is not a "
                    "duration in seconds", what, me);
    }
}

void train_read_state(const mha_st_file *f, const char *what, const cli_opt *opts, size_t n,
                      size_t cfg_size, const train_state_rules *rules, train_state_read *s)
{
    memset(s, 0, sizeof *s);
    read_meta(f, what, opts, n, cfg_size, rules->need_elapsed, s);
    uint64_t optim_t = 0, best = 0, rng[2] = {0, 1};
    double best_val = INFINITY;
    read_entry(f, what, "train.step", MHA_ST_U64, 0, &s->step, 1);
    const int has_optim = read_entry(f, what, "optimizer.step", MHA_ST_U64, 0, &optim_t,
                                     rules->full);
    if (rules->best) {
        read_entry(f, what, "best.step", MHA_ST_U64, 0, &best, 1);
        read_entry(f, what, rules->best, MHA_ST_F64, 0, &best_val, 1);
    }
    read_entry(f, what, "data.rng", MHA_ST_U64, 2, rng, rules->full);
    /* a best value is >= 0 (at most best_max); +inf, with best.step 0, until the first
     * evaluation */
    if (rules->best && (!(best_val >= 0) || isinf(best_val) != (best == 0) ||
                        (!isinf(best_val) && best_val > rules->best_max)))
        cli_die(CLI_EXIT_USAGE, "%s: inconsistent state: %s %g at best.step %llu (%s, or +inf "
                "before the first evaluation)", what, rules->best, best_val,
                (unsigned long long)best, rules->best_range);
    if (has_optim && optim_t != s->step)
        cli_die(CLI_EXIT_USAGE, "%s: inconsistent state: optimizer.step %llu differs from "
                "train.step %llu (every step is one optimizer step)", what,
                (unsigned long long)optim_t, (unsigned long long)s->step);
    if (best > s->step)
        cli_die(CLI_EXIT_USAGE, "%s: inconsistent state: best.step %llu is past train.step %llu",
                what, (unsigned long long)best, (unsigned long long)s->step);
    if (s->step > s->made)
        cli_die(CLI_EXIT_USAGE, "%s: inconsistent state: train.step %llu is past the --steps "
                "%llu it was made with", what, (unsigned long long)s->step,
                (unsigned long long)s->made);
    if ((rng[1] & 1u) == 0)
        cli_die(CLI_EXIT_USAGE, "%s: bad data.rng state: the PCG32 increment %llu is even (a "
                "generator's increment is always odd); the file is corrupt", what,
                (unsigned long long)rng[1]);
}

/* ---- the loop's files and reports ------------------------------------------------------ */

void train_loop_open_log(train_loop *L, const train_log *log, char *csv_path, size_t cap)
{
    L->out = log->out;
    L->rank0 = log->rank0;
    L->hist = log->hist;
    L->csv = log->csv;
    snprintf(csv_path, cap, "%s/train_log.csv", L->out);
    report_catch_stop_signals();
    L->last_ckpt = log->resume && log->resume[0] ? log->resume : NULL;
    if (L->rank0)
        report_csv_open(L->csv, csv_path, log->header, log->fmts, L->hist, log->step,
                        log->run_id, log->resume, log->force);
    L->csv->on_fail = train_loop_log_failed;
    L->csv->ctx = L;
}

void train_loop_report(train_loop *L, const train_report *r)
{
    L->rep = *r;
}

int train_program_run(const train_program *p, int argc, char **argv, int first)
{
    train_loop_init(p->loop);
    if (p->setup(p->ctx, argc, argv, first)) {
        p->destroy(p->ctx);
        return 0; /* a finished run: nothing to do */
    }
    p->plan(p->ctx);
    const int rc = train_loop_run_and_close(p->loop);
    if (rc)
        return rc;
    p->finish(p->ctx, *p->loop->step == p->loop->steps);
    p->destroy(p->ctx);
    return train_loop_exit_status(p->loop);
}

int train_loop_run_and_close(train_loop *L)
{
    const int rc = train_loop_run(L);
    if (rc)
        return rc;
    report_progress_end(L->rep.prog);
    train_loop_close(L);
    return 0;
}
