/* Native fast path for the <Record .../> elements of an Apple Health export.xml.
 *
 * `Scanner.scan()` walks the body of <HealthData> (everything after its start tag) and
 * takes the Records it fully understands straight into column buffers (no Python object
 * per Record): plain quantity and category Records, their MetadataEntry children and HRV
 * beat lists. Everything else - Workouts, ActivitySummary, Correlations, comments, text,
 * and any Record it is not sure about (an unknown entity, a bad byte, a duplicate
 * attribute, an unusual child, ...) - is handed back as a byte range ("region") for the
 * expat parser, together with the padding (newlines, spaces) that keeps expat's line and
 * column numbers equal to the file's. The scanner never reports an error itself: what
 * it does not take, expat checks, so malformed XML is reported exactly as before.
 *
 * The same object is the column builder of the Python path (`qadd`, `qmd`, `cadd`), so
 * Records read by either path land in one set of columns in file order.
 *
 * scan() releases the GIL while it works, so parsing overlaps with the database load.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- growable buffers */
typedef struct {
    char *p;
    Py_ssize_t n, cap;
} Buf;

static int buf_grow(Buf *b, Py_ssize_t need)
{
    if (b->n + need <= b->cap)
        return 0;
    Py_ssize_t cap = b->cap ? b->cap : 1024;
    while (cap < b->n + need)
        cap *= 2;
    char *q = realloc(b->p, (size_t)cap);
    if (!q)
        return -1;
    b->p = q;
    b->cap = cap;
    return 0;
}

static inline int buf_put(Buf *b, const void *s, Py_ssize_t n)
{
    if (n <= 0) /* nothing to copy: never memcpy(NULL, s, 0) into a buffer not allocated yet */
        return 0;
    if (buf_grow(b, n))
        return -1;
    memcpy(b->p + b->n, s, (size_t)n);
    b->n += n;
    return 0;
}

static inline int buf_byte(Buf *b, char c)
{
    if (b->n >= b->cap && buf_grow(b, 1))
        return -1;
    b->p[b->n++] = c;
    return 0;
}

/* A string column: data bytes, int32 end offset per row, one validity byte per row. */
typedef struct {
    Buf data, ends, valid;
    Py_ssize_t rows;
} Col;

static int col_add(Col *c, const char *s, Py_ssize_t n)
{
    if (s == NULL)
        n = 0;
    if (c->data.n + n > INT32_MAX)
        return -1;
    if (n && buf_put(&c->data, s, n))
        return -1;
    int32_t end = (int32_t)c->data.n;
    if (buf_put(&c->ends, &end, 4) || buf_byte(&c->valid, s != NULL))
        return -1;
    c->rows++;
    return 0;
}

static void col_truncate(Col *c, Py_ssize_t rows)
{
    c->rows = rows;
    c->ends.n = rows * 4;
    c->valid.n = rows;
    c->data.n = rows ? ((int32_t *)c->ends.p)[rows - 1] : 0;
}

static void col_free(Col *c)
{
    free(c->data.p);
    free(c->ends.p);
    free(c->valid.p);
    memset(c, 0, sizeof(*c));
}

/* The first `rows` rows as (rows, offsets bytes, data bytes, validity bitmap or None);
 * they are removed from the column. Needs the GIL. */
static PyObject *col_take(Col *c, Py_ssize_t rows)
{
    if (rows > c->rows)
        rows = c->rows;
    int32_t *ends = (int32_t *)c->ends.p;
    int32_t nbytes = rows ? ends[rows - 1] : 0;
    PyObject *offs = PyBytes_FromStringAndSize(NULL, (rows + 1) * 4);
    PyObject *data = PyBytes_FromStringAndSize(nbytes ? c->data.p : "", nbytes);
    PyObject *valid = NULL;
    if (!offs || !data)
        goto fail;
    int32_t *o = (int32_t *)PyBytes_AS_STRING(offs);
    o[0] = 0;
    if (rows)
        memcpy(o + 1, ends, (size_t)rows * 4);
    int nulls = 0;
    for (Py_ssize_t i = 0; i < rows; i++)
        if (!c->valid.p[i]) {
            nulls = 1;
            break;
        }
    if (nulls) {
        valid = PyBytes_FromStringAndSize(NULL, (rows + 7) / 8);
        if (!valid)
            goto fail;
        unsigned char *v = (unsigned char *)PyBytes_AS_STRING(valid);
        memset(v, 0, (size_t)(rows + 7) / 8);
        for (Py_ssize_t i = 0; i < rows; i++)
            if (c->valid.p[i])
                v[i >> 3] |= (unsigned char)(1u << (i & 7));
    }
    else {
        valid = Py_None;
        Py_INCREF(valid);
    }
    /* drop the rows handed out */
    Py_ssize_t rest = c->rows - rows;
    if (c->data.n > nbytes)
        memmove(c->data.p, c->data.p + nbytes, (size_t)(c->data.n - nbytes));
    c->data.n -= nbytes;
    for (Py_ssize_t i = 0; i < rest; i++)
        ends[i] = ends[i + rows] - nbytes;
    c->ends.n = rest * 4;
    if (rest)
        memmove(c->valid.p, c->valid.p + rows, (size_t)rest);
    c->valid.n = rest;
    c->rows = rest;
    return Py_BuildValue("(nNNN)", rows, offs, data, valid);
fail:
    Py_XDECREF(offs);
    Py_XDECREF(data);
    return NULL;
}

/* ----------------------------------------------------------------- parsed dates */
/* startDate/endDate of the usual shape "YYYY-MM-DD HH:MM:SS +HHMM" read here (UTC
 * microseconds, offset minutes, local day), so that the Arrow date kernels run only for
 * batches holding some other shape. A row is "ok" only when both dates have that shape
 * and are ordinary dates (1970-9999, valid day of month, hour < 24, ...): on those the
 * Arrow path gives the same values; anything else sends the whole batch to it. */
typedef struct {
    Buf start, end, off, day, ok; /* int64 us, int64 us, int64 min, int32 days, uint8 */
} DateCols;

static int64_t civil_days(int y, int m, int d)
{
    y -= m <= 2;
    int64_t era = y / 400;
    int64_t yoe = y - era * 400;
    int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

static inline int dig(const char *s, int i) { return (unsigned)(s[i] - '0') <= 9; }

static int simple_date(const char *s, Py_ssize_t n, int64_t *us, int64_t *off, int32_t *day)
{
    static const int8_t pos[] = {0, 1, 2, 3, 5, 6, 8, 9, 11, 12, 14, 15, 17, 18, 21, 22, 23, 24};
    if (!s || n != 25 || s[4] != '-' || s[7] != '-' || s[10] != ' ' || s[13] != ':' || s[16] != ':' ||
        s[19] != ' ' || (s[20] != '+' && s[20] != '-'))
        return 0;
    for (size_t i = 0; i < sizeof(pos); i++)
        if (!dig(s, pos[i]))
            return 0;
#define NUM2(i) ((s[i] - '0') * 10 + (s[i + 1] - '0'))
    int y = NUM2(0) * 100 + NUM2(2), mo = NUM2(5), d = NUM2(8), h = NUM2(11), mi = NUM2(14), se = NUM2(17);
    int oh = NUM2(21), om = NUM2(23);
#undef NUM2
    static const int8_t dim[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    if (y < 1000 || mo < 1 || mo > 12 || d < 1 || h > 23 || mi > 59 || se > 59)
        return 0;
    int leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    if (d > dim[mo - 1] + (mo == 2 && leap))
        return 0;
    int64_t days = civil_days(y, mo, d);
    int64_t o = (s[20] == '-' ? -1 : 1) * (int64_t)(oh * 60 + om);
    *us = (days * 86400 + h * 3600 + mi * 60 + se - o * 60) * 1000000;
    *off = o;
    *day = (int32_t)days;
    return 1;
}

static int dates_add(DateCols *D, const char *s0, Py_ssize_t n0, const char *s1, Py_ssize_t n1)
{
    int64_t a = 0, b = 0, o = 0, o2;
    int32_t d = 0, d2;
    uint8_t ok = simple_date(s0, n0, &a, &o, &d) && simple_date(s1, n1, &b, &o2, &d2);
    if (buf_put(&D->start, &a, 8) || buf_put(&D->end, &b, 8) || buf_put(&D->off, &o, 8) ||
        buf_put(&D->day, &d, 4) || buf_put(&D->ok, &ok, 1))
        return -1;
    return 0;
}

static void dates_truncate(DateCols *D, Py_ssize_t rows)
{
    D->start.n = D->end.n = D->off.n = rows * 8;
    D->day.n = rows * 4;
    D->ok.n = rows;
}

static void dates_free(DateCols *D)
{
    free(D->start.p);
    free(D->end.p);
    free(D->off.p);
    free(D->day.p);
    free(D->ok.p);
}

static PyObject *take_fixed(Buf *b, Py_ssize_t bytes)
{
    PyObject *o = PyBytes_FromStringAndSize(bytes ? b->p : "", bytes);
    if (o) {
        if (b->n > bytes)
            memmove(b->p, b->p + bytes, (size_t)(b->n - bytes));
        b->n -= bytes;
    }
    return o;
}

/* The first `rows` rows: (start, end, offset, day) bytes, or None if some row is not ok. */
static PyObject *dates_take(DateCols *D, Py_ssize_t rows)
{
    int ok = 1;
    for (Py_ssize_t i = 0; i < rows; i++)
        if (!D->ok.p[i]) {
            ok = 0;
            break;
        }
    PyObject *a = take_fixed(&D->start, rows * 8), *b = take_fixed(&D->end, rows * 8),
             *c = take_fixed(&D->off, rows * 8), *d = take_fixed(&D->day, rows * 4),
             *e = take_fixed(&D->ok, rows);
    if (!a || !b || !c || !d || !e || !ok) {
        Py_XDECREF(a);
        Py_XDECREF(b);
        Py_XDECREF(c);
        Py_XDECREF(d);
        Py_XDECREF(e);
        if (PyErr_Occurred())
            return NULL;
        Py_RETURN_NONE;
    }
    Py_DECREF(e);
    return Py_BuildValue("(NNNN)", a, b, c, d);
}

/* ------------------------------------------------------------------------ scanner */
#define NQ 7 /* type, sourceName, device, unit, startDate, endDate, value */
enum { A_TYPE, A_SOURCE, A_DEVICE, A_UNIT, A_START, A_END, A_VALUE };
static const char *const WANTED[NQ] = {"type", "sourceName", "device", "unit", "startDate", "endDate", "value"};

#define MAXATTR 32
#define MAXBEATS_BYTES (64 << 20)

typedef struct {
    const char *name;
    int nlen;
    const char *val; /* into the input, or NULL: then voff into scratch */
    Py_ssize_t voff, vlen;
} Attr;

typedef struct {
    PyObject_HEAD
    Col q[NQ];     /* quantity Records */
    DateCols qd, cd; /* their dates read (quantity, category) */
    Buf md_row;    /* int32 quantity row of each MetadataEntry */
    Col md_key, md_val;
    Col c[NQ];     /* category Records */
    Buf c_line;    /* int64 */
    Buf c_col;     /* int32, 1-based */
    Buf hrv_row;   /* int32 quantity row of each HRV payload */
    Col hrv_key, hrv_payload;
    Col raw_key, raw_payload; /* category Records with metadata */
    Buf scratch;   /* decoded attribute values of the Record being read */
    Buf json;      /* payload being built */
    Buf mdtmp;     /* (key, value) pairs of the current Record: Attr-like offsets */
    /* position tracking: line/col (col = characters since the line start, 0-based) known
     * at stream offset koff; expat's position (end of what it was fed) is (fl, fc). */
    long long koff, kline, kcol, fline, fcol;
    long long records; /* Records taken natively */
} Scanner;

typedef struct {
    Py_ssize_t q, md, c, hrv, raw;
} Mark;

static Mark mark(Scanner *S)
{
    Mark m = {S->q[0].rows, S->md_row.n / 4, S->c[0].rows, S->hrv_row.n / 4, S->raw_key.rows};
    return m;
}

static void rollback(Scanner *S, Mark m)
{
    for (int i = 0; i < NQ; i++) {
        col_truncate(&S->q[i], m.q);
        col_truncate(&S->c[i], m.c);
    }
    dates_truncate(&S->qd, m.q);
    dates_truncate(&S->cd, m.c);
    S->md_row.n = m.md * 4;
    col_truncate(&S->md_key, m.md);
    col_truncate(&S->md_val, m.md);
    S->c_line.n = m.c * 8;
    S->c_col.n = m.c * 4;
    S->hrv_row.n = m.hrv * 4;
    col_truncate(&S->hrv_key, m.hrv);
    col_truncate(&S->hrv_payload, m.hrv);
    col_truncate(&S->raw_key, m.raw);
    col_truncate(&S->raw_payload, m.raw);
}

enum { RD_OK = 0, RD_MORE = 1, RD_DELEGATE = 2, RD_NOMEM = 3 };

static inline int is_ws(uint8_t c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }
static inline int is_name_start(uint8_t c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':';
}
static inline int is_name_char(uint8_t c)
{
    return is_name_start(c) || (c >= '0' && c <= '9') || c == '-' || c == '.';
}

/* Length of a valid UTF-8 sequence of an XML Char at p (0: invalid, -1: cut by `end`). */
static int utf8_len(const uint8_t *p, const uint8_t *end)
{
    uint8_t c = p[0];
    int n;
    if (c >= 0xC2 && c <= 0xDF)
        n = 2;
    else if (c >= 0xE0 && c <= 0xEF)
        n = 3;
    else if (c >= 0xF0 && c <= 0xF4)
        n = 4;
    else
        return 0;
    if (end - p < n)
        return -1;
    for (int i = 1; i < n; i++)
        if ((p[i] & 0xC0) != 0x80)
            return 0;
    if (n == 3) {
        if (c == 0xE0 && p[1] < 0xA0)
            return 0;
        if (c == 0xED && p[1] >= 0xA0) /* surrogates */
            return 0;
        if (c == 0xEF && p[1] == 0xBF && (p[2] == 0xBE || p[2] == 0xBF)) /* U+FFFE/F */
            return 0;
    }
    if (n == 4) {
        if (c == 0xF0 && p[1] < 0x90)
            return 0;
        if (c == 0xF4 && p[1] >= 0x90)
            return 0;
    }
    return n;
}

static int put_utf8(Buf *b, uint32_t v)
{
    char t[4];
    int n;
    if (v < 0x80) {
        t[0] = (char)v;
        n = 1;
    }
    else if (v < 0x800) {
        t[0] = (char)(0xC0 | (v >> 6));
        t[1] = (char)(0x80 | (v & 0x3F));
        n = 2;
    }
    else if (v < 0x10000) {
        t[0] = (char)(0xE0 | (v >> 12));
        t[1] = (char)(0x80 | ((v >> 6) & 0x3F));
        t[2] = (char)(0x80 | (v & 0x3F));
        n = 3;
    }
    else {
        t[0] = (char)(0xF0 | (v >> 18));
        t[1] = (char)(0x80 | ((v >> 12) & 0x3F));
        t[2] = (char)(0x80 | ((v >> 6) & 0x3F));
        t[3] = (char)(0x80 | (v & 0x3F));
        n = 4;
    }
    return buf_put(b, t, n);
}

static inline int xml_char_ok(uint32_t v)
{
    return v == 0x9 || v == 0xA || v == 0xD || (v >= 0x20 && v <= 0xD7FF) ||
           (v >= 0xE000 && v <= 0xFFFD) || (v >= 0x10000 && v <= 0x10FFFF);
}

/* An entity or character reference at p ('&'): appends its text to `out`. */
static int read_ref(const uint8_t **pp, const uint8_t *end, Buf *out)
{
    const uint8_t *p = *pp + 1;
    const uint8_t *semi = NULL;
    for (const uint8_t *s = p; s < end && s < p + 12; s++)
        if (*s == ';') {
            semi = s;
            break;
        }
    if (!semi)
        return (end - p < 12) ? RD_MORE : RD_DELEGATE;
    Py_ssize_t n = semi - p;
    if (n >= 2 && p[0] == '#') {
        uint32_t v = 0;
        if (p[1] == 'x') {
            if (n < 3 || n > 8)
                return RD_DELEGATE;
            for (const uint8_t *s = p + 2; s < semi; s++) {
                uint8_t c = *s;
                int d = (c >= '0' && c <= '9') ? c - '0' : (c >= 'a' && c <= 'f') ? c - 'a' + 10
                                                         : (c >= 'A' && c <= 'F') ? c - 'A' + 10 : -1;
                if (d < 0)
                    return RD_DELEGATE;
                v = v * 16 + (uint32_t)d;
            }
        }
        else {
            if (n > 8)
                return RD_DELEGATE;
            for (const uint8_t *s = p + 1; s < semi; s++) {
                if (*s < '0' || *s > '9')
                    return RD_DELEGATE;
                v = v * 10 + (uint32_t)(*s - '0');
            }
        }
        if (!xml_char_ok(v))
            return RD_DELEGATE;
        if (put_utf8(out, v))
            return RD_NOMEM;
    }
    else {
        char c;
        if (n == 2 && p[0] == 'l' && p[1] == 't')
            c = '<';
        else if (n == 2 && p[0] == 'g' && p[1] == 't')
            c = '>';
        else if (n == 3 && !memcmp(p, "amp", 3))
            c = '&';
        else if (n == 4 && !memcmp(p, "quot", 4))
            c = '"';
        else if (n == 4 && !memcmp(p, "apos", 4))
            c = '\'';
        else
            return RD_DELEGATE; /* an entity we do not know: expat decides */
        if (buf_byte(out, c))
            return RD_NOMEM;
    }
    *pp = semi + 1;
    return RD_OK;
}

/* The attributes of a start tag; p is just after the element name. On RD_OK, *pp is after
 * the tag's '>' and *empty tells whether it was '/>'. Values are decoded and normalised
 * as expat does for CDATA attributes (tab/newline -> space). */
static int read_attrs(Scanner *S, const uint8_t **pp, const uint8_t *end, Attr *at, int *nat, int *empty)
{
    const uint8_t *p = *pp;
    int n = 0;
    for (;;) {
        int ws = 0;
        while (p < end && is_ws(*p)) {
            p++;
            ws = 1;
        }
        if (p >= end)
            return RD_MORE;
        if (*p == '/') {
            if (p + 1 >= end)
                return RD_MORE;
            if (p[1] != '>')
                return RD_DELEGATE;
            *empty = 1;
            *pp = p + 2;
            *nat = n;
            return RD_OK;
        }
        if (*p == '>') {
            *empty = 0;
            *pp = p + 1;
            *nat = n;
            return RD_OK;
        }
        if (!ws || !is_name_start(*p) || n >= MAXATTR)
            return RD_DELEGATE;
        const uint8_t *name = p;
        while (p < end && is_name_char(*p))
            p++;
        if (p >= end)
            return RD_MORE;
        int nlen = (int)(p - name);
        for (int i = 0; i < n; i++)
            if (at[i].nlen == nlen && !memcmp(at[i].name, name, (size_t)nlen))
                return RD_DELEGATE; /* duplicate attribute: expat's error */
        while (p < end && is_ws(*p))
            p++;
        if (p >= end)
            return RD_MORE;
        if (*p != '=')
            return RD_DELEGATE;
        p++;
        while (p < end && is_ws(*p))
            p++;
        if (p >= end)
            return RD_MORE;
        uint8_t q = *p;
        if (q != '"' && q != '\'')
            return RD_DELEGATE;
        p++;
        const uint8_t *v = p;
        for (;;) { /* plain bytes */
            if (p >= end)
                return RD_MORE;
            uint8_t c = *p;
            if (c == q || c < 0x20 || c >= 0x80 || c == '<' || c == '&')
                break;
            p++;
        }
        Attr *a = &at[n];
        a->name = (const char *)name;
        a->nlen = nlen;
        if (*p == q) {
            a->val = (const char *)v;
            a->vlen = p - v;
            p++;
        }
        else { /* decode into scratch */
            a->val = NULL;
            a->voff = S->scratch.n;
            if (buf_put(&S->scratch, v, p - v))
                return RD_NOMEM;
            for (;;) {
                if (p >= end)
                    return RD_MORE;
                uint8_t c = *p;
                if (c == q) {
                    p++;
                    break;
                }
                if (c == '<')
                    return RD_DELEGATE;
                if (c == '&') {
                    int r = read_ref(&p, end, &S->scratch);
                    if (r != RD_OK)
                        return r;
                    continue;
                }
                if (c < 0x20) {
                    if (c != '\n' && c != '\t')
                        return RD_DELEGATE; /* \r (never here: see parser.py) or a control byte */
                    if (buf_byte(&S->scratch, ' '))
                        return RD_NOMEM;
                    p++;
                    continue;
                }
                if (c >= 0x80) {
                    int k = utf8_len(p, end);
                    if (k < 0)
                        return RD_MORE;
                    if (k == 0)
                        return RD_DELEGATE;
                    if (buf_put(&S->scratch, p, k))
                        return RD_NOMEM;
                    p += k;
                    continue;
                }
                if (buf_byte(&S->scratch, (char)c))
                    return RD_NOMEM;
                p++;
            }
            a->vlen = S->scratch.n - a->voff;
        }
        n++;
    }
}

static inline const char *aval(Scanner *S, const Attr *a)
{
    return a->val ? a->val : S->scratch.p + a->voff;
}

static int find_attr(const Attr *at, int n, const char *name)
{
    size_t len = strlen(name);
    for (int i = 0; i < n; i++)
        if ((size_t)at[i].nlen == len && !memcmp(at[i].name, name, len))
            return i;
    return -1;
}

/* "<Name" followed by a character that ends a name. -1: cut by end. */
static int tag_is(const uint8_t *p, const uint8_t *end, const char *name, size_t len)
{
    if ((size_t)(end - p) < len + 2)
        return (memcmp(p, name, (size_t)(end - p) < len + 1 ? (size_t)(end - p) : len + 1) == 0) ? -1 : 0;
    return !memcmp(p, name, len + 1) && !is_name_char(p[len + 1]);
}
#define TAG_IS(p, end, lit) tag_is((p), (end), lit, sizeof(lit) - 2)

static int json_str(Buf *b, const char *s, Py_ssize_t n)
{
    static const char hex[] = "0123456789abcdef";
    if (buf_byte(b, '"'))
        return -1;
    Py_ssize_t i = 0, run = 0;
    for (; i < n; i++) {
        uint8_t c = (uint8_t)s[i];
        if (c >= 0x20 && c != '"' && c != '\\')
            continue;
        if (buf_put(b, s + run, i - run))
            return -1;
        run = i + 1;
        char e[6] = {'\\', 0, 0, 0, 0, 0};
        int k = 2;
        switch (c) {
        case '"': e[1] = '"'; break;
        case '\\': e[1] = '\\'; break;
        case '\n': e[1] = 'n'; break;
        case '\r': e[1] = 'r'; break;
        case '\t': e[1] = 't'; break;
        case '\b': e[1] = 'b'; break;
        case '\f': e[1] = 'f'; break;
        default:
            e[1] = 'u'; e[2] = '0'; e[3] = '0'; e[4] = hex[c >> 4]; e[5] = hex[c & 15];
            k = 6;
        }
        if (buf_put(b, e, k))
            return -1;
    }
    if (buf_put(b, s + run, n - run) || buf_byte(b, '"'))
        return -1;
    return 0;
}

static int json_attrs(Scanner *S, Buf *b, const Attr *at, int n)
{
    if (buf_byte(b, '{'))
        return -1;
    for (int i = 0; i < n; i++) {
        if ((i && buf_byte(b, ',')) || json_str(b, at[i].name, at[i].nlen) || buf_byte(b, ':') ||
            json_str(b, aval(S, &at[i]), at[i].vlen))
            return -1;
    }
    return buf_byte(b, '}');
}

static int natural_key(Scanner *S, Col *c, const Attr *at, const int *ix)
{
    Buf *k = &S->mdtmp; /* reused as a temporary here */
    k->n = 0;
    const int parts[4] = {A_TYPE, A_SOURCE, A_START, A_END};
    for (int i = 0; i < 4; i++) {
        const Attr *a = &at[ix[parts[i]]];
        if ((i && buf_byte(k, '|')) || buf_put(k, aval(S, a), a->vlen))
            return -1;
    }
    return col_add(c, k->p, k->n);
}

#define MAXMD 64

/* One <Record ...> at p (p[0] == '<'). */
static int read_record(Scanner *S, const uint8_t *buf, const uint8_t **pp, const uint8_t *end)
{
    const uint8_t *p = *pp + 7; /* "<Record" */
    Attr at[MAXATTR];
    int nat = 0, empty = 0;
    S->scratch.n = 0;
    int r = read_attrs(S, &p, end, at, &nat, &empty);
    if (r != RD_OK)
        return r;
    int ix[NQ];
    for (int i = 0; i < NQ; i++)
        ix[i] = find_attr(at, nat, WANTED[i]);
    if (ix[A_TYPE] < 0 || ix[A_SOURCE] < 0 || ix[A_START] < 0 || ix[A_END] < 0)
        return RD_DELEGATE; /* expat's path reports the missing attribute */
    const char *type = aval(S, &at[ix[A_TYPE]]);
    if (at[ix[A_TYPE]].vlen < 3 || ((uint8_t)type[0] | (uint8_t)type[1] | (uint8_t)type[2]) >= 0x80)
        return RD_DELEGATE;
    int quantity = type[2] == 'Q'; /* HKQuantityTypeIdentifier... */

    /* children: MetadataEntry, HeartRateVariabilityMetadataList (quantity only) */
    Attr md[MAXMD][2];
    int mdset[MAXMD][2];
    int nmd = 0;
    int nbeats = 0;
    Buf *js = &S->json;
    js->n = 0;
    if (!empty) {
        for (;;) {
            while (p < end && is_ws(*p))
                p++;
            if (p >= end)
                return RD_MORE;
            if (*p != '<')
                return RD_DELEGATE; /* text inside a Record */
            int t;
            if (p + 1 < end && p[1] == '/') {
                if (end - p < 9)
                    return RD_MORE;
                if (memcmp(p, "</Record", 8))
                    return RD_DELEGATE;
                p += 8;
                while (p < end && is_ws(*p))
                    p++;
                if (p >= end)
                    return RD_MORE;
                if (*p != '>')
                    return RD_DELEGATE;
                p++;
                break;
            }
            if ((t = TAG_IS(p, end, "<MetadataEntry")) != 0) {
                if (t < 0)
                    return RD_MORE;
                if (nmd >= MAXMD)
                    return RD_DELEGATE;
                const uint8_t *q = p + sizeof("<MetadataEntry") - 1;
                Attr ma[MAXATTR];
                int nma = 0, mempty = 0;
                r = read_attrs(S, &q, end, ma, &nma, &mempty);
                if (r != RD_OK)
                    return r;
                if (!mempty)
                    return RD_DELEGATE;
                int k = find_attr(ma, nma, "key"), v = find_attr(ma, nma, "value");
                mdset[nmd][0] = k >= 0;
                mdset[nmd][1] = v >= 0;
                if (k >= 0)
                    md[nmd][0] = ma[k];
                if (v >= 0)
                    md[nmd][1] = ma[v];
                nmd++;
                p = q;
                continue;
            }
            if ((t = TAG_IS(p, end, "<HeartRateVariabilityMetadataList")) != 0) {
                if (t < 0)
                    return RD_MORE;
                if (!quantity)
                    return RD_DELEGATE;
                const uint8_t *q = p + sizeof("<HeartRateVariabilityMetadataList") - 1;
                Attr la[MAXATTR];
                int nla = 0, lempty = 0;
                r = read_attrs(S, &q, end, la, &nla, &lempty);
                if (r != RD_OK)
                    return r;
                p = q;
                if (lempty)
                    continue;
                for (;;) {
                    while (p < end && is_ws(*p))
                        p++;
                    if (p >= end)
                        return RD_MORE;
                    if (*p != '<')
                        return RD_DELEGATE;
                    if (p + 1 < end && p[1] == '/') {
                        #define HRV_END "</HeartRateVariabilityMetadataList"
                        if ((size_t)(end - p) < sizeof(HRV_END))
                            return RD_MORE;
                        if (memcmp(p, HRV_END, sizeof(HRV_END) - 1))
                            return RD_DELEGATE;
                        p += sizeof(HRV_END) - 1;
                        while (p < end && is_ws(*p))
                            p++;
                        if (p >= end)
                            return RD_MORE;
                        if (*p != '>')
                            return RD_DELEGATE;
                        p++;
                        break;
                    }
                    t = TAG_IS(p, end, "<InstantaneousBeatsPerMinute");
                    if (t < 0)
                        return RD_MORE;
                    if (!t)
                        return RD_DELEGATE;
                    q = p + sizeof("<InstantaneousBeatsPerMinute") - 1;
                    Attr ba[MAXATTR];
                    int nba = 0, bempty = 0;
                    r = read_attrs(S, &q, end, ba, &nba, &bempty);
                    if (r != RD_OK)
                        return r;
                    if (!bempty)
                        return RD_DELEGATE;
                    p = q;
                    if (js->n > MAXBEATS_BYTES)
                        return RD_DELEGATE;
                    /* [time, bpm] */
                    int ti = find_attr(ba, nba, "time"), bi = find_attr(ba, nba, "bpm");
                    if (buf_put(js, nbeats ? ",[" : "[", nbeats ? 2 : 1))
                        return RD_NOMEM;
                    if (ti >= 0 ? json_str(js, aval(S, &ba[ti]), ba[ti].vlen) : buf_put(js, "null", 4))
                        return RD_NOMEM;
                    if (buf_byte(js, ','))
                        return RD_NOMEM;
                    if (bi >= 0 ? json_str(js, aval(S, &ba[bi]), ba[bi].vlen) : buf_put(js, "null", 4))
                        return RD_NOMEM;
                    if (buf_byte(js, ']'))
                        return RD_NOMEM;
                    nbeats++;
                }
                continue;
            }
            return RD_DELEGATE; /* any other child (or a comment, PI, CDATA) */
        }
    }
    *pp = p;
    (void)buf;

    Col *cols = quantity ? S->q : S->c;
    for (int i = 0; i < NQ; i++) {
        const Attr *a = ix[i] >= 0 ? &at[ix[i]] : NULL;
        if (col_add(&cols[i], a ? aval(S, a) : NULL, a ? a->vlen : 0))
            return RD_NOMEM;
    }
    if (dates_add(quantity ? &S->qd : &S->cd, aval(S, &at[ix[A_START]]), at[ix[A_START]].vlen,
                  aval(S, &at[ix[A_END]]), at[ix[A_END]].vlen))
        return RD_NOMEM;
    if (quantity) {
        int32_t row = (int32_t)(S->q[0].rows - 1);
        for (int i = 0; i < nmd; i++) {
            if (buf_put(&S->md_row, &row, 4))
                return RD_NOMEM;
            const Attr *k = mdset[i][0] ? &md[i][0] : NULL, *v = mdset[i][1] ? &md[i][1] : NULL;
            if (col_add(&S->md_key, k ? aval(S, k) : "", k ? k->vlen : 0) ||
                col_add(&S->md_val, v ? aval(S, v) : "", v ? v->vlen : 0))
                return RD_NOMEM;
        }
        if (nbeats) { /* {"attributes":{...},"beats":[...]} */
            Py_ssize_t beats_len = js->n;
            if (buf_put(js, "{\"attributes\":", 14) || json_attrs(S, js, at, nat) ||
                buf_put(js, ",\"beats\":[", 10))
                return RD_NOMEM;
            /* payload = header (after the beats) + beats + "]}" */
            Py_ssize_t head = beats_len, headlen = js->n - beats_len;
            Col *pc = &S->hrv_payload;
            if (pc->data.n + headlen + beats_len + 2 > INT32_MAX)
                return RD_NOMEM;
            if (buf_put(&pc->data, js->p + head, headlen) || buf_put(&pc->data, js->p, beats_len) ||
                buf_put(&pc->data, "]}", 2))
                return RD_NOMEM;
            int32_t pend = (int32_t)pc->data.n;
            if (buf_put(&pc->ends, &pend, 4) || buf_byte(&pc->valid, 1))
                return RD_NOMEM;
            pc->rows++;
            if (buf_put(&S->hrv_row, &row, 4) || natural_key(S, &S->hrv_key, at, ix))
                return RD_NOMEM;
        }
    }
    else {
        /* position of the Record ('<'): filled in by the caller */
        int64_t zero64 = 0;
        int32_t zero32 = 0;
        if (buf_put(&S->c_line, &zero64, 8) || buf_put(&S->c_col, &zero32, 4))
            return RD_NOMEM;
        if (nmd) { /* {"attributes":{...},"metadata":{...}}: a dict, so a repeated key is
                      left to the Python path */
            for (int i = 0; i < nmd; i++)
                for (int j = 0; j < i; j++) {
                    Py_ssize_t li = mdset[i][0] ? md[i][0].vlen : 0, lj = mdset[j][0] ? md[j][0].vlen : 0;
                    if (li == lj && (!li || !memcmp(aval(S, &md[i][0]), aval(S, &md[j][0]), (size_t)li)))
                        return RD_DELEGATE;
                }
            js->n = 0;
            if (buf_put(js, "{\"attributes\":", 14) || json_attrs(S, js, at, nat) ||
                buf_put(js, ",\"metadata\":{", 13))
                return RD_NOMEM;
            for (int i = 0; i < nmd; i++) {
                if (i && buf_byte(js, ','))
                    return RD_NOMEM;
                if (json_str(js, mdset[i][0] ? aval(S, &md[i][0]) : "", mdset[i][0] ? md[i][0].vlen : 0) ||
                    buf_byte(js, ':') ||
                    json_str(js, mdset[i][1] ? aval(S, &md[i][1]) : "", mdset[i][1] ? md[i][1].vlen : 0))
                    return RD_NOMEM;
            }
            if (buf_put(js, "}}", 2) || col_add(&S->raw_payload, js->p, js->n) ||
                natural_key(S, &S->raw_key, at, ix))
                return RD_NOMEM;
        }
    }
    return RD_OK;
}

static const uint8_t *find2(const uint8_t *p, const uint8_t *end, const char *pat, size_t n)
{
    while (p + n <= end) {
        const uint8_t *q = memchr(p, pat[0], (size_t)(end - p));
        if (!q || q + n > end)
            return NULL;
        if (!memcmp(q, pat, n))
            return q;
        p = q + 1;
    }
    return NULL;
}

/* Past a comment, PI or CDATA section at p (p[0] == '<'): 1 ok, 0 not one, -1 cut, -2 other '<!'. */
static int skip_special(const uint8_t **pp, const uint8_t *end)
{
    const uint8_t *p = *pp, *e;
    if (end - p < 2)
        return -1;
    if (p[1] == '?') {
        if (!(e = find2(p + 2, end, "?>", 2)))
            return -1;
        *pp = e + 2;
        return 1;
    }
    if (p[1] != '!')
        return 0;
    if (end - p < 9)
        return -1;
    if (!memcmp(p, "<!--", 4)) {
        if (!(e = find2(p + 4, end, "-->", 3)))
            return -1;
        *pp = e + 3;
        return 1;
    }
    if (!memcmp(p, "<![CDATA[", 9)) {
        if (!(e = find2(p + 9, end, "]]>", 3)))
            return -1;
        *pp = e + 3;
        return 1;
    }
    return -2;
}

/* The end of the item at p: an element with its content, an end tag, a comment, a PI, or
 * a run of text. 0 ok, 1 it is an end tag at this level (the root's end), -1 cut, -2 give up. */
static int item_end(const uint8_t *p, const uint8_t *end, const uint8_t **out)
{
    if (*p != '<') {
        const uint8_t *q = memchr(p, '<', (size_t)(end - p));
        if (!q)
            return -1;
        *out = q;
        return 0;
    }
    long depth = 0;
    for (;;) {
        /* p at '<' */
        int s = skip_special(&p, end);
        if (s < 0)
            return s;
        if (s == 0) {
            if (p[1] == '/') {
                const uint8_t *q = memchr(p, '>', (size_t)(end - p));
                if (!q)
                    return -1;
                p = q + 1;
                if (--depth < 0) {
                    *out = p;
                    return 1;
                }
            }
            else {
                const uint8_t *q = p + 1;
                for (;;) {
                    while (q < end && *q != '>' && *q != '"' && *q != '\'')
                        q++;
                    if (q >= end)
                        return -1;
                    if (*q == '>')
                        break;
                    const uint8_t *c = memchr(q + 1, *q, (size_t)(end - q - 1));
                    if (!c)
                        return -1;
                    q = c + 1;
                }
                if (q[-1] != '/')
                    depth++;
                p = q + 1;
            }
        }
        if (depth == 0) {
            *out = p;
            return 0;
        }
        const uint8_t *q = memchr(p, '<', (size_t)(end - p));
        if (!q)
            return -1;
        p = q;
    }
}

/* Is the next element tag after p one that the Python path would attach to the Record
 * before it (MetadataEntry, beat list, beat)? 1 yes (*at = its '<'), 0 no, -1 cut. */
static int stray_child_next(const uint8_t *p, const uint8_t *end, const uint8_t **at)
{
    for (;;) {
        const uint8_t *q = memchr(p, '<', (size_t)(end - p));
        if (!q)
            return -1;
        p = q;
        int s = skip_special(&p, end);
        if (s == -1)
            return -1;
        if (s == -2)
            return 0;
        if (s == 1)
            continue;
        if (end - p < 2)
            return -1;
        if (p[1] == '/')
            return 0;
        int t1 = TAG_IS(p, end, "<MetadataEntry"), t2 = TAG_IS(p, end, "<HeartRateVariabilityMetadataList"),
            t3 = TAG_IS(p, end, "<InstantaneousBeatsPerMinute");
        if (t1 > 0 || t2 > 0 || t3 > 0) {
            *at = p;
            return 1;
        }
        if (t1 < 0 || t2 < 0 || t3 < 0)
            return -1;
        return 0;
    }
}

enum { S_MORE = 0, S_REGION = 1, S_REGION_LAST = 2, S_REST = 3, S_NOMEM = 4 };
#define MAXREGION (64 << 20)

/* line/col at buffer offset `to`, advancing the known position (buffer starts at `base`). */
static void advance(Scanner *S, const uint8_t *buf, long long base, Py_ssize_t to)
{
    Py_ssize_t from = (Py_ssize_t)(S->koff - base);
    if (to <= from)
        return;
    const uint8_t *p = buf + from, *end = buf + to, *last = NULL;
    while (p < end) {
        const uint8_t *q = memchr(p, '\n', (size_t)(end - p));
        if (!q)
            break;
        S->kline++;
        last = q;
        p = q + 1;
    }
    const uint8_t *s = last ? last + 1 : buf + from;
    long long chars = 0;
    for (; s < end; s++)
        chars += ((*s & 0xC0) != 0x80);
    S->kcol = last ? chars : S->kcol + chars;
    S->koff = base + to;
}

static int scan_body(Scanner *S, const uint8_t *buf, Py_ssize_t len, long long base, Py_ssize_t pos,
                     int final, int force, Py_ssize_t *ra, Py_ssize_t *rb)
{
    const uint8_t *p = buf + pos, *end = buf + len;
    for (;;) {
        while (p < end && is_ws(*p))
            p++;
        *ra = p - buf;
        if (p >= end)
            return S_MORE;
        int rec = *p == '<' ? TAG_IS(p, end, "<Record") : 0;
        if (rec < 0)
            return final ? S_REST : S_MORE;
        if (rec > 0 && !force) {
            Mark m = mark(S);
            const uint8_t *q = p;
            int r = read_record(S, buf, &q, end);
            if (r == RD_OK) {
                const uint8_t *at;
                int st = stray_child_next(q, end, &at);
                if (st == 0 || (st < 0 && final)) {
                    if (S->c[0].rows > m.c) { /* a category Record: note where it starts */
                        advance(S, buf, base, p - buf);
                        ((int64_t *)S->c_line.p)[m.c] = S->kline;
                        ((int32_t *)S->c_col.p)[m.c] = (int32_t)(S->kcol + 1);
                    }
                    S->records++;
                    p = q;
                    continue;
                }
                rollback(S, m);
                if (st < 0)
                    return S_MORE;
                r = RD_DELEGATE;
            }
            else
                rollback(S, m);
            if (r == RD_NOMEM)
                return S_NOMEM;
            if (r == RD_MORE)
                return final ? S_REST : S_MORE;
        }
        /* a region for expat: this item and any stray children after it */
        const uint8_t *e;
        int k = item_end(p, end, &e);
        if (k == -2)
            return S_REST;
        if (k == -1)
            return (final || end - p > MAXREGION) ? S_REST : S_MORE;
        if (k == 0) {
            for (;;) {
                const uint8_t *at, *e2;
                int st = stray_child_next(e, end, &at);
                if (st == 0 || (st < 0 && final))
                    break;
                if (st < 0)
                    return end - p > MAXREGION ? S_REST : S_MORE;
                int k2 = item_end(at, end, &e2);
                if (k2 == -2)
                    return S_REST;
                if (k2 == -1)
                    return (final || end - p > MAXREGION) ? S_REST : S_MORE;
                e = e2;
                if (k2 == 1) {
                    k = 1;
                    break;
                }
            }
        }
        *rb = e - buf;
        return k == 1 ? S_REGION_LAST : S_REGION;
    }
}

/* ----------------------------------------------------------------- Python methods */
static void Scanner_dealloc(Scanner *S)
{
    for (int i = 0; i < NQ; i++) {
        col_free(&S->q[i]);
        col_free(&S->c[i]);
    }
    dates_free(&S->qd);
    dates_free(&S->cd);
    Col *cols[] = {&S->md_key, &S->md_val, &S->hrv_key, &S->hrv_payload, &S->raw_key, &S->raw_payload};
    for (size_t i = 0; i < sizeof(cols) / sizeof(cols[0]); i++)
        col_free(cols[i]);
    Buf *bufs[] = {&S->md_row, &S->c_line, &S->c_col, &S->hrv_row, &S->scratch, &S->json, &S->mdtmp};
    for (size_t i = 0; i < sizeof(bufs) / sizeof(bufs[0]); i++)
        free(bufs[i]->p);
    Py_TYPE(S)->tp_free((PyObject *)S);
}

static PyObject *Scanner_new(PyTypeObject *type, PyObject *args, PyObject *kw)
{
    Scanner *S = (Scanner *)type->tp_alloc(type, 0);
    if (S) {
        S->kline = S->fline = 1;
    }
    return (PyObject *)S;
}

/* set_position(offset, line, col): line/col (col 0-based, in characters) at stream
 * offset `offset`, which is also where expat stands. */
static PyObject *Scanner_set_position(Scanner *S, PyObject *args)
{
    long long off, line, col;
    if (!PyArg_ParseTuple(args, "LLL", &off, &line, &col))
        return NULL;
    S->koff = off;
    S->kline = S->fline = line;
    S->kcol = S->fcol = col;
    Py_RETURN_NONE;
}

static PyObject *padding(Scanner *S)
{
    long long nl = S->kline - S->fline;
    long long sp = nl ? S->kcol : S->kcol - S->fcol;
    S->fline = S->kline;
    S->fcol = S->kcol;
    return Py_BuildValue("(LL)", nl, sp);
}

/* scan(buf, base, pos, final, force) -> (status, a, b, (newlines, spaces))
 *   status 0: more data needed; everything before `a` was taken natively.
 *   1: bytes [a, b) are for expat, after the padding; 2: the same, and it closed the root
 *   (or was an end tag at top level): the rest of the file goes to expat.
 *   3: from `a` on, everything goes to expat (after the padding).
 * `base` is the stream offset of buf[0]; `force`: the next item goes to expat even if it
 * is a Record the scanner could read (a category Record read by expat waits for it). */
static PyObject *Scanner_scan(Scanner *S, PyObject *args)
{
    Py_buffer view;
    long long base;
    Py_ssize_t pos, a = 0, b = 0;
    int final, force;
    if (!PyArg_ParseTuple(args, "y*Lnpp", &view, &base, &pos, &final, &force))
        return NULL;
    if (pos < 0 || pos > view.len || base + pos < S->koff) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, "scan position out of order");
        return NULL;
    }
    int st;
    const uint8_t *buf = (const uint8_t *)view.buf;
    Py_BEGIN_ALLOW_THREADS
    st = scan_body(S, buf, view.len, base, pos, final, force, &a, &b);
    if (st != S_NOMEM)
        advance(S, buf, base, a);
    Py_END_ALLOW_THREADS
    if (st == S_NOMEM) {
        PyBuffer_Release(&view);
        return PyErr_NoMemory();
    }
    PyObject *pad = Py_None;
    Py_INCREF(pad);
    if (st == S_REGION || st == S_REGION_LAST || st == S_REST) {
        Py_DECREF(pad);
        pad = padding(S);
        if (st != S_REST) {
            Py_BEGIN_ALLOW_THREADS
            advance(S, buf, base, b);
            Py_END_ALLOW_THREADS
            S->fline = S->kline;
            S->fcol = S->kcol;
        }
    }
    PyBuffer_Release(&view);
    if (!pad)
        return NULL;
    return Py_BuildValue("(innN)", st, a, b, pad);
}

/* pad() -> (newlines, spaces) from expat's position to the scanner's. */
static PyObject *Scanner_pad(Scanner *S, PyObject *noargs) { return padding(S); }

static PyObject *str_of(Col *c, Py_ssize_t i)
{
    int32_t *ends = (int32_t *)c->ends.p;
    int32_t s = i ? ends[i - 1] : 0;
    return PyUnicode_DecodeUTF8(c->data.p + s, ends[i] - s, "strict");
}

/* take_raw() -> (category raws [(key, payload)], HRV raws [(row, key, payload)]) */
static PyObject *Scanner_take_raw(Scanner *S, PyObject *noargs)
{
    PyObject *raws = PyList_New(S->raw_key.rows), *hrv = PyList_New(S->hrv_key.rows);
    if (!raws || !hrv)
        goto fail;
    for (Py_ssize_t i = 0; i < S->raw_key.rows; i++) {
        PyObject *t = Py_BuildValue("(NN)", str_of(&S->raw_key, i), str_of(&S->raw_payload, i));
        if (!t)
            goto fail;
        PyList_SET_ITEM(raws, i, t);
    }
    for (Py_ssize_t i = 0; i < S->hrv_key.rows; i++) {
        PyObject *t = Py_BuildValue("(iNN)", ((int32_t *)S->hrv_row.p)[i], str_of(&S->hrv_key, i),
                                    str_of(&S->hrv_payload, i));
        if (!t)
            goto fail;
        PyList_SET_ITEM(hrv, i, t);
    }
    col_truncate(&S->raw_key, 0);
    col_truncate(&S->raw_payload, 0);
    col_truncate(&S->hrv_key, 0);
    col_truncate(&S->hrv_payload, 0);
    S->hrv_row.n = 0;
    return Py_BuildValue("(NN)", raws, hrv);
fail:
    Py_XDECREF(raws);
    Py_XDECREF(hrv);
    return NULL;
}

static int add_dates_obj(DateCols *D, PyObject *start, PyObject *end)
{
    Py_ssize_t n0 = 0, n1 = 0;
    const char *s0 = PyUnicode_Check(start) ? PyUnicode_AsUTF8AndSize(start, &n0) : NULL;
    const char *s1 = PyUnicode_Check(end) ? PyUnicode_AsUTF8AndSize(end, &n1) : NULL;
    if (PyErr_Occurred())
        return -1;
    if (dates_add(D, s0, n0, s1, n1)) {
        PyErr_NoMemory();
        return -1;
    }
    return 0;
}

static int add_obj(Col *c, PyObject *o)
{
    if (o == Py_None)
        return col_add(c, NULL, 0);
    Py_ssize_t n;
    const char *s = PyUnicode_AsUTF8AndSize(o, &n);
    if (!s)
        return -1;
    if (n == 1 && s[0] == 0) /* parser.NULL: an absent attribute */
        s = NULL;
    if (col_add(c, s, n)) {
        PyErr_NoMemory();
        return -1;
    }
    return 0;
}

/* qadd(type, sourceName, device, unit, startDate, endDate, value): a quantity Record read
 * by the Python path (None = absent attribute). */
static PyObject *Scanner_qadd(Scanner *S, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != NQ) {
        PyErr_SetString(PyExc_TypeError, "qadd takes 7 arguments");
        return NULL;
    }
    for (int i = 0; i < NQ; i++)
        if (add_obj(&S->q[i], args[i]))
            return NULL;
    if (add_dates_obj(&S->qd, args[A_START], args[A_END]))
        return NULL;
    Py_RETURN_NONE;
}

/* qmd(key, value): a MetadataEntry of the last quantity Record. */
static PyObject *Scanner_qmd(Scanner *S, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2 || S->q[0].rows == 0) {
        PyErr_SetString(PyExc_TypeError, "qmd(key, value) after a quantity Record");
        return NULL;
    }
    int32_t row = (int32_t)(S->q[0].rows - 1);
    if (buf_put(&S->md_row, &row, 4))
        return PyErr_NoMemory();
    if (add_obj(&S->md_key, args[0]) || add_obj(&S->md_val, args[1]))
        return NULL;
    Py_RETURN_NONE;
}

/* cadd(type, sourceName, device, unit, startDate, endDate, value, line, column) */
static PyObject *Scanner_cadd(Scanner *S, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != NQ + 2) {
        PyErr_SetString(PyExc_TypeError, "cadd takes 9 arguments");
        return NULL;
    }
    int64_t line = PyLong_AsLongLong(args[NQ]);
    int32_t col = (int32_t)PyLong_AsLong(args[NQ + 1]);
    if (PyErr_Occurred())
        return NULL;
    for (int i = 0; i < NQ; i++)
        if (add_obj(&S->c[i], args[i]))
            return NULL;
    if (add_dates_obj(&S->cd, args[A_START], args[A_END]))
        return NULL;
    if (buf_put(&S->c_line, &line, 8) || buf_put(&S->c_col, &col, 4))
        return PyErr_NoMemory();
    Py_RETURN_NONE;
}

/* take_quantity(rows) -> (7 columns, md rows (int32 bytes), md keys, md values) for the
 * first `rows` quantity rows; MetadataEntry rows of the rest are renumbered. */
static PyObject *Scanner_take_quantity(Scanner *S, PyObject *args)
{
    Py_ssize_t rows;
    if (!PyArg_ParseTuple(args, "n", &rows))
        return NULL;
    if (rows > S->q[0].rows)
        rows = S->q[0].rows;
    PyObject *cols = PyTuple_New(NQ);
    if (!cols)
        return NULL;
    for (int i = 0; i < NQ; i++) {
        PyObject *c = col_take(&S->q[i], rows);
        if (!c) {
            Py_DECREF(cols);
            return NULL;
        }
        PyTuple_SET_ITEM(cols, i, c);
    }
    int32_t *mr = (int32_t *)S->md_row.p;
    Py_ssize_t nmd = S->md_row.n / 4, m = 0;
    while (m < nmd && mr[m] < rows)
        m++;
    PyObject *mdrows = PyBytes_FromStringAndSize(m ? (const char *)mr : "", m * 4);
    PyObject *keys = col_take(&S->md_key, m), *vals = col_take(&S->md_val, m);
    for (Py_ssize_t i = m; i < nmd; i++)
        mr[i - m] = mr[i] - (int32_t)rows;
    S->md_row.n = (nmd - m) * 4;
    PyObject *dates = dates_take(&S->qd, rows);
    if (!mdrows || !keys || !vals || !dates) {
        Py_DECREF(cols);
        Py_XDECREF(mdrows);
        Py_XDECREF(keys);
        Py_XDECREF(vals);
        Py_XDECREF(dates);
        return NULL;
    }
    return Py_BuildValue("(NNNNN)", cols, mdrows, keys, vals, dates);
}

/* take_categories() -> (7 columns, lines (int64 bytes), columns (int32 bytes)) */
static PyObject *Scanner_take_categories(Scanner *S, PyObject *noargs)
{
    Py_ssize_t rows = S->c[0].rows;
    PyObject *cols = PyTuple_New(NQ);
    if (!cols)
        return NULL;
    for (int i = 0; i < NQ; i++) {
        PyObject *c = col_take(&S->c[i], rows);
        if (!c) {
            Py_DECREF(cols);
            return NULL;
        }
        PyTuple_SET_ITEM(cols, i, c);
    }
    PyObject *lines = PyBytes_FromStringAndSize(rows ? S->c_line.p : "", rows * 8);
    PyObject *colno = PyBytes_FromStringAndSize(rows ? S->c_col.p : "", rows * 4);
    S->c_line.n = S->c_col.n = 0;
    PyObject *dates = dates_take(&S->cd, rows);
    if (!lines || !colno || !dates) {
        Py_DECREF(cols);
        Py_XDECREF(lines);
        Py_XDECREF(colno);
        Py_XDECREF(dates);
        return NULL;
    }
    return Py_BuildValue("(NNNN)", cols, lines, colno, dates);
}

static PyObject *Scanner_qrows(Scanner *S, PyObject *noargs) { return PyLong_FromSsize_t(S->q[0].rows); }
static PyObject *Scanner_crows(Scanner *S, PyObject *noargs) { return PyLong_FromSsize_t(S->c[0].rows); }
static PyObject *Scanner_records(Scanner *S, PyObject *noargs) { return PyLong_FromLongLong(S->records); }

static PyMethodDef Scanner_methods[] = {
    {"scan", (PyCFunction)Scanner_scan, METH_VARARGS, "scan(buf, base, pos, final, force) -> (status, a, b, padding)"},
    {"pad", (PyCFunction)Scanner_pad, METH_NOARGS, "(newlines, spaces) up to the scanner's position"},
    {"set_position", (PyCFunction)Scanner_set_position, METH_VARARGS, "set_position(offset, line, col)"},
    {"take_raw", (PyCFunction)Scanner_take_raw, METH_NOARGS, "raw payloads made natively"},
    {"qadd", (PyCFunction)(void (*)(void))Scanner_qadd, METH_FASTCALL, "append a quantity Record"},
    {"qmd", (PyCFunction)(void (*)(void))Scanner_qmd, METH_FASTCALL, "append a MetadataEntry"},
    {"cadd", (PyCFunction)(void (*)(void))Scanner_cadd, METH_FASTCALL, "append a category Record"},
    {"take_quantity", (PyCFunction)Scanner_take_quantity, METH_VARARGS, "hand out quantity rows"},
    {"take_categories", (PyCFunction)Scanner_take_categories, METH_NOARGS, "hand out category rows"},
    {"qrows", (PyCFunction)Scanner_qrows, METH_NOARGS, "quantity rows held"},
    {"crows", (PyCFunction)Scanner_crows, METH_NOARGS, "category rows held"},
    {"records", (PyCFunction)Scanner_records, METH_NOARGS, "Records taken natively so far"},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject ScannerType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "connectors.healthkit._scan.Scanner",
    .tp_basicsize = sizeof(Scanner),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Native scanner and column builder for export.xml Records.",
    .tp_new = Scanner_new,
    .tp_dealloc = (destructor)Scanner_dealloc,
    .tp_methods = Scanner_methods,
};

static struct PyModuleDef scanmodule = {PyModuleDef_HEAD_INIT, "_scan", "export.xml Record scanner", -1, NULL};

PyMODINIT_FUNC PyInit__scan(void)
{
    if (PyType_Ready(&ScannerType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&scanmodule);
    if (!m)
        return NULL;
    Py_INCREF(&ScannerType);
    if (PyModule_AddObject(m, "Scanner", (PyObject *)&ScannerType) < 0) {
        Py_DECREF(&ScannerType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
