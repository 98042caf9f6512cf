/*
 * A C prototype of termorch's pane supervisor, for `npm run bench -- supervisor` (issue 10): the
 * hot path of src/tmux/wrapper.pl for a tty=0 agent, to measure what a compiled supervisor would
 * cost per task and per MB of output. Not shipped: no tty mode, cgroups or memory limit.
 *
 *   supervisor ATTEMPT_DIR    reads and deletes ATTEMPT_DIR/launch, runs the agent, writes pid,
 *                             the two logs and exit.json (the contract in docs/ARCHITECTURE.md)
 *   supervisor --translate    reads pattern sources (one a line) on stdin, prints "OK <ERE>" or
 *                             "NO <why>" for each: which patterns POSIX ERE can express
 *
 * Redaction uses POSIX regcomp(REG_EXTENDED | REG_NEWLINE) on sources translated from the
 * shared dialect (src/redact/redactor.ts). REG_NEWLINE keeps `.` and `[^...]` off the line break
 * and the translation never lets a class match it, so a pattern run over a whole chunk of lines
 * matches exactly what it would match in each line alone, without a regexec call per line.
 * REG_STARTEND (glibc, the BSDs, macOS; not musl) lets lines hold NUL bytes.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <regex.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define READ_SIZE (1 << 20)
#define LINE_MAX_ (1 << 20) /* a partial line longer than this is redacted and written without its end */
#define PANE_MAX (1 << 20)  /* bytes queued for a slow pane before further output is only logged */
#define PANE_RATE (2 << 20) /* bytes per second shown in the pane at most (as the perl wrapper) */
#define REDACTED "[REDACTED]"

typedef struct { char *p; size_t n, cap; } buf_t;

static void buf_add(buf_t *b, const char *p, size_t n) {
  if (b->n + n + 1 > b->cap) {
    b->cap = (b->n + n + 1) * 2;
    if (!(b->p = realloc(b->p, b->cap))) abort();
  }
  memcpy(b->p + b->n, p, n);
  b->n += n;
}
static void buf_cut(buf_t *b, size_t n) { memmove(b->p, b->p + n, b->n - n); b->n -= n; }

/* ------------------------------------------------------------------------------------------- */
/* Patterns: the shared dialect translated to ERE */

typedef struct {
  regex_t re, end;  /* end: the part after a lazy [\s\S]*? (a span across lines, e.g. a private key) */
  int span, icase;
  size_t rare;      /* the index of the literal's rarest byte */
  char lit[64];     /* a literal in every match (lower case for icase), or "": memmem finds the lines to try */
} pattern_t;

/* Appends the translation of src to out; returns NULL or why it cannot be translated. */
static const char *translate(const char *s, buf_t *out, int *icase, char *lit, size_t litcap) {
  size_t nlit = 0;
  int lit_open = 1, depth = 0, alternation = 0;
  *icase = 0;
  lit[0] = 0;
  if (!strncmp(s, "(?i)", 4)) { *icase = 1; s += 4; }
  while (*s) {
    char c = *s++;
    char one[2] = {c, 0};
    if (c == '(' ) {
      lit_open = 0;
      if (*s == '?') {
        if (s[1] == ':') { s += 2; }
        else if (s[1] == '=' || s[1] == '!' || (s[1] == '<' && (s[2] == '=' || s[2] == '!'))) return "lookaround";
        else return "inline flag or named group";
      }
      depth++;
      buf_add(out, "(", 1);
    } else if (c == '[') {
      /* A class: rebuilt so that ], ^ and - sit where ERE reads them literally. */
      buf_t items = {0};
      int neg = 0, rb = 0, caret = 0, dash = 0;
      if (*s == '^') { neg = 1; s++; }
      if (!strncmp(s, "\\s\\S]", 5) || !strncmp(s, "\\S\\s]", 5)) { s += 5; buf_add(out, "[^\n]", 4); lit_open = 0; continue; }
      for (int first = 1; *s && (*s != ']' || first); first = 0) {
        char k = *s++;
        if (k == '\\') {
          k = *s++;
          if (k == 'd') { buf_add(&items, "0-9", 3); continue; }
          if (k == 'w') { buf_add(&items, "[:alnum:]_", 10); continue; }
          if (k == 's') { buf_add(&items, " \t\r\v\f", 5); continue; }
          if (k == 'x' && *s == '{') { k = (char)strtol(s + 1, NULL, 16); s = strchr(s, '}') + 1; }
          else if (k == 'n') { continue; } /* a line never holds its break */
          else if (k == 't') { k = '\t'; }
          else if (k == 'r') { k = '\r'; }
          else if ((k >= 'a' && k <= 'z') || (k >= 'A' && k <= 'Z') || (k >= '0' && k <= '9')) {
            free(items.p);
            return k == 'p' || k == 'P' ? "Unicode class" : "escape in a class";
          }
        }
        if (k == ']') rb = 1;
        else if (k == '^') caret = 1;
        else if (k == '-' && (*s == ']' || first)) dash = 1;
        else if (k == '\n') continue;
        else if (!k) { free(items.p); return "NUL byte"; }
        else buf_add(&items, &k, 1);
      }
      if (*s++ != ']') { free(items.p); return "unterminated class"; }
      buf_add(out, neg ? "[^" : "[", neg ? 2 : 1);
      if (rb) buf_add(out, "]", 1);
      if (items.n) buf_add(out, items.p, items.n);
      if (neg) buf_add(out, "\n", 1);
      if (caret) buf_add(out, "^", 1);
      if (dash) buf_add(out, "-", 1);
      buf_add(out, "]", 1);
      free(items.p);
      lit_open = 0;
    } else if (c == '\\') {
      char k = *s++;
      const char *cls = NULL;
      if (!k) return "trailing backslash";
      switch (k) {
        case 'd': cls = "[0-9]"; break;
        case 'D': cls = "[^0-9\n]"; break;
        case 'w': cls = "[[:alnum:]_]"; break;
        case 'W': cls = "[^[:alnum:]_\n]"; break;
        case 's': cls = "[ \t\r\v\f]"; break;
        case 'S': cls = "[^ \t\r\v\f\n]"; break;
        case 'p': case 'P': case 'X': return "Unicode class";
        case 'b': case 'B': case 'A': case 'z': case 'Z': case 'G': return "assertion (\\b, \\A, \\z...)";
        default: break;
      }
      if (cls) { buf_add(out, cls, strlen(cls)); lit_open = 0; continue; }
      if (k >= '1' && k <= '9') return "backreference";
      if (k == 'x' && *s == '{') { k = (char)strtol(s + 1, NULL, 16); s = strchr(s, '}') + 1; }
      else if (k == 't') k = '\t';
      else if (k == 'r') k = '\r';
      else if ((k >= 'a' && k <= 'z') || (k >= 'A' && k <= 'Z') || (k >= '0' && k <= '9')) return "escape";
      if (k == '\n') return "line break (a line never holds one)";
      if (!k) return "NUL byte";
      one[0] = k;
      if (strchr(".[]()*+?{}|^$\\", k)) buf_add(out, "\\", 1);
      buf_add(out, one, 1);
      if (lit_open && depth == 0 && nlit + 1 < litcap) lit[nlit++] = *icase && k >= 'A' && k <= 'Z' ? (char)(k + 32) : k;
    } else {
      if (c == ')') { depth--; lit_open = 0; }
      else if (c == '|' && depth == 0) alternation = 1; /* then no literal is in every match */
      else if (strchr(".^$", c)) lit_open = 0;
      else if (strchr("*+?{", c)) {
        /* The atom before a quantifier is not required: drop it from the literal. */
        if (lit_open && nlit) nlit--;
        lit_open = 0;
        if (c == '{') { const char *e = strchr(s, '}'); if (!e) return "unterminated {"; buf_add(out, one, 1); buf_add(out, s, (size_t)(e - s + 1)); s = e + 1; }
        else buf_add(out, one, 1);
        if (*s == '?') return "lazy quantifier";
        if (*s == '+') return "possessive quantifier";
        continue;
      }
      buf_add(out, one, 1);
      if (lit_open && depth == 0 && !strchr(").^$|", c) && nlit + 1 < litcap)
        lit[nlit++] = *icase && c >= 'A' && c <= 'Z' ? (char)(c + 32) : c;
    }
  }
  lit[alternation ? 0 : nlit] = 0;
  buf_add(out, "", 0);
  out->p[out->n] = 0;
  return NULL;
}

/* How common a byte is in logs, roughly: the literal search looks for its rarest byte. */
static int commonness(char c) {
  if (strchr(" -:.=/", c) || (c >= '0' && c <= '9')) return 4;
  if (strchr("etaoinsrhldcu", c)) return 3;
  return c >= 'a' && c <= 'z' ? 2 : 1;
}

/*
 * A pattern: plain, or A[\s\S]*?B / A.*?B (the private-key token pattern: a span that may run
 * over lines, A to B, every line between: the rules' key blocks).
 */
static const char *pattern_compile(pattern_t *p, const char *src, char *err, size_t errcap) {
  static const char SPAN[] = "[\\s\\S]*?", LINE[] = ".*?";
  const char *at = strstr(src, SPAN);
  size_t lazy = sizeof SPAN - 1;
  if (!at && (at = strstr(src, LINE))) lazy = sizeof LINE - 1;
  char *head = strndup(src, at ? (size_t)(at - src) : strlen(src));
  int icase, icase2;
  buf_t a = {0}, b = {0};
  char dummy[8];
  const char *why = translate(head, &a, &icase, p->lit, sizeof p->lit);
  if (!why && at) {
    if (!strncmp(src, "(?i)", 4)) why = "(?i) with a span";
    else why = translate(at + lazy, &b, &icase2, dummy, sizeof dummy);
  }
  free(head);
  int rc = 0;
  if (!why) rc = regcomp(&p->re, a.p, REG_EXTENDED | REG_NEWLINE | (icase ? REG_ICASE : 0));
  if (!why && !rc && at && (rc = regcomp(&p->end, b.p, REG_EXTENDED | REG_NEWLINE))) regfree(&p->re);
  if (rc) { regerror(rc, &p->re, err, errcap); why = err; }
  p->span = at != NULL;
  p->icase = icase;
  p->rare = 0;
  for (size_t i = 1; p->lit[i]; i++) if (commonness(p->lit[i]) < commonness(p->lit[p->rare])) p->rare = i;
  if (!why) snprintf(err, errcap, "%s%s%s", a.p, at ? " ... " : "", at ? b.p : "");
  free(a.p);
  free(b.p);
  return why;
}

static int find(regex_t *re, const char *t, size_t from, size_t to, regmatch_t *m) {
  m->rm_so = (regoff_t)from;
  m->rm_eo = (regoff_t)to;
  return regexec(re, t, 1, m, REG_STARTEND) == 0;
}

/* A lower-case copy of the text being redacted, for the literals of (?i) patterns; made once per text. */
static buf_t lower;
static int lower_ok;

static const char *lowered(const char *in, size_t n) {
  if (lower_ok) return lower.p;
  lower.n = 0;
  buf_add(&lower, in, n);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) { /* 8 bytes at a time: the 0x20 bit set where a byte is A-Z */
    uint64_t x, h;
    memcpy(&x, lower.p + i, 8);
    h = x & 0x7f7f7f7f7f7f7f7full;
    x |= ((h + 0x3f3f3f3f3f3f3f3full) & ~(h + 0x2525252525252525ull) & ~x & 0x8080808080808080ull) >> 2;
    memcpy(lower.p + i, &x, 8);
  }
  for (; i < n; i++) lower.p[i] = (char)(lower.p[i] + ((unsigned char)(lower.p[i] - 'A') < 26) * 32);
  lower_ok = 1;
  return lower.p;
}

/* The literal in hay[0..n): memchr (vectorised) for its rarest byte, then a compare. */
static const char *find_lit(const pattern_t *p, const char *hay, size_t n, size_t litn) {
  for (size_t at = p->rare; at < n;) {
    const char *c = memchr(hay + at, p->lit[p->rare], n - at);
    if (!c) return NULL;
    size_t start = (size_t)(c - hay) - p->rare;
    if (start + litn <= n && !memcmp(hay + start, p->lit, litn)) return hay + start;
    at = (size_t)(c - hay) + 1;
  }
  return NULL;
}

/* Every non-empty match of p in in[0..n) replaced; in may hold many lines. Returns 1 if out was used. */
static int redact_one(pattern_t *p, char *in_span, const char *in, size_t n, buf_t *out) {
  size_t litn = strlen(p->lit), pos = 0, done = 0;
  const char *hay = litn && p->icase ? lowered(in, n) : in;
  if (litn && !*in_span && !find_lit(p, hay, n, litn)) return 0;
  regmatch_t m, e;
  int changed = 0;
  out->n = 0;
  if (!p->span) {
    while (pos <= n) {
      size_t from = pos, to = n;
      if (litn) {
        /* regexec only on the lines that hold the literal: glibc scans byte by byte. */
        const char *o = find_lit(p, hay + pos, n - pos, litn);
        if (!o) break;
        const char *ls = memrchr(in + pos, '\n', (size_t)(o - hay) - pos), *le = memchr(in + (o - hay), '\n', n - (size_t)(o - hay));
        from = ls ? (size_t)(ls - in) + 1 : pos;
        to = le ? (size_t)(le - in) : n;
      }
      if (!find(&p->re, in, from, to, &m)) {
        if (!litn) break;
        pos = to + 1;
        continue;
      }
      size_t so = (size_t)m.rm_so, eo = (size_t)m.rm_eo;
      if (eo == so) { pos = so + 1; continue; } /* an empty match would hide nothing */
      buf_add(out, in + done, so - done);
      buf_add(out, REDACTED, sizeof REDACTED - 1);
      pos = done = eo;
      changed = 1;
    }
  } else {
    /* Line by line, as the perl wrapper's private-key blocks. */
    while (pos < n) {
      const char *nl = memchr(in + pos, '\n', n - pos);
      size_t end = nl ? (size_t)(nl - in) : n;
      if (*in_span) {
        buf_add(out, in + done, pos - done);
        buf_add(out, REDACTED, sizeof REDACTED - 1);
        changed = 1;
        if (find(&p->end, in, pos, end, &e)) { *in_span = 0; done = (size_t)e.rm_eo; }
        else done = end;
      } else {
        size_t at = pos;
        while (!*in_span && at < end && find(&p->re, in, at, end, &m)) {
          buf_add(out, in + done, (size_t)m.rm_so - done);
          buf_add(out, REDACTED, sizeof REDACTED - 1);
          changed = 1;
          if (find(&p->end, in, (size_t)m.rm_eo, end, &e)) at = done = (size_t)e.rm_eo;
          else { *in_span = 1; done = end; }
        }
      }
      pos = end + 1;
    }
  }
  if (!changed) return 0;
  buf_add(out, in + done, n - done);
  lower_ok = 0;
  return 1;
}

/* ------------------------------------------------------------------------------------------- */
/* Capped logs, a line-buffered feed into each, and the pane */

typedef struct {
  int fd, truncated;
  long long max, written;
  buf_t line;       /* the partial last line */
  char *in_span;    /* per pattern: inside a span (a private key) that began on an earlier line */
} log_t;

static pattern_t *pats;
static int npats;
static buf_t scratch[2];

static void write_all(int fd, const char *p, size_t n) {
  while (n) {
    ssize_t w = write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) return;
    p += w;
    n -= (size_t)w;
  }
}

static void log_write(log_t *l, const char *p, size_t n) {
  if (l->fd < 0 || l->truncated || !n) return;
  if (l->max <= 0 || l->written + (long long)n <= l->max) {
    write_all(l->fd, p, n);
    l->written += (long long)n;
    return;
  }
  long long room = l->max - l->written;
  if (room > 0) write_all(l->fd, p, (size_t)room);
  char marker[80];
  int m = snprintf(marker, sizeof marker, "\n[termorch: log truncated at %lld bytes]\n", l->max);
  write_all(l->fd, marker, (size_t)m);
  l->written = l->max;
  l->truncated = 1;
}

/* Every pattern over p[0..*n), each on the output of the one before: p itself, or a scratch buffer. */
static const char *redact_text(char *in_span, const char *p, size_t *n) {
  int cur = -1;
  lower_ok = 0;
  for (int i = 0; i < npats; i++) {
    buf_t *o = &scratch[(cur + 1) & 1];
    if (redact_one(&pats[i], &in_span[i], p, *n, o)) { p = o->p; *n = o->n; cur = (cur + 1) & 1; }
  }
  return p;
}

static void log_text(log_t *l, const char *p, size_t n) {
  p = redact_text(l->in_span, p, &n);
  log_write(l, p, n);
}

static void log_feed(log_t *l, const char *p, size_t n, int eof) {
  if (n) buf_add(&l->line, p, n);
  char *nl = l->line.n ? memrchr(l->line.p, '\n', l->line.n) : NULL;
  size_t cut = nl ? (size_t)(nl - l->line.p) + 1 : 0;
  if (eof || l->line.n - cut > LINE_MAX_) cut = l->line.n;
  if (cut) { log_text(l, l->line.p, cut); buf_cut(&l->line, cut); }
}

static buf_t pane;
static long long pane_dropped;
static double pane_tokens = PANE_MAX, pane_clock;
static int pane_ok = 1;

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_REALTIME, &t);
  return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static void pane_put(const char *p, size_t n, int always) {
  double t = now();
  if (!pane_ok) return;
  if (pane_clock > 0) pane_tokens += (t - pane_clock) * PANE_RATE;
  if (pane_tokens > PANE_MAX) pane_tokens = PANE_MAX;
  pane_clock = t;
  if (pane.n + n > PANE_MAX || (!always && (double)n > pane_tokens)) { pane_dropped += (long long)n; return; }
  pane_tokens -= (double)n;
  buf_add(&pane, p, n);
}

static void pane_flush(void) {
  ssize_t w = pane.n ? write(1, pane.p, pane.n) : 0;
  if (w > 0) buf_cut(&pane, (size_t)w);
  else if (w < 0 && errno != EAGAIN && errno != EINTR) { pane_ok = 0; pane.n = 0; }
  if (!pane.n && pane_dropped) {
    char msg[96];
    int m = snprintf(msg, sizeof msg, "\r\n[termorch: %lld bytes not shown here; the log has them all]\r\n", pane_dropped);
    buf_add(&pane, msg, (size_t)m);
    pane_dropped = 0;
  }
}

/* ------------------------------------------------------------------------------------------- */
/* Files */

static char *dir;

static void write_atomic(const char *name, const char *data) {
  char path[4096], tmp[4200];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  snprintf(tmp, sizeof tmp, "%s.tmp.%d", path, (int)getpid());
  int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  if (fd < 0) return;
  write_all(fd, data, strlen(data));
  if (close(fd) || rename(tmp, path)) unlink(tmp);
}

static void iso(double t, char *out) {
  time_t s = (time_t)t;
  struct tm g;
  gmtime_r(&s, &g);
  size_t n = strftime(out, 32, "%Y-%m-%dT%H:%M:%S", &g);
  snprintf(out + n, 8, ".%03dZ", (int)((t - (double)s) * 1000));
}

static void json_str(buf_t *b, const char *s) {
  if (!s) { buf_add(b, "null", 4); return; }
  buf_add(b, "\"", 1);
  for (; *s; s++) {
    char e[8];
    if (*s == '"' || *s == '\\') { e[0] = '\\'; e[1] = *s; buf_add(b, e, 2); }
    else if ((unsigned char)*s < 0x20 || *s == 0x7f) buf_add(b, e, (size_t)snprintf(e, sizeof e, "\\u%04x", *s));
    else buf_add(b, s, 1);
  }
  buf_add(b, "\"", 1);
}

/* exit.json, with the perl wrapper's keys; code -1 and pid 0 are null; an error means launch_failed. */
static void write_exit(int code, const char *sig, const char *started, const char *finished, int pid,
                       const long long *bytes, int truncated, int hangup, const char *error) {
  buf_t j = {0};
  char num[200];
  buf_add(&j, num, (size_t)(code < 0 ? snprintf(num, sizeof num, "{\"exit_code\":null") : snprintf(num, sizeof num, "{\"exit_code\":%d", code)));
  buf_add(&j, ",\"signal\":", 10);
  json_str(&j, sig);
  buf_add(&j, ",\"started_at\":", 14);
  json_str(&j, started);
  buf_add(&j, ",\"finished_at\":", 15);
  json_str(&j, finished);
  buf_add(&j, num, (size_t)(pid ? snprintf(num, sizeof num, ",\"pid\":%d", pid) : snprintf(num, sizeof num, ",\"pid\":null")));
  buf_add(&j, num, (size_t)snprintf(num, sizeof num,
    ",\"stdout_bytes\":%lld,\"stderr_bytes\":%lld,\"truncated\":%s,\"hangup\":%s,\"launch_failed\":%s,\"error\":",
    bytes[0], bytes[1], truncated ? "true" : "false", hangup ? "true" : "false", error ? "true" : "false"));
  json_str(&j, error);
  buf_add(&j, "}\n", 3);
  write_atomic("exit.json", j.p);
  free(j.p);
}

static char *decode(char *v) {
  char *w = v;
  for (char *r = v; *r; r++) {
    if (*r == '%' && r[1] && r[2]) { char h[3] = {r[1], r[2], 0}; *w++ = (char)strtol(h, NULL, 16); r += 2; }
    else *w++ = *r;
  }
  *w = 0;
  return v;
}

/* ------------------------------------------------------------------------------------------- */

static int sig_pipe[2];
static void on_signal(int s) { int e = errno; char c = (char)s; (void)!write(sig_pipe[1], &c, 1); errno = e; }

static int translate_main(void) {
  char line[65536], msg[8192];
  while (fgets(line, sizeof line, stdin)) {
    line[strcspn(line, "\n")] = 0;
    pattern_t p;
    const char *why = pattern_compile(&p, line, msg, sizeof msg);
    fputs(why ? "NO " : "OK ", stdout);
    for (const char *c = why ? why : msg; *c; c++) /* one line per pattern: control bytes as \xHH */
      if ((unsigned char)*c < 0x20) printf("\\x%02x", *c); else putchar(*c);
    putchar('\n');
  }
  return 0;
}

int main(int argc, char **argv) {
  if (argc == 2 && !strcmp(argv[1], "--translate")) return translate_main();
  if (argc != 2) { fprintf(stderr, "usage: supervisor ATTEMPT_DIR | supervisor --translate\n"); return 2; }
  dir = argv[1];
  char path[4096];
  snprintf(path, sizeof path, "%s/launch", dir);
  int lf = open(path, O_RDONLY);
  if (lf < 0) { fprintf(stderr, "supervisor: cannot read %s: %s\n", path, strerror(errno)); return 125; }
  buf_t raw = {0};
  char chunk[65536];
  for (ssize_t r; (r = read(lf, chunk, sizeof chunk)) > 0;) buf_add(&raw, chunk, (size_t)r);
  close(lf);
  unlink(path); /* it may hold secrets */
  buf_add(&raw, "", 1);
  char *cwd = ".", *out_path = NULL, *err_path = NULL, **args = calloc(raw.n, sizeof *args),
       **envs = calloc(raw.n, sizeof *envs);
  int nargs = 0, nenv = 0;
  long long max = 0, grace_ms = 5000;
  pats = calloc(raw.n, sizeof *pats);
  char err[4096] = "";
  for (char *save, *l = strtok_r(raw.p, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
    char *v = strchr(l, '=');
    if (!v) continue;
    *v++ = 0;
    decode(v);
    if (!strcmp(l, "cwd")) cwd = v;
    else if (!strcmp(l, "stdout_log")) out_path = v;
    else if (!strcmp(l, "stderr_log")) err_path = v;
    else if (!strcmp(l, "max_log_bytes")) max = atoll(v);
    else if (!strcmp(l, "kill_grace_ms")) grace_ms = atoll(v);
    else if (!strcmp(l, "arg")) args[nargs++] = v;
    else if (!strcmp(l, "env")) envs[nenv++] = v;
    else if (!strcmp(l, "redact") && *v && !err[0]) {
      char msg[4096];
      const char *why = pattern_compile(&pats[npats], v, msg, sizeof msg);
      if (why) snprintf(err, sizeof err, "redaction pattern %d cannot be used: %s", npats + 1, why);
      else npats++;
    }
  }
  log_t logs[2] = {{.max = max, .in_span = calloc((size_t)npats + 1, 1)}, {.max = max, .in_span = calloc((size_t)npats + 1, 1)}};
  const char *paths[2] = {out_path, err_path};
  for (int i = 0; i < 2; i++) {
    logs[i].fd = paths[i] ? open(paths[i], O_WRONLY | O_CREAT | O_APPEND, 0600) : -1;
    struct stat st;
    if (logs[i].fd >= 0 && !fstat(logs[i].fd, &st)) logs[i].written = st.st_size;
    else if (!err[0]) snprintf(err, sizeof err, "cannot open %s", paths[i] ? paths[i] : "a log");
  }
  if (!nargs && !err[0]) snprintf(err, sizeof err, "no command given");
  char started[32], finished[32];
  long long bytes[2] = {0, 0};
  if (err[0]) {
    /* Fail closed: nothing runs without its redaction. */
    char msg[4200], line[4300];
    snprintf(msg, sizeof msg, "cannot start: %s; nothing was run", err);
    snprintf(line, sizeof line, "termorch: %s\n", msg);
    log_write(&logs[1], line, strlen(line));
    iso(now(), finished);
    write_exit(125, NULL, NULL, finished, 0, bytes, 0, 0, msg);
    return 125;
  }
  int outp[2], errp[2], status[2];
  if (pipe2(sig_pipe, O_CLOEXEC | O_NONBLOCK) || pipe2(status, O_CLOEXEC) || pipe(outp) || pipe(errp)) return 125;
  fcntl(outp[1], F_SETPIPE_SZ, 1 << 20); /* best effort, as the perl wrapper: the agent runs ahead */
  fcntl(errp[1], F_SETPIPE_SZ, 1 << 20);
  struct sigaction sa = {.sa_handler = on_signal};
  int fwd[] = {SIGHUP, SIGTERM, SIGINT, SIGQUIT, SIGCHLD};
  for (int i = 0; i < 5; i++) sigaction(fwd[i], &sa, NULL);
  signal(SIGPIPE, SIG_IGN);
  prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
  pid_t pid = fork();
  if (pid == 0) {
    for (int i = 0; i < 5; i++) signal(fwd[i], SIG_DFL);
    signal(SIGPIPE, SIG_DFL);
    setsid();
    int null = open("/dev/null", O_RDONLY);
    dup2(null, 0);
    dup2(outp[1], 1);
    dup2(errp[1], 2);
    close(outp[0]); close(errp[0]); close(outp[1]); close(errp[1]); close(null);
    char msg[4200];
    if (chdir(cwd)) {
      snprintf(msg, sizeof msg, "cannot run the agent: cannot change to directory %s: %s", cwd, strerror(errno));
      write_all(status[1], msg, strlen(msg));
      _exit(126);
    }
    /* execvp with the agent's own environment (its PATH), as the perl wrapper's exec. */
    environ = envs;
    execvp(args[0], args);
    int e = errno;
    snprintf(msg, sizeof msg, "cannot run the agent: %s: %s", args[0], strerror(e));
    write_all(status[1], msg, strlen(msg));
    _exit(e == ENOENT ? 127 : 126);
  }
  if (pid < 0) return 125;
  close(outp[1]); close(errp[1]); close(status[1]);
  char pidline[32];
  snprintf(pidline, sizeof pidline, "%d\n", (int)pid);
  write_atomic("pid", pidline);
  iso(now(), started);
  fcntl(1, F_SETFL, fcntl(1, F_GETFL) | O_NONBLOCK);
  /* EOF on the close-on-exec status pipe: exec succeeded. Otherwise it says why not. */
  char launch_error[4200] = "";
  ssize_t ln;
  while ((ln = read(status[0], launch_error, sizeof launch_error - 1)) < 0 && errno == EINTR) {}
  launch_error[ln > 0 ? ln : 0] = 0;
  close(status[0]);
  if (launch_error[0]) {
    char line[4300];
    snprintf(line, sizeof line, "termorch: %s\n", launch_error);
    log_text(&logs[1], line, strlen(line));
    pane_put(line, strlen(line), 1);
  }

  char *data = malloc(READ_SIZE);
  struct pollfd fds[4] = {{outp[0], POLLIN, 0}, {errp[0], POLLIN, 0}, {sig_pipe[0], POLLIN, 0}, {1, 0, 0}};
  int open_streams = 2, reaped = 0, wstatus = 0, hangup = 0;
  double term_at = 0, kill_at = 0, abandon_at = 0, grace = (double)grace_ms / 1000;
  while (!reaped || open_streams) {
    double t = now();
    if (term_at && t >= term_at) { term_at = 0; kill(-pid, SIGTERM); }
    if (kill_at && t >= kill_at) { kill_at = 0; kill(-pid, SIGKILL); }
    if (abandon_at && t >= abandon_at) break; /* something that left the group holds the pipes */
    double next = t + 1;
    if (term_at && term_at < next) next = term_at;
    if (kill_at && kill_at < next) next = kill_at;
    if (abandon_at && abandon_at < next) next = abandon_at;
    fds[3].fd = pane_ok && pane.n ? 1 : -1; /* a closed pane would report POLLERR at every turn */
    fds[3].events = POLLOUT;
    int n = poll(fds, 4, (int)((next - t) * 1000) + 1);
    if (n < 0 && errno != EINTR) break;
    if (fds[2].revents) {
      char sigs[64];
      ssize_t k = read(sig_pipe[0], sigs, sizeof sigs);
      for (ssize_t i = 0; i < k; i++) {
        int s = sigs[i];
        if (s == SIGCHLD) continue;
        if (s == SIGHUP) {
          hangup |= !reaped;
          pane_ok = 0;
          if (!term_at) term_at = now() + grace;
          if (!kill_at) kill_at = now() + 2 * grace;
        }
        if (s == SIGTERM && !kill_at) kill_at = now() + grace;
        kill(-pid, s);
      }
    }
    for (pid_t r; (r = waitpid(-1, &wstatus, WNOHANG)) > 0;) {
      if (r != pid || reaped) continue;
      reaped = 1;
      iso(now(), finished);
      if (open_streams) {
        /* Its leftovers still hold the pipes: a moment, then TERM, KILL, and stop waiting. */
        double t2 = now() + (grace < 1 ? grace : 1);
        if (!term_at || term_at > t2) term_at = t2;
        if (!kill_at || kill_at > t2 + grace) kill_at = t2 + grace;
        abandon_at = t2 + grace + 1;
      }
    }
    for (int i = 0; i < 2; i++) {
      if (fds[i].fd < 0 || !fds[i].revents) continue;
      ssize_t r = read(fds[i].fd, data, READ_SIZE);
      if (r < 0 && (errno == EINTR || errno == EAGAIN)) continue;
      if (r <= 0) { log_feed(&logs[i], NULL, 0, 1); close(fds[i].fd); fds[i].fd = -1; open_streams--; continue; }
      bytes[i] += r;
      pane_put(data, (size_t)r, 0);
      log_feed(&logs[i], data, (size_t)r, 0);
    }
    if (fds[3].revents & POLLOUT) pane_flush();
  }
  for (int i = 0; i < 2; i++) if (fds[i].fd >= 0) log_feed(&logs[i], NULL, 0, 1);
  if (!reaped) { waitpid(pid, &wstatus, 0); iso(now(), finished); }
  /* Nothing of the agent may outlive its recorded end: as subreaper, every leftover is our child. */
  pid_t left;
  while ((left = waitpid(-1, NULL, WNOHANG)) > 0) {}
  if (left == 0) {
    kill(-pid, SIGTERM);
    for (double end = now() + grace; now() < end && waitpid(-1, NULL, WNOHANG) >= 0;) usleep(20000);
    kill(-pid, SIGKILL);
    while (waitpid(-1, NULL, 0) > 0) {}
  }
  char signame[32] = "";
  if (!launch_error[0] && WIFSIGNALED(wstatus)) {
    const char *abbrev = sigabbrev_np(WTERMSIG(wstatus)); /* glibc 2.32+ */
    if (abbrev) snprintf(signame, sizeof signame, "SIG%s", abbrev);
    else snprintf(signame, sizeof signame, "SIG%d", WTERMSIG(wstatus));
  }
  for (int i = 0; i < 2; i++) if (logs[i].fd >= 0) close(logs[i].fd);
  if (launch_error[0]) { /* the record is redacted like the logs: argv[0] or the cwd may hold a secret */
    size_t n = strlen(launch_error);
    const char *r = redact_text(calloc((size_t)npats + 1, 1), launch_error, &n);
    if (r != launch_error) snprintf(launch_error, sizeof launch_error, "%.*s", (int)n, r);
  }
  write_exit(signame[0] ? -1 : WEXITSTATUS(wstatus), signame[0] ? signame : NULL, started, finished, (int)pid,
             bytes, logs[0].truncated || logs[1].truncated, hangup, launch_error[0] ? launch_error : NULL);
  for (double end = now() + 2; pane_ok && pane.n && now() < end;) {
    struct pollfd w = {1, POLLOUT, 0};
    poll(&w, 1, 100);
    pane_flush();
  }
  return WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : 128 + WTERMSIG(wstatus);
}
