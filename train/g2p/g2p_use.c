/*
 * mha-g2p pronounce and eval: the programs' use of a trained model. pronounce goes through
 * libmha_g2p (include/mha_g2p.h: lexicons first, the model for the rest); eval decodes the
 * test or validation words itself (g2p_decode.c) and scores them (g2p_score.c).
 */
#include "g2p_prog.h"

#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cJSON.h>

#include "mha_g2p.h"
#include "report.h"

enum { SHOWN_BYTES = 64 }; /* of a word in a message */

/* word[len] as a message shows it, into buf[cap] (cap >= 2 * SHOWN_BYTES + 40): quoted, a
 * NUL byte written \0; a word of more than SHOWN_BYTES bytes cut after its first
 * SHOWN_BYTES (up to 3 fewer, to end on a whole UTF-8 character), followed by "..." and
 * its length — 'ABC...' (1048576 bytes) — so a huge line of input gives a short message. */
static const char *shown_word(const char *word, size_t len, char *buf, size_t cap)
{
    size_t keep = len;
    if (len > SHOWN_BYTES) {
        keep = SHOWN_BYTES;
        while (keep > SHOWN_BYTES - 3 && ((unsigned char)word[keep] & 0xC0) == 0x80)
            keep--; /* word[keep] continues a character: end before that character */
    }
    size_t o = 0;
    buf[o++] = '\'';
    for (size_t i = 0; i < keep; i++) {
        if (word[i] == '\0')
            buf[o++] = '\\';
        buf[o++] = word[i] == '\0' ? '0' : word[i];
    }
    if (keep < len)
        snprintf(buf + o, cap - o, "...' (%zu bytes)", len);
    else
        snprintf(buf + o, cap - o, "'");
    return buf;
}

/* Bytes of the longest symbol of v. */
static size_t longest_symbol(const g2p_vocab *v)
{
    size_t m = 0;
    for (size_t i = 0; i < v->n; i++)
        m = strlen(v->sym[i]) > m ? strlen(v->sym[i]) : m;
    return m;
}

/* Open the model of cfg->model for decoding. */
static void open_model(g2p_config *cfg, g2p_run *r, size_t beam);

/* The models a command decodes with: --model's (run[0], whose configuration is the
 * command's) and --ensemble's. */
typedef struct g2p_models {
    size_t n;
    g2p_run run[G2P_MAX_MODELS];
    mha_s2s *m[G2P_MAX_MODELS];
    char path[G2P_MAX_MODELS][CLI_PATH_CAP];
    int reverse;                /* they write right to left                             */
} g2p_models;

/* Open model p into ms (after --model's, whose configuration is cfg) for `role` ("in an
 * ensemble", "for rescoring"); exit 2 for a model that is not one of the same data as
 * --model's: other symbols, or other longest word or pronunciation (the sizes of the
 * decoder's caches), or, when direction >= 0, that does not write in that direction
 * (1: right to left). Returns its configuration's direction. */
static int add_model(const g2p_config *cfg, g2p_models *ms, const char *p, const char *role,
                     int direction, const g2p_run *first)
{
    g2p_config c;
    g2p_defaults(&c);
    snprintf(c.model, sizeof c.model, "%s", p);
    c.run_threads = cfg->run_threads;
    g2p_run *r = &ms->run[ms->n];
    open_model(&c, r, 1);
    char what[2 * CLI_PATH_CAP + 64];
    snprintf(what, sizeof what, "cannot use model %s %s with %s", p, role, cfg->model);
    if (!g2p_vocab_equal(&r->src, &first->src) || !g2p_vocab_equal(&r->tgt, &first->tgt))
        cli_die(CLI_EXIT_USAGE, "%s: other symbols (a model of other data)", what);
    if (c.src_context != cfg->src_context || c.tgt_context != cfg->tgt_context)
        cli_die(CLI_EXIT_USAGE, "%s: it reads words of up to %zu symbols and writes up to "
                "%zu, --model %zu and %zu (a model of other data)", what, c.src_context,
                c.tgt_context, cfg->src_context, cfg->tgt_context);
    if (direction >= 0 && c.reverse != direction)
        cli_die(CLI_EXIT_USAGE, "%s: it writes pronunciations %s, the others %s", what,
                c.reverse ? "right to left" : "left to right",
                direction ? "right to left" : "left to right");
    snprintf(ms->path[ms->n], sizeof ms->path[0], "%s", p);
    ms->m[ms->n] = r->m;
    ms->n++;
    return c.reverse;
}

/* Open --model (into cfg, as open_model) and every model of --ensemble (FILE[:FILE...]),
 * of one direction; and, when rs is not NULL, the models of --rescore into rs (a
 * direction of their own). Exit 2 as add_model. */
static void open_models(g2p_config *cfg, g2p_models *ms, size_t beam, g2p_models *rs)
{
    memset(ms, 0, sizeof *ms);
    char paths[G2P_MAX_MODELS][CLI_PATH_CAP];
    const size_t n_ens = g2p_split_list(cfg->ensemble, "--ensemble", paths, G2P_MAX_MODELS - 1);
    snprintf(ms->path[0], sizeof ms->path[0], "%s", cfg->model);
    open_model(cfg, &ms->run[0], beam);
    ms->m[0] = ms->run[0].m;
    ms->n = 1;
    for (size_t i = 0; i < n_ens; i++)
        add_model(cfg, ms, paths[i], "in an ensemble", cfg->reverse, &ms->run[0]);
    ms->reverse = cfg->reverse;
    if (!rs)
        return;
    memset(rs, 0, sizeof *rs);
    const size_t n_resc = g2p_split_list(cfg->rescore, "--rescore", paths, G2P_MAX_MODELS);
    int dir = -1;
    for (size_t i = 0; i < n_resc; i++)
        dir = add_model(cfg, rs, paths[i], "for rescoring", dir, &ms->run[0]);
    rs->reverse = dir == 1;
}

static void close_models(g2p_models *ms)
{
    for (size_t i = 0; i < ms->n; i++)
        g2p_run_destroy(&ms->run[i]);
    memset(ms, 0, sizeof *ms);
}

static void open_model(g2p_config *cfg, g2p_run *r, size_t beam)
{
    g2p_vocab src = {0}, tgt = {0};
    char what[CLI_PATH_CAP + 32];
    snprintf(what, sizeof what, "cannot use model %s", cfg->model);
    const int threads = cli_check_threads(cfg->run_threads, 1);
    mha_st_file *f = g2p_open_checkpoint(cfg->model, what, NULL, cfg, &src, &tgt);
    cfg->run_threads = threads;
    (void)beam;
    g2p_load_model(r, cfg, f, what, &src, &tgt, G2P_ENCODE_BATCH);
    mha_st_free(f);
    g2p_vocab_free(&src);
    g2p_vocab_free(&tgt);
}

/* Up to max words of standard input, one a line (blank lines skipped, spaces around a word
 * removed), into list[0 .. *n) (strdup'ed; list has room for max); *lineno counts the lines
 * read so far. A line holding a NUL byte is refused with a message naming it
 * (*bad_any = 1). Returns 0 at the end of the input. */
static int read_words(char **list, size_t max, size_t *n, size_t *lineno, int *bad_any)
{
    static char *line = NULL; /* one reader per process: pronounce's */
    static size_t lcap = 0;
    char shownw[2 * SHOWN_BYTES + 40];
    ssize_t got = 0;
    *n = 0;
    while (*n < max && (got = getline(&line, &lcap, stdin)) >= 0) {
        ++*lineno;
        while (got > 0 && (line[got - 1] == '\n' || line[got - 1] == '\r' ||
                           line[got - 1] == ' ' || line[got - 1] == '\t'))
            line[--got] = 0;
        char *w = line;
        while (w < line + got && (*w == ' ' || *w == '\t'))
            w++;
        const size_t wlen = (size_t)(line + got - w);
        if (wlen == 0)
            continue;
        if (memchr(w, '\0', wlen)) { /* a C string would end there: refused, not cut */
            fprintf(stderr, "%s: line %zu: word %s: a NUL byte is not in the model's "
                    "alphabet\n", cli_program(), *lineno, shown_word(w, wlen, shownw,
                                                                    sizeof shownw));
            *bad_any = 1;
            continue;
        }
        if (!(list[(*n)++] = strdup(w)))
            cli_die(CLI_EXIT_RUNTIME, "out of memory");
    }
    if (got < 0) {
        free(line);
        line = NULL;
        lcap = 0;
        return 0;
    }
    return 1;
}

/* Exit status and message of a library status: out of memory is a runtime error, the
 * rest (a file that is not a model or lexicon, a bad word) is the input's. */
static int exit_of(int st) { return st == MHA_ENOMEM ? CLI_EXIT_RUNTIME : CLI_EXIT_USAGE; }

/* Words pronounced per library call: the memory of pronounce does not grow with the input
 * (answers of one chunk at a time), and its output streams. */
enum { PRONOUNCE_CHUNK = 1024 };

/* Pronounce words list[0 .. n) and print their answers as dictionary lines (lex: the
 * lexicons' paths, for --show-source); out, n_out, status have room for PRONOUNCE_CHUNK
 * words. A word that fails is named on stderr with its own message (*bad_any = 1). */
static void pronounce_chunk(mha_g2p *g, const g2p_config *cfg, unsigned flags,
                            char *const *list, size_t n, char (*lex)[CLI_PATH_CAP],
                            mha_g2p_pron *out, size_t *n_out, int *status, int *bad_any)
{
    const size_t K = cfg->nbest;
    char err[4 * CLI_PATH_CAP];
    int st = mha_g2p_pronounce_batch(g, n, (const char *const *)list, flags, K, out, n_out,
                                     status, err, sizeof err);
    if (st == MHA_ENOMEM)
        cli_die(CLI_EXIT_RUNTIME, "%s", err);
    /* the words that failed, each with its own message (the batch names only the first) */
    int bad = 0;
    for (size_t i = 0; i < n; i++) {
        if (status[i] == MHA_OK)
            continue;
        mha_g2p_pron one;
        size_t n1;
        if (mha_g2p_pronounce(g, list[i], flags, 1, &one, &n1, err, sizeof err) == MHA_OK)
            cli_die(CLI_EXIT_RUNTIME, "word %zu: pronounced alone, not in a batch", i);
        fprintf(stderr, "%s: %s\n", cli_program(), err);
        bad = *bad_any = 1;
    }
    /* the answers again (the calls above replaced the strings): every word at once */
    if (bad && mha_g2p_pronounce_batch(g, n, (const char *const *)list, flags, K, out, n_out,
                                       status, err, sizeof err) == MHA_ENOMEM)
        cli_die(CLI_EXIT_RUNTIME, "%s", err);
    for (size_t i = 0; i < n; i++)
        for (size_t k = 0; k < n_out[i]; k++) {
            const mha_g2p_pron *p = out + i * K + k;
            if (k == 0)
                printf("%s  %s", p->word, p->phones);
            else
                printf("%s(%zu)  %s", p->word, k, p->phones);
            const int lp = K > 1 && p->source != MHA_G2P_SOURCE_LEXICON;
            if (cfg->show_source || lp)
                printf("  #");
            if (cfg->show_source)
                printf(" %s%s%s", p->source == MHA_G2P_SOURCE_LEXICON ? "lexicon"
                                  : p->source == MHA_G2P_SOURCE_PARTS ? "parts"
                                                                      : "model",
                       p->source == MHA_G2P_SOURCE_LEXICON ? " " : "",
                       p->source == MHA_G2P_SOURCE_LEXICON ? lex[p->lexicon] : "");
            if (lp)
                printf(" logprob %.4f", p->logprob);
            putchar('\n');
        }
}

/* Refuse (exit 2) a decoding that needs more memory than this process may use: `need`
 * bytes (the models' weights, their decoding caches, the lexicons or words), for `what`. */
static void check_decode_memory(double need, const char *what)
{
    const double have = (double)cli_memory_limit();
    if (need <= have)
        return;
    char n[32], h[32];
    cli_bytes_text(need, n, sizeof n);
    cli_bytes_text(have, h, sizeof h);
    cli_die_usage("%s needs about %s of memory (the models' weights, their decoding caches "
                  "and the words), more than the %s this process may use", what, n, h);
}

/* pronounce: a thin user of the G2P library (mha_g2p.h): the model (and its ensemble),
 * --lexicon's dictionaries, then the model's own; each word's answers as dictionary
 * lines, PRONOUNCE_CHUNK words at a time (the command line's, or standard input's). */
/* pronounce's handle: --model with --ensemble's and --rescore's models, the rescoring
 * weight, the beam; exit as the library's status says when a model cannot be used. */
static mha_g2p *open_handle(const g2p_config *cfg, int threads)
{
    char paths[G2P_MAX_MODELS][CLI_PATH_CAP];
    size_t n_ens = g2p_split_list(cfg->ensemble, "--ensemble", paths, G2P_MAX_MODELS - 1);
    char err[4 * CLI_PATH_CAP];
    mha_g2p *g = NULL;
    int st = mha_g2p_open(&g, cfg->model, threads, err, sizeof err);
    if (st != MHA_OK)
        cli_die(exit_of(st), "cannot use model %s: %s", cfg->model, err);
    for (size_t i = 0; i < n_ens; i++)
        if ((st = mha_g2p_add_model(g, paths[i], err, sizeof err)) != MHA_OK)
            cli_die(exit_of(st), "cannot use model %s in an ensemble with %s: %s", paths[i],
                    cfg->model, err);
    char rpaths[G2P_MAX_MODELS][CLI_PATH_CAP];
    const size_t n_resc = g2p_split_list(cfg->rescore, "--rescore", rpaths, G2P_MAX_MODELS);
    for (size_t i = 0; i < n_resc; i++)
        if ((st = mha_g2p_add_rescorer(g, rpaths[i], err, sizeof err)) != MHA_OK)
            cli_die(exit_of(st), "cannot use model %s for rescoring with %s: %s", rpaths[i],
                    cfg->model, err);
    cli_check(mha_g2p_set_rescore_weight(g, cfg->rescore_weight), "--rescore-weight");
    if (!mha_g2p_checksummed(g))
        fprintf(stderr, "%s: note: the model (%s%s%s) has no checksums (written before they "
                "existed): a damaged byte in it cannot be caught\n", cli_program(), cfg->model,
                n_ens || n_resc ? " or a model of " : "",
                n_ens ? "--ensemble" : n_resc ? "--rescore" : "");
    /* the width the library searches with (max(beam, nbest)), so that its memory estimate
     * counts what --nbest asks for */
    cli_check(mha_g2p_set_beam(g, cfg->beam > cfg->nbest ? cfg->beam : cfg->nbest, cfg->alpha),
              "decoding options");
    return g;
}

/* pronounce's lexicons into the handle: --lexicon's in order, then the dictionary the model
 * was trained on (a note when it is not there); their paths into lex. Returns how many. */
static size_t add_lexicons(mha_g2p *g, const g2p_config *cfg, char (*lex)[CLI_PATH_CAP])
{
    size_t n_lex = 0;
    if (!cfg->no_lexicon) {
        n_lex = g2p_split_list(cfg->lexicon, "--lexicon", lex, G2P_MAX_LEXICONS);
        if (mha_g2p_model_data(g)[0]) {
            g2p_default_path(lex[n_lex], CLI_PATH_CAP, mha_g2p_model_data(g));
            if (access(lex[n_lex], R_OK) == 0)
                n_lex++;
            else
                fprintf(stderr, "%s: note: %s, the dictionary the model was trained on, is "
                        "not there: the model answers every word\n", cli_program(),
                        lex[n_lex]);
        }
    }
    char err[4 * CLI_PATH_CAP];
    int st;
    for (size_t i = 0; i < n_lex; i++)
        if ((st = mha_g2p_add_lexicon(g, lex[i], NULL, err, sizeof err)) != MHA_OK)
            cli_die(exit_of(st), "lexicon: %s", err);
    return n_lex;
}

int g2p_pronounce_main(int argc, char **argv)
{
    g2p_config cfg;
    char **words;
    size_t n;
    g2p_parse(G2P_PRONOUNCE_OPTS, G2P_N_PRONOUNCE_OPTS, argc, argv, &cfg, &words, &n);
    /* the beam is max(--beam, --nbest) wide (open_handle) */
    if (cfg.rescore[0] && cfg.beam < 2 && cfg.nbest < 2)
        cli_die_usage("--rescore rescores the beam's list: it needs --beam 2 or more");
    int bad_any = 0;
    mha_g2p *g = open_handle(&cfg, cli_check_threads(cfg.run_threads, 1));
    char lex[G2P_MAX_LEXICONS + 1][CLI_PATH_CAP];
    add_lexicons(g, &cfg, lex);
    size_t need;
    cli_check(mha_g2p_memory(g, &need), "memory estimate");
    check_decode_memory((double)need, "pronounce");
    const unsigned flags = (cfg.no_lexicon ? MHA_G2P_NO_LEXICON : 0u) |
                           (cfg.no_stress ? MHA_G2P_NO_STRESS : 0u);
    const size_t C = PRONOUNCE_CHUNK;
    mha_g2p_pron *out = calloc(C * cfg.nbest, sizeof *out);
    size_t *n_out = calloc(C, sizeof *n_out);
    int *status = calloc(C, sizeof *status);
    char **chunk = calloc(C, sizeof *chunk);
    if (!out || !n_out || !status || !chunk)
        cli_die(CLI_EXIT_RUNTIME, "out of memory");
    if (n > 0) /* the command line's words */
        for (size_t i = 0; i < n; i += C)
            pronounce_chunk(g, &cfg, flags, words + i, n - i < C ? n - i : C, lex, out, n_out,
                            status, &bad_any);
    else { /* standard input's, a chunk at a time */
        size_t lineno = 0, got;
        int more;
        do {
            more = read_words(chunk, C, &got, &lineno, &bad_any);
            if (got > 0)
                pronounce_chunk(g, &cfg, flags, chunk, got, lex, out, n_out, status,
                                &bad_any);
            for (size_t i = 0; i < got; i++)
                free(chunk[i]);
        } while (more);
    }
    cli_flush_stdout(); /* exit 1 if the pronunciations could not be written */
    mha_g2p_close(g);
    UTIL_FREE_ALL(words, chunk, out, n_out, status);
    return bad_any ? CLI_EXIT_USAGE : 0;
}

/* What eval's decoding holds at most (its passes run one after the other): every model's
 * weights, and the caches of one pass — G2P_DECODE_ROWS hypotheses (or the beam, if
 * wider) per model and rescoring model. The models are decode-only already. */
static double eval_memory(const g2p_models *ms, const g2p_models *rs, size_t beam)
{
    const size_t rows = beam > G2P_DECODE_ROWS ? beam : G2P_DECODE_ROWS;
    double need = 0;
    for (size_t i = 0; i < ms->n + rs->n; i++) {
        const mha_s2s *m = i < ms->n ? ms->m[i] : rs->m[i - ms->n];
        mha_s2s_config mc;
        size_t n = 0, b = 0;
        cli_check(mha_s2s_get_config(m, &mc), "model");
        cli_check(mha_s2s_param_count(m, &n), "model");
        cli_check(mha_s2s_infer_bytes(m, rows, mc.src_context, mc.tgt_context, 0, &b),
                  "memory estimate");
        need += (double)n * sizeof(float) + (double)b;
    }
    return need;
}

/* One scoring pass (a beam width) of eval: the numbers into obj, the wrong words to f.
 * Returns SIZE_MAX, or (writing nothing) the dictionary index of the first word whose best
 * answer has a score that is not finite. */
static size_t eval_pass(g2p_models *ms, g2p_models *rs, const g2p_config *cfg,
                        const g2p_dict *dict, const g2p_set *s, int split, const int32_t *map,
                        size_t beam, cJSON *obj, FILE *f)
{
    const g2p_run *r = &ms->run[0];
    g2p_decoder d;
    g2p_decoder_init(&d, ms->n, ms->m, beam, 1, cfg->alpha);
    d.reverse = cfg->reverse;
    if (rs && rs->n)
        g2p_decoder_rescore(&d, rs->n, rs->m, rs->reverse, cfg->rescore_weight);
    const size_t count = split >= 0 ? s->words_off[split + 1] - s->words_off[split]
                                    : s->words_off[G2P_NSPLIT] - s->words_off[0];
    const size_t L = cfg->tgt_context;
    unsigned char *wrong = calloc(count + 1, 1);
    int32_t *hyp = calloc(count * L + 1, sizeof *hyp);
    size_t *hl = calloc(count + 1, sizeof *hl);
    if (!wrong || !hyp || !hl)
        cli_die(CLI_EXIT_RUNTIME, "out of memory");
    g2p_tally st, ns;
    const double t0 = report_now();
    size_t bad;
    const size_t n = g2p_score_split(&d, s, split, map, r->tgt.n, &st, &ns, SIZE_MAX, wrong,
                                     hyp, hl, &bad);
    if (bad != SIZE_MAX) {
        UTIL_FREE_ALL(wrong, hyp, hl);
        g2p_decoder_free(&d);
        return split >= 0 ? s->word_idx[s->words_off[split] + bad] : s->word_idx[bad];
    }
    const double secs = report_now() - t0;
    cJSON_AddNumberToObject(obj, "words", (double)n);
    cJSON_AddNumberToObject(obj, "wer", g2p_wer(&ns));
    cJSON_AddNumberToObject(obj, "per", g2p_per(&ns));
    cJSON_AddNumberToObject(obj, "wer_stress", g2p_wer(&st));
    cJSON_AddNumberToObject(obj, "per_stress", g2p_per(&st));
    cJSON_AddNumberToObject(obj, "seconds", secs);
    cJSON_AddNumberToObject(obj, "words_per_second", secs > 0 ? (double)n / secs : 0);
    printf("  %s: %zu words, WER %.2f%%  PER %.2f%%  (with stress: WER %.2f%%  PER %.2f%%), "
           "%.0f words/s\n", beam == 1 ? "greedy" : rs && rs->n ? "beam, rescored" : "beam", n, 100 * g2p_wer(&ns),
           100 * g2p_per(&ns), 100 * g2p_wer(&st), 100 * g2p_per(&st),
           secs > 0 ? (double)n / secs : 0);
    if (f) { /* the wrong words: WORD  hypothesis  # reference(s) */
        const size_t cap = (L + 256) * (longest_symbol(&r->tgt) + 1) + 64;
        char *buf = malloc(cap);
        if (!buf)
            cli_die(CLI_EXIT_RUNTIME, "out of memory");
        for (size_t i = 0; i < n; i++) {
            if (!wrong[i])
                continue;
            const size_t w = split >= 0 ? s->word_idx[s->words_off[split] + i]
                                        : s->word_idx[i];
            size_t len;
            cli_check(g2p_vocab_join(&r->tgt, hyp + i * L, hl[i], " ", buf, cap, &len),
                      "errors");
            fprintf(f, "%s  %s  #", dict->words[w].text, buf);
            for (size_t p = s->pron_off[w]; p < s->pron_off[w + 1]; p++) {
                cli_check(g2p_vocab_join(&r->tgt, s->tgt + s->tgt_off[p],
                                         s->tgt_off[p + 1] - s->tgt_off[p], " ", buf, cap,
                                         &len), "errors");
                fprintf(f, "%s %s", p > s->pron_off[w] ? " |" : "", buf);
            }
            fputc('\n', f);
        }
        free(buf);
    }
    free(wrong);
    free(hyp);
    free(hl);
    g2p_decoder_free(&d);
    return SIZE_MAX;
}

/* eval's passes (greedy; with --beam, the beam's too) and its files in out: errors.txt (the
 * last pass's wrong words) and eval.json, each written whole or not at all. */
static void eval_write(g2p_models *ms, g2p_models *rs, const g2p_config *cfg,
                       const g2p_dict *dict, const g2p_set *s, int split, const int32_t *map,
                       const char *dict_path, const char *out)
{
    cli_prepare_out_dir(out);
    char epath[CLI_PATH_CAP + 32], jpath[CLI_PATH_CAP + 32];
    snprintf(epath, sizeof epath, "%s/errors.txt", out);
    snprintf(jpath, sizeof jpath, "%s/eval.json", out);
    char tmp[CLI_PATH_CAP + 64];
    snprintf(tmp, sizeof tmp, "%s.tmp", epath);
    FILE *f = fopen(tmp, "w");
    if (!f)
        cli_die(CLI_EXIT_RUNTIME, "cannot write %s", tmp);
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "model", cfg->model);
    if (ms->n > 1) {
        cJSON *e = cJSON_AddArrayToObject(root, "ensemble");
        for (size_t i = 1; i < ms->n; i++)
            cJSON_AddItemToArray(e, cJSON_CreateString(ms->path[i]));
    }
    cJSON_AddStringToObject(root, "dictionary", dict_path);
    cJSON_AddStringToObject(root, "words", split < 0               ? "all"
                                           : split == G2P_VALID ? "validation"
                                                                : "test");
    const size_t beam = cfg->beam;
    size_t bad = eval_pass(ms, NULL, cfg, dict, s, split, map, 1,
                           cJSON_AddObjectToObject(root, "greedy"), beam == 1 ? f : NULL);
    if (beam > 1 && bad == SIZE_MAX) {
        cJSON *b = cJSON_AddObjectToObject(root, "beam");
        cJSON_AddNumberToObject(b, "width", (double)beam);
        cJSON_AddNumberToObject(b, "alpha", cfg->alpha);
        if (rs->n) {
            cJSON *e = cJSON_AddArrayToObject(b, "rescore");
            for (size_t i = 0; i < rs->n; i++)
                cJSON_AddItemToArray(e, cJSON_CreateString(rs->path[i]));
            cJSON_AddNumberToObject(b, "rescore_weight", cfg->rescore_weight);
        }
        bad = eval_pass(ms, rs, cfg, dict, s, split, map, beam, b, f);
    }
    if (bad != SIZE_MAX) { /* a damaged model's garbage is not scored: nothing written */
        fclose(f);
        remove(tmp);
        cJSON_Delete(root);
        cli_die(CLI_EXIT_USAGE, "word '%s': the model's scores for it are not finite (its "
                "weights overflow: a damaged model?); nothing written", dict->words[bad].text);
    }
    if (fclose(f) != 0 || rename(tmp, epath) != 0)
        cli_die(CLI_EXIT_RUNTIME, "cannot write %s", epath);
    report_write_json(root, jpath, 1);
    printf("  wrong words in %s, numbers in %s\n", epath, jpath);
}

int g2p_eval_main(int argc, char **argv)
{
    g2p_config cfg;
    g2p_parse(G2P_EVAL_OPTS, G2P_N_EVAL_OPTS, argc, argv, &cfg, NULL, NULL);
    char dict_path[CLI_PATH_CAP], out[CLI_PATH_CAP];
    snprintf(dict_path, sizeof dict_path, "%s", cfg.dict);
    snprintf(out, sizeof out, "%s", cfg.eval_out[0] ? cfg.eval_out : "");
    const size_t beam = cfg.beam;
    const double alpha = cfg.alpha;
    const int eval_split = cfg.eval_split;
    if (dict_path[0] && eval_split != 0)
        cli_die_usage("--words validation scores the model's own data; it does not go with "
                      "--dict");
    if (cfg.rescore[0] && beam < 2)
        cli_die_usage("--rescore rescores the beam's list: it needs --beam 2 or more");
    g2p_models ms, rs;
    open_models(&cfg, &ms, beam, &rs);
    for (size_t i = 0; i < ms.n + rs.n; i++) /* they only decode: their weights once */
        cli_check(mha_s2s_decode_only(i < ms.n ? ms.m[i] : rs.m[i - ms.n]), "model");
    const g2p_run *r = &ms.run[0];
    cfg.beam = beam;
    cfg.alpha = alpha;
    const int split = dict_path[0] ? -1 : eval_split == 1 ? G2P_VALID : G2P_TEST;
    if (!dict_path[0]) /* the model's own data; a relative path also under the source tree */
        g2p_default_path(dict_path, sizeof dict_path, cfg.data);
    if (!out[0])
        cli_dirname(cfg.model, out, sizeof out);
    char err[2 * CLI_PATH_CAP];
    g2p_dict dict;
    g2p_set s;
    if (g2p_dict_read(dict_path, split < 0 ? G2P_FMT_AUTO : cfg.format, &dict, err, sizeof err))
        cli_die(CLI_EXIT_USAGE, "%s", err);
    if (g2p_set_encode(&dict, &r->src, &r->tgt, &s, err, sizeof err))
        cli_die(CLI_EXIT_USAGE, "%s", err);
    check_decode_memory(eval_memory(&ms, &rs, beam) + (double)g2p_dict_bytes(&dict), "eval");
    g2p_vocab reduced = {0};
    int32_t *map = calloc(r->tgt.n, sizeof *map);
    if (!map)
        cli_die(CLI_EXIT_RUNTIME, "out of memory");
    if (g2p_stress_map(&r->tgt, &reduced, map, err, sizeof err) != MHA_OK)
        cli_die(CLI_EXIT_RUNTIME, "%s", err);
    printf("mha-g2p eval: %s%s%s on %s (%s), %zu words it cannot spell skipped\n", cfg.model,
           ms.n > 1 ? " + " : "", ms.n > 1 ? cfg.ensemble : "", dict_path, split < 0 ? "every word" : split == G2P_VALID ? "validation words"
                                                                     : "test words",
           s.skipped_words);
    eval_write(&ms, &rs, &cfg, &dict, &s, split, map, dict_path, out);
    free(map);
    g2p_vocab_free(&reduced);
    g2p_set_free(&s);
    g2p_dict_free(&dict);
    close_models(&ms);
    close_models(&rs);
    return 0;
}

