/*
 * g2p_score — edit distance, closest reference, stress map and the WER/PER tallies (see
 * g2p_score.h for the contract).
 */
#include "g2p_score.h"
#include "g2p_internal.h"

#include <stdlib.h>
#include <string.h>

/* ---- distances ----------------------------------------------------------------------- */

/* One row of the dynamic programme at a time:
 *   D[i][j] = min(D[i−1][j] + 1, D[i][j−1] + 1, D[i−1][j−1] + [a_i ≠ b_j]),
 *   D[0][j] = j, D[i][0] = i;   work[j] holds D[i][j] for the row i being computed. */
size_t g2p_edit_distance(const int32_t *a, size_t na, const int32_t *b, size_t nb, size_t *work)
{
    for (size_t j = 0; j <= nb; j++)
        work[j] = j;
    for (size_t i = 1; i <= na; i++) {
        size_t diag = work[0]; /* D[i−1][j−1] */
        work[0] = i;
        for (size_t j = 1; j <= nb; j++) {
            size_t up = work[j]; /* D[i−1][j] */
            size_t best = diag + (a[i - 1] != b[j - 1]);
            if (up + 1 < best)
                best = up + 1;
            if (work[j - 1] + 1 < best)
                best = work[j - 1] + 1;
            work[j] = best;
            diag = up;
        }
    }
    return work[nb];
}

g2p_closest g2p_closest_ref(const int32_t *hyp, size_t nh, const int32_t *ref,
                            const size_t *ref_off, size_t n_ref, size_t *work)
{
    g2p_closest best = {0, (size_t)-1, (size_t)-1};
    for (size_t i = 0; i < n_ref; i++) {
        size_t len = ref_off[i + 1] - ref_off[i];
        /* the reference as `a`, so the scratch depends on the hypothesis only */
        size_t d = g2p_edit_distance(ref + ref_off[i], len, hyp, nh, work);
        if (d < best.dist || (d == best.dist && len < best.len))
            best = (g2p_closest){i, d, len};
    }
    if (n_ref == 0)
        best = (g2p_closest){0, 0, 0};
    return best;
}

/* ---- the stress map ------------------------------------------------------------------ */

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Symbol s without a trailing stress digit: its length. */
static size_t unstressed_len(const char *s)
{
    size_t n = strlen(s);
    return n >= 2 && s[n - 1] >= '0' && s[n - 1] <= '2' ? n - 1 : n;
}

int g2p_stress_map(const g2p_vocab *tgt, g2p_vocab *reduced, int32_t *map, char *err, size_t errcap)
{
    if (tgt == NULL || tgt->sym == NULL || reduced == NULL || map == NULL ||
        tgt->n_special > tgt->n)
        return util_fail(MHA_EINVAL, err, errcap, "g2p_stress_map: NULL argument");
    size_t ns = tgt->n_special, n = tgt->n;
    /* every symbol stripped (copies), then sorted and made distinct */
    char **all = calloc(n ? n : 1, sizeof *all), **uniq = calloc(n ? n : 1, sizeof *uniq);
    int rc = all != NULL && uniq != NULL ? MHA_OK : MHA_ENOMEM;
    for (size_t i = 0; i < n && rc == MHA_OK; i++) {
        size_t l = i < ns ? strlen(tgt->sym[i]) : unstressed_len(tgt->sym[i]);
        if ((all[i] = malloc(l + 1)) == NULL)
            rc = MHA_ENOMEM;
        else {
            memcpy(all[i], tgt->sym[i], l);
            all[i][l] = '\0';
        }
    }
    size_t nu = 0;
    if (rc == MHA_OK) {
        memcpy(uniq, all, n * sizeof *uniq);
        qsort(uniq + ns, n - ns, sizeof *uniq, cmp_str);
        nu = ns;
        for (size_t i = ns; i < n; i++)
            if (nu == ns || strcmp(uniq[nu - 1], uniq[i]) != 0)
                uniq[nu++] = uniq[i];
        for (size_t i = ns; i < nu && rc == MHA_OK; i++)
            for (size_t s = 0; s < ns; s++)
                if (strcmp(uniq[i], tgt->sym[s]) == 0)
                    rc =
                        util_fail(MHA_EFORMAT, err, errcap,
                                  "g2p_stress_map: \"%s\" without its stress digit is the reserved "
                                  "symbol %zu",
                                  uniq[i], s);
    }
    g2p_vocab red = {0};
    if (rc == MHA_OK)
        rc = g2p_vocab_make(&red, (const char *const *)uniq, nu, ns, err, errcap);
    else if (rc == MHA_ENOMEM)
        util_fail(rc, err, errcap, "g2p_stress_map: out of memory");
    if (rc == MHA_OK)
        for (size_t i = 0; i < n; i++)
            map[i] = g2p_vocab_find(&red, all[i]); /* always found */
    for (size_t i = 0; all != NULL && i < n; i++)
        free(all[i]);
    free(all);
    free(uniq);
    if (rc == MHA_OK)
        *reduced = red;
    return rc;
}

/* ---- tallies ------------------------------------------------------------------------- */

double g2p_wer(const g2p_tally *t)
{
    return t != NULL && t->words > 0 ? (double)t->wrong / (double)t->words : 0.0;
}

double g2p_per(const g2p_tally *t)
{
    return t != NULL && t->ref_len > 0 ? (double)t->edits / (double)t->ref_len : 0.0;
}

int g2p_scorer_init(g2p_scorer *s, const int32_t *map, size_t map_n)
{
    if (s == NULL || (map != NULL && map_n == 0))
        return MHA_EINVAL;
    memset(s, 0, sizeof *s);
    s->map = map;
    s->map_n = map != NULL ? map_n : 0;
    return MHA_OK;
}

void g2p_scorer_free(g2p_scorer *s)
{
    if (s == NULL)
        return;
    free(s->work);
    free(s->buf);
    free(s->off);
    memset(s, 0, sizeof *s);
}

/* Make *p hold at least n elements of `size` bytes (doubling); 0 or -1. */
static int reserve(void *p, size_t *cap, size_t n, size_t size)
{
    if (n <= *cap)
        return 0;
    size_t c = *cap < 64 ? 64 : *cap;
    while (c < n)
        c = c > SIZE_MAX / 2 / size ? n : 2 * c;
    void *q = realloc(*(void **)p, c * size);
    if (q == NULL)
        return -1;
    *(void **)p = q;
    *cap = c;
    return 0;
}

static void tally(g2p_tally *t, g2p_closest c)
{
    t->words++;
    t->wrong += c.dist != 0;
    t->edits += c.dist;
    t->ref_len += c.len;
}

int g2p_scorer_add(g2p_scorer *s, const int32_t *hyp, size_t nh, const int32_t *ref,
                   const size_t *ref_off, size_t n_ref, g2p_closest out[2], char *err,
                   size_t errcap)
{
    if (s == NULL || (hyp == NULL && nh > 0) || ref == NULL || ref_off == NULL || n_ref == 0)
        return util_fail(MHA_EINVAL, err, errcap,
                         "g2p_scorer_add: NULL argument or a word without references");
    size_t total = ref_off[n_ref] - ref_off[0];
    for (size_t i = 0; i < n_ref; i++)
        if (ref_off[i + 1] < ref_off[i])
            return util_fail(MHA_EINVAL, err, errcap, "g2p_scorer_add: ref_off decreases at %zu",
                             i);
    if (s->map != NULL) {
        for (size_t i = 0; i < nh; i++)
            if (hyp[i] < 0 || (size_t)hyp[i] >= s->map_n)
                return util_fail(MHA_EINVAL, err, errcap,
                                 "g2p_scorer_add: hypothesis id %d at %zu outside [0, %zu)",
                                 (int)hyp[i], i, s->map_n);
        for (size_t k = ref_off[0]; k < ref_off[n_ref]; k++)
            if (ref[k] < 0 || (size_t)ref[k] >= s->map_n)
                return util_fail(MHA_EINVAL, err, errcap,
                                 "g2p_scorer_add: reference id %d outside [0, %zu)", (int)ref[k],
                                 s->map_n);
    }
    if (reserve(&s->work, &s->cap, nh + 1, sizeof *s->work) != 0 ||
        (s->map != NULL && (reserve(&s->buf, &s->cap_buf, nh + total, sizeof *s->buf) != 0 ||
                            reserve(&s->off, &s->cap_off, n_ref + 1, sizeof *s->off) != 0)))
        return util_fail(MHA_ENOMEM, err, errcap, "g2p_scorer_add: out of memory");
    g2p_closest c[2] = {g2p_closest_ref(hyp, nh, ref, ref_off, n_ref, s->work), {0, 0, 0}};
    if (s->map != NULL) {
        /* buf = [mapped hypothesis (nh) | mapped references (total)], offsets from 0 */
        int32_t *mh = s->buf, *mr = s->buf + nh;
        for (size_t i = 0; i < nh; i++)
            mh[i] = s->map[hyp[i]];
        for (size_t k = 0; k < total; k++)
            mr[k] = s->map[ref[ref_off[0] + k]];
        for (size_t i = 0; i <= n_ref; i++)
            s->off[i] = ref_off[i] - ref_off[0];
        c[1] = g2p_closest_ref(mh, nh, mr, s->off, n_ref, s->work);
        tally(&s->nostress, c[1]);
    }
    tally(&s->stress, c[0]);
    if (out != NULL) {
        out[0] = c[0];
        out[1] = c[1];
    }
    return MHA_OK;
}
