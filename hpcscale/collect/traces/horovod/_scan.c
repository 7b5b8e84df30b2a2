/* Compiled fast path of the Horovod timeline parser (hpcscale/collect/traces/horovod/).

   Two passes per chunk of whole records, `[rec,rec,...]`:
   - Scanner.tokenize(buf) reads the records into columns (phase, name code, ts, pid, where the
     args value sits in buf) without touching any state, so a chunk with a bad record can be
     handed back whole (it returns None) to the Python path that finds and counts bad records;
   - Scanner.pair(columns, negotiate) pairs every E with the B on top of its pid's stack, as the
     Python loop does, with the stacks kept here across chunks.
   Names are interned in a table here (code = index, in first-seen order after the names the
   Scanner was created with), so the Python side sees small integers, never strings per record.
   Records are validated like msgspec's typed decode of the `Event` struct: `ph` required and one
   of the Chrome-trace phases, `name` a string, `ts` and `pid` integers, anything else skipped. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

/* ------------------------------------------------------------------ growable columns */

typedef struct {
    char *ph;
    int32_t *code, *acode;
    int64_t *ts, *pid;
    Py_ssize_t n, cap;
} Cols;

static void cols_free(Cols *c) {
    PyMem_Free(c->ph);
    PyMem_Free(c->code);
    PyMem_Free(c->ts);
    PyMem_Free(c->pid);
    PyMem_Free(c->acode);
    memset(c, 0, sizeof *c);
}

static int cols_grow(Cols *c, Py_ssize_t want) {
    Py_ssize_t cap = c->cap ? c->cap * 2 : want;
#define GROW(f, t)                                              \
    do {                                                        \
        t *p = PyMem_Realloc(c->f, (size_t)cap * sizeof(t));    \
        if (!p) return -1;                                      \
        c->f = p;                                               \
    } while (0)
    GROW(ph, char);
    GROW(code, int32_t);
    GROW(ts, int64_t);
    GROW(pid, int64_t);
    GROW(acode, int32_t);
#undef GROW
    c->cap = cap;
    return 0;
}

/* ------------------------------------------------------------------ name table */

typedef struct {
    char *bytes; /* raw JSON string content (escapes as written) */
    Py_ssize_t len;
    uint64_t hash;
} Name;

typedef struct {
    Name *names; /* by code */
    Py_ssize_t n, cap;
    int32_t *slots; /* open addressing: code + 1, 0 = empty */
    Py_ssize_t nslots;
} Names;

static uint64_t hash_bytes(const char *s, Py_ssize_t n) {
    /* 8 bytes a step, multiply-xorshift mixing: names and args are short and many */
    uint64_t h = 0x9E3779B97F4A7C15ULL ^ (uint64_t)n;
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, s, 8);
        h = (h ^ w) * 0xBF58476D1CE4E5B9ULL;
        h ^= h >> 31;
        s += 8;
        n -= 8;
    }
    uint64_t w = 0;
    memcpy(&w, s, (size_t)n);
    h = (h ^ w) * 0x94D049BB133111EBULL;
    return h ^ (h >> 29);
}

static int names_rehash(Names *t, Py_ssize_t nslots) {
    int32_t *slots = PyMem_Calloc((size_t)nslots, sizeof(int32_t));
    if (!slots) return -1;
    for (Py_ssize_t k = 0; k < t->n; k++) {
        Py_ssize_t i = (Py_ssize_t)(t->names[k].hash & (uint64_t)(nslots - 1));
        while (slots[i]) i = (i + 1) & (nslots - 1);
        slots[i] = (int32_t)(k + 1);
    }
    PyMem_Free(t->slots);
    t->slots = slots;
    t->nslots = nslots;
    return 0;
}

/* The code of `s` (raw string content), adding it if new; -1 on memory error. */
static int32_t names_code(Names *t, const char *s, Py_ssize_t n, int *added) {
    uint64_t h = hash_bytes(s, n);
    Py_ssize_t mask = t->nslots - 1;
    Py_ssize_t i = (Py_ssize_t)(h & (uint64_t)mask);
    *added = 0;
    while (t->slots[i]) {
        Name *nm = &t->names[t->slots[i] - 1];
        if (nm->hash == h && nm->len == n && memcmp(nm->bytes, s, (size_t)n) == 0)
            return t->slots[i] - 1;
        i = (i + 1) & mask;
    }
    if (t->n == t->cap) {
        Py_ssize_t cap = t->cap ? t->cap * 2 : 64;
        Name *p = PyMem_Realloc(t->names, (size_t)cap * sizeof(Name));
        if (!p) return -1;
        t->names = p;
        t->cap = cap;
    }
    char *copy = PyMem_Malloc(n ? (size_t)n : 1);
    if (!copy) return -1;
    memcpy(copy, s, (size_t)n);
    int32_t code = (int32_t)t->n;
    t->names[t->n++] = (Name){copy, n, h};
    t->slots[i] = code + 1;
    *added = 1;
    if (t->n * 2 > t->nslots && names_rehash(t, t->nslots * 2) < 0) return -1;
    return code;
}

static void names_free(Names *t) {
    for (Py_ssize_t k = 0; k < t->n; k++) PyMem_Free(t->names[k].bytes);
    PyMem_Free(t->names);
    PyMem_Free(t->slots);
    memset(t, 0, sizeof *t);
}

/* ------------------------------------------------------------------ per-pid B stacks */

typedef struct {
    int32_t code, ready; /* ready: name code of the last rank ready in it, or -1 */
    int64_t ts;
} Open;

typedef struct {
    int64_t pid;
    int32_t depth, cap; /* depth 0 = empty slot */
    Open *items;
} Stack;

typedef struct {
    Stack *slots;
    Py_ssize_t nslots, used;
} Stacks;

static Py_ssize_t pid_slot(const Stacks *s, int64_t pid) {
    uint64_t h = (uint64_t)pid * 0x9E3779B97F4A7C15ULL;
    return (Py_ssize_t)((h >> 20) & (uint64_t)(s->nslots - 1));
}

static Stack *stacks_find(Stacks *s, int64_t pid) {
    Py_ssize_t mask = s->nslots - 1, i = pid_slot(s, pid);
    while (s->slots[i].depth) {
        if (s->slots[i].pid == pid) return &s->slots[i];
        i = (i + 1) & mask;
    }
    return NULL;
}

static int stacks_resize(Stacks *s, Py_ssize_t nslots) {
    Stack *old = s->slots;
    Py_ssize_t oldn = s->nslots;
    s->slots = PyMem_Calloc((size_t)nslots, sizeof(Stack));
    if (!s->slots) {
        s->slots = old;
        return -1;
    }
    s->nslots = nslots;
    for (Py_ssize_t k = 0; k < oldn; k++) {
        if (!old[k].depth) continue;
        Py_ssize_t i = pid_slot(s, old[k].pid);
        while (s->slots[i].depth) i = (i + 1) & (nslots - 1);
        s->slots[i] = old[k];
    }
    PyMem_Free(old);
    return 0;
}

static int stacks_push(Stacks *s, int64_t pid, Open item) {
    Stack *st = stacks_find(s, pid);
    if (!st) {
        if ((s->used + 1) * 2 > s->nslots && stacks_resize(s, s->nslots * 2) < 0) return -1;
        Py_ssize_t i = pid_slot(s, pid);
        while (s->slots[i].depth) i = (i + 1) & (s->nslots - 1);
        st = &s->slots[i];
        st->pid = pid;
        st->cap = 4;
        st->items = PyMem_Malloc(4 * sizeof(Open));
        if (!st->items) return -1;
        s->used++;
    } else if (st->depth == st->cap) {
        Open *p = PyMem_Realloc(st->items, (size_t)st->cap * 2 * sizeof(Open));
        if (!p) return -1;
        st->items = p;
        st->cap *= 2;
    }
    st->items[st->depth++] = item;
    return 0;
}

/* Empty stacks leave the table (only open spans stay): backward-shift deletion. */
static void stacks_remove(Stacks *s, Stack *st) {
    Py_ssize_t mask = s->nslots - 1, i = st - s->slots;
    PyMem_Free(st->items);
    st->items = NULL;
    st->depth = 0;
    s->used--;
    Py_ssize_t j = i;
    for (;;) {
        j = (j + 1) & mask;
        if (!s->slots[j].depth) break;
        Py_ssize_t home = pid_slot(s, s->slots[j].pid);
        /* move j into the hole i unless its home lies cyclically in (i, j] */
        int stays = (i <= j) ? (i < home && home <= j) : (i < home || home <= j);
        if (stays) continue;
        s->slots[i] = s->slots[j];
        s->slots[j].depth = 0;
        s->slots[j].items = NULL;
        i = j;
    }
}

static void stacks_free(Stacks *s) {
    for (Py_ssize_t k = 0; k < s->nslots; k++)
        if (s->slots[k].depth) PyMem_Free(s->slots[k].items);
    PyMem_Free(s->slots);
    memset(s, 0, sizeof *s);
}

/* ------------------------------------------------------------------ the Scanner type */

typedef struct {
    PyObject_HEAD Names names;
    Names args; /* distinct raw `args` values: a handful of dtype/shape pairs, tensor names */
    Stacks stacks;
    PyObject *decode_str; /* callable: JSON string token (bytes, with quotes) -> str */
    PyObject *new_names;  /* list of str added since the caller last took them */
    PyObject *new_args;   /* list of bytes (raw JSON values) added since last taken */
    int32_t empty_code;   /* code of the empty name (every E), -1 until met */
} Scanner;

static int add_name_str(Scanner *self, const char *s, Py_ssize_t n) {
    PyObject *text;
    if (memchr(s, '\\', (size_t)n)) {
        PyObject *tok = PyBytes_FromStringAndSize(NULL, n + 2);
        if (!tok) return -1;
        char *p = PyBytes_AS_STRING(tok);
        p[0] = '"';
        memcpy(p + 1, s, (size_t)n);
        p[n + 1] = '"';
        text = PyObject_CallOneArg(self->decode_str, tok);
        Py_DECREF(tok);
    } else {
        text = PyUnicode_DecodeUTF8(s, n, NULL);
    }
    if (!text) return -1;
    int rc = PyList_Append(self->new_names, text);
    Py_DECREF(text);
    return rc;
}

/* The code of a name (raw JSON string content), interned and reported in new_names if new.
   -1 with a Python error set when it is not valid text (bad UTF-8 or escape), -2 out of memory;
   a rejected name leaves the table as it was. */
static int32_t intern_name(Scanner *self, const char *s, Py_ssize_t n) {
    int added;
    int32_t code = names_code(&self->names, s, n, &added);
    if (code < 0) {
        PyErr_NoMemory();
        return -2;
    }
    if (added && add_name_str(self, s, n) < 0) {
        self->names.n--; /* it is the last one added */
        PyMem_Free(self->names.names[code].bytes);
        if (names_rehash(&self->names, self->names.nslots) < 0) {
            PyErr_NoMemory();
            return -2;
        }
        return -1;
    }
    return code;
}

static int Scanner_init(Scanner *self, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"decode_str", NULL};
    PyObject *decode;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O", kwlist, &decode)) return -1;
    names_free(&self->names);
    names_free(&self->args);
    stacks_free(&self->stacks);
    self->names.slots = PyMem_Calloc(256, sizeof(int32_t));
    self->names.nslots = 256;
    self->args.slots = PyMem_Calloc(256, sizeof(int32_t));
    self->args.nslots = 256;
    self->stacks.slots = PyMem_Calloc(1024, sizeof(Stack));
    self->stacks.nslots = 1024;
    if (!self->names.slots || !self->args.slots || !self->stacks.slots) {
        PyErr_NoMemory();
        return -1;
    }
    Py_XSETREF(self->decode_str, Py_NewRef(decode));
    Py_XSETREF(self->new_names, PyList_New(0));
    Py_XSETREF(self->new_args, PyList_New(0));
    self->empty_code = -1;
    return self->new_names && self->new_args ? 0 : -1;
}

static void Scanner_dealloc(Scanner *self) {
    names_free(&self->names);
    names_free(&self->args);
    Py_XDECREF(self->new_args);
    stacks_free(&self->stacks);
    Py_XDECREF(self->decode_str);
    Py_XDECREF(self->new_names);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* ------------------------------------------------------------------ JSON scanning */

typedef struct {
    const char *p, *end;
} Cur;

static inline void ws(Cur *c) {
    while (c->p < c->end && (*c->p == ' ' || *c->p == '\n' || *c->p == '\r' || *c->p == '\t'))
        c->p++;
}

/* Bytes that end the plain run of a string: the quote, a backslash, control characters. */
static unsigned char STOP[256];

static void init_stop(void) {
    for (int i = 0; i < 0x20; i++) STOP[i] = 1;
    STOP['"'] = STOP['\\'] = 1;
}

static int hex4(const char *q, const char *end) {
    if (end - q < 4) return -1;
    int v = 0;
    for (int i = 0; i < 4; i++) {
        char h = q[i];
        int d = h >= '0' && h <= '9'   ? h - '0'
                : h >= 'a' && h <= 'f' ? h - 'a' + 10
                : h >= 'A' && h <= 'F' ? h - 'A' + 10
                                       : -1;
        if (d < 0) return -1;
        v = v * 16 + d;
    }
    return v;
}

/* Length of the escape at q (its backslash), or -1 if invalid: a lone or reversed UTF-16
   surrogate is invalid too. */
static Py_ssize_t escape_len(const char *q, const char *end) {
    if (end - q < 2) return -1;
    switch (q[1]) {
    case '"': case '\\': case '/': case 'b': case 'f': case 'n': case 'r': case 't':
        return 2;
    case 'u': {
        int v = hex4(q + 2, end);
        if (v < 0 || (v >= 0xDC00 && v <= 0xDFFF)) return -1;
        if (v < 0xD800 || v > 0xDBFF) return 6;
        if (end - q < 12 || q[6] != '\\' || q[7] != 'u') return -1;
        int lo = hex4(q + 8, end);
        return lo >= 0xDC00 && lo <= 0xDFFF ? 12 : -1;
    }
    default:
        return -1;
    }
}

/* A string at c->p (at its opening quote): sets [*s, *s + *n) to its raw content. */
static int scan_string(Cur *c, const char **s, Py_ssize_t *n) {
    if (c->p >= c->end || *c->p != '"') return -1;
    const char *q = ++c->p;
    while (q < c->end) {
        unsigned char ch = (unsigned char)*q;
        if (!STOP[ch]) {
            q++;
            continue;
        }
        if (ch == '"') {
            *s = c->p;
            *n = q - c->p;
            c->p = q + 1;
            return 0;
        }
        if (ch < 0x20) return -1;
        /* a backslash: the escape must be valid JSON, as msgspec checks even in skipped text */
        Py_ssize_t used = escape_len(q, c->end);
        if (used < 0) return -1;
        q += used;
    }
    return -1;
}

/* An integer (JSON grammar, no fraction or exponent: those are floats, not ints). */
static int scan_int(Cur *c, int64_t *out) {
    const char *q = c->p;
    int neg = 0;
    if (q < c->end && *q == '-') {
        neg = 1;
        q++;
    }
    if (q >= c->end || *q < '0' || *q > '9') return -1;
    if (*q == '0' && q + 1 < c->end && q[1] >= '0' && q[1] <= '9') return -1;
    uint64_t v = 0;
    int digits = 0;
    while (q < c->end && *q >= '0' && *q <= '9') {
        if (++digits > 18) return -1; /* beyond what a timeline holds: let msgspec judge */
        v = v * 10 + (uint64_t)(*q - '0');
        q++;
    }
    if (q < c->end && (*q == '.' || *q == 'e' || *q == 'E')) return -1;
    *out = neg ? -(int64_t)v : (int64_t)v;
    c->p = q;
    return 0;
}

static int skip_value(Cur *c, int depth);

/* After a member or an element: 1 if a ',' follows (another one comes), 0 if `close` ends the
   object or array (consumed), -1 for anything else. */
static int next_or_close(Cur *c, char close) {
    ws(c);
    if (c->p < c->end && *c->p == ',') {
        c->p++;
        return 1;
    }
    if (c->p < c->end && *c->p == close) {
        c->p++;
        return 0;
    }
    return -1;
}

static int skip_number(Cur *c) {
    const char *q = c->p;
    if (q < c->end && *q == '-') q++;
    if (q >= c->end || *q < '0' || *q > '9') return -1;
    if (*q == '0')
        q++;
    else
        while (q < c->end && *q >= '0' && *q <= '9') q++;
    if (q < c->end && *q == '.') {
        q++;
        if (q >= c->end || *q < '0' || *q > '9') return -1;
        while (q < c->end && *q >= '0' && *q <= '9') q++;
    }
    if (q < c->end && (*q == 'e' || *q == 'E')) {
        q++;
        if (q < c->end && (*q == '+' || *q == '-')) q++;
        if (q >= c->end || *q < '0' || *q > '9') return -1;
        while (q < c->end && *q >= '0' && *q <= '9') q++;
    }
    c->p = q;
    return 0;
}

static int skip_word(Cur *c, const char *w, Py_ssize_t n) {
    if (c->end - c->p < n || memcmp(c->p, w, (size_t)n) != 0) return -1;
    c->p += n;
    return 0;
}

static int skip_value(Cur *c, int depth) {
    const char *s;
    Py_ssize_t n;
    if (depth > 64) return -1;
    ws(c);
    if (c->p >= c->end) return -1;
    switch (*c->p) {
    case '"':
        return scan_string(c, &s, &n);
    case '{':
        c->p++;
        ws(c);
        if (c->p < c->end && *c->p == '}') {
            c->p++;
            return 0;
        }
        for (;;) {
            ws(c);
            if (scan_string(c, &s, &n) < 0) return -1;
            ws(c);
            if (c->p >= c->end || *c->p != ':') return -1;
            c->p++;
            if (skip_value(c, depth + 1) < 0) return -1;
            int more = next_or_close(c, '}');
            if (more <= 0) return more;
        }
    case '[':
        c->p++;
        ws(c);
        if (c->p < c->end && *c->p == ']') {
            c->p++;
            return 0;
        }
        for (;;) {
            if (skip_value(c, depth + 1) < 0) return -1;
            int more = next_or_close(c, ']');
            if (more <= 0) return more;
        }
    case 't':
        return skip_word(c, "true", 4);
    case 'f':
        return skip_word(c, "false", 5);
    case 'n':
        return skip_word(c, "null", 4);
    default:
        return skip_number(c);
    }
}

static const char PHASES[] = "BEXiIMCbenstfPOND";

/* One record at c->p (its '{'); appends a row. 0 ok, -1 not an Event, -2 Python error. */
#define LIT(c, s) ((c)->end - (c)->p >= (Py_ssize_t)(sizeof(s) - 1) && memcmp((c)->p, s, sizeof(s) - 1) == 0)

/* Horovod's own byte layout, read without looking keys up:
   {"ph": "B", "name": "N", "ts": 1, "pid": 2}     (E: no name; X: then , "dur": 0;
   {"ph": "i", "name": "N", "ts": 1, "s": "g"}      a collective's E: then , "args": {...})
   Returns 1 and the fields, or 0 (cursor unmoved) for anything else: the generic reader. */
static int fast_fields(Cur *c, char *ph, const char **name_s, Py_ssize_t *name_n, int64_t *ts,
                       int64_t *pid, const char **args_s, Py_ssize_t *args_n) {
    Cur k = *c;
    if (!LIT(&k, "{\"ph\": \"") || k.end - k.p < 10) return 0;
    k.p += 8;
    char p = *k.p;
    if (!memchr(PHASES, p, sizeof PHASES - 1) || k.p[1] != '"') return 0;
    k.p += 2;
    if (LIT(&k, ", \"name\": ")) {
        k.p += 10;
        if (scan_string(&k, name_s, name_n) < 0) return 0;
    }
    if (!LIT(&k, ", \"ts\": ")) return 0;
    k.p += 8;
    if (scan_int(&k, ts) < 0) return 0;
    if (LIT(&k, ", \"pid\": ")) {
        k.p += 9;
        if (scan_int(&k, pid) < 0) return 0;
    }
    if (LIT(&k, ", \"dur\": 0")) {
        k.p += 10;
    } else if (LIT(&k, ", \"s\": \"g\"")) {
        k.p += 10;
    } else if (LIT(&k, ", \"args\": ")) {
        k.p += 10;
        *args_s = k.p;
        if (skip_value(&k, 0) < 0) return 0;
        *args_n = k.p - *args_s;
    }
    if (k.p >= k.end || *k.p != '}') return 0;
    k.p++;
    *ph = p;
    *c = k;
    return 1;
}

static int scan_record(Scanner *self, Cur *c, Cols *out) {
    const char *ks, *name_s = "", *args_s = NULL;
    Py_ssize_t kn, name_n = 0, args_n = 0;
    char ph = 0;
    int64_t ts = -1, pid = -1;
    if (fast_fields(c, &ph, &name_s, &name_n, &ts, &pid, &args_s, &args_n)) goto emit;
    name_s = "";
    name_n = 0;
    args_s = NULL;
    args_n = 0;
    ts = pid = -1;
    if (c->p >= c->end || *c->p != '{') return -1;
    c->p++;
    ws(c);
    if (c->p < c->end && *c->p == '}') {
        c->p++;
        return -1; /* no ph */
    }
    for (;;) {
        ws(c);
        if (scan_string(c, &ks, &kn) < 0) return -1;
        ws(c);
        if (c->p >= c->end || *c->p != ':') return -1;
        c->p++;
        ws(c);
        if (kn == 2 && ks[0] == 'p' && ks[1] == 'h') {
            const char *s;
            Py_ssize_t n;
            if (scan_string(c, &s, &n) < 0 || n != 1 || !memchr(PHASES, s[0], sizeof PHASES - 1))
                return -1; /* an escaped or unknown phase: the Python path decides */
            ph = s[0];
        } else if (kn == 4 && memcmp(ks, "name", 4) == 0) {
            if (scan_string(c, &name_s, &name_n) < 0) return -1;
        } else if (kn == 2 && ks[0] == 't' && ks[1] == 's') {
            if (scan_int(c, &ts) < 0) return -1;
        } else if (kn == 3 && memcmp(ks, "pid", 3) == 0) {
            if (scan_int(c, &pid) < 0) return -1;
        } else if (kn == 4 && memcmp(ks, "args", 4) == 0) {
            args_s = c->p;
            if (skip_value(c, 0) < 0) return -1;
            args_n = c->p - args_s;
        } else if (memchr(ks, '\\', (size_t)kn)) {
            return -1; /* an escaped key might spell a known one: the Python path decides */
        } else if (skip_value(c, 0) < 0) {
            return -1;
        }
        int more = next_or_close(c, '}');
        if (more < 0) return -1;
        if (!more) break;
    }
    if (!ph) return -1;
emit:;
    int32_t code = name_n ? intern_name(self, name_s, name_n) : self->empty_code;
    if (code == -1 && !name_n) code = self->empty_code = intern_name(self, "", 0);
    if (code == -2) return -2;
    if (code < 0) { /* not UTF-8, or a bad escape: not a record msgspec would take either */
        PyErr_Clear();
        return -1;
    }
    int32_t acode = -1;
    if (args_s) {
        int added;
        acode = names_code(&self->args, args_s, args_n, &added);
        if (acode < 0) {
            PyErr_NoMemory();
            return -2;
        }
        if (added) {
            PyObject *raw = PyBytes_FromStringAndSize(args_s, args_n);
            if (!raw || PyList_Append(self->new_args, raw) < 0) {
                Py_XDECREF(raw);
                return -2;
            }
            Py_DECREF(raw);
        }
    }
    if (out->n == out->cap && cols_grow(out, 4096) < 0) {
        PyErr_NoMemory();
        return -2;
    }
    Py_ssize_t k = out->n++;
    out->ph[k] = ph;
    out->code[k] = code;
    out->ts[k] = ts;
    out->pid[k] = pid;
    out->acode[k] = acode;
    return 0;
}

static PyObject *column(const void *data, Py_ssize_t n, size_t item) {
    return PyBytes_FromStringAndSize(data ? (const char *)data : "", n * (Py_ssize_t)item);
}

/* tokenize(buf) -> (ph, code, ts, pid, args_code) as bytes columns, or None when a record is
   not a valid Event (the caller falls back to the Python path for this chunk). args_code is
   the record's `args` value interned like names (-1: none); take_args() gives new ones. */
static PyObject *Scanner_tokenize(Scanner *self, PyObject *arg) {
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0) return NULL;
    const char *base = view.buf;
    Cur c = {base, base + view.len};
    Cols out = {0};
    if (cols_grow(&out, view.len / 48 + 16) < 0) { /* a record is ~50-100 bytes */
        cols_free(&out);
        PyBuffer_Release(&view);
        return PyErr_NoMemory();
    }
    int bad = 0;
    ws(&c);
    if (c.p >= c.end || *c.p != '[') {
        bad = 1;
    } else {
        c.p++;
        ws(&c);
        if (c.p < c.end && *c.p == ']') {
            c.p++;
        } else {
            for (;;) {
                ws(&c);
                int rc = scan_record(self, &c, &out);
                if (rc == -2) {
                    cols_free(&out);
                    PyBuffer_Release(&view);
                    return NULL;
                }
                if (rc < 0) {
                    bad = 1;
                    break;
                }
                int more = next_or_close(&c, ']');
                if (more < 0) bad = 1;
                if (more <= 0) break;
            }
        }
        ws(&c);
        if (c.p != c.end) bad = 1;
    }
    PyBuffer_Release(&view);
    if (bad) {
        cols_free(&out);
        Py_RETURN_NONE;
    }
    PyObject *res =
        Py_BuildValue("(NNNNN)", column(out.ph, out.n, 1), column(out.code, out.n, 4),
                      column(out.ts, out.n, 8), column(out.pid, out.n, 8),
                      column(out.acode, out.n, 4));
    cols_free(&out);
    return res;
}

/* pair(ph, code, ts, pid, negotiate) -> (code, t0, t1, end_index, parent, ready, orphans)

   Columns as tokenize returns them; `negotiate` has one byte per name code, nonzero for
   NEGOTIATE_* names. Per pair: the B's name code and ts, the E's ts and row, the code of the
   bottom of the stack it was nested in (-1 at top level) and, for a negotiation, the name code of
   the last rank that reported ready (an X on that pid while it was on top), else -1. */
static PyObject *Scanner_pair(Scanner *self, PyObject *args) {
    Py_buffer b_ph, b_code, b_ts, b_pid, b_neg;
    if (!PyArg_ParseTuple(args, "y*y*y*y*y*", &b_ph, &b_code, &b_ts, &b_pid, &b_neg)) return NULL;
    PyObject *res = NULL;
    Py_ssize_t n = b_ph.len;
    const char *ph = b_ph.buf;
    const int32_t *code = b_code.buf;
    const int64_t *ts = b_ts.buf, *pid = b_pid.buf;
    const unsigned char *neg = b_neg.buf;
    Py_ssize_t nneg = b_neg.len;
    int32_t *o_code = NULL, *o_parent = NULL, *o_ready = NULL;
    int64_t *o_t0 = NULL, *o_t1 = NULL, *o_end = NULL;
    Py_ssize_t m = 0, orphans = 0;
    if (b_code.len != n * 4 || b_ts.len != n * 8 || b_pid.len != n * 8) {
        PyErr_SetString(PyExc_ValueError, "columns of different lengths");
        goto done;
    }
    Py_ssize_t ne = 0;
    for (Py_ssize_t i = 0; i < n; i++) ne += ph[i] == 'E';
    o_code = PyMem_Malloc((size_t)(ne ? ne : 1) * 4);
    o_parent = PyMem_Malloc((size_t)(ne ? ne : 1) * 4);
    o_ready = PyMem_Malloc((size_t)(ne ? ne : 1) * 4);
    o_t0 = PyMem_Malloc((size_t)(ne ? ne : 1) * 8);
    o_t1 = PyMem_Malloc((size_t)(ne ? ne : 1) * 8);
    o_end = PyMem_Malloc((size_t)(ne ? ne : 1) * 8);
    if (!o_code || !o_parent || !o_ready || !o_t0 || !o_t1 || !o_end) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        char p = ph[i];
        if (p == 'E') {
            Stack *st = stacks_find(&self->stacks, pid[i]);
            if (!st) {
                orphans++;
                continue;
            }
            Open top = st->items[--st->depth];
            o_code[m] = top.code;
            o_t0[m] = top.ts;
            o_t1[m] = ts[i];
            o_end[m] = i;
            o_ready[m] = top.ready;
            o_parent[m] = st->depth ? st->items[0].code : -1;
            m++;
            if (!st->depth) stacks_remove(&self->stacks, st);
        } else if (p == 'B') {
            if (stacks_push(&self->stacks, pid[i], (Open){code[i], -1, ts[i]}) < 0) {
                PyErr_NoMemory();
                goto done;
            }
        } else if (p == 'X') {
            Stack *st = stacks_find(&self->stacks, pid[i]);
            if (st) {
                Open *top = &st->items[st->depth - 1];
                if (top->code >= 0 && top->code < nneg && neg[top->code]) top->ready = code[i];
            }
        }
    }
    res = Py_BuildValue("(NNNNNNn)", column(o_code, m, 4), column(o_t0, m, 8),
                        column(o_t1, m, 8), column(o_end, m, 8), column(o_parent, m, 4),
                        column(o_ready, m, 4), orphans);
done:
    PyMem_Free(o_code);
    PyMem_Free(o_parent);
    PyMem_Free(o_ready);
    PyMem_Free(o_t0);
    PyMem_Free(o_t1);
    PyMem_Free(o_end);
    PyBuffer_Release(&b_ph);
    PyBuffer_Release(&b_code);
    PyBuffer_Release(&b_ts);
    PyBuffer_Release(&b_pid);
    PyBuffer_Release(&b_neg);
    return res;
}

/* open_spans() -> (bottom_ts, all_ts): ts of each open stack's bottom B, and of every open B. */
static PyObject *Scanner_open_spans(Scanner *self, PyObject *Py_UNUSED(ignored)) {
    Stacks *s = &self->stacks;
    Py_ssize_t total = 0;
    for (Py_ssize_t k = 0; k < s->nslots; k++) total += s->slots[k].depth;
    PyObject *bottoms = PyBytes_FromStringAndSize(NULL, s->used * 8);
    PyObject *all = PyBytes_FromStringAndSize(NULL, total * 8);
    if (!bottoms || !all) {
        Py_XDECREF(bottoms);
        Py_XDECREF(all);
        return NULL;
    }
    int64_t *b = (int64_t *)PyBytes_AS_STRING(bottoms), *a = (int64_t *)PyBytes_AS_STRING(all);
    for (Py_ssize_t k = 0; k < s->nslots; k++) {
        Stack *st = &s->slots[k];
        if (!st->depth) continue;
        *b++ = st->items[0].ts;
        for (int32_t d = 0; d < st->depth; d++) *a++ = st->items[d].ts;
    }
    return Py_BuildValue("(NN)", bottoms, all);
}

/* take_names() -> list of the names added since the last call, in code order. */
static PyObject *Scanner_take_names(Scanner *self, PyObject *Py_UNUSED(ignored)) {
    PyObject *taken = self->new_names, *fresh = PyList_New(0);
    if (!fresh) return NULL;
    self->new_names = fresh;
    return taken;
}

/* take_args() -> list of the raw args values added since the last call, in code order. */
static PyObject *Scanner_take_args(Scanner *self, PyObject *Py_UNUSED(ignored)) {
    PyObject *taken = self->new_args, *fresh = PyList_New(0);
    if (!fresh) return NULL;
    self->new_args = fresh;
    return taken;
}

/* args_code(raw) -> the code of a raw args value, adding it if new. */
static PyObject *Scanner_args_code(Scanner *self, PyObject *arg) {
    char *s;
    Py_ssize_t n;
    if (PyBytes_AsStringAndSize(arg, &s, &n) < 0) return NULL;
    int added;
    int32_t code = names_code(&self->args, s, n, &added);
    if (code < 0) return PyErr_NoMemory();
    if (added && PyList_Append(self->new_args, arg) < 0) return NULL;
    return PyLong_FromLong(code);
}

/* code(raw) -> the code of a name given as its JSON string content (what sits between the
   quotes), adding it if new: for records the Python path had to decode. */
static PyObject *Scanner_code(Scanner *self, PyObject *arg) {
    char *s;
    Py_ssize_t n;
    if (PyBytes_AsStringAndSize(arg, &s, &n) < 0) return NULL;
    int32_t code = intern_name(self, s, n);
    return code < 0 ? NULL : PyLong_FromLong(code);
}

static PyMethodDef Scanner_methods[] = {
    {"tokenize", (PyCFunction)Scanner_tokenize, METH_O, "Records of one chunk, as columns."},
    {"pair", (PyCFunction)Scanner_pair, METH_VARARGS, "Pair E events with their B."},
    {"open_spans", (PyCFunction)Scanner_open_spans, METH_NOARGS, "ts of the open B events."},
    {"take_names", (PyCFunction)Scanner_take_names, METH_NOARGS, "Names added since last."},
    {"take_args", (PyCFunction)Scanner_take_args, METH_NOARGS, "Args added since last."},
    {"args_code", (PyCFunction)Scanner_args_code, METH_O, "A raw args value's code."},
    {"code", (PyCFunction)Scanner_code, METH_O, "A name's code."},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject ScannerType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "hpcscale.collect.traces.horovod._scan.Scanner",
    .tp_basicsize = sizeof(Scanner),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Tokenizer and B/E pairing for Horovod timelines (see hpcscale/collect/traces/horovod/).",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Scanner_init,
    .tp_dealloc = (destructor)Scanner_dealloc,
    .tp_methods = Scanner_methods,
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "_scan",
    .m_doc = "Compiled fast path of hpcscale's timeline parser.",
    .m_size = -1,
};

PyMODINIT_FUNC PyInit__scan(void) {
    init_stop();
    if (PyType_Ready(&ScannerType) < 0) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (!m) return NULL;
    if (PyModule_AddObjectRef(m, "Scanner", (PyObject *)&ScannerType) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
