/* The progress line (live on a terminal, plain lines otherwise), elapsed-time text and
 * the stop signals of the training programs (report.h; the logs and files are in
 * report.c). */
#include "report.h"

#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

/* ---- stopping on a signal ---- */

static volatile sig_atomic_t stop_signal;
/* What the first signal says at once, on stderr (made before: a handler may only write) */
static char stop_msg[2][160];
static size_t stop_len[2];

static void on_stop_signal(int sig)
{
    if (stop_signal) { /* the second one: the default action, now (async-signal-safe) */
        signal(sig, SIG_DFL);
        raise(sig);
        return;
    }
    stop_signal = sig;
    const int k = sig == SIGTERM;
    if (write(STDERR_FILENO, stop_msg[k], stop_len[k]) < 0) {
        /* nothing to do: the stop goes on */
    }
}

void report_catch_stop_signals(void)
{
    for (int k = 0; k < 2; k++) {
        snprintf(stop_msg[k], sizeof stop_msg[k], "\n%s: %s: stopping after this step, with "
                 "a checkpoint; a second signal stops at once\n",
                 cli_program(), k ? "SIGTERM" : "SIGINT");
        stop_len[k] = strlen(stop_msg[k]);
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART; /* a signal must not fail the loop's writes with EINTR */
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
}

int report_stop_signal(void) { return (int)stop_signal; }

const char *report_signal_name(int sig)
{
    static char buf[32];
    if (sig == SIGINT)
        return "SIGINT";
    if (sig == SIGTERM)
        return "SIGTERM";
    snprintf(buf, sizeof buf, "signal %d", sig);
    return buf;
}

/* ---- progress ---------------------------------------------------------------------------- */

double report_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void report_progress_start(report_progress *p, int mode, int mpi)
{
    p->tty = mode == REPORT_PROGRESS_LIVE ||
             (mode != REPORT_PROGRESS_PLAIN && !mpi && isatty(STDOUT_FILENO));
    p->open = 0;
    p->t0 = report_now();
    p->last_shown = 0;
}

int report_progress_due(report_progress *p, int last)
{
    double t = report_now() - p->t0;
    if (t - p->last_shown >= 0.1 || last) {
        p->last_shown = t;
        return 1;
    }
    return 0;
}

/* Columns of the terminal on stdout (COLUMNS, else 80, when it cannot say). */
static size_t terminal_width(void)
{
    struct winsize ws;
    if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0)
        return ws.ws_col;
    const char *c = getenv("COLUMNS");
    long v = c ? strtol(c, NULL, 10) : 0;
    return v > 0 && v < 10000 ? (size_t)v : 80;
}

void report_progress_show(report_progress *p, const char *fmt, ...)
{
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (p->tty) {
        /* cut to width - 1 columns (a character in the last column wraps on some
         * terminals); a column per character: count UTF-8 lead bytes */
        const size_t width = terminal_width() > 1 ? terminal_width() - 1 : 1;
        size_t cols = 0, i = 0;
        for (; buf[i]; i++) {
            if (((unsigned char)buf[i] & 0xC0) != 0x80 && cols++ == width)
                break;
        }
        buf[i] = '\0';
        printf("\r%s\033[K", buf);
        p->open = 1;
    } else {
        printf("%s\n", buf);
    }
    fflush(stdout);
}

void report_progress_end(report_progress *p)
{
    if (p->tty && p->open) {
        printf("\n");
        fflush(stdout);
    }
    p->open = 0;
}

void report_duration(double s, char *buf, size_t cap)
{
    if (!isfinite(s) || s < 0 || s > 1e15) {
        snprintf(buf, cap, "?");
        return;
    }
    /* whole seconds first, then split: 119.8 s is "2m00s", never "1m60s" */
    const long long r = llround(s);
    if (r < 60)
        snprintf(buf, cap, "%llds", r);
    else if (r < 3600)
        snprintf(buf, cap, "%lldm%02llds", r / 60, r % 60);
    else
        snprintf(buf, cap, "%lldh%02lldm%02llds", r / 3600, r / 60 % 60, r % 60);
}
