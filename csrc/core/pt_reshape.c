/* pt_reshape.c: new columns from a CallTree's: pruning what has no cost (time ranges),
 * and mapping its frame ids (profiles matched onto another's frames). */
#include "pt_core.h"

#include <stdlib.h>
#include <string.h>

/* pruned(tree, totals) -> (parents, frames, selfs, calls): the nodes with a non-zero
 * total (any metric) or a call count > 0, and the ancestors of those, renumbered in id
 * order (the root kept); calls None when the tree holds none.  Not async-signal-safe. */
PyObject *pt_py_pruned(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *obj, *totals;
    if (!PyArg_ParseTuple(args, "OO:pruned", &obj, &totals))
        return NULL;
    if (!PyList_Check(totals)) {
        PyErr_SetString(PyExc_TypeError, "pruned: totals must be a list of columns");
        return NULL;
    }
    pt_tree t;
    pt_shape s;
    pt_col calls = {0};
    if (pt_tree_open(&t, obj, 0) < 0)
        return NULL;
    if (pt_shape_get(&s, &t, 0) < 0) {
        pt_tree_close(&t);
        return NULL;
    }
    Py_ssize_t n = s.n, kept = 0;
    int32_t *new_of = malloc(sizeof(int32_t) * (size_t)n);
    int32_t *keep = malloc(sizeof(int32_t) * (size_t)n);
    int32_t *col32 = malloc(sizeof(int32_t) * (size_t)n);
    double *col64 = malloc(sizeof(double) * (size_t)n);
    int64_t *calls64 = malloc(sizeof(int64_t) * (size_t)n);
    PyObject *parents_out = NULL, *frames_out = NULL, *selfs_out = NULL, *calls_out = NULL;
    PyObject *result = NULL;
    if (new_of == NULL || keep == NULL || col32 == NULL || col64 == NULL || calls64 == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    if (t.calls != NULL && pt_col_get(&calls, t.calls, PT_I64, 0, "calls") < 0)
        goto done;
    const int32_t *up = PT_I32P(&s.parents), *fr = PT_I32P(&s.frames);
    memset(new_of, 0, sizeof(int32_t) * (size_t)n);
    new_of[0] = 1;
    for (Py_ssize_t i = 1; i < n && i < calls.len; i++)
        if (PT_I64P(&calls)[i] > 0)
            new_of[i] = 1;
    for (Py_ssize_t m = 0; m < PyList_Size(totals); m++) {
        pt_col tc;
        if (pt_col_get(&tc, PyList_GetItem(totals, m), PT_F64, 0, "totals") < 0)
            goto done;
        for (Py_ssize_t i = 1; i < n && i < tc.len; i++)
            if (PT_F64P(&tc)[i] != 0.0)
                new_of[i] = 1;
        pt_col_release(&tc);
    }
    for (Py_ssize_t i = n - 1; i > 0; i--) {
        if (up[i] < 0 || up[i] >= i) {
            PyErr_Format(PyExc_ValueError, "node %zd: parent %d is not an earlier node", i, up[i]);
            goto done;
        }
        if (new_of[i])
            new_of[up[i]] = 1;
    }
    for (Py_ssize_t i = 0; i < n; i++)
        if (new_of[i]) {
            keep[kept] = (int32_t)i;
            new_of[i] = (int32_t)kept++;
        } else {
            new_of[i] = -1;
        }
    col32[0] = -1;
    for (Py_ssize_t k = 1; k < kept; k++)
        col32[k] = new_of[up[keep[k]]];
    if ((parents_out = pt_array_new(PT_I32, col32, kept)) == NULL)
        goto done;
    for (Py_ssize_t k = 0; k < kept; k++)
        col32[k] = fr[keep[k]];
    if ((frames_out = pt_array_new(PT_I32, col32, kept)) == NULL)
        goto done;
    for (Py_ssize_t k = 0; k < kept; k++)
        calls64[k] = keep[k] < calls.len ? PT_I64P(&calls)[keep[k]] : -1;
    if (t.calls == NULL) {
        calls_out = Py_None; /* every count unknown, as in the tree */
        Py_INCREF(calls_out);
    } else if ((calls_out = pt_array_new(PT_I64, calls64, kept)) == NULL) {
        goto done;
    }
    if ((selfs_out = PyList_New(0)) == NULL)
        goto done;
    for (Py_ssize_t m = 0; m < t.n_metrics; m++) {
        pt_col sc;
        if (pt_col_get(&sc, PyList_GetItem(t.selfs, m), PT_F64, 0, "selfs") < 0)
            goto done;
        for (Py_ssize_t k = 0; k < kept; k++)
            col64[k] = keep[k] < sc.len ? PT_F64P(&sc)[keep[k]] : 0.0;
        pt_col_release(&sc);
        PyObject *column = pt_array_new(PT_F64, col64, kept);
        if (column == NULL || PyList_Append(selfs_out, column) < 0) {
            Py_XDECREF(column);
            goto done;
        }
        Py_DECREF(column);
    }
    result = Py_BuildValue("(OOOO)", parents_out, frames_out, selfs_out, calls_out);
done:
    Py_XDECREF(parents_out);
    Py_XDECREF(frames_out);
    Py_XDECREF(selfs_out);
    Py_XDECREF(calls_out);
    pt_col_release(&calls);
    pt_shape_release(&s);
    pt_tree_close(&t);
    free(new_of);
    free(keep);
    free(col32);
    free(col64);
    free(calls64);
    return result;
}

/* remap_frames(tree, frame_map) -> (array('i') frames, merges): the frames column mapped
 * through `frame_map` (the root's kept), and whether two siblings now share a frame.
 * Not async-signal-safe. */
PyObject *pt_py_remap_frames(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *obj, *map_obj;
    if (!PyArg_ParseTuple(args, "OO:remap_frames", &obj, &map_obj))
        return NULL;
    pt_ints map;
    if (pt_ints_get(&map, map_obj, "frame_map") < 0)
        return NULL;
    pt_tree t;
    pt_shape s;
    PyObject *result = NULL;
    int32_t *frames = NULL;
    uint64_t *seen = NULL;
    if (pt_tree_open(&t, obj, 0) < 0) {
        pt_ints_free(&map);
        return NULL;
    }
    if (pt_shape_get(&s, &t, 0) < 0)
        goto close;
    Py_ssize_t n = s.n;
    size_t cap = 16;
    while (cap < (size_t)n * 2)
        cap *= 2;
    frames = malloc(sizeof(int32_t) * (size_t)n);
    seen = calloc(cap, sizeof(uint64_t)); /* (parent, frame) + 1 in the low/high words */
    if (frames == NULL || seen == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    frames[0] = PT_I32P(&s.frames)[0];
    int merges = 0;
    for (Py_ssize_t i = 1; i < n; i++) {
        int64_t f = PT_I32P(&s.frames)[i];
        if (f < 0 || f >= map.len) {
            PyErr_Format(PyExc_IndexError, "remap_frames: frame %lld is not in frame_map",
                         (long long)f);
            goto done;
        }
        int64_t g = map.items[f];
        if (g < INT32_MIN || g > INT32_MAX) {
            PyErr_SetString(PyExc_OverflowError, "remap_frames: frame id too big");
            goto done;
        }
        frames[i] = (int32_t)g;
        if (merges)
            continue;
        /* keys are unique per node id pair; +1 keeps 0 as the empty slot */
        uint64_t key = ((uint64_t)(uint32_t)PT_I32P(&s.parents)[i] << 32 | (uint32_t)g) + 1;
        uint64_t h = key * 0x9E3779B97F4A7C15ULL;
        size_t slot = (size_t)(h >> 20) & (cap - 1);
        while (seen[slot] && seen[slot] != key)
            slot = (slot + 1) & (cap - 1);
        if (seen[slot] == key)
            merges = 1;
        seen[slot] = key;
    }
    PyObject *column = pt_array_new(PT_I32, frames, n);
    if (column != NULL)
        result = Py_BuildValue("(NO)", column, merges ? Py_True : Py_False);
done:
    pt_shape_release(&s);
close:
    pt_tree_close(&t);
    pt_ints_free(&map);
    free(frames);
    free(seen);
    return result;
}
