/* pt_invert.c: trees built from another tree's caller paths: the bottom-up tree (each
 * node with a self cost by its callers) and a function's caller tree; and the paths of
 * given leaves.  New nodes and costs come in the order the Python model made them. */
#include "pt_core.h"

#include <stdlib.h>
#include <string.h>

/* The frames from `node` up towards the root (root excluded), at most `limit`, into
 * `path`; returns how many.  Async-signal-safe (pure). */
static Py_ssize_t pt_callers_up(const pt_nodes *n, Py_ssize_t node, int32_t *path,
                                Py_ssize_t limit) {
    Py_ssize_t len = 0;
    while (node > 0 && len < limit) {
        path[len++] = n->frames[node];
        node = n->parents[node];
    }
    return len;
}

/* The common part of invert and callers: insert each of `count` caller paths (made by
 * `make`) into `dst`, then add costs pair by pair.  Not async-signal-safe. */
typedef struct {
    pt_tree src, dst;
    pt_nodes sn, dn;
    pt_vec pairs; /* (dst leaf, src node) in insertion order */
    int32_t *path;
    int cut;
} pt_invert;

/* Insert the path of `src_node` (callers up to `max_depth`, the first frame replaced by
 * `root_frame` when >= 0) into the destination; records the pair.  0 or -1.  Runs
 * without the GIL (C memory and borrowed buffers only).  Not async-signal-safe. */
static int pt_invert_one(pt_invert *iv, Py_ssize_t src_node, Py_ssize_t max_depth,
                         int64_t root_frame) {
    Py_ssize_t len = pt_callers_up(&iv->sn, src_node, iv->path, max_depth + 1);
    if (len > max_depth) {
        iv->cut = 1;
        len = max_depth;
    }
    if (root_frame >= 0 && len > 0)
        iv->path[0] = (int32_t)root_frame;
    Py_ssize_t node = 0;
    int made = 0;
    for (Py_ssize_t i = 0; i < len; i++) {
        node = pt_child_of(iv->dst.index, &iv->dn, (int32_t)node, iv->path[i], made, &made);
        if (node < 0)
            return -1;
    }
    return pt_push2(&iv->pairs, (int32_t)node, (int32_t)src_node);
}

/* Open both trees of an inversion.  Not async-signal-safe. */
static int pt_invert_open(pt_invert *iv, PyObject *src, PyObject *dst, Py_ssize_t max_depth) {
    memset(iv, 0, sizeof *iv);
    if (max_depth < 1 || max_depth > (1 << 24)) {
        PyErr_SetString(PyExc_ValueError, "max_depth must be between 1 and 2**24");
        return -1;
    }
    if (src == dst) {
        PyErr_SetString(PyExc_ValueError, "a tree cannot be inverted into itself");
        return -1;
    }
    iv->path = malloc(sizeof(int32_t) * (size_t)(max_depth + 1));
    if (iv->path == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    if (pt_tree_open(&iv->src, src, 0) < 0)
        goto fail;
    if (pt_tree_open(&iv->dst, dst, 1) < 0) {
        pt_tree_close(&iv->src);
        goto fail;
    }
    if (pt_tree_read(&iv->src, &iv->sn) < 0)
        goto close;
    if (pt_tree_read(&iv->dst, &iv->dn) < 0) {
        pt_tree_unread(&iv->src);
        goto close;
    }
    return 0;
close:
    pt_tree_close(&iv->dst);
    pt_tree_close(&iv->src);
fail:
    free(iv->path);
    return -1;
}

/* Commit the destination's new nodes and add `costs` (columns of the source, one per
 * destination metric up to `metrics`) of each pair's source node to its leaf, and its
 * calls when `with_calls`.  Closes both trees.  0 or -1.  Not async-signal-safe. */
static int pt_invert_finish(pt_invert *iv, PyObject *costs, int with_calls, int ok) {
    pt_tree_unread(&iv->src);
    pt_tree_unread(&iv->dst);
    if (ok && pt_tree_commit(&iv->dst, &iv->dn, NULL) < 0)
        ok = 0;
    Py_ssize_t metrics = iv->dst.n_metrics;
    if (PyList_Size(costs) < metrics)
        metrics = PyList_Size(costs);
    pt_col dcols[64], scols[64], dcalls = {0}, scalls = {0};
    Py_ssize_t got = 0;
    if (ok && metrics > 64) {
        PyErr_SetString(PyExc_ValueError, "too many metrics");
        ok = 0;
    }
    for (; ok && got < metrics; got++) {
        if (pt_list_col(&dcols[got], iv->dst.selfs, got, 1, "selfs") < 0) {
            ok = 0;
            break;
        }
        if (pt_list_col(&scols[got], costs, got, 0, "costs") < 0) {
            pt_col_release(&dcols[got]);
            ok = 0;
            break;
        }
        if (scols[got].len < iv->sn.n0) {
            PyErr_SetString(PyExc_ValueError, "cost column shorter than the tree");
            pt_col_release(&dcols[got]);
            pt_col_release(&scols[got]);
            ok = 0;
            break;
        }
    }
    with_calls = with_calls && iv->src.calls != NULL; /* else no count is known */
    if (ok && with_calls &&
        (pt_tree_need_calls(&iv->dst) < 0 ||
         pt_col_get(&dcalls, iv->dst.calls, PT_I64, 1, "calls") < 0 ||
         pt_col_get(&scalls, iv->src.calls, PT_I64, 0, "source calls") < 0))
        ok = 0;
    if (ok) {
        for (Py_ssize_t p = 0; p < iv->pairs.len; p += 2) {
            int32_t leaf = iv->pairs.items[p], node = iv->pairs.items[p + 1];
            for (Py_ssize_t m = 0; m < got; m++)
                PT_F64P(&dcols[m])[leaf] += PT_F64P(&scols[m])[node];
            if (with_calls) {
                int64_t count = PT_I64P(&scalls)[node], *mine = &PT_I64P(&dcalls)[leaf];
                if (count >= 0)
                    *mine = *mine < 0 ? count : *mine + count;
            }
        }
    }
    for (Py_ssize_t m = 0; m < got; m++) {
        pt_col_release(&dcols[m]);
        pt_col_release(&scols[m]);
    }
    pt_col_release(&dcalls);
    pt_col_release(&scalls);
    pt_tree_close(&iv->dst);
    pt_tree_close(&iv->src);
    pt_nodes_free(&iv->dn);
    pt_vec_free(&iv->pairs);
    free(iv->path);
    return ok ? 0 : -1;
}

/* invert(src, dst, max_depth) -> cut: views.bottom_up_tree.  Every node of `src` with a
 * self cost (any metric non-zero), in id order, is inserted into `dst` by its callers
 * (itself first, at most `max_depth` levels) and its self costs added there.  True when
 * a path was cut.  Not async-signal-safe. */
PyObject *pt_py_invert(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *src, *dst;
    Py_ssize_t max_depth;
    if (!PyArg_ParseTuple(args, "OOn:invert", &src, &dst, &max_depth))
        return NULL;
    pt_invert iv;
    if (pt_invert_open(&iv, src, dst, max_depth) < 0)
        return NULL;
    Py_ssize_t metrics = iv.src.n_metrics;
    pt_col cols[64];
    Py_ssize_t got = 0;
    int ok = metrics <= 64;
    if (!ok)
        PyErr_SetString(PyExc_ValueError, "too many metrics");
    for (; ok && got < metrics; got++)
        if (pt_list_col(&cols[got], iv.src.selfs, got, 0, "selfs") < 0)
            ok = 0;
    if (ok) {
        /* C memory and borrowed buffers only: other threads (the UI) run meanwhile. */
        Py_BEGIN_ALLOW_THREADS
        for (Py_ssize_t i = 1; ok && i < iv.sn.n0; i++) {
            int any = 0;
            for (Py_ssize_t m = 0; m < metrics && !any; m++)
                any = PT_F64P(&cols[m])[i] != 0.0;
            if (any && pt_invert_one(&iv, i, max_depth, -1) < 0)
                ok = 0;
        }
        Py_END_ALLOW_THREADS
    }
    for (Py_ssize_t m = 0; m < got; m++)
        pt_col_release(&cols[m]);
    int cut = iv.cut;
    PyObject *costs = iv.src.selfs;
    Py_INCREF(costs);
    int rc = pt_invert_finish(&iv, costs, 0, ok);
    Py_DECREF(costs);
    if (rc < 0)
        return NULL;
    return PyBool_FromLong(cut);
}

/* callers(src, src_totals, dst, nodes, root_frame, max_depth) -> cut: views.caller_tree.
 * Each of `nodes` (in order) is inserted into `dst` by its callers (at most `max_depth`
 * levels, its own frame replaced by `root_frame`), with its total costs (`src_totals`)
 * as self costs and its call count.  Not async-signal-safe. */
PyObject *pt_py_callers(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *src, *totals, *dst, *nodes_obj;
    long long root_frame;
    Py_ssize_t max_depth;
    if (!PyArg_ParseTuple(args, "OOOOLn:callers", &src, &totals, &dst, &nodes_obj, &root_frame,
                          &max_depth))
        return NULL;
    if (!PyList_Check(totals)) {
        PyErr_SetString(PyExc_TypeError, "callers: totals must be a list of columns");
        return NULL;
    }
    if (root_frame < 0 || root_frame > INT32_MAX) {
        PyErr_SetString(PyExc_ValueError, "callers: root_frame must be a frame id");
        return NULL;
    }
    pt_ints nodes;
    if (pt_ints_get(&nodes, nodes_obj, "nodes") < 0)
        return NULL;
    pt_invert iv;
    if (pt_invert_open(&iv, src, dst, max_depth) < 0) {
        pt_ints_free(&nodes);
        return NULL;
    }
    int ok = 1;
    Py_BEGIN_ALLOW_THREADS /* as in invert: other threads run meanwhile */
    for (Py_ssize_t k = 0; ok && k < nodes.len; k++) {
        if (nodes.items[k] < 1 || nodes.items[k] >= iv.sn.n0) {
            pt_raise(PyExc_IndexError, "callers: not a node of the tree");
            ok = 0;
        } else if (pt_invert_one(&iv, (Py_ssize_t)nodes.items[k], max_depth, root_frame) < 0) {
            ok = 0;
        }
    }
    Py_END_ALLOW_THREADS
    pt_ints_free(&nodes);
    int cut = iv.cut;
    if (pt_invert_finish(&iv, totals, 1, ok) < 0)
        return NULL;
    return PyBool_FromLong(cut);
}

/* paths_of(tree, leaves) -> (array('i') frames, array('q') offsets): each leaf's path
 * from the root (outermost first, root excluded), concatenated.  Not async-signal-safe. */
PyObject *pt_py_paths_of(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *obj, *leaves_obj;
    if (!PyArg_ParseTuple(args, "OO:paths_of", &obj, &leaves_obj))
        return NULL;
    pt_ints leaves;
    if (pt_ints_get(&leaves, leaves_obj, "leaves") < 0)
        return NULL;
    pt_tree t;
    pt_nodes n;
    pt_vec frames = {0};
    int64_t *offsets = malloc(sizeof(int64_t) * (size_t)(leaves.len + 1));
    PyObject *result = NULL;
    if (offsets == NULL) {
        pt_ints_free(&leaves);
        return PyErr_NoMemory();
    }
    if (pt_tree_open(&t, obj, 0) < 0)
        goto free;
    if (pt_tree_read(&t, &n) < 0)
        goto close;
    offsets[0] = 0;
    for (Py_ssize_t s = 0; s < leaves.len; s++) {
        int64_t leaf = leaves.items[s];
        if (leaf < 0 || leaf >= n.n0) {
            PyErr_SetString(PyExc_IndexError, "paths_of: not a node of the tree");
            goto close;
        }
        Py_ssize_t start = frames.len;
        for (Py_ssize_t node = (Py_ssize_t)leaf; node > 0; node = n.parents[node])
            if (pt_vec_push(&frames, n.frames[node]) < 0)
                goto close;
        for (Py_ssize_t a = start, b = frames.len - 1; a < b; a++, b--) {
            int32_t x = frames.items[a];
            frames.items[a] = frames.items[b];
            frames.items[b] = x;
        }
        offsets[s + 1] = frames.len;
    }
    PyObject *f = pt_array_new(PT_I32, frames.items, frames.len);
    PyObject *o = f == NULL ? NULL : pt_array_new(PT_I64, offsets, leaves.len + 1);
    if (o != NULL)
        result = Py_BuildValue("(NN)", f, o);
    else
        Py_XDECREF(f);
close:
    pt_tree_close(&t);
free:
    pt_vec_free(&frames);
    free(offsets);
    pt_ints_free(&leaves);
    return result;
}
