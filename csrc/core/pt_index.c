/* pt_index.c: a tree's (parent, frame) -> child index, and opening a CallTree's columns
 * for an operation that may add nodes (pt_tree_open / pt_tree_read; the nodes made are
 * appended by pt_commit.c).
 *
 * The index is an open-addressing table of node ids (uint32, id + 1; 0 is empty),
 * keyed by the node's (parent, frame) read from the columns themselves, so it costs
 * 4 bytes a slot (at most 3/4 full) instead of a Python dict's ~100 bytes a node.  It
 * lives in CallTree._index and follows the columns: nodes appended since it last looked
 * are indexed at the next operation (a later node with an existing key replaces it, as
 * a dict built in id order would). */
#include "pt_core.h"

#include <stdlib.h>
#include <string.h>

struct pt_index {
    PyObject_HEAD
    uint32_t *slots; /* node id + 1; 0: empty */
    size_t cap;      /* a power of two, or 0 */
    Py_ssize_t used; /* occupied slots */
    Py_ssize_t count; /* nodes [1, count) are in the table */
    PyObject *parents, *frames; /* the columns the ids refer to */
};

/* murmur3's finalizer over (parent, frame).  Async-signal-safe (pure). */
static inline size_t pt_hash(int32_t parent, int32_t frame) {
    uint64_t h = ((uint64_t)(uint32_t)parent << 32) | (uint32_t)frame;
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdULL;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ULL;
    h ^= h >> 33;
    return (size_t)h;
}

/* Async-signal-safe (pure reads). */
static inline int32_t pt_parent(const pt_nodes *t, Py_ssize_t id) {
    return id < t->n0 ? t->parents[id] : t->new_parents[id - t->n0];
}

/* Async-signal-safe (pure reads). */
static inline int32_t pt_frame(const pt_nodes *t, Py_ssize_t id) {
    return id < t->n0 ? t->frames[id] : t->new_frames[id - t->n0];
}

/* Put `node` in `slots` (capacity mask + 1), replacing a node of the same key.
 * Returns 1 when a slot was newly used.  Async-signal-safe (pure). */
static int pt_place(uint32_t *slots, size_t mask, const pt_nodes *t, Py_ssize_t node) {
    int32_t parent = pt_parent(t, node), frame = pt_frame(t, node);
    size_t i = pt_hash(parent, frame) & mask;
    for (;;) {
        uint32_t s = slots[i];
        if (s == 0) {
            slots[i] = (uint32_t)node + 1;
            return 1;
        }
        Py_ssize_t other = (Py_ssize_t)s - 1;
        if (pt_parent(t, other) == parent && pt_frame(t, other) == frame) {
            slots[i] = (uint32_t)node + 1;
            return 0;
        }
        i = (i + 1) & mask;
    }
}

/* Make room for one more node (rehashing into a table twice the size).  The nodes in
 * the table have distinct keys, so they are placed without comparing keys, and in id
 * order (found through a bitmap), so their columns are read in sequence, not at random.
 * 0 or -1; may run without the GIL.  Not async-signal-safe (malloc). */
static int pt_index_reserve(pt_index *ix, const pt_nodes *t) {
    if ((size_t)(ix->used + 1) * 4 <= ix->cap * 3)
        return 0;
    size_t cap = ix->cap ? ix->cap * 2 : 1024, mask = cap - 1;
    size_t nodes = (size_t)(t->n0 + t->k);
    uint32_t *slots = calloc(cap, sizeof(uint32_t));
    uint64_t *in = calloc(nodes / 64 + 1, sizeof(uint64_t));
    if (slots == NULL || in == NULL) {
        free(slots);
        free(in);
        pt_raise_nomem();
        return -1;
    }
    for (size_t i = 0; i < ix->cap; i++)
        if (ix->slots[i]) {
            size_t node = ix->slots[i] - 1;
            in[node / 64] |= 1ULL << (node % 64);
        }
    for (size_t w = 0; w <= nodes / 64; w++)
        for (uint64_t bits = in[w]; bits; bits &= bits - 1) {
            size_t node = w * 64 + (size_t)__builtin_ctzll(bits);
            size_t i = pt_hash(pt_parent(t, (Py_ssize_t)node), pt_frame(t, (Py_ssize_t)node)) & mask;
            while (slots[i])
                i = (i + 1) & mask;
            slots[i] = (uint32_t)node + 1;
        }
    free(in);
    free(ix->slots);
    ix->slots = slots;
    ix->cap = cap;
    return 0;
}

/* Add `node` (replacing a node of the same key).  0 or -1.  Not async-signal-safe. */
static int pt_index_put(pt_index *ix, const pt_nodes *t, Py_ssize_t node) {
    if (pt_index_reserve(ix, t) < 0)
        return -1;
    ix->used += pt_place(ix->slots, ix->cap - 1, t, node);
    return 0;
}

/* See pt_core.h.  Not async-signal-safe. */
void pt_index_clear(pt_index *ix) {
    if (ix->slots != NULL)
        memset(ix->slots, 0, ix->cap * sizeof(uint32_t));
    ix->used = 0;
    ix->count = 1;
}

/* See pt_core.h.  Not async-signal-safe. */
void pt_index_indexed(pt_index *ix, Py_ssize_t count) {
    ix->count = count;
}

/* See pt_core.h.  Not async-signal-safe (reads buffers under the GIL). */
Py_ssize_t pt_index_find(pt_index *ix, const pt_nodes *t, int32_t parent, int32_t frame) {
    if (ix->cap == 0)
        return -1;
    size_t mask = ix->cap - 1, i = pt_hash(parent, frame) & mask;
    for (;;) {
        uint32_t s = ix->slots[i];
        if (s == 0)
            return -1;
        Py_ssize_t node = (Py_ssize_t)s - 1;
        if (pt_parent(t, node) == parent && pt_frame(t, node) == frame)
            return node;
        i = (i + 1) & mask;
    }
}

/* A new node of the operation (not yet in the columns); may run without the GIL.
 * Not async-signal-safe. */
static Py_ssize_t pt_nodes_add(pt_nodes *t, int32_t parent, int32_t frame) {
    Py_ssize_t id = t->n0 + t->k;
    if (id >= INT32_MAX) {
        pt_raise(PyExc_OverflowError, "call tree: more than 2**31 - 1 nodes");
        return -1;
    }
    if (t->k == t->cap) {
        Py_ssize_t cap = t->cap ? 2 * t->cap : 256;
        int32_t *p = realloc(t->new_parents, sizeof(int32_t) * (size_t)cap);
        if (p == NULL)
            goto nomem;
        t->new_parents = p;
        int32_t *f = realloc(t->new_frames, sizeof(int32_t) * (size_t)cap);
        if (f == NULL)
            goto nomem;
        t->new_frames = f;
        if (t->keep_outer) {
            uint8_t *o = realloc(t->new_outer, (size_t)cap);
            if (o == NULL)
                goto nomem;
            t->new_outer = o;
        }
        t->cap = cap;
    }
    t->new_parents[t->k] = parent;
    t->new_frames[t->k] = frame;
    if (t->keep_outer)
        t->new_outer[t->k] = 0;
    t->k++;
    return id;
nomem:
    pt_raise_nomem();
    return -1;
}

/* See pt_core.h.  One probe: the slot of the key, or the empty slot the new node takes.
 * May run without the GIL.  Not async-signal-safe. */
Py_ssize_t pt_child_of(pt_index *ix, pt_nodes *t, int32_t parent, int32_t frame, int fresh,
                       int *made) {
    *made = 0;
    if (pt_index_reserve(ix, t) < 0)
        return -1;
    size_t mask = ix->cap - 1, i = pt_hash(parent, frame) & mask;
    for (;;) {
        uint32_t s = ix->slots[i];
        if (s == 0)
            break;
        if (!fresh) {
            Py_ssize_t node = (Py_ssize_t)s - 1;
            if (pt_parent(t, node) == parent && pt_frame(t, node) == frame)
                return node;
        }
        i = (i + 1) & mask;
    }
    Py_ssize_t id = pt_nodes_add(t, parent, frame);
    if (id < 0)
        return -1;
    ix->slots[i] = (uint32_t)id + 1;
    ix->used++;
    *made = 1;
    return id;
}

/* See pt_core.h.  Not async-signal-safe. */
void pt_nodes_free(pt_nodes *t) {
    free(t->new_parents);
    free(t->new_frames);
    free(t->new_outer);
    t->new_parents = t->new_frames = NULL;
    t->new_outer = NULL;
    t->k = t->cap = 0;
}

/* ---- the Index type ------------------------------------------------------------------ */

/* Not async-signal-safe (Python object teardown). */
static void pt_index_dealloc(PyObject *self) {
    pt_index *ix = (pt_index *)self;
    free(ix->slots);
    Py_XDECREF(ix->parents);
    Py_XDECREF(ix->frames);
    PyTypeObject *type = Py_TYPE(self);
    freefunc tp_free = (freefunc)PyType_GetSlot(type, Py_tp_free);
    tp_free(self);
    Py_DECREF(type);
}

/* Index.get(key, default=None): the child `key` = parent << 32 | frame names, as the
 * dict this index replaced answered it.  Not async-signal-safe. */
static PyObject *pt_index_get(PyObject *self, PyObject *args) {
    pt_index *ix = (pt_index *)self;
    long long key;
    PyObject *fallback = Py_None;
    if (!PyArg_ParseTuple(args, "L|O:get", &key, &fallback))
        return NULL;
    if (ix->parents == NULL) {
        Py_INCREF(fallback);
        return fallback;
    }
    pt_col cp, cf;
    if (pt_col_get(&cp, ix->parents, PT_I32, 0, "parents") < 0)
        return NULL;
    if (pt_col_get(&cf, ix->frames, PT_I32, 0, "frames") < 0) {
        pt_col_release(&cp);
        return NULL;
    }
    pt_nodes t = {.parents = PT_I32P(&cp), .frames = PT_I32P(&cf), .n0 = cp.len};
    Py_ssize_t found = -1;
    int rc = 0;
    if (ix->count > t.n0)
        pt_index_clear(ix);
    for (Py_ssize_t i = ix->count > 1 ? ix->count : 1; i < t.n0 && rc == 0; i++)
        rc = pt_index_put(ix, &t, i);
    if (rc == 0) {
        ix->count = t.n0;
        long long parent = key >> 32, frame = (int32_t)(uint32_t)(key & 0xffffffffLL);
        if (parent >= INT32_MIN && parent <= INT32_MAX)
            found = pt_index_find(ix, &t, (int32_t)parent, (int32_t)frame);
    }
    pt_col_release(&cp);
    pt_col_release(&cf);
    if (rc < 0)
        return NULL;
    if (found < 0) {
        Py_INCREF(fallback);
        return fallback;
    }
    return PyLong_FromSsize_t(found);
}

/* Index.rebind(parents, frames): follow a copy of the columns it indexes (the same
 * items: CallTree.copy(take_index=True)).  Not async-signal-safe. */
static PyObject *pt_index_rebind(PyObject *self, PyObject *args) {
    pt_index *ix = (pt_index *)self;
    PyObject *parents, *frames;
    if (!PyArg_ParseTuple(args, "OO:rebind", &parents, &frames))
        return NULL;
    Py_INCREF(parents);
    Py_INCREF(frames);
    PyObject *old_parents = ix->parents, *old_frames = ix->frames;
    ix->parents = parents;
    ix->frames = frames;
    Py_XDECREF(old_parents);
    Py_XDECREF(old_frames);
    Py_RETURN_NONE;
}

static PyMethodDef pt_index_methods[] = {
    {"get", pt_index_get, METH_VARARGS, "get(parent << 32 | frame, default=None) -> node"},
    {"rebind", pt_index_rebind, METH_VARARGS, "rebind(parents, frames): index a copy"},
    {NULL, NULL, 0, NULL},
};

static PyType_Slot pt_index_slots[] = {
    {Py_tp_dealloc, pt_index_dealloc},
    {Py_tp_methods, pt_index_methods},
    {Py_tp_doc, "A CallTree's (parent, frame) -> child index (collectors/model/core.py)."},
    {0, NULL},
};

PyType_Spec pt_index_spec = {
    "proftui.collectors.model._core.Index", sizeof(pt_index), 0, Py_TPFLAGS_DEFAULT,
    pt_index_slots,
};

/* ---- a CallTree opened for one operation --------------------------------------------- */

/* A new reference to attribute `name`, or NULL with an exception.  Not async-signal-safe. */
static PyObject *pt_attr(PyObject *obj, const char *name) {
    return PyObject_GetAttrString(obj, name);
}

/* See pt_core.h.  Not async-signal-safe. */
int pt_tree_open(pt_tree *t, PyObject *tree, int with_index) {
    memset(t, 0, sizeof *t);
    t->obj = tree;
    PyObject *links = NULL;
    if ((t->parents = pt_attr(tree, "parents")) == NULL ||
        (t->frames = pt_attr(tree, "frames")) == NULL ||
        (t->calls = pt_attr(tree, "_calls")) == NULL ||
        (t->selfs = pt_attr(tree, "selfs")) == NULL ||
        (t->totals = pt_attr(tree, "_totals")) == NULL || (links = pt_attr(tree, "_links")) == NULL)
        goto fail;
    if (!PyList_Check(t->selfs) || (t->totals != Py_None && !PyList_Check(t->totals))) {
        Py_DECREF(links);
        PyErr_SetString(PyExc_TypeError, "CallTree: selfs and totals must be lists");
        goto fail;
    }
    if (t->calls == Py_None)
        Py_CLEAR(t->calls);
    if (links != Py_None && PyArg_ParseTuple(links, "OOO", &t->first, &t->last, &t->next)) {
        Py_INCREF(t->first);
        Py_INCREF(t->last);
        Py_INCREF(t->next);
    } else if (links != Py_None) {
        Py_DECREF(links);
        goto fail;
    }
    Py_DECREF(links);
    t->n_metrics = PyList_Size(t->selfs);
    if (with_index) {
        PyObject *ix = pt_attr(tree, "_index");
        if (ix == NULL)
            goto fail;
        if (PyObject_TypeCheck(ix, (PyTypeObject *)pt_index_type) &&
            ((pt_index *)ix)->parents == t->parents && ((pt_index *)ix)->frames == t->frames) {
            t->index = (pt_index *)ix;
        } else {
            Py_DECREF(ix);
            ix = PyObject_CallNoArgs(pt_index_type);
            if (ix == NULL)
                goto fail;
            pt_index *fresh = (pt_index *)ix;
            fresh->count = 1;
            Py_INCREF(t->parents);
            fresh->parents = t->parents;
            Py_INCREF(t->frames);
            fresh->frames = t->frames;
            t->index = fresh;
            if (PyObject_SetAttrString(tree, "_index", ix) < 0)
                goto fail;
        }
    }
    return 0;
fail:
    pt_tree_close(t);
    return -1;
}

/* See pt_core.h.  Not async-signal-safe. */
int pt_tree_need_links(pt_tree *t) {
    if (t->first != NULL)
        return 0;
    PyObject *links = PyObject_CallMethod(t->obj, "_links_now", NULL);
    if (links == NULL)
        return -1;
    int ok = PyArg_ParseTuple(links, "OOO", &t->first, &t->last, &t->next);
    if (ok) {
        Py_INCREF(t->first);
        Py_INCREF(t->last);
        Py_INCREF(t->next);
    } else {
        t->first = t->last = t->next = NULL;
    }
    Py_DECREF(links);
    return ok ? 0 : -1;
}

/* See pt_core.h.  Not async-signal-safe. */
int pt_tree_need_calls(pt_tree *t) {
    if (t->calls != NULL)
        return 0;
    t->calls = PyObject_GetAttrString(t->obj, "calls");
    return t->calls == NULL ? -1 : 0;
}

/* See pt_core.h.  Not async-signal-safe. */
int pt_tree_read(pt_tree *t, pt_nodes *nodes) {
    memset(nodes, 0, sizeof *nodes);
    if (pt_col_get(&t->cp, t->parents, PT_I32, 0, "parents") < 0)
        return -1;
    if (pt_col_get(&t->cf, t->frames, PT_I32, 0, "frames") < 0) {
        pt_col_release(&t->cp);
        return -1;
    }
    if (t->cp.len != t->cf.len || t->cp.len < 1) {
        pt_tree_unread(t);
        PyErr_SetString(PyExc_ValueError, "CallTree: parents and frames differ in length");
        return -1;
    }
    nodes->parents = PT_I32P(&t->cp);
    nodes->frames = PT_I32P(&t->cf);
    nodes->n0 = t->cp.len;
    pt_index *ix = t->index;
    if (ix != NULL) {
        if (ix->count > nodes->n0 || ix->count < 1)
            pt_index_clear(ix);
        for (Py_ssize_t i = ix->count; i < nodes->n0; i++)
            if (pt_index_put(ix, nodes, i) < 0) {
                pt_index_clear(ix);
                pt_tree_unread(t);
                return -1;
            }
        ix->count = nodes->n0;
    }
    return 0;
}

/* See pt_core.h.  Not async-signal-safe. */
void pt_tree_unread(pt_tree *t) {
    pt_col_release(&t->cp);
    pt_col_release(&t->cf);
}

/* See pt_core.h.  Not async-signal-safe. */
void pt_tree_close(pt_tree *t) {
    pt_tree_unread(t);
    Py_CLEAR(t->parents);
    Py_CLEAR(t->frames);
    Py_CLEAR(t->first);
    Py_CLEAR(t->last);
    Py_CLEAR(t->next);
    Py_CLEAR(t->calls);
    Py_CLEAR(t->selfs);
    Py_CLEAR(t->totals);
    Py_CLEAR(t->index);
}
