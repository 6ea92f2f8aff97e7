/* The watch stream's hot path in C (issue 25): what a watch that keeps up does once per read.
 *
 * Optional: ``watchkeeper.client._fast`` falls back to the Python in ``_http1``/``_pieces``
 * when this module is not built (or WATCHKEEPER_PURE_PYTHON is set), and every function
 * here answers None ("not the plain case") where the Python must decide, so both paths
 * take and refuse exactly the same bytes (tests/runtime/client/test_speedups.py compares
 * them on generated input).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>
#include <stdint.h>

static PyObject *s_type, *s_object, *s_metadata, *s_resourceVersion;
static PyObject *s_ADDED, *s_MODIFIED, *s_DELETED;

/* True if the n bytes at s are all ASCII (the JSON decoder skips strings without checking
 * their UTF-8; the Python path checks with ``isascii()`` and a strict decode). */
static int all_ascii(const unsigned char *s, Py_ssize_t n) {
    uint64_t acc = 0;
    Py_ssize_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t v;
        memcpy(&v, s + i, 8);
        acc |= v;
    }
    for (; i < n; i++) acc |= s[i];
    return (acc & 0x8080808080808080ULL) == 0;
}

/* lazy_batch(data, decode, classes, counts, strip, piece_type) -> (events, piece, rv) | None
 *
 * The lazy stream's plain piece (``PieceDecoder.batch``): whole lines ``data`` (ending with a
 * newline), each one ADDED/MODIFIED/DELETED event with a named object. Decoded as one JSON
 * array (newlines made commas) by ``decode`` (msgspec, into object heads); its length must be
 * the number of newlines. Each event is ``classes[type](None, metadata, piece, strip, i)``
 * with ``piece = piece_type(data)``; ``counts`` gets the events by type; ``rv`` is the last
 * event's resourceVersion. None, with nothing changed, for anything else (a decode error, a
 * BOOKMARK/ERROR, non-ASCII bytes, a line that is not one value): the caller's Python then
 * decides, with its errors in its words. */
static PyObject *lazy_batch(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (nargs != 6) {
        PyErr_SetString(PyExc_TypeError, "lazy_batch takes 6 arguments");
        return NULL;
    }
    PyObject *data = args[0], *decode = args[1], *classes = args[2], *counts = args[3];
    PyObject *strip = args[4], *piece_type = args[5];
    if (!PyBytes_CheckExact(data) || !PyDict_CheckExact(classes) || !PyDict_CheckExact(counts)) {
        PyErr_SetString(PyExc_TypeError, "lazy_batch: bytes, callable, dict, dict, bool, type");
        return NULL;
    }
    const unsigned char *src = (const unsigned char *)PyBytes_AS_STRING(data);
    Py_ssize_t n = PyBytes_GET_SIZE(data);
    if (n == 0 || src[n - 1] != '\n' || !all_ascii(src, n)) Py_RETURN_NONE;

    /* "[" + data with its newlines made commas, the last one "]" */
    PyObject *array = PyBytes_FromStringAndSize(NULL, n + 1);
    if (array == NULL) return NULL;
    unsigned char *dst = (unsigned char *)PyBytes_AS_STRING(array);
    dst[0] = '[';
    memcpy(dst + 1, src, (size_t)n);
    Py_ssize_t lines = 0;
    unsigned char *scan = dst + 1, *end = dst + 1 + n;
    while (scan < end) {
        unsigned char *nl = memchr(scan, '\n', (size_t)(end - scan));
        if (nl == NULL) break;
        *nl = ',';
        lines++;
        scan = nl + 1;
    }
    dst[n] = ']';

    PyObject *envs = PyObject_CallOneArg(decode, array);
    Py_DECREF(array);
    if (envs == NULL) {
        PyErr_Clear(); /* the Python path decodes again and says what is wrong */
        Py_RETURN_NONE;
    }
    if (!PyList_CheckExact(envs) || PyList_GET_SIZE(envs) != lines) {
        Py_DECREF(envs);
        Py_RETURN_NONE;
    }

    PyObject *events = NULL, *piece = NULL, *rv = NULL, *result = NULL;
    Py_ssize_t tally[3] = {0, 0, 0};
    PyObject *kinds[3] = {s_ADDED, s_MODIFIED, s_DELETED};
    /* Pass 1: every type plain, every metadata at hand (no event built before all are). */
    PyObject *metas = PyList_New(lines);
    PyObject *types = PyList_New(lines);
    if (metas == NULL || types == NULL) goto fail;
    for (Py_ssize_t i = 0; i < lines; i++) {
        PyObject *env = PyList_GET_ITEM(envs, i);
        PyObject *t = PyObject_GetAttr(env, s_type);
        if (t == NULL) goto fail;
        int k = -1;
        for (int j = 0; j < 3; j++) {
            int eq = PyUnicode_Compare(t, kinds[j]);
            if (eq == -1 && PyErr_Occurred()) {
                Py_DECREF(t);
                goto fail;
            }
            if (eq == 0) {
                k = j;
                break;
            }
        }
        if (k < 0) { /* a BOOKMARK, an ERROR or another type: the Python decides */
            Py_DECREF(t);
            goto not_plain;
        }
        tally[k]++;
        PyList_SET_ITEM(types, i, t);
        PyObject *obj = PyObject_GetAttr(env, s_object);
        if (obj == NULL) goto fail;
        PyObject *meta = PyObject_GetAttr(obj, s_metadata);
        Py_DECREF(obj);
        if (meta == NULL) goto fail;
        PyList_SET_ITEM(metas, i, meta);
    }
    piece = PyObject_CallOneArg(piece_type, data);
    if (piece == NULL) goto fail;
    events = PyList_New(lines);
    if (events == NULL) goto fail;
    for (Py_ssize_t i = 0; i < lines; i++) {
        PyObject *cls = PyDict_GetItemWithError(classes, PyList_GET_ITEM(types, i));
        if (cls == NULL) {
            if (PyErr_Occurred()) goto fail;
            goto not_plain; /* a class map without this type: the Python asks ``other`` */
        }
        PyObject *index = PyLong_FromSsize_t(i);
        if (index == NULL) goto fail;
        PyObject *call_args[5] = {Py_None, PyList_GET_ITEM(metas, i), piece, strip, index};
        PyObject *ev = PyObject_Vectorcall(cls, call_args, 5, NULL);
        Py_DECREF(index);
        if (ev == NULL) goto fail;
        PyList_SET_ITEM(events, i, ev);
    }
    if (lines > 0) {
        rv = PyObject_GetAttr(PyList_GET_ITEM(metas, lines - 1), s_resourceVersion);
        if (rv == NULL) goto fail;
    } else {
        rv = PyUnicode_FromString("");
        if (rv == NULL) goto fail;
    }
    for (int j = 0; j < 3; j++) {
        if (!tally[j]) continue;
        PyObject *had = PyDict_GetItemWithError(counts, kinds[j]);
        if (had == NULL && PyErr_Occurred()) goto fail;
        Py_ssize_t before = 0;
        if (had != NULL) {
            before = PyLong_AsSsize_t(had);
            if (before == -1 && PyErr_Occurred()) goto fail;
        }
        PyObject *now = PyLong_FromSsize_t(before + tally[j]);
        if (now == NULL) goto fail;
        int bad = PyDict_SetItem(counts, kinds[j], now);
        Py_DECREF(now);
        if (bad) goto fail;
    }
    result = PyTuple_Pack(3, events, piece, rv);
fail:
    Py_XDECREF(events);
    Py_XDECREF(piece);
    Py_XDECREF(rv);
    Py_XDECREF(metas);
    Py_XDECREF(types);
    Py_DECREF(envs);
    return result;
not_plain:
    Py_XDECREF(events);
    Py_XDECREF(piece);
    Py_XDECREF(metas);
    Py_XDECREF(types);
    Py_DECREF(envs);
    Py_RETURN_NONE;
}


/* The hex digit's value, or -1. */
static inline int hexval(unsigned char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* The chunk loop of ``whole_chunks`` and ``hand_chunks``: from ``*p`` (at the CRLF that
 * ended the last chunk), each chunk that arrived whole before ``w`` is taken: its header is
 * the last one seen (``cur``, ``*curn`` bytes, of ``*size``) or matches CRLF, 1-8 hex digits,
 * CRLF; its payload is moved to ``*b``. Stops, as the Python does, at anything else (a
 * partial chunk, the last chunk, an extension, a malformed header), with ``*p`` at the CRLF
 * that ends the last chunk taken. Returns whether the header changed. */
static int take_chunks(unsigned char *buf, Py_ssize_t *pp, Py_ssize_t *bp, Py_ssize_t w,
                       unsigned char *cur, Py_ssize_t *curnp, Py_ssize_t *sizep) {
    Py_ssize_t p = *pp, b = *bp, curn = *curnp, size = *sizep;
    int changed = 0;
    while (w - p > 2) {
        Py_ssize_t start;
        if (curn > 0 && w - p >= curn && memcmp(buf + p, cur, (size_t)curn) == 0) {
            start = p + curn;
        } else {
            /* CRLF, 1-8 hex digits, CRLF */
            if (buf[p] != '\r' || buf[p + 1] != '\n') break;
            Py_ssize_t q = p + 2, v = 0;
            int digits = 0, h = 0;
            while (q < w && digits <= 8 && (h = hexval(buf[q])) >= 0) {
                v = v * 16 + h;
                q++;
                digits++;
            }
            if (digits == 0 || digits > 8 || q + 2 > w || buf[q] != '\r' || buf[q + 1] != '\n')
                break;
            start = q + 2;
            curn = start - p;
            memcpy(cur, buf + p, (size_t)curn);
            changed = 1;
            size = v;
        }
        Py_ssize_t end = start + size;
        if (end > w || size == 0) break;
        memmove(buf + b, buf + start, (size_t)size);
        b += size;
        p = end;
    }
    *pp = p, *bp = b, *curnp = curn, *sizep = size;
    return changed;
}

/* The positions and header arguments shared by both functions, checked. */
static int chunk_args(PyObject *const *args, Py_ssize_t *p, Py_ssize_t *b, Py_ssize_t *w,
                      Py_ssize_t *size) {
    *p = PyLong_AsSsize_t(args[1]);
    *b = PyLong_AsSsize_t(args[2]);
    *w = PyLong_AsSsize_t(args[3]);
    *size = PyLong_AsSsize_t(args[5]);
    if (PyErr_Occurred()) return -1;
    if (*p < 0 || *b < 0 || *w > PyByteArray_GET_SIZE(args[0]) || *p > *w || *b > *p ||
            *size < 0) {
        PyErr_SetString(PyExc_ValueError, "whole_chunks: positions out of order");
        return -1;
    }
    return 0;
}

/* whole_chunks(buf, p, b, w, head, size) -> (p, b, head, size)
 *
 * ``ResponseProtocol._whole_chunks``'s loop (``take_chunks``). */
static PyObject *whole_chunks(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (nargs != 6 || !PyByteArray_CheckExact(args[0]) || !PyBytes_CheckExact(args[4])) {
        PyErr_SetString(PyExc_TypeError, "whole_chunks(bytearray, int, int, int, bytes, int)");
        return NULL;
    }
    Py_ssize_t p, b, w, size;
    if (chunk_args(args, &p, &b, &w, &size) < 0) return NULL;
    PyObject *head = args[4];
    unsigned char *buf = (unsigned char *)PyByteArray_AS_STRING(args[0]);
    /* The header last seen, copied: the payload moves may overwrite it in buf. */
    unsigned char cur[16];
    Py_ssize_t curn = PyBytes_GET_SIZE(head) <= 16 ? PyBytes_GET_SIZE(head) : 0;
    memcpy(cur, PyBytes_AS_STRING(head), (size_t)curn);
    if (take_chunks(buf, &p, &b, w, cur, &curn, &size)) {
        PyObject *fresh = PyBytes_FromStringAndSize((const char *)cur, curn);
        if (fresh == NULL) return NULL;
        return Py_BuildValue("(nnNn)", p, b, fresh, size);
    }
    return Py_BuildValue("(nnOn)", p, b, head, size);
}

/* hand_chunks(buf, p, b, w, head, size, r, hand) -> (data | None, p, b, head, size)
 *
 * ``whole_chunks``, then, when ``hand`` (the consumer waits for up to that many bytes of
 * lines) and the read ended exactly with its last chunk's CRLF, and the body from ``r``
 * (all of it new) is whole lines of at most ``hand`` bytes: those lines as bytes, with the
 * CRLF moved to the front of ``buf`` (the buffer starts again: p = b = 0, w = 2). */
static PyObject *hand_chunks(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (nargs != 8 || !PyByteArray_CheckExact(args[0]) || !PyBytes_CheckExact(args[4])) {
        PyErr_SetString(PyExc_TypeError,
                        "hand_chunks(bytearray, int, int, int, bytes, int, int, int)");
        return NULL;
    }
    Py_ssize_t p, b, w, size;
    if (chunk_args(args, &p, &b, &w, &size) < 0) return NULL;
    Py_ssize_t r = PyLong_AsSsize_t(args[6]), hand = PyLong_AsSsize_t(args[7]);
    if (PyErr_Occurred()) return NULL;
    PyObject *head = args[4];
    unsigned char *buf = (unsigned char *)PyByteArray_AS_STRING(args[0]);
    unsigned char cur[16];
    Py_ssize_t curn = PyBytes_GET_SIZE(head) <= 16 ? PyBytes_GET_SIZE(head) : 0;
    memcpy(cur, PyBytes_AS_STRING(head), (size_t)curn);
    int changed = take_chunks(buf, &p, &b, w, cur, &curn, &size);
    PyObject *fresh = head;
    Py_INCREF(head);
    if (changed) {
        Py_DECREF(head);
        fresh = PyBytes_FromStringAndSize((const char *)cur, curn);
        if (fresh == NULL) return NULL;
    }
    if (hand > 0 && r >= 0 && b > r && b - r <= hand && buf[b - 1] == '\n' && w - p == 2 &&
            buf[p] == '\r' && buf[p + 1] == '\n') {
        PyObject *data = PyBytes_FromStringAndSize((const char *)buf + r, b - r);
        if (data == NULL) {
            Py_DECREF(fresh);
            return NULL;
        }
        buf[0] = '\r', buf[1] = '\n';
        return Py_BuildValue("(NnnNn)", data, (Py_ssize_t)0, (Py_ssize_t)0, fresh, size);
    }
    return Py_BuildValue("(OnnNn)", Py_None, p, b, fresh, size);
}


/* -- KeyField: ObjectEvent.name / .namespace / .resource_version --------------------------
 * A descriptor that reads ``event._key.<field>`` (``event._keys().<field>`` when the key is
 * not known yet): what the Python properties on ``ObjectEvent`` do, without a frame per
 * read (a watch consumer and the Store read these for every event). */

static PyObject *s__key, *s__keys;

typedef struct {
    PyObject_HEAD
    PyObject *field;
} KeyFieldObject;

static PyObject *keyfield_get(PyObject *self, PyObject *obj, PyObject *type) {
    (void)type;
    if (obj == NULL || obj == Py_None) return Py_NewRef(self);
    PyObject *key = PyObject_GetAttr(obj, s__key);
    if (key == NULL) return NULL;
    if (key == Py_None) {
        Py_DECREF(key);
        key = PyObject_CallMethodNoArgs(obj, s__keys);
        if (key == NULL) return NULL;
    }
    PyObject *value = PyObject_GetAttr(key, ((KeyFieldObject *)self)->field);
    Py_DECREF(key);
    return value;
}

static PyObject *keyfield_new(PyTypeObject *type, PyObject *args, PyObject *kwds) {
    PyObject *field;
    if (kwds != NULL && PyDict_GET_SIZE(kwds)) {
        PyErr_SetString(PyExc_TypeError, "KeyField(field): no keyword arguments");
        return NULL;
    }
    if (!PyArg_ParseTuple(args, "U:KeyField", &field)) return NULL;
    KeyFieldObject *self = (KeyFieldObject *)type->tp_alloc(type, 0);
    if (self == NULL) return NULL;
    Py_INCREF(field);
    PyUnicode_InternInPlace(&field);
    self->field = field;
    return (PyObject *)self;
}

static void keyfield_dealloc(PyObject *self) {
    Py_XDECREF(((KeyFieldObject *)self)->field);
    Py_TYPE(self)->tp_free(self);
}

static PyObject *keyfield_repr(PyObject *self) {
    return PyUnicode_FromFormat("KeyField(%R)", ((KeyFieldObject *)self)->field);
}

static PyTypeObject KeyFieldType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "watchkeeper._speedups.KeyField",
    .tp_basicsize = sizeof(KeyFieldObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "KeyField(field): event._key.<field>, from event._keys() until the key is known.",
    .tp_new = keyfield_new,
    .tp_dealloc = keyfield_dealloc,
    .tp_repr = keyfield_repr,
    .tp_descr_get = keyfield_get,
};

static PyMethodDef methods[] = {
    {"lazy_batch", (PyCFunction)(void (*)(void))lazy_batch, METH_FASTCALL,
     "The lazy stream's plain piece: (events, piece, rv), or None for the Python to decide."},
    {"whole_chunks", (PyCFunction)(void (*)(void))whole_chunks, METH_FASTCALL,
     "ResponseProtocol._whole_chunks's loop: (p, b, head, size) after the whole chunks."},
    {"hand_chunks", (PyCFunction)(void (*)(void))hand_chunks, METH_FASTCALL,
     "whole_chunks, then the lines for a waiting consumer: (data | None, p, b, head, size)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "watchkeeper._speedups",
    .m_doc = "The watch stream's per-read work in C (optional; see watchkeeper.client._fast).",
    .m_size = -1,
    .m_methods = methods,
};

PyMODINIT_FUNC PyInit__speedups(void) {
    s_type = PyUnicode_InternFromString("type");
    s_object = PyUnicode_InternFromString("object");
    s_metadata = PyUnicode_InternFromString("metadata");
    s_resourceVersion = PyUnicode_InternFromString("resourceVersion");
    s_ADDED = PyUnicode_InternFromString("ADDED");
    s_MODIFIED = PyUnicode_InternFromString("MODIFIED");
    s_DELETED = PyUnicode_InternFromString("DELETED");
    if (!s_type || !s_object || !s_metadata || !s_resourceVersion || !s_ADDED || !s_MODIFIED ||
        !s_DELETED)
        return NULL;

    s__key = PyUnicode_InternFromString("_key");
    s__keys = PyUnicode_InternFromString("_keys");
    if (!s__key || !s__keys || PyType_Ready(&KeyFieldType) < 0) return NULL;
    PyObject *mod = PyModule_Create(&module);
    if (mod == NULL) return NULL;
    if (PyModule_AddObjectRef(mod, "KeyField", (PyObject *)&KeyFieldType) < 0) {
        Py_DECREF(mod);
        return NULL;
    }
    return mod;
}
