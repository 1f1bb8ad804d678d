/*
 * train/common/dist.h: the MPI layer of data-parallel training, and its one-rank stand-in.
 * Built twice (CMakeLists.txt): with MHA_WITH_MPI for mha-gpt-mpi, without for mha-gpt.
 */
#include "dist.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef MHA_WITH_MPI
#include <mpi.h>
#endif

#include "cli.h"
#include "crc32c.h"
#include "report.h"

static int g_rank = 0, g_size = 1;

/* the shared part of both builds */

int dist_rank(void) { return g_rank; }
int dist_size(void) { return g_size; }

void dist_share(size_t n, size_t *first, size_t *count)
{
    const size_t N = (size_t)g_size, r = (size_t)g_rank, q = n / N, extra = n % N;
    *count = q + (r < extra);
    *first = r * q + (r < extra ? r : extra);
}

void dist_bcast_layout(const ckpt_layout *lay)
{
    if (dist_size() == 1)
        return;
    for (size_t i = 0; i < lay->n_t; i++) {
        const ckpt_tensor *t = &lay->t[i];
        float *const a[3] = {t->p, t->m, t->v};
        for (int k = 0; k < 3; k++)
            if (a[k] != NULL)
                dist_bcast(a[k], t->numel * sizeof(float));
    }
    for (size_t i = 0; i < lay->n_s; i++) /* U64 and F64 values: 8 bytes each */
        dist_bcast(lay->s[i].data, (lay->s[i].ndim ? lay->s[i].len : 1) * 8);
}

void dist_agree_inputs(const cli_opt *opts, size_t n, const void *cfg, const char *data,
                       const char *resume)
{
    if (g_size == 1)
        return;
    uint32_t opt = 0; /* every option's name and value, as --help would print them */
    for (size_t i = 0; i < n; i++) {
        char v[2 * CLI_PATH_CAP];
        cli_format(&opts[i], cfg, v, sizeof v);
        opt = crc32c(crc32c(opt, opts[i].name, strlen(opts[i].name) + 1), v, strlen(v) + 1);
    }
    uint64_t data_fp = 0, ck = 0;
    if (crc32c_file(data, &data_fp) != 0)
        cli_die(CLI_EXIT_USAGE, "cannot read %s", data);
    if (resume[0] && crc32c_file(resume, &ck) != 0)
        cli_die(CLI_EXIT_USAGE, "cannot read %s", resume);
    char what_data[CLI_PATH_CAP + 16], what_ck[CLI_PATH_CAP + 24];
    snprintf(what_data, sizeof what_data, "--data %s", data);
    snprintf(what_ck, sizeof what_ck, "checkpoint (--resume %s)", resume);
    /* the checkpoint first: on --resume the options (and so --data's path) not given on the
     * command line are its, so another checkpoint makes the others differ too */
    const char *const what[3] = {what_ck, what_data, "set of options"};
    const uint64_t v[3] = {ck, data_fp, opt};
    dist_agree(what, v, 3);
}

struct dist_grads {
    mha_gpt *g;
    dist_sync mode;
    size_t n_tensors;
    float **grad;       /* [n_tensors] the model's gradient of each tensor       */
    size_t *numel;      /* [n_tensors]                                          */
    float scale;        /* this rank's share of the global batch                 */
    double wait;        /* seconds in dist_grads_finish's waits                  */
    uint64_t steps;
#ifdef MHA_WITH_MPI
    MPI_Request *req;   /* [n_tensors] the all-reduces started (one per run of tensors) */
    size_t n_req;
#endif
};

dist_grads *dist_grads_create(const ckpt_tensor *pt, size_t n, mha_gpt *g, dist_sync mode)
{
    dist_grads *d = calloc(1, sizeof *d);
    if (!d)
        return NULL;
    d->g = g;
    d->mode = g ? mode : DIST_SYNC_AFTER; /* no model hook: one sum after backward */
    d->scale = 1;
    if (g_size == 1)
        return d; /* nothing to combine */
    d->n_tensors = n;
    d->grad = calloc(n ? n : 1, sizeof *d->grad);
    d->numel = calloc(n ? n : 1, sizeof *d->numel);
#ifdef MHA_WITH_MPI
    d->req = calloc(n ? n : 1, sizeof *d->req);
#endif
    if (!d->grad || !d->numel
#ifdef MHA_WITH_MPI
        || !d->req
#endif
    ) {
        dist_grads_destroy(d);
        return NULL;
    }
    for (size_t i = 0; i < n; i++) {
        d->grad[i] = pt[i].g;
        d->numel[i] = pt[i].numel;
    }
    return d;
}

void dist_grads_destroy(dist_grads *d)
{
    if (!d)
        return;
    if (d->g && g_size > 1)
        mha_gpt_set_grad_hook(d->g, NULL, NULL);
    free(d->grad);
    free(d->numel);
#ifdef MHA_WITH_MPI
    free(d->req);
#endif
    free(d);
}

void dist_grads_stats(const dist_grads *d, double *wait_seconds, uint64_t *steps)
{
    *wait_seconds = d->wait;
    *steps = d->steps;
}

int dist_main(int argc, char **argv, const char *name, int (*run)(int argc, char **argv))
{
    static char full[64]; /* the program's name for its life (cli_start_program keeps it) */
    snprintf(full, sizeof full, "%s%s", name, dist_with_mpi() ? "-mpi" : "");
    dist_init(&argc, &argv, full);
    const int status = run(argc, argv);
    dist_finalize();
    return status;
}

#ifndef MHA_WITH_MPI
/* ---- one rank ------------------------------------------------------------------------ */

void dist_init(int *argc, char ***argv, const char *name)
{
    (void)argc;
    (void)argv;
    cli_start_program(name);
}
void dist_finalize(void) {}
int dist_with_mpi(void) { return 0; }
void dist_sum(double *x, size_t n)
{
    (void)x;
    (void)n;
}
int dist_any(int flag) { return flag != 0; }
int dist_max(int v) { return v; }
int dist_same(uint64_t v)
{
    (void)v;
    return 1;
}
void dist_bcast(void *buf, size_t bytes)
{
    (void)buf;
    (void)bytes;
}
void dist_barrier(void) {}
void dist_agree(const char *const *what, const uint64_t *v, size_t n)
{
    (void)what, (void)v, (void)n;
}
void dist_grads_begin(dist_grads *d, double scale) { d->scale = (float)scale; }
void dist_grads_finish(dist_grads *d) { d->steps++; }

#else
/* ---- MPI ------------------------------------------------------------------------------ */

void dist_init(int *argc, char ***argv, const char *name)
{
    int provided = 0;
    if (MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS) {
        fprintf(stderr, "%s: cannot initialise MPI\n", name);
        exit(CLI_EXIT_RUNTIME);
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &g_size);
    static char label[96];
    if (g_rank == 0) {
        snprintf(label, sizeof label, "%s", name);
    } else {
        snprintf(label, sizeof label, "%s (rank %d)", name, g_rank);
        if (!freopen("/dev/null", "w", stdout)) /* rank 0 alone prints results */
            fprintf(stderr, "%s: cannot silence stdout\n", label);
    }
    cli_start_program(label);
    cli_set_usage_quiet(g_rank != 0);
    if (provided < MPI_THREAD_FUNNELED) {
        fprintf(stderr, "%s: this MPI does not support OpenMP threads beside MPI calls "
                "(MPI_THREAD_FUNNELED)\n", label);
        MPI_Abort(MPI_COMM_WORLD, CLI_EXIT_RUNTIME);
    }
}

void dist_finalize(void) { MPI_Finalize(); }
int dist_with_mpi(void) { return 1; }

/* MPI counts are int: send n items of `bytes` each in pieces of at most 2^30 items. */
enum { DIST_CHUNK = 1 << 30 };

void dist_sum(double *x, size_t n)
{
    for (size_t i = 0; i < n; i += DIST_CHUNK) {
        const size_t m = n - i < DIST_CHUNK ? n - i : DIST_CHUNK;
        MPI_Allreduce(MPI_IN_PLACE, x + i, (int)m, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        /* MPI does not promise every rank the same bits of a sum; the ranks decide on these
         * values (the best checkpoint, a non-finite stop), so they take rank 0's */
        MPI_Bcast(x + i, (int)m, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    }
}

int dist_any(int flag)
{
    int f = flag != 0, any = 0;
    MPI_Allreduce(&f, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    return any;
}

int dist_max(int v)
{
    int m = v;
    MPI_Allreduce(&v, &m, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    return m;
}

int dist_same(uint64_t v)
{
    uint64_t lo = 0, hi = 0;
    MPI_Allreduce(&v, &lo, 1, MPI_UINT64_T, MPI_MIN, MPI_COMM_WORLD);
    MPI_Allreduce(&v, &hi, 1, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD);
    return lo == hi;
}

void dist_barrier(void) { MPI_Barrier(MPI_COMM_WORLD); }

void dist_agree(const char *const *what, const uint64_t *v, size_t n)
{
    /* every rank gets every rank's n values, so every rank finds the same first difference */
    uint64_t *all = malloc((size_t)g_size * n * sizeof *all);
    if (all == NULL)
        cli_die(CLI_EXIT_RUNTIME, "out of memory");
    MPI_Allgather(v, (int)n, MPI_UINT64_T, all, (int)n, MPI_UINT64_T, MPI_COMM_WORLD);
    for (int r = 1; r < g_size; r++) {
        const uint64_t *vr = all + (size_t)r * n;
        size_t n_diff = 0, last = 0;
        for (size_t i = 0; i < n; i++)
            if (vr[i] != all[i])
                n_diff++, last = i;
        if (n_diff == 0)
            continue;
        if (g_rank == 0) { /* every item that differs: "another A, another B and another C" */
            fprintf(stderr, "%s: rank %d was given", cli_program(), r);
            for (size_t i = 0, k = 0; i < n; i++)
                if (vr[i] != all[i])
                    fprintf(stderr, "%s another %s", k++ == 0 ? "" : i == last ? " and" : ",",
                            what[i]);
            fprintf(stderr, " than rank 0: every rank must read the same options and files "
                    "(copy them to every host, at the same paths)\n");
            fflush(stderr);
        }
        free(all);
        MPI_Barrier(MPI_COMM_WORLD); /* rank 0's message is out before any rank exits */
        exit(CLI_EXIT_USAGE);
    }
    free(all);
}

void dist_bcast(void *buf, size_t bytes)
{
    for (size_t i = 0; i < bytes; i += DIST_CHUNK) {
        const size_t m = bytes - i < DIST_CHUNK ? bytes - i : DIST_CHUNK;
        MPI_Bcast((char *)buf + i, (int)m, MPI_BYTE, 0, MPI_COMM_WORLD);
    }
}

/* Sum n floats at x across ranks in place: started (non-blocking) when n fits an int
 * count, else summed now in pieces. */
static void sum_run(dist_grads *d, float *x, size_t n)
{
    if (n > (size_t)DIST_CHUNK) {
        for (size_t i = 0; i < n; i += DIST_CHUNK) {
            const size_t m = n - i < DIST_CHUNK ? n - i : DIST_CHUNK;
            MPI_Allreduce(MPI_IN_PLACE, x + i, (int)m, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        }
        return;
    }
    MPI_Iallreduce(MPI_IN_PLACE, x, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD,
                   &d->req[d->n_req++]);
}

/* Start the sum of the gradients of tensors [first, first + count) (called by the model
 * during backward, and without overlap once for all after it): each is scaled by this
 * rank's share in place, and every run of tensors adjacent in memory is summed in place by
 * one all-reduce — no copies. The model keeps its gradients in one arena in tensor order
 * (mha_gpt_grads), so a block's range is one all-reduce, and without overlap the whole
 * gradient is one. */
static void start_range(dist_grads *d, size_t first, size_t count)
{
    float *run = NULL;
    size_t run_n = 0;
    for (size_t i = first; i < first + count; i++) {
        float *g = d->grad[i];
        const size_t n = d->numel[i];
        if (d->scale != 1.0f)
            for (size_t k = 0; k < n; k++)
                g[k] *= d->scale;
        if (run && run + run_n == g) {
            run_n += n;
            continue;
        }
        if (run)
            sum_run(d, run, run_n);
        run = g;
        run_n = n;
    }
    if (run)
        sum_run(d, run, run_n);
    /* Open MPI moves non-blocking collectives on only inside MPI calls: poll the ones
     * started so far while backward goes on */
    int done;
    MPI_Testall((int)d->n_req, d->req, &done, MPI_STATUSES_IGNORE);
}

static void on_grads_ready(void *user, size_t first, size_t count)
{
    start_range(user, first, count);
}

void dist_grads_begin(dist_grads *d, double scale)
{
    d->scale = (float)scale;
    if (g_size == 1)
        return;
    d->n_req = 0;
    if (d->mode == DIST_SYNC_OVERLAP && d->g)
        mha_gpt_set_grad_hook(d->g, on_grads_ready, d);
}

void dist_grads_finish(dist_grads *d)
{
    d->steps++;
    if (g_size == 1)
        return;
    const double t0 = report_now();
    if (d->mode == DIST_SYNC_OVERLAP && d->g) {
        mha_gpt_set_grad_hook(d->g, NULL, NULL);
        MPI_Waitall((int)d->n_req, d->req, MPI_STATUSES_IGNORE);
    } else {
        start_range(d, 0, d->n_tensors);
        MPI_Waitall((int)d->n_req, d->req, MPI_STATUSES_IGNORE);
    }
    d->wait += report_now() - t0;
}
#endif
