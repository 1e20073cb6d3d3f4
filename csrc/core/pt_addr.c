/* pt_addr.c: AddressCache, the (runtime address, is the leaf) -> frame ids cache of one
 * address space of a stack table (stacktable/builder.py).  A stack's path of frame ids
 * is made in one call from its addresses; only the addresses never seen are handed
 * back to Python to be symbolized (and interned) once. */
#include "pt_core.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
    uint64_t address;
    uint32_t offset; /* into the pool of frame ids */
    uint16_t count;
    uint8_t leaf;
    uint8_t used;
} pt_addr_entry;

typedef struct {
    PyObject_HEAD
    pt_addr_entry *entries;
    size_t cap, used; /* cap: a power of two, or 0 */
    int32_t *pool;
    size_t pool_len, pool_cap;
} pt_addr;

/* Async-signal-safe (pure). */
static inline size_t pt_addr_hash(uint64_t address, int leaf) {
    uint64_t h = address * 2 + (uint64_t)leaf;
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdULL;
    h ^= h >> 33;
    return (size_t)h;
}

/* The entry of (address, leaf), or NULL.  Async-signal-safe (pure reads). */
static pt_addr_entry *pt_addr_find(pt_addr *c, uint64_t address, int leaf) {
    if (c->cap == 0)
        return NULL;
    size_t mask = c->cap - 1, i = pt_addr_hash(address, leaf) & mask;
    for (;;) {
        pt_addr_entry *e = &c->entries[i];
        if (!e->used)
            return NULL;
        if (e->address == address && e->leaf == leaf)
            return e;
        i = (i + 1) & mask;
    }
}

/* Not async-signal-safe (malloc). */
static int pt_addr_grow(pt_addr *c) {
    if ((c->used + 1) * 2 <= c->cap)
        return 0;
    size_t cap = c->cap ? c->cap * 2 : 256;
    pt_addr_entry *entries = calloc(cap, sizeof *entries);
    if (entries == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    for (size_t k = 0; k < c->cap; k++) {
        pt_addr_entry *e = &c->entries[k];
        if (!e->used)
            continue;
        size_t i = pt_addr_hash(e->address, e->leaf) & (cap - 1);
        while (entries[i].used)
            i = (i + 1) & (cap - 1);
        entries[i] = *e;
    }
    free(c->entries);
    c->entries = entries;
    c->cap = cap;
    return 0;
}

/* Not async-signal-safe (Python object teardown). */
static void pt_addr_dealloc(PyObject *self) {
    pt_addr *c = (pt_addr *)self;
    free(c->entries);
    free(c->pool);
    PyTypeObject *type = Py_TYPE(self);
    freefunc tp_free = (freefunc)PyType_GetSlot(type, Py_tp_free);
    tp_free(self);
    Py_DECREF(type);
}

/* AddressCache.put(address, leaf, ids): remember the frame ids of (address, leaf).
 * Not async-signal-safe. */
static PyObject *pt_addr_put(PyObject *self, PyObject *args) {
    pt_addr *c = (pt_addr *)self;
    unsigned long long address;
    int leaf;
    PyObject *ids_obj;
    if (!PyArg_ParseTuple(args, "KpO:put", &address, &leaf, &ids_obj))
        return NULL;
    pt_ints ids;
    if (pt_ints_get(&ids, ids_obj, "ids") < 0)
        return NULL;
    if (ids.len > 65535 || c->pool_len + (size_t)ids.len > UINT32_MAX) {
        pt_ints_free(&ids);
        PyErr_SetString(PyExc_ValueError, "AddressCache.put: too many frames");
        return NULL;
    }
    for (Py_ssize_t i = 0; i < ids.len; i++)
        if (ids.items[i] < 0 || ids.items[i] > INT32_MAX) {
            pt_ints_free(&ids);
            PyErr_SetString(PyExc_ValueError, "AddressCache.put: not a frame id");
            return NULL;
        }
    pt_addr_entry *e = pt_addr_find(c, address, leaf);
    if (e == NULL) {
        if (pt_addr_grow(c) < 0) {
            pt_ints_free(&ids);
            return NULL;
        }
        size_t i = pt_addr_hash(address, leaf) & (c->cap - 1);
        while (c->entries[i].used)
            i = (i + 1) & (c->cap - 1);
        e = &c->entries[i];
        e->used = 1;
        e->address = address;
        e->leaf = (uint8_t)leaf;
        c->used++;
    }
    if (c->pool_len + (size_t)ids.len > c->pool_cap) {
        size_t cap = c->pool_cap ? c->pool_cap : 1024;
        while (cap < c->pool_len + (size_t)ids.len)
            cap *= 2;
        int32_t *pool = realloc(c->pool, cap * sizeof(int32_t));
        if (pool == NULL) {
            pt_ints_free(&ids);
            return PyErr_NoMemory();
        }
        c->pool = pool;
        c->pool_cap = cap;
    }
    e->offset = (uint32_t)c->pool_len;
    e->count = (uint16_t)ids.len;
    for (Py_ssize_t i = 0; i < ids.len; i++)
        c->pool[c->pool_len++] = (int32_t)ids.items[i];
    pt_ints_free(&ids);
    Py_RETURN_NONE;
}

/* The ids `extra` (a dict (address, leaf) -> ids, or None) gives for a key, as a new
 * reference; NULL without an exception when it has none.  Not async-signal-safe. */
static PyObject *pt_addr_extra(PyObject *extra, uint64_t address, int leaf) {
    if (extra == Py_None)
        return NULL;
    PyObject *key = Py_BuildValue("(KO)", (unsigned long long)address, leaf ? Py_True : Py_False);
    if (key == NULL)
        return NULL;
    PyObject *found = PyDict_GetItemWithError(extra, key);
    Py_DECREF(key);
    Py_XINCREF(found);
    return found;
}

/* AddressCache.path(ips, extra=None) -> (array('i') | None, missing): the frame ids of a
 * stack given innermost first (`ips`), outermost first; or None and the (address, leaf)
 * keys neither the cache nor `extra` knows, each once, outermost first.
 * Not async-signal-safe. */
static PyObject *pt_addr_path(PyObject *self, PyObject *args) {
    pt_addr *c = (pt_addr *)self;
    PyObject *ips_obj, *extra = Py_None;
    if (!PyArg_ParseTuple(args, "O|O:path", &ips_obj, &extra))
        return NULL;
    if (extra != Py_None && !PyDict_Check(extra)) {
        PyErr_SetString(PyExc_TypeError, "AddressCache.path: extra must be a dict");
        return NULL;
    }
    /* The addresses: an array('Q') (RawStack.ips) read in place, else any sequence. */
    Py_buffer words = {0};
    int have_words = 0;
    PyObject *ips = NULL;
    if (PyObject_CheckBuffer(ips_obj) &&
        PyObject_GetBuffer(ips_obj, &words, PyBUF_FORMAT | PyBUF_C_CONTIGUOUS) == 0) {
        const char *f = words.format ? words.format : "B";
        if (words.itemsize == 8 && (f[0] == 'Q' || f[0] == 'q' || f[0] == 'L' || f[0] == 'l'))
            have_words = 1;
        else
            PyBuffer_Release(&words);
    } else {
        PyErr_Clear();
    }
    if (!have_words && (ips = PySequence_Fast(ips_obj, "ips")) == NULL)
        return NULL;
    Py_ssize_t n = have_words ? words.len / 8 : PySequence_Size(ips);
    pt_vec path = {0};
    PyObject *missing = PyList_New(0), *result = NULL;
    if (missing == NULL)
        goto done;
    for (Py_ssize_t depth = n - 1; depth >= 0; depth--) {
        unsigned long long address;
        if (have_words) {
            address = ((const uint64_t *)words.buf)[depth];
        } else {
            PyObject *item = PySequence_GetItem(ips, depth);
            if (item == NULL)
                goto done;
            address = PyLong_AsUnsignedLongLong(item);
            Py_DECREF(item);
            if (address == (unsigned long long)-1 && PyErr_Occurred())
                goto done;
        }
        int leaf = depth == 0;
        pt_addr_entry *e = pt_addr_find(c, address, leaf);
        if (e != NULL) {
            for (uint16_t k = 0; k < e->count; k++)
                if (pt_vec_push(&path, c->pool[e->offset + k]) < 0)
                    goto done;
            continue;
        }
        PyObject *given = pt_addr_extra(extra, address, leaf);
        if (given == NULL && PyErr_Occurred())
            goto done;
        if (given != NULL) {
            pt_ints ids;
            int rc = pt_ints_get(&ids, given, "extra ids");
            Py_DECREF(given);
            if (rc < 0)
                goto done;
            for (Py_ssize_t k = 0; k < ids.len && rc == 0; k++)
                rc = pt_vec_push(&path, (int32_t)ids.items[k]);
            pt_ints_free(&ids);
            if (rc < 0)
                goto done;
            continue;
        }
        PyObject *key = Py_BuildValue("(KO)", address, leaf ? Py_True : Py_False);
        if (key == NULL)
            goto done;
        int seen = PySequence_Contains(missing, key);
        if (seen < 0 || (!seen && PyList_Append(missing, key) < 0)) {
            Py_DECREF(key);
            goto done;
        }
        Py_DECREF(key);
    }
    if (PyList_Size(missing) > 0) {
        result = Py_BuildValue("(OO)", Py_None, missing);
    } else {
        PyObject *out = pt_array_new(PT_I32, path.items, path.len);
        if (out != NULL)
            result = Py_BuildValue("(NO)", out, missing);
    }
done:
    if (have_words)
        PyBuffer_Release(&words);
    Py_XDECREF(ips);
    Py_XDECREF(missing);
    pt_vec_free(&path);
    return result;
}

/* len(AddressCache): the keys it knows.  Async-signal-safe (a read). */
static Py_ssize_t pt_addr_len(PyObject *self) {
    return (Py_ssize_t)((pt_addr *)self)->used;
}

static PyMethodDef pt_addr_methods[] = {
    {"put", pt_addr_put, METH_VARARGS, "put(address, leaf, ids): remember a key's frame ids"},
    {"path", pt_addr_path, METH_VARARGS,
     "path(ips, extra=None) -> (frame ids outermost first | None, missing keys)"},
    {NULL, NULL, 0, NULL},
};

static PyType_Slot pt_addr_slots[] = {
    {Py_tp_dealloc, pt_addr_dealloc},
    {Py_tp_methods, pt_addr_methods},
    {Py_sq_length, pt_addr_len},
    {Py_tp_doc, "(address, is the leaf) -> frame ids of one address space."},
    {0, NULL},
};

PyType_Spec pt_addr_spec = {
    "proftui.collectors.model._core.AddressCache", sizeof(pt_addr), 0, Py_TPFLAGS_DEFAULT,
    pt_addr_slots,
};
