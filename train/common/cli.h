/*
 * cli — the command-line conventions of the training programs (mha-train, mha-gpt):
 * one option table per program, strict parsing, --help listing every option with its
 * default, and the messages and exit statuses of a bad value.
 *
 *   static const cli_opt OPTS[] = {
 *       {"layers", CLI_SIZE, offsetof(my_config, layers), 1, 64, 1, "L", "blocks", NULL},
 *       ...
 *   };
 *   const char *vals[N] = {0};
 *   cli_collect(OPTS, N, argc, argv, 1, vals);   // exit 2: unknown option, missing value
 *   cli_apply(OPTS, N, vals, &cfg);              // exit 2: bad value, message names it
 *
 * Options are "--name VALUE" or "--name=VALUE"; a flag (CLI_FLAG) takes no value
 * ("--utf8"; "--utf8=0" turns it off). The last occurrence of an option wins.
 * Values are parsed strictly: integers are plain decimal digits (no sign, no white
 * space, no wrap-around); numbers are decimal floating-point text, digits [. digits]
 * [e [-+] digits] or . digits [...] (no sign, white space, hex, inf or nan), read by
 * strtod; both within [lo, hi]. A number too small for a normal double is accepted as
 * the subnormal strtod gives (1e-320), one that rounds to 0 or overflows is refused.
 *
 * Unlike the library (src/), this is program code: the cli_die* functions print to
 * stderr, prefixed with the program name (cli_set_program), and exit.
 * Exit statuses shared by the programs: CLI_EXIT_RUNTIME 1 (I/O, library error),
 * CLI_EXIT_USAGE 2 (bad option or input), CLI_EXIT_NONFINITE 3 (training diverged).
 */
#ifndef TRAIN_CLI_H
#define TRAIN_CLI_H

#include <stddef.h>
#include <stdint.h>

enum { CLI_EXIT_RUNTIME = 1, CLI_EXIT_USAGE = 2, CLI_EXIT_NONFINITE = 3 };
enum { CLI_PATH_CAP = 4096 }; /* bytes of a CLI_PATH / CLI_STR field, NUL included */

typedef enum cli_type {
    CLI_SIZE,   /* size_t                                                     */
    CLI_U64,    /* uint64_t                                                   */
    CLI_INT,    /* int                                                        */
    CLI_DBL,    /* double                                                     */
    CLI_PATH,   /* char[CLI_PATH_CAP], non-empty                              */
    CLI_STR,    /* char[CLI_PATH_CAP], may be empty (escapes \n \t \\ read)   */
    CLI_CHOICE, /* int: index into the option's NULL-terminated choices        */
    CLI_FLAG    /* int 0/1: no value on the command line                       */
} cli_type;

typedef struct cli_opt {
    const char *name;  /* without "--"                                                */
    cli_type type;
    size_t off;        /* offset of the field in the program's config struct           */
    double lo, hi;     /* numeric range (inclusive); hi >= 2^64 shows as "2^64-1"       */
    int ckpt;          /* 0: not stored in checkpoints;
                          1: stored, and an explicit different value on --resume is
                             refused (the model or data depends on it);
                          2: stored, taken from the checkpoint unless given again;
                          3: as 2, and a checkpoint made before the option existed
                             (without it) leaves the default;
                          4: as 1, and a checkpoint made before the option existed
                             (without it) has the default                              */
    const char *arg;   /* placeholder in --help ("N", "FILE")                          */
    const char *help;
    const char *const *choices; /* CLI_CHOICE: names, NULL-terminated; else NULL      */
} cli_opt;

/* Table entries both training programs have, the same way (off: offsetof the field in
 * the program's config). */
/* Names of mha_attn_mode values, NULL-terminated (index = mode). */
extern const char *const CLI_ATTN_NAMES[];
#define CLI_OPT_ATTENTION(off)                                                               \
    {"attention", CLI_CHOICE, (off), 0, 0, 2, "MODE",                                       \
     "stored (keeps the attention weights: heat maps) | recompute (memory-efficient: "      \
     "activation memory linear in the sequence length; no heat maps)", CLI_ATTN_NAMES}
/* Names of mha_precision values, NULL-terminated (index = value). */
extern const char *const CLI_PRECISION_NAMES[];
#define CLI_OPT_PRECISION(off)                                                               \
    {"precision", CLI_CHOICE, (off), 0, 0, 3, "P",                                          \
     "fp32 | bf16: mixed precision, the matrix products (attention, MLP, read-out) take "    \
     "bfloat16 operands with float32 sums (weights, optimizer, norms, softmax and loss "    \
     "stay float32); needs a CPU with AVX512_BF16", CLI_PRECISION_NAMES}
#define CLI_OPT_CKPT_EVERY(off)                                                              \
    {"ckpt-every", CLI_U64, (off), 0, 1e9, 2, "N",                                          \
     "steps between checkpoints (0 = only at the end)", NULL}
#define CLI_OPT_STOP_AFTER(off)                                                              \
    {"stop-after", CLI_U64, (off), 0, 1e9, 0, "N",                                          \
     "stop after step N with a checkpoint, as if interrupted (0 = run to --steps)", NULL}
/* Names of the --progress modes, NULL-terminated (index = report_progress_start's mode). */
extern const char *const CLI_PROGRESS_NAMES[];
#define CLI_OPT_PROGRESS(off)                                                                \
    {"progress", CLI_CHOICE, (off), 0, 0, 0, "MODE",                                        \
     "auto (a live line on a terminal, plain lines otherwise and under mpirun) | live (a "  \
     "line rewritten in place) | plain (a line per evaluation)", CLI_PROGRESS_NAMES}
#define CLI_OPT_FORCE(off)                                                                   \
    {"force", CLI_FLAG, (off), 0, 1, 0, "",                                                 \
     "start (or resume) a run in an --out that holds another run's checkpoints, removing "  \
     "them (refused without it)", NULL}
#define CLI_OPT_THREADS(off)                                                                 \
    {"threads", CLI_INT, (off), 0, CLI_MAX_THREADS, 2, "N",                                 \
     "threads for attention and BLAS (0 = all cores; 1 = bitwise reproducible); at most 4 x " \
     "the online CPUs", NULL}

/* The schedule's and the run's options of every trainer (ck: the row's ckpt kind: mha-train
 * stores its schedule as defining, 1; the others let --resume change it, 2). */
#define CLI_OPT_STEPS(off)                                                                   \
    {"steps", CLI_U64, (off), 1, 1e9, 2, "N",                                               \
     "training steps. With --resume, another N (above the checkpoint's step) continues the " \
     "run, a finished one too: each remaining step gets the learning rate a run started with " \
     "--steps N has at that step (warm-up, then for 0-based step s >= warmup: min-lr + (lr - " \
     "min-lr)(1 + cos(pi (s - warmup) / (N - 1 - warmup)))/2, min-lr from s = N - 1); the "   \
     "steps done keep theirs. The checkpoint's N continues bit for bit; a finished run "     \
     "resumed without a larger N exits 0 with a message", NULL}
#define CLI_OPT_LR(off, ck)                                                                  \
    {"lr", CLI_DBL, (off), 0, 1e6, (ck), "X",                                               \
     "peak learning rate (after warm-up). Numbers are decimal (digits, fraction, exponent: "  \
     "3e-3; no sign, hex, inf or nan); a subnormal such as 1e-320 is kept, a value that "    \
     "underflows to 0 (1e-400) is refused", NULL}
#define CLI_OPT_MIN_LR(off, ck)                                                              \
    {"min-lr", CLI_DBL, (off), 0, 1e6, (ck), "X",                                           \
     "learning rate at the end of the cosine decay (<= --lr)", NULL}
#define CLI_OPT_CLIP(off, ck)                                                                \
    {"clip", CLI_DBL, (off), 0, 1e12, (ck), "X", "clip the global gradient norm (0 = off)", NULL}
#define CLI_OPT_BETA2(off)                                                                   \
    {"beta2", CLI_DBL, (off), 0, 0.999999, 2, "X", "AdamW beta2 (beta1 0.9, eps 1e-8)", NULL}
#define CLI_OPT_OUT(off)                                                                     \
    {"out", CLI_PATH, (off), 0, 0, 0, "DIR",                                                \
     "output directory (with --resume: the checkpoint's directory unless given)", NULL}
#define CLI_OPT_RESUME(off)                                                                  \
    {"resume", CLI_PATH, (off), 0, 0, 0, "FILE",                                            \
     "continue from a checkpoint; options not given come from it", NULL}

/* The former name of option `name` if it was renamed (mha-train's "model-dim", now "dim"
 * as in every program), else NULL. cli_collect accepts the former name for the option;
 * ckpt_config_from_meta reads it from checkpoints written before the change. */
const char *cli_former_name(const char *name);

/* The program name of every message ("mha-train"); static storage, not copied. */
void cli_set_program(const char *name);
/* The start of every program: cli_set_program(name), and SIGXFSZ ignored, so that a write
 * past a file size limit (`ulimit -f`) fails with EFBIG and is reported like a full disk
 * (a message naming the file, exit CLI_EXIT_RUNTIME, the last checkpoint intact) instead
 * of killing the process silently in the middle of a write. */
void cli_start_program(const char *name);
/* quiet: cli_die_usage exits with CLI_EXIT_USAGE without a message (the ranks of an MPI
 * job other than 0: all parse the same options, and rank 0 says what is wrong). */
void cli_set_usage_quiet(int quiet);
const char *cli_program(void);

/* "<prog>: <message>\n(see <prog> --help)" on stderr, exit CLI_EXIT_USAGE. */
void cli_die_usage(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
/* "<prog>: <message>" on stderr, exit `code`. */
void cli_die(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3), noreturn));
/* For a command whose results go to stdout, once they are printed: flush stdout and check
 * every write to it (ferror), so that output lost to a full disk or a failing device is not
 * taken for success: "cannot write standard output: <why>" and exit CLI_EXIT_RUNTIME. stdout
 * stays open. */
void cli_flush_stdout(void);
/* cli_die(CLI_EXIT_RUNTIME, "<what>: <mha_strerror(st)>") unless st == MHA_OK. */
void cli_check(int st, const char *what);

/* The directory part of path into out[cap] ("." when path has no '/', "/" for a file in
 * the root): where --resume writes by default, beside its checkpoint. */
void cli_dirname(const char *path, char *out, size_t cap);
/* 1 if a and b name the same existing file or directory (device and inode), else 0. */
int cli_same_file(const char *a, const char *b);
/* 1 if name is <prefix><digits><suffix> (e.g. checkpoint-2000.safetensors), with the number
 * in *k (saturating at ULLONG_MAX / 10 digits' worth: such a name is still matched). */
int cli_numbered_name(const char *name, const char *prefix, const char *suffix,
                      unsigned long long *k);
/* Index of option `name` in opts[n]; n if absent. */
size_t cli_index(const cli_opt *opts, size_t n, const char *name);

/* Format field o of cfg into buf: the text --help shows and checkpoints store, which
 * cli_parse reads back to the same value (doubles: shortest exact text). */
void cli_format(const cli_opt *o, const void *cfg, char *buf, size_t cap);
/* Parse text into field o of cfg. NULL on success, else a message (static storage)
 * such as "must be a number in range"; cfg unchanged then. A flag reads 0/1. */
const char *cli_parse(const cli_opt *o, const char *text, void *cfg);
/* " [lo, hi]" for numeric options, "" otherwise. */
void cli_range_text(const cli_opt *o, char *buf, size_t cap);
/* Copy field o from src to dst (both config structs of the same type). */
void cli_copy_field(const cli_opt *o, void *dst, const void *src);

/* Threads: --threads N of both programs is at most cli_max_threads() = 4 × the online
 * CPUs, capped at CLI_MAX_THREADS (more only oversubscribes, and OpenBLAS buffers per
 * thread have hung runs under an address-space limit). */
enum { CLI_MAX_THREADS = 256 };
int cli_max_threads(void);
/* Exit 2 unless 0 <= threads <= cli_max_threads(): "invalid value 'N' for --threads: at
 * most ..." (`given` 0: the value came from the checkpoint, and the message says so).
 * Returns the thread count to use (0 → the online CPUs). */
int cli_check_threads(int threads, int given);

/* Exits 2 unless precision p (an mha_precision) runs on this CPU; the message names the
 * CPU feature it lacks and says whether p came from the checkpoint (given == 0). */
void cli_check_precision(int p, int given);
/* 1 when the environment turns bf16 off (MHA_DISABLE_BF16 set, not empty, not "0"; the
 * library then behaves as on a CPU without AVX512_BF16). */
int cli_bf16_disabled(void);

/* Make output directory dir (mkdir -p) and check that files can be created in it, before
 * anything expensive is built: exit 2 naming --out if a component is not a directory
 * (--out /etc/passwd), cannot be created, or dir is not writable. */
void cli_prepare_out_dir(const char *dir);

/* Bytes of memory a run may use: the smaller of the physical memory and the
 * address-space limit (RLIMIT_AS) less what the process has mapped already and what its
 * libraries map on first use (256 MiB + 128 MiB per CPU: OpenBLAS's per-thread buffers),
 * or SIZE_MAX if neither is known. */
size_t cli_memory_limit(void);
/* A training run's memory estimate, checked before it allocates: params (parameters with
 * their gradients and AdamW's moments), acts (the activations of `batch`, e.g. "12
 * windows"), other (data) bytes. When their sum is more than cli_memory_limit(), exit 2
 * naming `config` (the options it came from), the parts, and the fix: `fix_params` or
 * `fix_acts`, whichever part is larger. Returns the sum. */
double cli_check_memory(double params, double acts, double other, const char *config,
                        const char *batch, const char *fix_params, const char *fix_acts);
/* Where a program finds a file it ships ("data/tinyshakespeare.txt", "models/…"): the path
 * itself when it exists relative to the working directory, else under the source tree the
 * program was built from, else under the installed data directory (PREFIX/share/mha, where
 * `cmake --install` puts data/ and models/), else the path as given (so that the error
 * names it). Into out[cap]. */
void cli_default_path(char *out, size_t cap, const char *rel);
/* "63.6 GiB", "512.0 MiB", "12 KiB" into buf. */
void cli_bytes_text(double bytes, char *buf, size_t cap);

/* Collect argv[first..argc) into vals[n] (the text of each given option, last one wins;
 * a bare flag gives "1"). Exit 2 with a message on a positional argument, an unknown
 * option or a missing value. vals[k] stays NULL for options not given. */
void cli_collect(const cli_opt *opts, size_t n, int argc, char **argv, int first,
                 const char **vals);
/* Parse every vals[k] != NULL into cfg, in table order; exit 2 on a bad value with
 * "invalid value '<v>' for --<name>: <why> [lo, hi]". */
void cli_apply(const cli_opt *opts, size_t n, const char *const *vals, void *cfg);

/* "  HEAD  text..." with text word-wrapped at 79 columns, continuation lines indented. */
void cli_print_wrapped(const char *head, const char *text);
/* Every option of opts[n] as "--name ARG  help [range]" and "default: <value of defs>"
 * (empty paths and strings: "none"), through cli_print_wrapped. */
void cli_print_options(const cli_opt *opts, size_t n, const void *defs);

#endif /* TRAIN_CLI_H */
